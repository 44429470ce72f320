#pragma once
// `tagflow train` on simulated GPUs that only time their work
// (TAGFLOW_SIM_GPUS=N:MODEL:timing): the same training steps as run_train,
// with nothing read back, so that a job of many modelled GPUs schedules on
// one host and reports what the model predicts.
//
//   TAGFLOW_SIM_GPUS=8:h100-sxm:timing tagflow train --model resnet18 --devices gpu:0..7
//
// Note [Predicted training]
// Each epoch runs its batches exactly as run_train does (split_and_load,
// forward and backward under autograd, Trainer::step with the aggregator
// make_local_aggregator picks: the ring of Note [Collectives on simulated
// GPUs]), under the profiler, then waits once. Reported, as predictions of
// the device model and never as measurements:
// - images per second: the epoch's images over the modelled time from the
//   epoch's start to its last device work (Engine::modelled_time_ns);
// - the step time: that span over the batches;
// - the gradient sums: per GPU, the union of the communication operations'
//   device spans, and the part of it during which the GPU's compute stream
//   ran other work (backward, mostly): how much of aggregation the
//   schedule hides. Averaged over the GPUs.
// The host is modelled as taking no time (Note [Modelled time]), so data
// loading and launch overheads are outside the prediction.

#include <cstdint>
#include <string>
#include <vector>

#include "tools/train.h"

namespace tagflow::tools {

/// One epoch's prediction (Note [Predicted training]).
struct PredictedEpoch {
  std::int64_t images = 0;
  std::int64_t batches = 0;
  double seconds = 0;  ///< modelled
  double images_per_second = 0;
  double step_seconds = 0;
  /// Per GPU and step, on average: gradient sums, and their part that
  /// overlapped compute.
  double communication_seconds = 0;
  double overlapped_seconds = 0;
  /// The most memory one GPU held, in bytes (counted against the model's).
  std::uint64_t peak_bytes = 0;
};

/// True when every device of `devices` is a simulated GPU that only times
/// its work; throws tagflow::Error when some are and some are not.
bool timing_only_devices(const std::vector<Context>& devices);

/// Runs `options.epochs` epochs of training on timing-only GPUs and prints
/// a line per epoch (JSON with `options.json`). Throws tagflow::Error for
/// an option that needs values (--save, --checkpoint-dir, --resume, --dist,
/// --profile) or devices that are not all timing-only GPUs.
std::vector<PredictedEpoch> predict_training(const TrainOptions& options);

}  // namespace tagflow::tools

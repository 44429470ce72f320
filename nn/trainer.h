#pragma once
// Trainer: applies an optimiser to a set of parameters, as Gluon's does.
//
//   nn::Trainer trainer(net.collect_params(), "sgd", {.learning_rate = 0.1});
//   ... forward and backward on a batch ...
//   trainer.step(batch_size);   // gradients are divided by the batch size
//
// The optimiser is named with its options in TrainerOptions ("sgd", "nag",
// "adam", "adamw"), or given as an object (nn/optimizer.h), the library's or
// your own:
//
//   nn::Trainer trainer(net.collect_params(), nn::adam({.beta1 = 0.8}), {.learning_rate = 1e-3});
//
// A parameter on several devices has its gradients summed over them by a
// dist::GradientAggregator (high-priority engine operations, pushed last layer
// first: Note [Aggregating as gradients become ready]), and every copy
// receives the same update, so the copies stay identical:
//
//   std::vector<Context> devices = {gpu(0), gpu(1)};
//   net.initialize(init::Xavier(), devices);
//   nn::Trainer trainer(net.collect_params(), "sgd", {.learning_rate = 0.1});
//   auto xs = nn::split_and_load(batch.data, devices);
//   auto ys = nn::split_and_load(batch.label, devices);
//   std::vector<NDArray> losses;
//   {
//     auto recording = autograd::record();
//     for (std::size_t i = 0; i < devices.size(); ++i) losses.push_back(loss(net(xs[i]), ys[i]));
//   }
//   for (NDArray& l : losses) l.backward();
//   trainer.step(batch.data.shape()[0]);   // the whole batch's size
//
// Note [Running state across devices]
// Running state (ParameterKind::kRunningState: BatchNorm's running mean and
// variance) is not learned from gradients: each device's forward pass in
// training mode moves its own copy towards the statistics of its own slice
// of the batch, so the copies drift apart, and a network evaluated or saved
// from one device would predict differently from another. So every update()
// ends by making each such parameter's copies the mean of them all: summed
// by the trainer's aggregator, as the gradients are, and divided by the
// number of copies summed, in every process (engine operations, ordered
// after the forward passes that wrote the statistics and before the next
// ones). Every copy then holds the same bits after every step, and
// evaluating on any device gives the same result. The sum goes through the
// aggregator's collectives rather than through copies between devices: on
// GPUs, a copy between two devices that a collective's parts wait behind
// can hold the collective up for ever (a stream waits for peers whose parts
// are queued behind work that waits for it). With equal slices this mean is
// what one device would keep from the whole batch for the running mean; for
// the variance it leaves out the spread between the slices' means, as
// MXNet's averaging does (synchronised batch norm, which computes the
// statistics over all devices in the forward pass, is not provided). A
// network trained without a Trainer keeps differing copies;
// Block::save_parameters then writes their mean (MXNet's rule), so a file
// does not depend on which device was first.
//
// Threads: one thread at a time. A Trainer keeps its optimiser state (made
// on the first step), step count and loss scaler without locks, and its
// aggregator needs its calls in one order (nn/dist/gradient_aggregator.h);
// its parameters may be read (evaluated) by other threads meanwhile, since
// every update is an engine operation ordered with their reads, but only one
// thread steps it.
// Threads: concurrent reads, exclusive writes. TrainerOptions is a value.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nn/amp.h"
#include "nn/dist/gradient_aggregator.h"
#include "nn/lr_schedule.h"
#include "nn/optimizer.h"
#include "nn/parameter.h"

namespace tagflow::nn {

struct TrainerOptions {
  double learning_rate = 0.01;  ///< the base rate, which `schedule` varies
  // The options of an optimiser named by a string (an optimiser object
  // holds its own: these must then keep their defaults).
  double momentum = 0;        ///< sgd, nag
  bool nesterov = false;      ///< sgd with momentum: Nesterov's accelerated gradient
  double weight_decay = 0;    ///< sgd and adam: L2 penalty; adamw: decoupled decay
  double beta1 = 0.9;         ///< adam, adamw
  double beta2 = 0.999;       ///< adam, adamw
  double epsilon = 1e-8;      ///< adam, adamw
  double clip_gradient = -1;  ///< > 0: each gradient element clipped to ±clip_gradient
  /// > 0: the gradients (divided by the batch size) scaled down together
  /// when their global L2 norm exceeds it (Note [Clipping by the global norm]).
  double clip_global_norm = -1;
  /// The rate of each update (nn/lr_schedule.h); constant by default.
  LrSchedule schedule;
  /// Dynamic loss scaling for float16 training (Note [Dynamic loss scaling]
  /// in nn/amp.h); off by default.
  amp::LossScaleOptions loss_scale;
};

/// The optimiser of that name with the options of `options` for it: "sgd",
/// "nag" (sgd with Nesterov's momentum; plain sgd without momentum, as
/// MXNet's NAG), "adam", "adamw". Throws for another name, listing these.
OptimizerPtr make_optimizer(const std::string& name, const TrainerOptions& options);

class Trainer {
 public:
  /// `optimizer`: "sgd" (with momentum and weight decay), "nag" (sgd with
  /// Nesterov's momentum), "adam" or "adamw", with the options `options`
  /// holds for it (make_optimizer). Throws for another name. `aggregator`
  /// sums gradients over devices (null: the local one,
  /// dist::make_local_aggregator()).
  Trainer(ParameterDict params, const std::string& optimizer, TrainerOptions options = {},
          std::shared_ptr<dist::GradientAggregator> aggregator = nullptr);
  /// With an optimiser object (nn/optimizer.h); `options`' optimiser fields
  /// must keep their defaults (throws otherwise: they would be ignored).
  Trainer(ParameterDict params, OptimizerPtr optimizer, TrainerOptions options = {},
          std::shared_ptr<dist::GradientAggregator> aggregator = nullptr);

  /// One update of every parameter that has a gradient, from the gradients
  /// of the last backward summed over devices, scaled by 1 / batch_size:
  /// allreduce_grads() (unless called since the last update), then update().
  /// Returns at once.
  void step(std::int64_t batch_size);

  /// Pushes the aggregation of every parameter's gradients over its devices
  /// (Note [Aggregating as gradients become ready]), and over processes with
  /// an aggregator across processes. For work between the sum and the
  /// update, e.g. clipping by the global norm; then call update(), not
  /// step(). Throws if called twice without an update between. The first
  /// call broadcasts the parameters first, unless broadcast_parameters() ran
  /// (processes initialised differently then make their first update from
  /// gradients of their own weights: call broadcast_parameters() yourself).
  void allreduce_grads();
  /// Makes every process's parameters (frozen ones included) equal to
  /// process 0's (the aggregator's broadcast); returns at once. With several processes, call
  /// it once the parameters are initialized (after a first forward when
  /// their shapes are inferred) and before training, so that the first
  /// gradients are computed from the same weights everywhere. Within one
  /// process it changes nothing.
  void broadcast_parameters();
  /// The fused update of every parameter's copies, from their gradients as
  /// they are (aggregated or not), then the copies of running state averaged
  /// over their devices (Note [Running state across devices]). Returns at once.
  void update(std::int64_t batch_size);

  /// Writes the optimizer's state (Note [Trainer state]) to the safetensors
  /// file `path` (atomically: the old file or the whole new one), with
  /// `metadata` in its "__metadata__" besides the trainer's own "tagflow.*"
  /// keys. Waits for the states' values. Throws io::FileError when it cannot.
  ///
  ///   trainer.save_states("trainer.safetensors", {{"epoch", "3"}});
  void save_states(const std::filesystem::path& path,
                   const std::map<std::string, std::string>& metadata = {});
  /// Reads what save_states wrote into every device's copy of each
  /// parameter's state and restores the update count (the schedule's
  /// position) and the base rate; returns the file's metadata. Checked
  /// before anything changes: a file of another optimizer, another list of
  /// parameters (count, names, shapes) or a damaged file throws
  /// io::FileError saying what differs. The parameters must be initialized.
  std::map<std::string, std::string> load_states(const std::filesystem::path& path);

  /// `loss` times the loss scale, in float32, when loss scaling is enabled
  /// (Note [Dynamic loss scaling] in nn/amp.h), else `loss` itself: call
  /// backward on what it returns. Recorded like any product; returns at
  /// once. The parameters must be initialized (after a first forward).
  NDArray scale_loss(const NDArray& loss);
  /// The loss scale the next scale_loss uses: a (1) float32 array on the
  /// first parameter's first device, read without waiting for anything
  /// else; undefined without loss scaling (or before the first scale_loss).
  const NDArray& loss_scale() const { return scaler_.loss_scale(); }
  /// How many updates were skipped because a gradient was not finite: a
  /// (1) float32 array beside loss_scale().
  const NDArray& skipped_updates() const { return scaler_.skipped_updates(); }

  const dist::GradientAggregator& aggregator() const { return *aggregator_; }

  /// The base rate (TrainerOptions::learning_rate).
  double learning_rate() const { return options_.learning_rate; }
  void set_learning_rate(double rate) { options_.learning_rate = rate; }
  /// The rate the next update uses: the schedule's at updates() + 1.
  double next_learning_rate() const;
  /// Updates made so far: the schedule's position (Note [Learning-rate schedules]).
  std::int64_t updates() const { return steps_; }
  const TrainerOptions& options() const { return options_; }
  /// The optimiser's name ("sgd", "adam", ...), as its state files say.
  std::string optimizer() const { return optimizer_->name(); }
  const Optimizer& optimizer_object() const { return *optimizer_; }
  /// With clip_global_norm: the global norm of the last update's gradients
  /// (divided by the batch size) before clipping, a (1) array on the first
  /// parameter's first device, computed there without waiting; else undefined.
  const NDArray& last_global_norm() const { return last_global_norm_; }

 private:
  /// The constructors' common part, once the optimiser is made.
  struct Made {};
  Trainer(Made, ParameterDict params, OptimizerPtr optimizer, TrainerOptions options,
          std::shared_ptr<dist::GradientAggregator> aggregator);

  void check_initialized() const;
  /// Makes the copies of every running-state parameter their mean (Note
  /// [Running state across devices]).
  void average_running_state();
  /// Makes the per-device states of every parameter that has none (zeros).
  void make_states();
  /// Scales every gradient by min(1, clip_global_norm / norm) (Note
  /// [Clipping by the global norm]).
  void clip_by_global_norm(double rescale);
  /// Where the loss-scaling state lives: the first initialized parameter's
  /// first device.
  Context scaling_home() const;

  ParameterDict params_;
  OptimizerPtr optimizer_;
  TrainerOptions options_;
  std::shared_ptr<dist::GradientAggregator> aggregator_;
  /// allreduce_grads() ran since the last update().
  bool aggregated_ = false;
  bool broadcast_done_ = false;
  std::int64_t steps_ = 0;
  /// Optimiser state per parameter and device, the arrays the optimiser's
  /// state_names() name: momentum (sgd), the first and second moments
  /// (adam). Made on the first step.
  std::vector<std::vector<std::vector<NDArray>>> states_;
  NDArray last_global_norm_;
  amp::LossScaler scaler_;
};

}  // namespace tagflow::nn

#include "tools/train_prediction.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tagflow/tagflow.h"
#include "tools/profile_report.h"

namespace tagflow::tools {

namespace {

/// Batches the host pushes before it waits for the oldest (run_train's
/// kBatchesAhead plus the one it waits for).
constexpr std::size_t kBatchesInFlight = 1;

/// Per GPU, in seconds: its communication's device time, and the part of it
/// during which it computed (Note [Predicted training]; the profile's time
/// breakdown, Note [Profile figures]).
std::pair<double, double> communication_overlap(const profiler::Trace& trace,
                                                const std::vector<Context>& devices) {
  double communication_us = 0;
  double overlapped_us = 0;
  for (const TimeBreakdown& t : summarize(trace).breakdown) {
    const bool listed =
        std::any_of(devices.begin(), devices.end(), [&](Context c) { return c.str() == t.device; });
    if (!listed) continue;
    communication_us += t.communication_us;
    overlapped_us += t.communication_overlapped_us;
  }
  const double n = 1e6 * static_cast<double>(devices.size());
  return {communication_us / n, overlapped_us / n};
}

}  // namespace

bool timing_only_devices(const std::vector<Context>& devices) {
  const auto& gpus = Engine::get().gpus();
  auto timing_only = [&](Context c) {
    return c.is_gpu() && static_cast<std::size_t>(c.index) < gpus.size() &&
           gpus[static_cast<std::size_t>(c.index)].timing_only;
  };
  const auto count = std::count_if(devices.begin(), devices.end(), timing_only);
  TAGFLOW_CHECK(count == 0 || count == static_cast<std::ptrdiff_t>(devices.size()),
                "train: expected every device or none to be a timing-only GPU "
                "(TAGFLOW_SIM_GPUS=N:MODEL:timing), got {} of {}",
                count, devices.size());
  return count > 0;
}

std::vector<PredictedEpoch> predict_training(const TrainOptions& options) {
  std::vector<std::string> names;
  for (Context c : options.devices) names.push_back(c.str());
  TAGFLOW_CHECK(timing_only_devices(options.devices),
                "train: a prediction needs timing-only GPUs (TAGFLOW_SIM_GPUS=N:MODEL:timing), "
                "got none among the devices {}",
                fmt::join(names, ", "));
  const auto refuse = [](bool given, const char* option) {
    TAGFLOW_CHECK(!given,
                  "train: {} needs values, which timing-only GPUs do not compute (they time "
                  "their kernels without running them); drop :timing from TAGFLOW_SIM_GPUS to "
                  "compute them",
                  option);
  };
  refuse(!options.save.empty(), "--save");
  refuse(!options.checkpoint_dir.empty(), "--checkpoint-dir");
  refuse(!options.resume_dir.empty(), "--resume");
  refuse(options.dist != "none", "--dist");
  refuse(options.epochs <= 0, "--epochs 0 (evaluation)");
  if (!options.profile.empty()) check_output_file(options.profile, "train: --profile");
  const std::vector<Context>& devices = options.devices;
  const auto device_count = static_cast<std::int64_t>(devices.size());
  TAGFLOW_CHECK(options.batch_size >= device_count,
                "train: a batch of {} samples cannot be split across {} devices: use a batch "
                "size of at least {}",
                options.batch_size, device_count, device_count);
  const DeviceModel& model = *Engine::get().config().sim_model;
  const std::filesystem::path dir =
      options.data_dir.empty() ? data::default_fashion_mnist_dir() : options.data_dir;
  const data::Dataset train_set = fashion_mnist(dir, true, options.limit);
  const std::int64_t remainder = train_set.size() % options.batch_size;
  data::DataLoader train_data(
      train_set, options.batch_size,
      {.shuffle = true,
       .seed = options.seed,
       .last_batch = remainder != 0 && remainder < device_count ? data::LastBatch::kDiscard
                                                                : data::LastBatch::kKeep,
       .num_workers = options.num_workers,
       .context = cpu_pinned(0)});
  random::seed(options.seed);
  std::shared_ptr<nn::Sequential> net = build_model(options.model);
  if (options.load.empty()) {
    net->initialize(model_initializer(options.model), devices);
  } else {
    net->load_parameters(options.load, devices);
  }
  nn::SoftmaxCrossEntropyLoss loss_function;
  const double learning_rate =
      options.learning_rate > 0 ? options.learning_rate : default_learning_rate(options.optimizer);
  nn::Trainer trainer(net->collect_params(), options.optimizer,
                      {.learning_rate = learning_rate,
                       .momentum = options.momentum,
                       .nesterov = options.nesterov,
                       .weight_decay = options.weight_decay,
                       .schedule = make_schedule(options, train_data.size()),
                       .loss_scale = {.enabled = options.dtype == DType::kFloat16}});
  const std::string cards = fmt::format("{} x {}", devices.size(), model.name);
  if (options.json) {
    fmt::print(
        "{{\"framework\":\"tagflow\",\"model\":\"{}\",\"devices\":{},\"device_model\":\"{}\","
        "\"prediction\":true,\"train_images\":{},\"batch_size\":{},\"dtype\":\"{}\"}}\n",
        options.model, devices.size(), model.name, train_set.size(), options.batch_size,
        dtype_name(options.dtype));
  } else {
    fmt::print(
        "train: {} on {} modelled GPUs ({}, timing only: a prediction of the model, not a "
        "measurement), {} training images, batch {}, {}\n",
        options.model, cards, model.description, train_set.size(), options.batch_size,
        dtype_name(options.dtype));
  }
  std::fflush(stdout);

  std::vector<PredictedEpoch> results;
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    for (Context c : devices) reset_peak_memory(c);
    Engine::get().wait_for_all();
    const std::int64_t start_ns = Engine::get().modelled_time_ns();
    PredictedEpoch result;
    profiler::clear();
    {
      const profiler::Scope profiling;
      // As run_train: the host one batch ahead of the devices (Note
      // [Batches in flight] in train.cc), waiting, without reading, for
      // the losses of the batch before.
      std::deque<std::vector<NDArray>> in_flight;
      for (const data::Batch& batch : train_data) {
        const std::vector<NDArray> xs = nn::split_and_load(batch.data, devices, false);
        const std::vector<NDArray> ys = nn::split_and_load(batch.label, devices, false);
        std::vector<NDArray> losses(xs.size());
        std::vector<NDArray> scaled(xs.size());
        {
          auto recording = autograd::record();
          const auto precision = nn::amp::autocast(options.dtype);
          for (std::size_t d = 0; d < xs.size(); ++d) {
            losses[d] = loss_function((*net)(xs[d]), ys[d]);
            scaled[d] = trainer.scale_loss(losses[d]);
          }
        }
        for (NDArray& l : scaled) l.backward();
        trainer.step(batch.data.shape()[0]);
        in_flight.push_back(std::move(losses));
        if (in_flight.size() > kBatchesInFlight) {
          for (const NDArray& loss : in_flight.front()) loss.wait_to_read();
          in_flight.pop_front();
        }
        result.images += batch.data.shape()[0];
        ++result.batches;
      }
      Engine::get().wait_for_all();
    }
    const profiler::Trace trace = profiler::collect();
    profiler::clear();
    if (epoch == 0 && !options.profile.empty()) {
      profiler::write_chrome_trace(trace, options.profile);
    }
    result.seconds = static_cast<double>(Engine::get().modelled_time_ns() - start_ns) * 1e-9;
    result.images_per_second =
        result.seconds > 0 ? static_cast<double>(result.images) / result.seconds : 0;
    result.step_seconds =
        result.batches > 0 ? result.seconds / static_cast<double>(result.batches) : 0;
    const auto [communication, overlapped] = communication_overlap(trace, devices);
    const double per_step = result.batches > 0 ? static_cast<double>(result.batches) : 1;
    result.communication_seconds = communication / per_step;
    result.overlapped_seconds = overlapped / per_step;
    for (Context c : devices) result.peak_bytes = std::max(result.peak_bytes, memory_stats(c).peak);
    const double overlap_percent =
        result.communication_seconds > 0
            ? 100 * result.overlapped_seconds / result.communication_seconds
            : 0;
    if (options.json) {
      fmt::print(
          "{{\"epoch\":{},\"prediction\":true,\"predicted_images_per_second\":{:.1f},"
          "\"predicted_step_seconds\":{:.6g},\"predicted_communication_seconds\":{:.6g},"
          "\"predicted_overlapped_seconds\":{:.6g},\"peak_bytes\":{}}}\n",
          epoch + 1, result.images_per_second, result.step_seconds, result.communication_seconds,
          result.overlapped_seconds, result.peak_bytes);
    } else {
      fmt::print(
          "epoch {:>2}/{}: predicted {:.0f} images/s on {} (model), step {:.3f} ms, gradient "
          "sums {:.3f} ms per GPU and step, {:.0f}% of it overlapping compute, peak {:.1f} MB "
          "per GPU\n",
          epoch + 1, options.epochs, result.images_per_second, cards, result.step_seconds * 1e3,
          result.communication_seconds * 1e3, overlap_percent,
          static_cast<double>(result.peak_bytes) / 1e6);
    }
    std::fflush(stdout);
    results.push_back(result);
  }
  return results;
}

}  // namespace tagflow::tools

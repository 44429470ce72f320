#include "tools/train.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tagflow/dist.h"
#include "tagflow/tagflow.h"
#include "tools/checkpoint.h"
#include "tools/profile_merge.h"
#include "tools/progress_line.h"
#include "tools/stop_on_signals.h"
#include "tools/train_prediction.h"

namespace tagflow::tools {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Samples of `batch` whose largest score is at the label, as a float32
/// array of shape (1) on the device (no wait).
NDArray count_correct(const NDArray& scores, const NDArray& label) {
  return sum(equal(argmax(scores, 1).astype(DType::kFloat32), label.astype(DType::kFloat32)));
}

/// The sum of one-element float32 arrays, one wait each.
double sum_on_host(const std::vector<NDArray>& values) {
  double total = 0;
  for (const NDArray& v : values) total += v.asscalar<float>();
  return total;
}

/// "1:05" or "2:01:05".
/// After each batch of an evaluation: the batches and samples so far.
using BatchCallback = std::function<void(std::int64_t batches, std::int64_t samples)>;

// Note [Batches in flight]
// The host pushes a batch while the devices still work on the one before,
// so that they never wait for it, and then waits for that one: one batch
// ahead. An array's memory is taken when the operation that writes it is
// pushed, so each batch in flight holds the memory of its whole forward
// and backward pass; one batch ahead is what keeps the devices busy (a
// batch's pushes take far less time than its kernels), and each batch more
// costs a batch's memory (for ResNet-18 at batch 128, about 2.4 GB).
constexpr std::size_t kBatchesAhead = 1;

/// The samples of `loader` that `net` classifies right, and how many there
/// are, each batch split across `devices`.
std::pair<double, double> evaluate(nn::Block& net, data::DataLoader& loader,
                                   const std::vector<Context>& devices,
                                   const BatchCallback& on_batch) {
  std::vector<NDArray> correct;
  for (Context c : devices) correct.push_back(zeros({1}, DType::kFloat32, c));
  std::int64_t samples = 0;
  std::int64_t batches = 0;
  std::deque<std::vector<NDArray>> in_flight;  // Note [Batches in flight]
  for (const data::Batch& batch : loader) {
    const std::vector<NDArray> xs = nn::split_and_load(batch.data, devices, false);
    const std::vector<NDArray> ys = nn::split_and_load(batch.label, devices, false);
    std::vector<NDArray> scores;
    for (std::size_t d = 0; d < xs.size(); ++d) {
      scores.push_back(net(xs[d]));
      correct[d] += count_correct(scores.back(), ys[d]);
    }
    samples += batch.data.shape()[0];
    in_flight.push_back(std::move(scores));
    if (in_flight.size() > kBatchesAhead) {
      for (const NDArray& s : in_flight.front()) s.wait_to_read();
      in_flight.pop_front();
    }
    on_batch(++batches, samples);
  }
  return {sum_on_host(correct), static_cast<double>(samples)};
}

/// The element-wise sum of `values` over the processes (none: as they are).
std::vector<double> over_processes(dist::MpiCommunicator* processes, std::vector<double> values) {
  return processes != nullptr ? processes->sum(values) : values;
}

/// The fraction of the test set classified right, over every process.
double test_accuracy(nn::Block& net, data::DataLoader& loader, const std::vector<Context>& devices,
                     dist::MpiCommunicator* processes, const BatchCallback& on_batch) {
  const auto [correct, samples] = evaluate(net, loader, devices, on_batch);
  const std::vector<double> totals = over_processes(processes, {correct, samples});
  return totals[1] == 0 ? 0.0 : totals[0] / totals[1];
}

/// The aggregator `dist` names (null: the Trainer's local one).
std::shared_ptr<dist::GradientAggregator> make_aggregator(const TrainOptions& options) {
  if (options.dist == "mpi") {
    return std::make_shared<dist::MpiAggregator>(options.processes,
                                                 dist::MpiAggregatorOptions{options.bucket_bytes});
  }
  if (options.dist == "nccl") {
    return std::make_shared<dist::NcclAggregator>(options.devices, options.processes,
                                                  options.processes->options().timeout_seconds);
  }
  return nullptr;
}

// Note [A loss that stops being finite]
// The host waits for the losses of the batch before the one it pushes
// (Note [Batches in flight]); the sums of that batch's losses, one
// per device, are read then, so a NaN or infinite loss ends the run naming
// its epoch and batch, at the cost of one small read per batch and device,
// of results already computed. The batches still in flight at the end of
// the epoch are checked before its figures are printed.

// Note [Profiled batches]
// `tagflow train --profile` records batches 5 to 9 of the first epoch, after
// the first batches have warmed the caches and the memory pools up. A first
// epoch of fewer than 10 batches has its last five recorded (all of them
// when it has five or fewer), so that a short run still gives a trace; with
// --epochs 0 no batch trains, and the run says so instead of writing nothing
// without a word.

/// The batches [begin, end) of the first epoch that --profile records.
struct BatchWindow {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

BatchWindow profiled_batches(std::int64_t batches_per_epoch) {
  constexpr std::int64_t kBegin = 5;
  constexpr std::int64_t kLength = 5;
  const std::int64_t begin = std::clamp<std::int64_t>(batches_per_epoch - kLength, 0, kBegin);
  return {begin, std::min(batches_per_epoch, begin + kLength)};
}

/// Starts recording before batch `window.begin`; before batch `window.end`
/// (or at the end of an epoch that is shorter), waits for the work in
/// flight, stops and writes the trace to `path`. Across processes, each
/// records its own trace, and `processes`' barrier at the start gives them
/// a common moment (Note [Aligning traces]).
void profile_window(std::optional<profiler::Scope>& scope, std::int64_t batch, BatchWindow window,
                    std::int64_t batches_per_epoch, const std::filesystem::path& path,
                    dist::MpiCommunicator* processes) {
  if (batch == window.begin && !scope) {
    Engine::get().wait_for_all();  // the trace starts from idle devices
    scope.emplace();
    if (processes != nullptr) {
      processes->barrier();
      profiler::mark_sync();
    }
  } else if (batch == window.end && scope) {
    Engine::get().wait_for_all();
    scope.reset();
    const profiler::Trace trace = profiler::collect();
    profiler::write_chrome_trace(trace, path);
    profiler::clear();
    if (trace.origin.rank != 0) return;  // the first process speaks for all
    fmt::print(stderr, "train: wrote a trace of {} operations (batches {} to {} of {}) to {}{}\n",
               trace.ops.size(), window.begin, window.end - 1, batches_per_epoch, path.string(),
               trace.origin.ranks > 1 ? ", and one per other process beside it" : "");
  }
}

std::string devices_text(const std::vector<Context>& devices) {
  std::vector<std::string> names;
  for (Context c : devices) names.push_back(c.str());
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

/// The tutorials' transform: ToTensor, then Normalize(0.13, 0.31).
data::Dataset fashion_mnist(const std::filesystem::path& dir, bool train, std::int64_t limit) {
  namespace T = data::transforms;
  data::Dataset images = data::FashionMNIST(dir, train);
  if (limit > 0 && limit < images.size()) {
    images = data::Dataset(limit, [images](std::int64_t i) { return images.get(i); });
  }
  return images.transform_first(T::Compose({T::ToTensor(), T::Normalize(0.13f, 0.31f)}));
}

std::vector<Context> parse_devices(const std::string& text, const char* command) {
  if (text == "all") return try_all_gpus();
  std::vector<Context> devices;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    std::string item = text.substr(begin, end - begin);
    // "gpu:0..7": a range of one device type.
    int last = -1;
    if (const std::size_t dots = item.find(".."); dots != std::string::npos) {
      const std::string upper = item.substr(dots + 2);
      item.resize(dots);
      std::size_t used = 0;
      try {
        last = std::stoi(upper, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      TAGFLOW_CHECK(used == upper.size() && used > 0 && last >= 0,
                    "{}: expected a range such as gpu:0..7, got \"{}\"", command,
                    text.substr(begin, end - begin));
    }
    const Context first = Context::parse(item);
    if (last < 0) last = first.index;
    TAGFLOW_CHECK(last >= first.index && last - first.index < 1024,
                  "{}: expected a range such as gpu:0..7 (first index up to last), got \"{}\"",
                  command, text.substr(begin, end - begin));
    for (int index = first.index; index <= last; ++index) {
      const Context c{first.type, index};
      TAGFLOW_CHECK(std::find(devices.begin(), devices.end(), c) == devices.end(),
                    "{}: the device {} is listed twice in \"{}\"", command, c.str(), text);
      TAGFLOW_CHECK(!c.is_cpu_pinned(),
                    "{}: {} is pinned host memory for transfers, not a device to run on; "
                    "expected cpu:N or gpu:N",
                    command, c.str());
      check_device(c);
      devices.push_back(c);
    }
    begin = end + 1;
  }
  return devices;
}

std::shared_ptr<nn::Sequential> build_model(const std::string& name) {
  if (name == "lenet") return std::make_shared<nn::Sequential>(models::lenet());
  if (name == "mlp") return std::make_shared<nn::Sequential>(models::mlp());
  if (name == "resnet18") return std::make_shared<nn::Sequential>(models::resnet18(10, 1));
  detail::throw_error("train: unknown model \"{}\"; expected lenet, mlp or resnet18", name);
}

init::InitializerPtr model_initializer(const std::string& name) {
  // ResNet-18 as the tutorials' multi-GPU chapter initialises it.
  return name == "resnet18" ? init::Normal(0.01) : init::Xavier();
}

nn::LrSchedule make_schedule(const TrainOptions& options, std::int64_t batches_per_epoch) {
  const auto updates = [&](double epochs) {
    return static_cast<std::int64_t>(std::llround(epochs * static_cast<double>(batches_per_epoch)));
  };
  const std::int64_t total = options.epochs * batches_per_epoch;
  const std::int64_t warmup = updates(options.warmup_epochs);
  TAGFLOW_CHECK(options.warmup_epochs >= 0 && (warmup < total || total == 0 || warmup == 0),
                "train: --warmup-epochs: expected fewer epochs of warm-up than of training ({}), "
                "got {}",
                options.epochs, options.warmup_epochs);
  nn::LrSchedule schedule;
  switch (nn::parse_lr_schedule_kind(options.lr_schedule)) {
    case nn::LrScheduleKind::kConstant:
      break;
    case nn::LrScheduleKind::kFactor:
      TAGFLOW_CHECK(options.lr_steps.size() == 1 && updates(options.lr_steps[0]) >= 1,
                    "train: --lr-schedule factor: expected one --lr-steps value, the epochs "
                    "between two changes of the rate (at least one batch), got {}",
                    options.lr_steps.size());
      schedule = nn::LrSchedule::factor_every(updates(options.lr_steps[0]), options.lr_factor);
      break;
    case nn::LrScheduleKind::kMultiFactor: {
      TAGFLOW_CHECK(!options.lr_steps.empty(),
                    "train: --lr-schedule multifactor: expected --lr-steps, the epochs after "
                    "which the rate changes, e.g. --lr-steps 30,60");
      std::vector<std::int64_t> steps;
      for (double epochs : options.lr_steps) steps.push_back(updates(epochs));
      schedule = nn::LrSchedule::multifactor(steps, options.lr_factor);
      break;
    }
    case nn::LrScheduleKind::kCosine:
      schedule =
          nn::LrSchedule::cosine(std::max<std::int64_t>(total, warmup + 1), options.final_lr);
      break;
    case nn::LrScheduleKind::kPoly:
      schedule = nn::LrSchedule::poly(std::max<std::int64_t>(total, warmup + 1), options.lr_power,
                                      options.final_lr);
      break;
  }
  return warmup > 0 ? schedule.with_warmup(warmup) : schedule;
}

double default_learning_rate(const std::string& optimizer) {
  if (optimizer == "sgd") return 0.1;
  if (optimizer == "adam") return 0.001;
  detail::throw_error("train: unknown optimizer \"{}\"; expected sgd or adam", optimizer);
}

void check_output_file(const std::filesystem::path& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ignored;  // a path that cannot be inspected fails the checks below
  const std::string text = path.string();
  TAGFLOW_CHECK(path.has_filename(), "{}: expected a file name, got '{}'", what, text);
  TAGFLOW_CHECK(!fs::is_directory(path, ignored), "{}: expected a file, got '{}' (a directory)",
                what, text);
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  TAGFLOW_CHECK(fs::is_directory(dir, ignored),
                "{}: expected a file in an existing directory, got '{}' (no directory '{}')", what,
                text, dir.string());
  TAGFLOW_CHECK(access(dir.c_str(), W_OK) == 0,
                "{}: expected a file in a writable directory, got '{}' ('{}' is not writable)",
                what, text, dir.string());
  TAGFLOW_CHECK(!fs::exists(path, ignored) || access(path.c_str(), W_OK) == 0,
                "{}: expected a writable file, got '{}' (it exists and cannot be written)", what,
                text);
}

namespace {

/// A float exactly, as text that reads back to the same bits.
std::string exact(float value) { return fmt::format("{:a}", value); }
float read_exact(const std::map<std::string, std::string>& metadata, const std::string& key,
                 const std::filesystem::path& file) {
  const auto it = metadata.find(key);
  if (it == metadata.end()) throw io::FileError(file, "no \"" + key + "\" in its metadata");
  char* end = nullptr;
  const float value = std::strtof(it->second.c_str(), &end);
  if (end == it->second.c_str() || *end != '\0') {
    throw io::FileError(file,
                        fmt::format("\"{}\": expected a number, got \"{}\"", key, it->second));
  }
  return value;
}

/// What a checkpoint must agree on with the run that resumes from it, for
/// the resumed run to be the same as one never stopped.
std::map<std::string, std::string> run_identity(const TrainOptions& options, int processes) {
  std::vector<std::string> devices;
  for (Context c : options.devices) devices.push_back(c.str());
  return {{"model", options.model},
          {"optimizer", options.optimizer},
          {"seed", std::to_string(options.seed)},
          {"batch_size", std::to_string(options.batch_size)},
          {"limit", std::to_string(options.limit)},
          {"devices", fmt::format("{}", fmt::join(devices, ","))},
          {"processes", std::to_string(processes)}};
}

}  // namespace

std::vector<EpochResult> run_train(const TrainOptions& options) {
  TAGFLOW_CHECK(options.epochs >= 0 && options.batch_size > 0 && options.learning_rate >= 0,
                "train: expected epochs >= 0, a batch size > 0 and a learning rate >= 0 (0: the "
                "optimizer's default), got {}, {} and {}",
                options.epochs, options.batch_size, options.learning_rate);
  const double learning_rate =
      options.learning_rate > 0 ? options.learning_rate : default_learning_rate(options.optimizer);
  TAGFLOW_CHECK(options.optimizer == "sgd" || (options.momentum == 0 && !options.nesterov),
                "train: --momentum and --nesterov apply to sgd; adam has its own moments (got "
                "--optimizer {} with momentum {})",
                options.optimizer, options.momentum);
  TAGFLOW_CHECK(!options.nesterov || options.momentum > 0,
                "train: --nesterov needs --momentum above 0, such as 0.9");
  TAGFLOW_CHECK(!options.devices.empty(), "train: expected at least one device, got none");
  TAGFLOW_CHECK(options.dist == "none" || options.dist == "mpi" || options.dist == "nccl",
                "train: unknown dist \"{}\"; expected none, mpi or nccl", options.dist);
  const bool distributed = options.dist != "none";
  TAGFLOW_CHECK(!distributed || options.processes != nullptr,
                "train: dist {} needs the processes' communicator (TrainOptions::processes)",
                options.dist);
  dist::MpiCommunicator* const processes = distributed ? options.processes.get() : nullptr;
  const int rank = distributed ? processes->rank() : 0;
  const int process_count = distributed ? processes->size() : 1;
  const bool speaks = rank == 0;  // only the first process prints and saves
  // Before any work, so that a run's result is not lost at its end.
  if (speaks && !options.save.empty()) check_output_file(options.save, "train: --save");
  // Each process records its own trace (tools/profile_merge.h).
  const std::filesystem::path profile_file =
      options.profile.empty() ? std::filesystem::path()
                              : rank_trace_file(options.profile, rank, process_count);
  if (!options.profile.empty()) check_output_file(profile_file, "train: --profile");
  profiler::set_rank(rank, process_count);
  for (Context c : options.devices) check_device(c);
  TAGFLOW_CHECK(!timing_only_devices(options.devices),
                "train: timing-only GPUs compute no values to train on: predict_training "
                "(tools/train_prediction.h) runs their steps, as `tagflow train` does for them");
  const std::vector<Context>& devices = options.devices;
  // Every device a simulated GPU keeping modelled time: each epoch also
  // says what the model predicts (Note [Modelled time] in engine/device_model.h).
  const bool modelled = std::all_of(devices.begin(), devices.end(), [](Context c) {
    return c.is_gpu() && !Engine::get().gpus()[static_cast<std::size_t>(c.index)].model.empty();
  });
  const std::string model_name =
      modelled ? Engine::get().gpus()[static_cast<std::size_t>(devices[0].index)].model : "";
  const auto device_count = static_cast<std::int64_t>(devices.size());
  TAGFLOW_CHECK(options.batch_size % process_count == 0,
                "train: a batch of {} samples cannot be split evenly across {} processes: use a "
                "multiple of {}",
                options.batch_size, process_count, process_count);
  const std::int64_t process_batch = options.batch_size / process_count;
  TAGFLOW_CHECK(process_batch >= device_count,
                "train: a batch of {} samples per process cannot be split across {} devices: use "
                "a batch size of at least {}",
                process_batch, device_count, device_count * process_count);
  const std::filesystem::path dir =
      options.data_dir.empty() ? data::default_fashion_mnist_dir() : options.data_dir;

  // Evaluating only (0 epochs) reads no training set.
  const data::Dataset train_set =
      options.epochs > 0 ? fashion_mnist(dir, true, options.limit)
                         : data::Dataset(0, [](std::int64_t) { return data::Sample{}; });
  // Each process takes its shard of every batch (Note [Sharding] in
  // nn/data/data_loader.h). A last batch with fewer samples than devices would
  // leave a device without work (and its gradients stale): it is dropped.
  const std::int64_t remainder = train_set.size() / process_count % process_batch;
  const bool drop_last = remainder != 0 && remainder < device_count;
  // Batches bound for GPUs are prepared in pinned memory, so that their
  // copies start at once; for CPU devices alone, in plain host memory.
  const bool any_gpu =
      std::any_of(devices.begin(), devices.end(), [](Context c) { return c.is_gpu(); });
  const Context batch_context = any_gpu ? cpu_pinned(0) : cpu(0);
  // Where to resume: the newest checkpoint that loads (Note [Checkpoints]).
  std::optional<Checkpoint> resume_from;
  std::map<std::string, std::string> resumed;  // its metadata
  if (!options.resume_dir.empty()) {
    for (const Checkpoint& c : list_checkpoints(options.resume_dir)) {
      try {
        resumed = validate_checkpoint(c);
        resume_from = c;
        break;
      } catch (const io::FileError& e) {
        if (speaks) {
          fmt::print(stderr, "train: --resume: skipping {}: {}\n", c.dir.string(), e.what());
        }
      }
    }
    if (!resume_from && list_checkpoints(options.resume_dir).empty()) {
      // Nothing written yet (a run killed before its first checkpoint): a
      // job that always passes --resume starts over.
      if (speaks) {
        fmt::print(stderr,
                   "train: --resume: no checkpoint in {} yet; starting from the beginning\n",
                   options.resume_dir.string());
      }
    } else {
      TAGFLOW_CHECK(resume_from.has_value(),
                    "train: --resume: expected a checkpoint that loads in {}, found none that does",
                    options.resume_dir.string());
    }
    for (const auto& [key, value] : run_identity(options, process_count)) {
      if (!resume_from) break;
      const auto it = resumed.find(key);
      const std::string saved = it != resumed.end() ? it->second : "(none)";
      TAGFLOW_CHECK(saved == value,
                    "train: --resume: {} was made with {} {}, this run has {}: resuming exactly "
                    "needs the same options",
                    resume_from->dir.string(), key, saved, value);
    }
    TAGFLOW_CHECK(!resume_from || resume_from->position.epoch <= options.epochs,
                  "train: --resume: {} is after epoch {}, and this run has {} epochs",
                  resume_from->dir.string(), resume_from->position.epoch, options.epochs);
  }
  const int first_epoch = resume_from ? resume_from->position.epoch : 0;
  data::DataLoader train_data(
      train_set, process_batch,
      {.shuffle = true,
       .seed = options.seed,
       .first_epoch = static_cast<std::uint64_t>(first_epoch),
       .last_batch = drop_last ? data::LastBatch::kDiscard : data::LastBatch::kKeep,
       .num_workers = options.num_workers,
       .context = batch_context,
       .num_shards = process_count,
       .shard_index = rank});
  data::DataLoader test_data(fashion_mnist(dir, false, options.test_limit), process_batch,
                             {.num_workers = options.num_workers,
                              .context = batch_context,
                              .num_shards = process_count,
                              .shard_index = rank});

  random::seed(options.seed);
  std::shared_ptr<nn::Sequential> net = build_model(options.model);
  // Across processes, only the first reads the parameter file; the others'
  // values are replaced by its own below.
  if (options.load.empty() || rank != 0) {
    net->initialize(model_initializer(options.model), devices);
  } else {
    net->load_parameters(options.load, devices);
  }
  nn::SoftmaxCrossEntropyLoss loss_function;
  const nn::LrSchedule schedule = make_schedule(options, train_data.size());
  TAGFLOW_CHECK(is_floating(options.dtype),
                "train: expected --dtype float32, float16 or bfloat16, got {}",
                dtype_name(options.dtype));
  nn::Trainer trainer(net->collect_params(), options.optimizer,
                      {.learning_rate = learning_rate,
                       .momentum = options.momentum,
                       .nesterov = options.nesterov,
                       .weight_decay = options.weight_decay,
                       .clip_global_norm = options.clip_grad_norm,
                       .schedule = schedule,
                       .loss_scale = {.enabled = options.dtype == DType::kFloat16}},
                      make_aggregator(options));
  if (resume_from) {
    net->load_parameters(resume_from->dir / "parameters.safetensors", devices);
    (void)trainer.load_states(resume_from->dir / "trainer.safetensors");
    const bool finished = resume_from->position.epoch == options.epochs;
    if (speaks && finished) {
      fmt::print(stderr,
                 "train: --resume: {} ends this run (its {} epoch{} done): nothing left to "
                 "train\n",
                 resume_from->dir.string(), options.epochs, options.epochs == 1 ? "" : "s");
    } else if (speaks) {
      fmt::print(stderr, "train: resuming from {} (epoch {}, batch {})\n",
                 resume_from->dir.string(), resume_from->position.epoch + 1,
                 resume_from->position.batch + 1);
    }
  }
  if (distributed) {
    (*net)(zeros({1, 1, 28, 28}, DType::kFloat32, devices[0]));  // the deferred shapes
    trainer.broadcast_parameters();  // every process starts from rank 0's weights
  }
  const StopOnSignals stop_on_signals(!options.checkpoint_dir.empty());
  std::int64_t trained_here = 0;  // batches trained by this run
  const auto stop_signal = [&] {
    if (const int signal = stop_on_signals.requested(); signal != 0) return signal;
    return options.stop_after > 0 && trained_here >= options.stop_after ? -1 : 0;
  };
  const auto checkpoint = [&](int epochs_done, std::int64_t batch,
                              std::map<std::string, std::string> extra) {
    std::map<std::string, std::string> metadata = run_identity(options, process_count);
    metadata.merge(extra);
    return write_checkpoint(options.checkpoint_dir, {.epoch = epochs_done, .batch = batch}, *net,
                            trainer, std::move(metadata), options.keep_checkpoints);
  };

  const bool progress = speaks && options.progress && isatty(STDERR_FILENO) != 0;
  if (speaks && options.json) {
    fmt::print(
        "{{\"framework\":\"tagflow\",\"model\":\"{}\",\"devices\":\"{}\",\"processes\":{},"
        "\"train_images\":{},\"batch_size\":{},\"optimizer\":\"{}\",\"learning_rate\":{},"
        "\"dtype\":\"{}\"}}\n",
        options.model, devices_text(devices), process_count, train_data.dataset().size(),
        options.batch_size, options.optimizer, learning_rate, dtype_name(options.dtype));
  } else if (speaks) {
    const std::string across =
        distributed ? fmt::format(" in each of {} processes ({})", process_count, options.dist)
                    : "";
    std::string optimizer = fmt::format("{} learning rate {}", options.optimizer, learning_rate);
    if (schedule.kind != nn::LrScheduleKind::kConstant || schedule.warmup_steps > 0) {
      optimizer += " (" + schedule.describe() + ")";
    }
    if (options.momentum > 0) {
      optimizer +=
          fmt::format(", {}momentum {}", options.nesterov ? "Nesterov " : "", options.momentum);
    }
    if (options.weight_decay > 0)
      optimizer += fmt::format(", weight decay {}", options.weight_decay);
    if (options.clip_grad_norm > 0) {
      optimizer += fmt::format(", gradients clipped to norm {}", options.clip_grad_norm);
    }
    const std::string precision =
        options.dtype == DType::kFloat32
            ? ""
            : fmt::format(", {} with float32 master weights{}", dtype_name(options.dtype),
                          options.dtype == DType::kFloat16 ? " and loss scaling" : "");
    fmt::print("train: {} on {}{}, {} training and {} test images, batch {}, {}{}\n", options.model,
               devices_text(devices), across, train_data.dataset().size(),
               test_data.dataset().size(), options.batch_size, optimizer, precision);
  }
  std::fflush(stdout);
  if (speaks && options.limit > 0 && options.test_limit == 0 && options.epochs > 0 &&
      test_data.dataset().size() > train_data.dataset().size()) {
    // A quick run on part of the training set may spend most of its time
    // evaluating: say so once, with the option that shortens it.
    fmt::print(stderr,
               "train: --limit {} limits the training set only: every epoch evaluates all {} "
               "test images (--test-limit N evaluates the first N)\n",
               options.limit, test_data.dataset().size());
  }
  if (speaks && !options.profile.empty() && options.epochs == 0) {
    fmt::print(stderr,
               "train: --profile: no trace written: the trace records training batches (5 to 9 of "
               "the first epoch), and --epochs 0 trains none\n");
  }
  ProgressLine progress_line(progress, options.epochs);
  // What the progress line shows after each evaluation batch.
  const BatchCallback show_test_progress = [&](std::int64_t batches, std::int64_t samples) {
    progress_line.update(batches, samples * process_count, nullptr);
  };

  std::vector<EpochResult> results;
  for (int epoch = first_epoch; epoch < options.epochs; ++epoch) {
    for (Context c : devices) reset_peak_memory(c);
    const Clock::time_point start = Clock::now();
    // On GPUs keeping modelled time: where the host stands in it (it has
    // waited for everything before), for the epoch's prediction.
    const std::int64_t modelled_start = modelled ? Engine::get().modelled_time_ns() : -1;
    // Loss and accuracy stay on the device until the epoch ends (one wait
    // per epoch, not per batch). The host runs one batch ahead of the
    // devices (Note [Batches in flight]).
    std::vector<NDArray> total_loss;
    std::vector<NDArray> correct;
    for (Context c : devices) {
      total_loss.push_back(zeros({1}, DType::kFloat32, c));
      correct.push_back(zeros({1}, DType::kFloat32, c));
    }
    // Each batch's loss sums per device, checked once the host has waited
    // for them anyway (Note [A loss that stops being finite]).
    struct BatchInFlight {
      std::int64_t batch = 0;
      std::vector<NDArray> loss_sums;
    };
    std::deque<BatchInFlight> in_flight;
    const auto check_finite = [&](const BatchInFlight& b) {
      for (const NDArray& loss_sum : b.loss_sums) {
        const float value = loss_sum.asscalar<float>();
        if (std::isfinite(value)) continue;
        progress_line.clear();
        detail::throw_error(
            "train: the training diverged: expected a finite loss, got {} in epoch {}/{}, batch "
            "{} of {} ({}, learning rate {}); try a lower --lr, such as {}",
            std::isnan(value) ? "nan" : fmt::format("{}", value), epoch + 1, options.epochs,
            b.batch + 1, train_data.size(), options.optimizer, learning_rate, learning_rate / 10);
      }
    };
    std::int64_t samples = 0;
    std::int64_t batches = 0;
    // A run resumed inside this epoch: its first batches were trained, and
    // its sums so far are the checkpoint's.
    std::int64_t skip = 0;
    std::int64_t restored_samples = 0;  // trained before the checkpoint, not timed here
    if (resume_from && epoch == first_epoch && resume_from->position.batch > 0) {
      skip = resume_from->position.batch;
      const std::filesystem::path file = resume_from->dir / "trainer.safetensors";
      for (std::size_t d = 0; d < devices.size(); ++d) {
        total_loss[d] += read_exact(resumed, fmt::format("loss_sum.{}", d), file);
        correct[d] += read_exact(resumed, fmt::format("correct.{}", d), file);
      }
      samples = static_cast<std::int64_t>(read_exact(resumed, "samples", file));
      restored_samples = samples;
    }
    const std::int64_t batches_per_epoch = train_data.size();
    const BatchWindow profiled = profiled_batches(batches_per_epoch);
    std::optional<profiler::Scope> profiling;
    progress_line.start(epoch + 1, "train", batches_per_epoch);
    for (const data::Batch& batch : train_data) {
      if (skip > 0) {  // trained before the checkpoint
        --skip;
        ++batches;
        continue;
      }
      if (!distributed && stop_signal() != 0) {
        // Note [Stopping at a batch boundary]: the sums so far go with it.
        std::map<std::string, std::string> sums{{"samples", std::to_string(samples)}};
        for (std::size_t d = 0; d < devices.size(); ++d) {
          sums[fmt::format("loss_sum.{}", d)] = exact(total_loss[d].asscalar<float>());
          sums[fmt::format("correct.{}", d)] = exact(correct[d].asscalar<float>());
        }
        progress_line.clear();
        const std::filesystem::path written = options.checkpoint_dir.empty()
                                                  ? std::filesystem::path()
                                                  : checkpoint(epoch, batches, std::move(sums));
        throw TrainingStopped(
            fmt::format("train: stopped in epoch {}, before batch {} of {}{}", epoch + 1,
                        batches + 1, batches_per_epoch,
                        written.empty() ? "" : "; checkpoint " + written.string()),
            written, std::max(stop_signal(), 0));
      }
      if (epoch == 0 && !options.profile.empty()) {
        profile_window(profiling, batches, profiled, batches_per_epoch, profile_file, processes);
      }
      // Each device takes its slice of the batch (copies on the copy
      // queues); forward and backward run on every device at once.
      const std::vector<NDArray> xs = nn::split_and_load(batch.data, devices, false);
      const std::vector<NDArray> ys = nn::split_and_load(batch.label, devices, false);
      std::vector<NDArray> scores(xs.size());
      std::vector<NDArray> losses(xs.size());
      std::vector<NDArray> scaled(xs.size());  // what backward starts from
      {
        auto recording = autograd::record();
        const auto precision = nn::amp::autocast(options.dtype);
        for (std::size_t d = 0; d < xs.size(); ++d) {
          scores[d] = (*net)(xs[d]);
          losses[d] = loss_function(scores[d], ys[d]);
          scaled[d] = trainer.scale_loss(losses[d]);  // losses[d] itself without float16
        }
      }
      for (NDArray& l : scaled) l.backward();
      // Every process's batch has the same size: the global one is n.
      const std::int64_t n = batch.data.shape()[0] * process_count;
      trainer.step(n);  // gradients summed across devices and processes, every copy updated
      BatchInFlight pushed{.batch = batches, .loss_sums = {}};
      for (std::size_t d = 0; d < xs.size(); ++d) {
        pushed.loss_sums.push_back(sum(losses[d]));
        total_loss[d] += pushed.loss_sums.back();
        correct[d] += count_correct(scores[d].detach(), ys[d]);
      }
      samples += batch.data.shape()[0];
      in_flight.push_back(std::move(pushed));
      if (in_flight.size() > kBatchesAhead) {
        check_finite(in_flight.front());  // waits for that batch's losses
        in_flight.pop_front();
      }
      ++batches;
      ++trained_here;
      progress_line.update(batches, samples * process_count, [&] {
        // A wait, rare: Note [How often the progress line waits].
        return sum_on_host(total_loss) / static_cast<double>(samples);
      });
    }
    if (profiling) {
      profile_window(profiling, profiled.end, profiled, batches_per_epoch, profile_file, processes);
    }
    for (const BatchInFlight& b : in_flight) check_finite(b);
    const std::vector<double> totals =
        over_processes(processes, {sum_on_host(total_loss), sum_on_host(correct),
                                   static_cast<double>(samples), stop_signal() != 0 ? 1.0 : 0.0});
    TAGFLOW_CHECK(totals[2] > 0,
                  "train: epoch {} had no training sample: expected at least one batch per "
                  "device (use a larger --limit, or fewer devices)",
                  epoch + 1);
    EpochResult result;
    result.loss = totals[0] / totals[2];
    result.train_accuracy = totals[1] / totals[2];
    result.seconds = seconds_since(start);
    result.images_per_second =
        (totals[2] - static_cast<double>(restored_samples * process_count)) / result.seconds;
    if (modelled) {  // the sums above waited for the epoch's last batch
      const double modelled_seconds =
          static_cast<double>(Engine::get().modelled_time_ns() - modelled_start) * 1e-9;
      if (modelled_seconds > 0) {
        result.predicted_images_per_second =
            static_cast<double>(samples - restored_samples) / modelled_seconds;
      }
    }
    for (Context c : devices) result.peak_bytes = std::max(result.peak_bytes, memory_stats(c).peak);
    if (trainer.loss_scale().defined()) {
      result.loss_scale = trainer.loss_scale().asscalar<float>();
      result.skipped_updates =
          static_cast<std::int64_t>(trainer.skipped_updates().asscalar<float>());
    }
    if (!std::isfinite(result.loss)) {  // another process's loss (each checks its own)
      progress_line.clear();
      detail::throw_error(
          "train: the training diverged: expected a finite mean loss, got {} in epoch {}/{} ({}, "
          "learning rate {}); try a lower --lr, such as {}",
          std::isnan(result.loss) ? "nan" : fmt::format("{}", result.loss), epoch + 1,
          options.epochs, options.optimizer, learning_rate, learning_rate / 10);
    }
    progress_line.start(epoch + 1, "test", test_data.size());
    {
      const auto precision = nn::amp::autocast(options.dtype);  // evaluated as it trains
      result.test_accuracy = test_accuracy(*net, test_data, devices, processes, show_test_progress);
    }
    progress_line.clear();
    // The checkpoint first: an epoch's line means its checkpoint is whole.
    std::filesystem::path written;
    if (!options.checkpoint_dir.empty() && speaks) written = checkpoint(epoch + 1, 0, {});
    if (!speaks) {
      // Quiet: rank 0 prints the figures of every process.
    } else if (options.json) {
      fmt::print(
          "{{\"epoch\":{},\"loss\":{:.6f},\"train_accuracy\":{:.6f},\"test_accuracy\":{:.6f},"
          "\"seconds\":{:.4f},\"images_per_second\":{:.1f},\"peak_bytes\":{}{}{}}}\n",
          epoch + 1, result.loss, result.train_accuracy, result.test_accuracy, result.seconds,
          result.images_per_second, result.peak_bytes,
          result.loss_scale > 0 ? fmt::format(",\"loss_scale\":{},\"skipped_updates\":{}",
                                              result.loss_scale, result.skipped_updates)
                                : "",
          result.predicted_images_per_second > 0
              ? fmt::format(",\"predicted_images_per_second\":{:.1f}",
                            result.predicted_images_per_second)
              : "");
    } else {
      fmt::print(
          "epoch {:>2}/{}: loss {:.4f}, train acc {:.4f}, test acc {:.4f}, {:.1f} s, {:.0f} "
          "images/s, peak {:.1f} MB{}{}\n",
          epoch + 1, options.epochs, result.loss, result.train_accuracy, result.test_accuracy,
          result.seconds, result.images_per_second, static_cast<double>(result.peak_bytes) / 1e6,
          result.loss_scale > 0 ? fmt::format(", loss scale {} ({} updates skipped)",
                                              result.loss_scale, result.skipped_updates)
                                : "",
          result.predicted_images_per_second > 0
              ? fmt::format("; predicted {:.0f} images/s on the modelled {} (a model, not a "
                            "measurement)",
                            result.predicted_images_per_second, model_name)
              : "");
    }
    std::fflush(stdout);
    results.push_back(result);
    if (totals[3] > 0 && epoch + 1 < options.epochs) {  // some process was asked to stop
      throw TrainingStopped(fmt::format("train: stopped after epoch {}{}", epoch + 1,
                                        written.empty() ? "" : "; checkpoint " + written.string()),
                            written, std::max(stop_signal(), 0));
    }
  }
  if (options.epochs == 0) {  // evaluation only, e.g. of loaded parameters
    EpochResult result;
    progress_line.start(0, "test", test_data.size());
    result.test_accuracy = test_accuracy(*net, test_data, devices, processes, show_test_progress);
    progress_line.clear();
    if (speaks) fmt::print("test acc {:.4f}\n", result.test_accuracy);
    results.push_back(result);
  }
  if (speaks && !options.save.empty()) {
    net->save_parameters(options.save);
    fmt::print(stderr, "train: saved the parameters to {}\n", options.save.string());
  }
  return results;
}

}  // namespace tagflow::tools

#include "tools/train.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <deque>

#include <fmt/format.h>

#include "tagflow/tagflow.h"

namespace tagflow::tools {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// The tutorials' transform: ToTensor, then Normalize(0.13, 0.31).
data::Dataset fashion_mnist(const std::filesystem::path& dir, bool train, std::int64_t limit) {
  namespace T = data::transforms;
  data::Dataset images = data::FashionMNIST(dir, train);
  if (limit > 0 && limit < images.size()) {
    images = data::Dataset(limit, [images](std::int64_t i) { return images.get(i); });
  }
  return images.transform_first(T::Compose({T::ToTensor(), T::Normalize(0.13f, 0.31f)}));
}

/// Samples of `batch` whose largest score is at the label, as a float32
/// array of shape (1) on the device (no wait).
NDArray count_correct(const NDArray& scores, const NDArray& label) {
  return sum(equal(argmax(scores, 1).astype(DType::kFloat32), label.astype(DType::kFloat32)));
}

/// "[=========>          ]  120/235" on stderr, redrawn in place.
void draw_progress(std::int64_t done, std::int64_t total) {
  constexpr int kWidth = 30;
  const int filled = total > 0 ? static_cast<int>(kWidth * done / total) : kWidth;
  std::string bar(static_cast<std::size_t>(filled), '=');
  if (filled < kWidth) bar += '>';
  bar.resize(kWidth, ' ');
  fmt::print(stderr, "\r[{}] {:>5}/{}", bar, done, total);
  std::fflush(stderr);
}

void clear_progress() {
  fmt::print(stderr, "\r{:50}\r", "");
  std::fflush(stderr);
}

/// Fraction of the samples of `loader` that `net` classifies right.
double evaluate(nn::Block& net, data::DataLoader& loader, Context ctx) {
  NDArray correct = zeros({1}, DType::kFloat32, ctx);
  std::int64_t samples = 0;
  for (const data::Batch& batch : loader) {
    const NDArray x = batch.data.as_in_context(ctx);
    const NDArray y = batch.label.as_in_context(ctx);
    correct += count_correct(net(x), y);
    samples += batch.data.shape()[0];
  }
  return samples == 0 ? 0.0 : correct.asscalar<float>() / static_cast<double>(samples);
}

}  // namespace

std::shared_ptr<nn::Sequential> build_model(const std::string& name) {
  auto net = std::make_shared<nn::Sequential>();
  if (name == "lenet") {
    net->add(nn::Conv2D(6, 5, "relu"), nn::MaxPool2D(2, 2), nn::Conv2D(16, 3, "relu"),
             nn::MaxPool2D(2, 2), nn::Dense(120, "relu"), nn::Dense(84, "relu"), nn::Dense(10));
  } else if (name == "mlp") {
    net->add(nn::Dense(256, "relu"), nn::Dense(128, "relu"), nn::Dense(10));
  } else {
    detail::throw_error("train: unknown model \"{}\"; expected lenet or mlp", name);
  }
  return net;
}

std::vector<EpochResult> run_train(const TrainOptions& options) {
  TAGFLOW_CHECK(options.epochs >= 0 && options.batch_size > 0 && options.learning_rate > 0,
                "train: expected epochs >= 0, a batch size > 0 and a learning rate > 0, got {}, "
                "{} and {}",
                options.epochs, options.batch_size, options.learning_rate);
  check_device(options.device);
  const Context ctx = options.device;
  const std::filesystem::path dir =
      options.data_dir.empty() ? default_fashion_mnist_dir() : options.data_dir;

  // Evaluating only (0 epochs) reads no training set.
  const data::Dataset train_set =
      options.epochs > 0 ? fashion_mnist(dir, true, options.limit)
                         : data::Dataset(0, [](std::int64_t) { return data::Sample{}; });
  data::DataLoader train_data(
      train_set, options.batch_size,
      {.shuffle = true, .seed = options.seed, .num_workers = options.num_workers});
  data::DataLoader test_data(fashion_mnist(dir, false, 0), options.batch_size,
                             {.num_workers = options.num_workers});

  random::seed(options.seed);
  std::shared_ptr<nn::Sequential> net = build_model(options.model);
  if (options.load.empty()) {
    net->initialize(init::Xavier(), {ctx});
  } else {
    net->load_parameters(options.load, ctx);
  }
  nn::SoftmaxCrossEntropyLoss loss_function;
  nn::Trainer trainer(net->collect_params(), options.optimizer,
                      {.learning_rate = options.learning_rate});

  const bool progress = options.progress && isatty(STDERR_FILENO) != 0;
  fmt::print("train: {} on {}, {} training and {} test images, batch {}, {} learning rate {}\n",
             options.model, ctx.str(), train_data.dataset().size(), test_data.dataset().size(),
             options.batch_size, options.optimizer, options.learning_rate);
  std::fflush(stdout);

  std::vector<EpochResult> results;
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    const Clock::time_point start = Clock::now();
    // Loss and accuracy stay on the device until the epoch ends (one wait
    // per epoch, not per batch). The host runs at most two batches ahead of
    // the device, which bounds the memory of the batches in flight.
    NDArray total_loss = zeros({1}, DType::kFloat32, ctx);
    NDArray correct = zeros({1}, DType::kFloat32, ctx);
    std::deque<NDArray> in_flight;
    std::int64_t samples = 0;
    std::int64_t batches = 0;
    const std::int64_t batches_per_epoch = train_data.size();
    for (const data::Batch& batch : train_data) {
      const NDArray x = batch.data.as_in_context(ctx);
      const NDArray y = batch.label.as_in_context(ctx);
      NDArray scores;
      NDArray loss;
      {
        auto recording = autograd::record();
        scores = (*net)(x);
        loss = loss_function(scores, y);
      }
      loss.backward();
      const std::int64_t n = x.shape()[0];
      trainer.step(n);
      total_loss += sum(loss);
      correct += count_correct(scores.detach(), y);
      samples += n;
      in_flight.push_back(loss);
      if (in_flight.size() > 2) {
        in_flight.front().wait_to_read();
        in_flight.pop_front();
      }
      if (progress) draw_progress(++batches, batches_per_epoch);
    }
    EpochResult result;
    result.loss = total_loss.asscalar<float>() / static_cast<double>(samples);
    result.train_accuracy = correct.asscalar<float>() / static_cast<double>(samples);
    result.seconds = seconds_since(start);
    result.images_per_second = static_cast<double>(samples) / result.seconds;
    if (progress) clear_progress();
    result.test_accuracy = evaluate(*net, test_data, ctx);
    fmt::print(
        "epoch {:>2}/{}: loss {:.4f}, train acc {:.4f}, test acc {:.4f}, {:.1f} s, {:.0f} "
        "images/s\n",
        epoch + 1, options.epochs, result.loss, result.train_accuracy, result.test_accuracy,
        result.seconds, result.images_per_second);
    std::fflush(stdout);
    results.push_back(result);
  }
  if (options.epochs == 0) {  // evaluation only, e.g. of loaded parameters
    EpochResult result;
    result.test_accuracy = evaluate(*net, test_data, ctx);
    fmt::print("test acc {:.4f}\n", result.test_accuracy);
    results.push_back(result);
  }
  if (!options.save.empty()) {
    net->save_parameters(options.save);
    fmt::print("saved the parameters to {}\n", options.save.string());
  }
  return results;
}

}  // namespace tagflow::tools

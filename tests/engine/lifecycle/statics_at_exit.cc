// A program that keeps what a training service keeps (arrays, the
// tutorials' LeNet, its parameters, a data loader) in globals and function
// statics, and returns from main with work still pending: no wait_for_all.
// It passes when it exits with status 0: nothing crashes while the statics
// are destroyed after main, and the work pending at exit, device work
// included, has run before the objects made ahead of the engine are
// destroyed (Note [Engine lifetime] in engine/engine.h).
//
//   statics_at_exit cpu   # on cpu(0) and cpu(1)
//   statics_at_exit gpu   # on gpu(0) and gpu(1); TAGFLOW_SIM_GPUS=2 without GPUs

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/stream.h"
#include "tagflow/tagflow.h"
#include "tests/engine/lifecycle/lifecycle.h"

using namespace tagflow;

namespace {

/// Made before the engine, so destroyed after its exit hook: by then every
/// operation pushed before main returned must have run.
struct PendingWorkCheck {
  std::atomic<int> ran{0};
  int expected = 0;
  ~PendingWorkCheck() {
    if (ran.load() != expected) {
      std::fprintf(stderr, "statics_at_exit: %d of %d pending operations ran before exit\n",
                   ran.load(), expected);
      std::_Exit(2);
    }
  }
};
PendingWorkCheck pending_work;

}  // namespace

// Default-constructed before the engine exists, assigned in main.
NDArray weights;
NDArray result;
std::vector<NDArray> on_each_device;
nn::Sequential lenet;
nn::ParameterDict lenet_params;
std::optional<data::DataLoader> loader;

// Made while statics are initialised: the engine starts before main.
NDArray made_before_main = arange(0, 16);

/// Function statics, made on first call (after the engine).
NDArray& lookup_table(Context ctx) {
  static NDArray table = random::uniform(-1, 1, {32, 8}, ctx);
  return table;
}
nn::Sequential& small_mlp(Context ctx) {
  static nn::Sequential mlp = [ctx] {
    nn::Sequential net;
    net.add(nn::Dense(16, "relu"), nn::Dense(4));
    net.initialize(init::Xavier(), {ctx});
    return net;
  }();
  return mlp;
}

namespace {

/// 64 images of 28x28 with labels, in host memory.
data::ArrayDataset small_data_set() {
  constexpr std::int64_t n = 64;
  std::vector<float> pixels(static_cast<std::size_t>(n * 28 * 28));
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(i % 97) / 97.f;
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int32_t>(i % 10);
  return data::ArrayDataset(data::HostArray::from<float>(pixels, {n, 1, 28, 28}),
                            data::HostArray::from<std::int32_t>(labels, {n}));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string where = argc > 1 ? argv[1] : "cpu";
  LIFECYCLE_CHECK(where == "cpu" || where == "gpu", "expected cpu or gpu, got " + where);
  if (where == "gpu") {
    LIFECYCLE_CHECK(num_gpus() >= 2, "expected two GPUs (TAGFLOW_SIM_GPUS=2)");
  }
  const std::vector<Context> devices =
      where == "gpu" ? std::vector<Context>{gpu(0), gpu(1)} : std::vector<Context>{cpu(0), cpu(1)};
  LIFECYCLE_CHECK(made_before_main.to_vector<float>()[15] == 15.f, "arange(0, 16)");

  // The tutorials' LeNet on both devices, and its parameters.
  random::seed(1);
  lenet.add(nn::Conv2D(6, 5, "relu"), nn::MaxPool2D(2, 2), nn::Conv2D(16, 3, "relu"),
            nn::MaxPool2D(2, 2), nn::Dense(120, "relu"), nn::Dense(84, "relu"), nn::Dense(10));
  lenet.initialize(init::Xavier(), devices);
  loader.emplace(small_data_set(), 16, data::DataLoaderOptions{.shuffle = true, .num_workers = 2});

  // One epoch forward on each device: the same network gives the same outputs.
  int batches = 0;
  for (const data::Batch& batch : *loader) {
    std::vector<std::vector<float>> outputs;
    for (Context ctx : devices) {
      const NDArray out = lenet(batch.data.as_in_context(ctx));
      LIFECYCLE_CHECK(out.shape() == Shape({16, 10}), "LeNet output shape " + out.shape().str());
      outputs.push_back(out.to_vector<float>());
    }
    for (std::size_t i = 0; i < outputs[0].size(); ++i) {
      LIFECYCLE_CHECK(std::isfinite(outputs[0][i]) && std::abs(outputs[0][i] - outputs[1][i]) <
                                                          1e-4f * (1 + std::abs(outputs[0][i])),
                      "outputs differ between devices");
    }
    ++batches;
  }
  LIFECYCLE_CHECK(batches == 4, "expected 4 batches, got " + std::to_string(batches));
  lenet_params = lenet.collect_params();
  LIFECYCLE_CHECK(lenet_params.size() == 10,
                  "expected 10 parameters, got " + std::to_string(lenet_params.size()));
  weights = (*lenet_params.begin())->data(devices[1]);

  // A new epoch left unread: the loader's workers are building its batches
  // while main returns.
  loader->start_epoch();

  // Function statics, used once.
  for (Context ctx : devices) on_each_device.push_back(ones({8, 8}, DType::kFloat32, ctx) * 2.0);
  const NDArray looked_up = lookup_table(devices[1]);
  const NDArray features =
      small_mlp(devices[0])(lookup_table(devices[1]).as_in_context(devices[0]));
  LIFECYCLE_CHECK(features.shape() == Shape({32, 4}), "MLP output shape " + features.shape().str());

  // Work still pending when main returns: a chain of operators on each
  // device, then an operation after it that takes its time (on a GPU, as
  // device work too).
  const NDArray images =
      loader->dataset().get(0).data.to_ndarray(devices[0]).reshape({1, 1, 28, 28});
  result = lenet(images);
  for (int i = 0; i < 200; ++i) result = result * 1.0001 + 0.5;
  NDArray elsewhere = result.copyto(devices[1]);
  for (int i = 0; i < 200; ++i) elsewhere = elsewhere * 0.999 - 0.25;
  pending_work.expected = 2;
  Engine::get().push({.name = "slow last operation",
                      .ctx = devices[1],
                      .reads = {elsewhere.var()},
                      .fn = [](const RunContext& rc) {
                        auto slow = [] {
                          std::this_thread::sleep_for(std::chrono::milliseconds(100));
                          pending_work.ran.fetch_add(1);
                        };
                        slow();
                        if (rc.stream != nullptr) {
                          rc.stream->enqueue_host(slow);  // device work, after the operation
                        } else {
                          slow();
                        }
                      }});
  on_each_device.push_back(elsewhere);
  return 0;
}

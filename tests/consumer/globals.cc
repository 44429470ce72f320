// Arrays, a LeNet, its parameters and a DataLoader held in global variables
// and function statics, destroyed after main returns: some made before the
// engine exists and assigned in main, some with work still pending at exit
// (no wait_for_all). On cpu(0), or on gpu(0) when the environment has one
// (TAGFLOW_SIM_GPUS=1). Exits 0 when the values computed in main are right
// and the exit is clean (run under AddressSanitizer by .ci/run).
#include <tagflow/tagflow.h>

#include <cstdio>
#include <memory>
#include <vector>

using namespace tagflow;

namespace {

// Made before the engine exists (empty until main assigns them), so
// destroyed after it would be if it were destroyed like other statics.
NDArray assigned_in_main;
nn::Sequential network;
nn::ParameterDict parameters;
std::unique_ptr<data::DataLoader> loader;
NDArray made_before_main = ones({4, 4});  // creates the engine, before main

/// A function static, made on first call, after the engine.
NDArray& pending() {
  static NDArray array = zeros({256, 256}, DType::kFloat32, try_gpu());
  return array;
}

}  // namespace

int main() {
  const Context ctx = try_gpu();
  assigned_in_main = random::uniform(0, 1, {64, 64}, ctx);
  network = models::lenet();
  network.initialize(init::Xavier(), {ctx});
  NDArray scores = network(random::uniform(0, 1, {2, 1, 28, 28}, ctx));
  parameters = network.collect_params();
  std::vector<float> labels(64);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = float(i % 10);
  loader = std::make_unique<data::DataLoader>(
      data::ArrayDataset(random::uniform(0, 1, {64, 2}), array(labels, {64})), 16,
      data::DataLoaderOptions{.num_workers = 1});
  float label_sum = 0;
  for (const auto& [x, y] : *loader) label_sum += sum(y).asscalar<float>();

  // Work still pending when main returns: products nobody waits for.
  for (int i = 0; i < 50; ++i) pending() = dot(pending() + 1, pending()) * 0.5f;

  const bool ok = scores.shape() == Shape({2, 10}) && parameters.size() == 10 &&
                  sum(made_before_main).asscalar<float>() == 16.f &&
                  label_sum == 6 * 45 + (0 + 1 + 2 + 3);
  std::printf("globals: %s on %s\n", ok ? "ok" : "FAILED", ctx.str().c_str());
  return ok ? 0 : 1;
}

#include "nn/dist/gradient_aggregator.h"

#include <algorithm>
#include <map>
#include <vector>

#include "engine/engine.h"
#include "nn/dist/nccl_aggregator.h"
#include "nn/dist/ring_aggregator.h"
#include "ops/device.h"
#include "ops/elementwise.h"
#include "ops/priority.h"

namespace tagflow::dist {

void check_aggregation_input(std::span<const NDArray> copies, int key, const char* who) {
  TAGFLOW_CHECK(key >= 0, "{}: expected a key >= 0, got {}", who, key);
  TAGFLOW_CHECK(!copies.empty(), "{}: expected at least one array, got none", who);
  for (std::size_t i = 0; i < copies.size(); ++i) {
    TAGFLOW_CHECK(copies[i].defined(), "{}: array {} of {} is undefined", who, i, copies.size());
  }
  const NDArray& first = copies[0];
  TAGFLOW_CHECK(!is_half(first.dtype()),
                "{}: expected float32, int32, int64 or uint8 arrays, got {} (sums of half "
                "gradients are not supported yet: convert them with astype(DType::kFloat32))",
                who, dtype_name(first.dtype()));
  for (std::size_t i = 1; i < copies.size(); ++i) {
    const NDArray& a = copies[i];
    TAGFLOW_CHECK(a.shape() == first.shape() && a.dtype() == first.dtype(),
                  "{}: expected arrays of one shape and dtype, got ({}) {} at 0 and ({}) {} at {}",
                  who, first.shape().str(), dtype_name(first.dtype()), a.shape().str(),
                  dtype_name(a.dtype()), i);
    for (std::size_t j = 0; j < i; ++j) {
      TAGFLOW_CHECK(copies[j].context() != a.context(),
                    "{}: expected one array per device, got arrays {} and {} both on {}", who, j, i,
                    a.context().str());
    }
  }
}

void DeviceAggregator::allreduce(std::span<const NDArray> copies, int key) {
  check_aggregation_input(copies, key, "DeviceAggregator::allreduce");
  const std::size_t n = copies.size();
  if (n == 1) return;
  const PriorityScope urgent(kCommunicationPriority);
  const std::size_t root = static_cast<std::size_t>(key) % n;
  NDArray total = copies[root];
  for (std::size_t i = 1; i < n; ++i) total += copies[(root + i) % n].copyto(total.context());
  for (std::size_t i = 1; i < n; ++i) total.copyto(copies[(root + i) % n]);
}

namespace {

/// NCCL between real GPUs when the build has it, engine copies otherwise,
/// chosen per parameter from the devices of its copies.
class LocalAggregator final : public GradientAggregator {
 public:
  void allreduce(std::span<const NDArray> copies, int key) override {
    if (copies.size() > 1 && nccl_available() && on_real_gpus(copies)) {
      clique(copies).allreduce(copies, key);
    } else if (copies.size() > 1 && on_modelled_gpus(copies)) {
      ring_.allreduce(copies, key);
    } else {
      device_.allreduce(copies, key);
    }
  }
  std::string name() const override {
    if (Engine::get().config().sim_model) return "ring or device";
    return nccl_available() ? "nccl or device" : "device";
  }

 private:
  /// Simulated GPUs keeping modelled time (TAGFLOW_SIM_GPUS=N:MODEL): NCCL's
  /// arrangement, timed as its ring (Note [Collectives on simulated GPUs]).
  static bool on_modelled_gpus(std::span<const NDArray> copies) {
    const auto& gpus = Engine::get().gpus();
    return std::all_of(copies.begin(), copies.end(), [&](const NDArray& a) {
      const Context ctx = a.context();
      return ctx.is_gpu() && static_cast<std::size_t>(ctx.index) < gpus.size() &&
             !gpus[static_cast<std::size_t>(ctx.index)].model.empty();
    });
  }
  static bool on_real_gpus(std::span<const NDArray> copies) {
    return std::all_of(copies.begin(), copies.end(),
                       [](const NDArray& a) { return is_real_gpu(a.context()); });
  }

  /// The communicators of the copies' GPUs, made on first use.
  NcclAggregator& clique(std::span<const NDArray> copies) {
    std::vector<int> indices;
    for (const NDArray& a : copies) indices.push_back(a.context().index);
    std::sort(indices.begin(), indices.end());
    std::unique_ptr<NcclAggregator>& entry = cliques_[indices];
    if (!entry) {
      std::vector<Context> gpus;
      for (int i : indices) gpus.push_back(gpu(i));
      entry = std::make_unique<NcclAggregator>(gpus);
    }
    return *entry;
  }

  DeviceAggregator device_;
  RingAggregator ring_;
  std::map<std::vector<int>, std::unique_ptr<NcclAggregator>> cliques_;
};

}  // namespace

std::unique_ptr<GradientAggregator> make_local_aggregator() {
  return std::make_unique<LocalAggregator>();
}

}  // namespace tagflow::dist

#include "nn/dist/ring_aggregator.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "engine/detail/model_clock.h"
#include "engine/detail/sim_collective.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "ops/dtype.h"
#include "ops/priority.h"

namespace tagflow::dist {

namespace {

/// The pointers and size a collective's sum needs: raw memory only, kept
/// alive by the engine until every part's stream has passed it.
struct SumPlan {
  DType dtype = DType::kFloat32;
  std::int64_t size = 0;
  std::vector<void*> copies;
};

/// copies[0] + copies[1] + ... in this order, written to every copy.
void sum_into_all(const SumPlan& plan) {
  TAGFLOW_DTYPE_SWITCH(plan.dtype, T, {
    std::vector<T> total(static_cast<T*>(plan.copies[0]),
                         static_cast<T*>(plan.copies[0]) + plan.size);
    for (std::size_t c = 1; c < plan.copies.size(); ++c) {
      const T* part = static_cast<const T*>(plan.copies[c]);
      for (std::int64_t i = 0; i < plan.size; ++i) {
        total[static_cast<std::size_t>(i)] =
            static_cast<T>(total[static_cast<std::size_t>(i)] + part[i]);
      }
    }
    for (void* copy : plan.copies) std::copy(total.begin(), total.end(), static_cast<T*>(copy));
  });
}

}  // namespace

RingAggregator::~RingAggregator() {
  for (auto& [_, var] : order_) Engine::get().delete_var(var);
}

void RingAggregator::allreduce(std::span<const NDArray> copies, int key) {
  check_aggregation_input(copies, key, "RingAggregator::allreduce");
  const std::size_t n = copies.size();
  if (n == 1) return;
  const auto& gpus = Engine::get().gpus();
  std::vector<int> ring;
  for (std::size_t i = 0; i < n; ++i) {
    const Context ctx = copies[i].context();
    TAGFLOW_CHECK(ctx.is_gpu() && static_cast<std::size_t>(ctx.index) < gpus.size() &&
                      gpus[static_cast<std::size_t>(ctx.index)].simulated,
                  "RingAggregator::allreduce: expected arrays on simulated GPUs, got array {} on "
                  "{}",
                  i, ctx.str());
    ring.push_back(ctx.index);
  }
  auto plan = std::make_shared<SumPlan>();
  plan->dtype = copies[0].dtype();
  plan->size = copies[0].size();
  for (const NDArray& copy : copies) plan->copies.push_back(copy.raw_data());
  const std::optional<DeviceModel>& model = Engine::get().config().sim_model;
  const double bytes =
      static_cast<double>(plan->size) * static_cast<double>(dtype_size(plan->dtype));
  const std::int64_t duration =
      model ? detail::sim::ModelClock::to_ns(model->allreduce_seconds(ring, bytes)) : 0;
  auto collective = std::make_shared<detail::sim::Collective>(static_cast<int>(n), duration,
                                                              [plan] { sum_into_all(*plan); });
  const PriorityScope urgent(kCommunicationPriority);
  for (std::size_t i = 0; i < n; ++i) {
    auto [order, added] = order_.try_emplace(ring[i]);
    if (added) order->second = Engine::get().new_var();
    Engine::get().push({.name = "allreduce",
                        .ctx = copies[i].context(),
                        .writes = {copies[i].var(), order->second},
                        .priority = current_priority(),
                        .queue = queue_,
                        .fn = [collective](const RunContext& rc) {
                          detail::sim::enqueue_collective(*rc.stream, collective);
                        }});
  }
}

}  // namespace tagflow::dist

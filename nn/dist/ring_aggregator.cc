#include "nn/dist/ring_aggregator.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
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

/// The first copy's bytes written to every other copy.
void copy_first_to_all(const SumPlan& plan) {
  const auto bytes = static_cast<std::size_t>(plan.size) * dtype_size(plan.dtype);
  for (std::size_t c = 1; c < plan.copies.size(); ++c) {
    std::memcpy(plan.copies[c], plan.copies[0], bytes);
  }
}

}  // namespace

RingAggregator::~RingAggregator() {
  for (auto& [_, var] : order_) Engine::get().delete_var(var);
}

void RingAggregator::allreduce(std::span<const NDArray> copies, int key) {
  check_aggregation_input(copies, key, "RingAggregator::allreduce");
  push(copies, Kind::kAllreduce);
}

void RingAggregator::broadcast(std::span<const NDArray> copies, int key) {
  check_aggregation_input(copies, key, "RingAggregator::broadcast");
  push(copies, Kind::kBroadcast);
}

void RingAggregator::push(std::span<const NDArray> copies, Kind kind) {
  const bool sum = kind == Kind::kAllreduce;
  const char* what = sum ? "allreduce" : "broadcast";
  const std::size_t n = copies.size();
  if (n == 1) return;
  const auto& gpus = Engine::get().gpus();
  std::vector<int> ring;
  for (std::size_t i = 0; i < n; ++i) {
    const Context ctx = copies[i].context();
    TAGFLOW_CHECK(ctx.is_gpu() && static_cast<std::size_t>(ctx.index) < gpus.size() &&
                      gpus[static_cast<std::size_t>(ctx.index)].simulated,
                  "RingAggregator::{}: expected arrays on simulated GPUs, got array {} on {}", what,
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
      !model ? 0
      : sum  ? detail::sim::ModelClock::to_ns(model->allreduce_seconds(ring, bytes))
             : detail::sim::ModelClock::to_ns(model->broadcast_seconds(ring, bytes));
  auto collective =
      std::make_shared<detail::sim::Collective>(static_cast<int>(n), duration, [plan, sum] {
        if (sum) {
          sum_into_all(*plan);
        } else {
          copy_first_to_all(*plan);
        }
      });
  const PriorityScope urgent(kCommunicationPriority);
  // The parts meet on the streams: pushed as a group, so that no engine
  // waits on one before it has launched the others (Note [Launch groups]
  // in engine/engine.h).
  LaunchGroup group;
  group.parts.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto [order, added] = order_.try_emplace(ring[i]);
    if (added) order->second = Engine::get().new_var();
    group.parts.push_back({.name = what,
                           .ctx = copies[i].context(),
                           .writes = {copies[i].var(), order->second},
                           .priority = current_priority(),
                           .queue = queue_,
                           .fn = [collective](const RunContext& rc) {
                             detail::sim::enqueue_collective(*rc.stream, collective);
                           }});
  }
  Engine::get().push_group(std::move(group));
}

}  // namespace tagflow::dist

#include "tools/stress_workload.h"

#include <algorithm>

#include "engine/splitmix.h"

namespace tagflow::tools::stress {

namespace {

/// A small portable generator: a seed means the same workload everywhere.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(splitmix64(seed)) {}
  std::uint64_t next() { return splitmix64(state_++); }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
  bool percent(int p) { return below(100) < p; }

 private:
  std::uint64_t state_;
};

constexpr std::array<int, 6> kPriorities = {-2, -1, 1, 2, 5, 100};

/// A slot of device `d`; half the picks go to its first two slots, so that
/// dependency chains grow long.
int slot_on(Rng& rng, const ClientShape& shape, int d) {
  const int per_device = (shape.slots - d + shape.num_devices - 1) / shape.num_devices;
  const int k = rng.percent(50) ? rng.below(std::min(2, per_device)) : rng.below(per_device);
  return d + k * shape.num_devices;
}

void add_errors(std::vector<std::uint64_t>& into, const std::vector<std::uint64_t>& from) {
  for (std::uint64_t e : from) {
    if (std::find(into.begin(), into.end(), e) == into.end()) into.push_back(e);
  }
}

}  // namespace

std::vector<Step> generate_round(std::uint64_t seed, int client, int round,
                                 const ClientShape& shape, const Mix& mix) {
  Rng rng(seed ^ splitmix64((static_cast<std::uint64_t>(client) << 32) |
                            static_cast<std::uint32_t>(round)));
  const int devices = shape.num_devices;
  std::vector<Step> steps(static_cast<std::size_t>(shape.steps));
  for (std::size_t i = 0; i < steps.size(); ++i) {
    Step& s = steps[i];
    // Unique across clients (bits 48..) and rounds (bits 24..47).
    s.id = (static_cast<std::uint64_t>(client + 1) << 48) |
           (static_cast<std::uint64_t>(round) << 24) | i;
    int r = rng.below(100);
    if (devices > 1 && r < mix.copy) {
      s.kind = StepKind::kCopy;
      const int from = rng.below(devices);
      s.device = (from + 1 + rng.below(devices - 1)) % devices;
      s.reads[0] = slot_on(rng, shape, from);
      s.write = slot_on(rng, shape, s.device);
    } else if ((r -= mix.copy) >= 0 && r < mix.allocate) {
      s.kind = StepKind::kAllocate;
      s.device = rng.below(devices);
      s.fails = rng.percent(mix.alloc_fail);
      s.bytes = 1024 * static_cast<std::uint64_t>(1 + rng.below(64));
      continue;
    } else if ((r -= mix.allocate) >= 0 && r < mix.remove) {
      s.kind = StepKind::kDelete;
      s.write = rng.below(shape.slots);
      s.device = s.write % devices;
      continue;
    } else {
      s.kind = StepKind::kCompute;
      s.device = rng.below(devices);
      s.write = slot_on(rng, shape, s.device);
      const int num_reads = rng.below(3);
      for (int k = 0; k < num_reads; ++k)
        s.reads[static_cast<std::size_t>(k)] = slot_on(rng, shape, s.device);
      s.reads_shared = rng.percent(20);
      s.read_modify_write = rng.percent(60);
    }
    s.async = rng.percent(mix.async);
    if (rng.percent(mix.priority)) {
      s.priority =
          kPriorities[static_cast<std::size_t>(rng.below(static_cast<int>(kPriorities.size())))];
    }
    s.fails = rng.percent(mix.fail);
  }
  return steps;
}

Value initial_value(std::uint64_t seed, int client, std::uint64_t generation, int slot) {
  const std::uint64_t h =
      splitmix64(seed ^ splitmix64((static_cast<std::uint64_t>(client) << 40) ^ (generation << 20) ^
                                   static_cast<std::uint64_t>(slot)));
  return {h, splitmix64(h)};
}

Value shared_value(std::uint64_t seed, int device) {
  const std::uint64_t h = splitmix64(~seed ^ static_cast<std::uint64_t>(device));
  return {h, splitmix64(h + 1)};
}

Value mix_values(const Step& step, const Value* inputs, int num_inputs, const Value* old) {
  std::uint64_t h = splitmix64(step.id);
  for (int i = 0; i < num_inputs; ++i) h = splitmix64(h ^ inputs[i].lo) + inputs[i].hi;
  if (old != nullptr) h = splitmix64(h ^ old->lo) ^ splitmix64(old->hi);
  return {h, splitmix64(h ^ step.id)};
}

Replay::Replay(std::uint64_t seed, int client, int slots, std::vector<Value> shared)
    : seed_(seed),
      client_(client),
      slots_(static_cast<std::size_t>(slots)),
      shared_(std::move(shared)) {
  for (int s = 0; s < slots; ++s)
    slots_[static_cast<std::size_t>(s)].value = initial_value(seed, client, 0, s);
}

bool Replay::apply(const Step& step) {
  auto at = [&](int s) -> SlotState& { return slots_[static_cast<std::size_t>(s)]; };
  switch (step.kind) {
    case StepKind::kAllocate:
      return !step.fails;
    case StepKind::kDelete: {
      SlotState& s = at(step.write);
      ++s.generation;
      s.value = initial_value(seed_, client_, s.generation, step.write);
      s.errors.clear();
      return true;
    }
    case StepKind::kCopy:
    case StepKind::kCompute:
      break;
  }
  // The variables whose errors it inherits: what it reads, and what it
  // modifies in place.
  std::vector<std::uint64_t> inherited;
  for (int r : step.reads) {
    if (r >= 0) add_errors(inherited, at(r).errors);
  }
  SlotState& out = at(step.write);
  if (step.read_modify_write) add_errors(inherited, out.errors);
  if (!inherited.empty()) {
    out.errors = std::move(inherited);  // skipped: passes the error on
    return false;
  }
  if (step.fails) {
    out.errors = {step.id};
    return false;
  }
  if (step.kind == StepKind::kCopy) {
    out.value = at(step.reads[0]).value;
  } else {
    std::array<Value, 3> inputs;
    int n = 0;
    for (int r : step.reads) {
      if (r >= 0) inputs[static_cast<std::size_t>(n++)] = at(r).value;
    }
    if (step.reads_shared)
      inputs[static_cast<std::size_t>(n++)] = shared_[static_cast<std::size_t>(step.device)];
    out.value = mix_values(step, inputs.data(), n, step.read_modify_write ? &out.value : nullptr);
  }
  out.errors.clear();
  return true;
}

}  // namespace tagflow::tools::stress

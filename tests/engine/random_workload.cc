#include "tests/engine/random_workload.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tagflow::testing {
namespace {

constexpr std::array<Context, 5> kContexts = {cpu(0), cpu(1), cpu(2), gpu(0), gpu(1)};
constexpr std::array<int, 5> kPriorities = {-1, 0, 0, 0, 2};

}  // namespace

Workload generate(std::uint64_t seed, const WorkloadShape& shape) {
  Rng rng(seed);
  Workload w;
  w.num_vars = shape.num_vars;
  w.num_shared = shape.num_shared;
  w.initial.resize(static_cast<std::size_t>(shape.num_vars));
  for (Cell& c : w.initial) {
    for (auto& word : c.words) word = rng.next();
  }
  // Half the picks go to a few hot variables: long dependency chains.
  const int hot = std::min(4, shape.num_vars);
  auto own_var = [&] { return rng.chance(50) ? rng.below(hot) : rng.below(shape.num_vars); };
  auto any_var = [&] {
    if (shape.num_shared > 0 && rng.chance(25)) return shape.num_vars + rng.below(shape.num_shared);
    return own_var();
  };
  w.ops.resize(shape.num_ops);
  for (std::size_t i = 0; i < shape.num_ops; ++i) {
    OpSpec& op = w.ops[i];
    op.id = shape.id_base + i;
    op.index = static_cast<std::uint32_t>(i);
    op.ctx = kContexts[static_cast<std::size_t>(rng.below(static_cast<int>(kContexts.size())))];
    op.queue = op.ctx.is_gpu() && rng.chance(35) ? QueueKind::kCopy : QueueKind::kCompute;
    op.priority =
        kPriorities[static_cast<std::size_t>(rng.below(static_cast<int>(kPriorities.size())))];
    const int finish = rng.below(100);
    op.finish = finish < 80   ? Finish::kSync
                : finish < 90 ? Finish::kDoneElsewhere
                              : Finish::kWorkElsewhere;
    const int num_reads = rng.below(4);
    for (int r = 0; r < num_reads; ++r) op.reads.push_back(any_var());
    const int num_writes = 1 + rng.below(2);
    for (int k = 0; k < num_writes; ++k) op.writes.push_back(own_var());
    // Listings the engine must merge: a read twice, a write twice, a variable
    // both read and written (read-modify-write).
    if (!op.reads.empty() && rng.chance(10)) op.reads.push_back(op.reads.front());
    if (rng.chance(5)) op.writes.push_back(op.writes.front());
    if (rng.chance(15)) op.reads.push_back(op.writes.back());
    op.slow = rng.below(1000) < 2;
  }
  // The last operation is slow device work: wait_for_all must wait for it.
  if (!w.ops.empty()) {
    OpSpec& last = w.ops.back();
    last.ctx = gpu(rng.below(2));
    last.slow = true;
  }
  for (std::size_t i = 0; i < shape.num_ops; ++i) {
    if (rng.below(static_cast<int>(std::max<std::size_t>(1, shape.num_ops / 24))) == 0) {
      w.checkpoints.push_back({i, own_var(), rng.chance(50)});
    }
  }
  std::vector<std::ptrdiff_t> last_touch(static_cast<std::size_t>(shape.num_vars), -1);
  for (const OpSpec& op : w.ops) {
    for (const auto* list : {&op.reads, &op.writes}) {
      for (int v : *list) {
        if (v < shape.num_vars) last_touch[static_cast<std::size_t>(v)] = op.index;
      }
    }
  }
  for (const Checkpoint& c : w.checkpoints) {
    auto& t = last_touch[static_cast<std::size_t>(c.var)];
    t = std::max(t, static_cast<std::ptrdiff_t>(c.after_op));
  }
  w.delete_after.resize(static_cast<std::size_t>(shape.num_vars));
  for (std::size_t v = 0; v < w.delete_after.size(); ++v) {
    w.delete_after[v] = rng.chance(50) ? last_touch[v] : -1;
  }
  // What the last (slow, device) operation writes stays alive until checked.
  if (!w.ops.empty()) {
    for (int v : w.ops.back().writes) w.delete_after[static_cast<std::size_t>(v)] = -1;
  }
  return w;
}

Coverage coverage_of(const Workload& w) {
  Coverage c;
  for (const OpSpec& op : w.ops) {
    c.gpu_ops += op.ctx.is_gpu() ? 1 : 0;
    c.copy_queue_ops += op.queue == QueueKind::kCopy ? 1 : 0;
    c.async_done_elsewhere += op.finish == Finish::kDoneElsewhere ? 1 : 0;
    c.async_work_elsewhere += op.finish == Finish::kWorkElsewhere ? 1 : 0;
    c.prioritized += op.priority != 0 ? 1 : 0;
    c.no_reads += op.reads.empty() ? 1 : 0;
    c.slow += op.slow ? 1 : 0;
    bool rmw = false, repeated = false;
    for (std::size_t a = 0; a < op.writes.size(); ++a) {
      for (int r : op.reads) rmw = rmw || r == op.writes[a];
      for (std::size_t b = a + 1; b < op.writes.size(); ++b)
        repeated = repeated || op.writes[a] == op.writes[b];
    }
    for (std::size_t a = 0; a < op.reads.size(); ++a) {
      for (std::size_t b = a + 1; b < op.reads.size(); ++b)
        repeated = repeated || op.reads[a] == op.reads[b];
    }
    c.read_modify_write += rmw ? 1 : 0;
    c.repeated_listing += repeated ? 1 : 0;
  }
  for (std::ptrdiff_t d : w.delete_after) c.early_deletes += d >= 0 ? 1 : 0;
  c.checkpoints = static_cast<int>(w.checkpoints.size());
  return c;
}

void apply(const OpSpec& op, Cell* const* table) {
  std::uint64_t input = splitmix64(op.id);
  for (int r : op.reads) {
    for (std::uint64_t word : table[r]->words) input += word;
  }
  for (int v : op.writes) {
    std::uint64_t carry = input;
    for (std::uint64_t& word : table[v]->words) {
      carry = splitmix64(word ^ carry);
      word = carry;
    }
  }
}

Expected replay(const Workload& w, const std::vector<Cell>& shared) {
  Expected e;
  e.cells = w.initial;
  std::vector<Cell> shared_copy = shared;
  std::vector<Cell*> table;
  for (Cell& c : e.cells) table.push_back(&c);
  for (Cell& c : shared_copy) table.push_back(&c);
  std::size_t next_checkpoint = 0;
  for (const OpSpec& op : w.ops) {
    apply(op, table.data());
    for (; next_checkpoint < w.checkpoints.size() &&
           w.checkpoints[next_checkpoint].after_op == op.index;
         ++next_checkpoint) {
      e.at_checkpoint.push_back(
          *table[static_cast<std::size_t>(w.checkpoints[next_checkpoint].var)]);
    }
  }
  return e;
}

}  // namespace tagflow::testing

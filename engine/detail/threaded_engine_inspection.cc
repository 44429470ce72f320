// The threaded engine's dependency dump (Note [Dependency state] in
// threaded_engine.h): the registry of engines whose push locks it holds, the
// parking of records completed while it reads, and the walk itself.

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "engine/detail/threaded_engine.h"

namespace tagflow::detail {

namespace {

/// Every threaded engine of the process, for the dump to lock. An engine
/// destroyed in a forked child stays listed (its destructor takes no lock
/// the parent may have held): each entry remembers its process, and a dump
/// skips the engines of another one without reading them.
struct Registry {
  struct Entry {
    ThreadedEngine* engine;
    ForkCheck made;
  };
  std::mutex mutex;
  std::vector<Entry> engines;
};
Registry& registry() {
  static auto* r = new Registry;  // engines may outlive static destruction
  return *r;
}

/// The records completed while a dump was under way.
struct Parked {
  std::mutex mutex;
  std::vector<OpBlock*> records;
};
Parked& parked() {
  static auto* p = new Parked;
  return *p;
}

}  // namespace

/// Frees the parked records once no dump can be reading them.
void ThreadedEngine::free_parked() {
  std::vector<OpBlock*> records;
  {
    std::lock_guard lock(parked().mutex);
    if (inspections_.load(std::memory_order_seq_cst) != 0) return;
    records.swap(parked().records);
  }
  for (OpBlock* op : records) delete op;
}

namespace {

/// Lists in `waits_for` what `op` waits on `pred` for: every variable both
/// claim, at least one of them to write (several edges may join the same
/// two operations, one per variable; each variable is listed once).
void add_blockers(const OpBlock& pred, const OpBlock& op, std::vector<Blocker>& waits_for) {
  for (const Blocker& b : waits_for) {
    if (b.seq == pred.seq) return;  // listed already
  }
  for (const Dep& a : op.deps) {
    for (const Dep& b : pred.deps) {
      if (a.var == b.var && (is_write(a.access) || is_write(b.access))) {
        waits_for.push_back({pred.seq, var_handle(a)});
      }
    }
  }
}

}  // namespace

void ThreadedEngine::enroll() {
  std::lock_guard lock(registry().mutex);
  registry().engines.push_back({this, fork_check_});
}

void ThreadedEngine::withdraw() {
  std::lock_guard lock(registry().mutex);
  auto& engines = registry().engines;
  std::erase_if(engines, [this](const Registry::Entry& e) { return e.engine == this; });
}

void ThreadedEngine::park(OpBlock* op) {
  // A dump may be reading it: keep the record, let go of what it holds.
  op->fn = OpFunction{};
  op->error = nullptr;
  // Not its overflow edges: they sit on its predecessors' stacks, which a
  // dump that saw a predecessor pending may be walking.
  if (OpExtras* extras = op->extras) {
    extras->launch_error = extras->async_error = nullptr;
    std::vector<Fence>().swap(extras->stream_waits);
  }
  {
    std::lock_guard lock(parked().mutex);
    parked().records.push_back(op);
  }
  free_parked();  // the dump may have ended meanwhile
}

OperationCounts ThreadedEngine::operation_counts() const {
  // Completions first: a count read later can only be higher.
  const std::uint64_t completed = completed_count();
  return {pushed_count(), completed};
}

DependencyState ThreadedEngine::dependency_state() {
  if (fork_check_.forked()) [[unlikely]]
    throw_fork_error("dependency_state");
  check_not_inside_operation("dependency_state");
  DependencyState state;
  {
    std::lock_guard registry_lock(registry().mutex);
    std::vector<ThreadedEngine*> engines;
    for (const Registry::Entry& e : registry().engines) {
      if (!e.made.forked()) engines.push_back(e.engine);
    }
    std::sort(engines.begin(), engines.end());
    for (ThreadedEngine* e : engines) e->push_lock_.lock();
    inspections_.fetch_add(1, std::memory_order_seq_cst);
    state.counts = operation_counts();
    collect_pending(state);
    inspections_.fetch_sub(1, std::memory_order_seq_cst);
    for (ThreadedEngine* e : engines) e->push_lock_.unlock();
  }
  free_parked();
  return state;
}

void ThreadedEngine::collect_pending(DependencyState& state) const {
  std::vector<OpBlock*> live;
  ObjectPool<OpBlock>::for_each_slot([&](void* slot) {
    auto* op = static_cast<OpBlock*>(slot);
    // Completed (or never used: zero bytes) records are not read further.
    if ((op->successor_count.load(std::memory_order_seq_cst) & OpBlock::kCompleted) != 0) return;
    if (op->seq == 0 || op->owner() != this) return;
    live.push_back(op);
  });
  std::sort(live.begin(), live.end(),
            [](const OpBlock* a, const OpBlock* b) { return a->seq < b->seq; });
  std::unordered_map<const OpBlock*, std::size_t> index;
  state.operations.reserve(live.size());
  for (const OpBlock* op : live) {
    index.emplace(op, state.operations.size());
    PendingOperation& p = state.operations.emplace_back();
    p.seq = op->seq;
    p.name = op->name;
    p.ctx = op->ctx;
    p.queue = op->queue;
    p.priority = op->priority;
    p.stage = op->stage.load(std::memory_order_relaxed);
    for (const Dep& d : op->deps) {
      (is_write(d.access) ? p.writes : p.reads).push_back(var_handle(d));
    }
  }
  std::vector<PendingOperation> deletions;
  for (const OpBlock* pred : live) {
    auto link = [&](const OpBlock* to) {
      if (const VarBlock* deleted = as_deletion(to)) {
        // Note [Deletion after the last writer]: listed as the deletion
        // operation it stands for, waiting for the writer.
        const VarHandle var = VarHandleBits::make(deleted, deleted->deleted_generation);
        deletions.push_back({.seq = deleted->deletion_seq,
                             .name = "delete_var",
                             .writes = {var},
                             .waits_for = {{pred->seq, var}}});
        return;
      }
      const auto it = index.find(to);
      if (it == index.end()) return;  // cannot happen: it follows a pending operation
      add_blockers(*pred, *to, state.operations[it->second].waits_for);
    };
    const std::uint32_t n = pred->successor_count.load(std::memory_order_acquire);
    if ((n & OpBlock::kCompleted) != 0) continue;  // completed meanwhile: released its successors
    for (std::uint32_t i = 0; i < std::min(n, OpBlock::kInlineSuccessors); ++i) {
      link(pred->inline_successors[i].load(std::memory_order_relaxed));
    }
    const Edge* e = pred->overflow.load(std::memory_order_acquire);
    for (; e != nullptr && e != OpBlock::kClosed; e = e->next) link(e->to);
  }
  if (!deletions.empty()) {
    for (PendingOperation& d : deletions) state.operations.push_back(std::move(d));
    std::sort(state.operations.begin(), state.operations.end(),
              [](const PendingOperation& a, const PendingOperation& b) { return a.seq < b.seq; });
  }
  for (PendingOperation& p : state.operations) {
    std::stable_sort(p.waits_for.begin(), p.waits_for.end(),
                     [](const Blocker& a, const Blocker& b) { return a.seq < b.seq; });
  }
}

}  // namespace tagflow::detail

// The threaded engine's variables: made, deleted (by an operation, at once
// when idle, or riding on their last writer, Note [Deletion after the last
// writer]), and told idle.

#include <memory>
#include <mutex>
#include <utility>

#include "engine/detail/threaded_engine.h"
#include "engine/error.h"

namespace tagflow::detail {

VarHandle ThreadedEngine::new_var() {
  if (fork_check_.forked()) [[unlikely]]
    throw_fork_error("new_var");
  return make_var();
}

void ThreadedEngine::delete_var(VarHandle var, VarDeleter on_deleted) {
  // In a forked child the variable, and the memory its deleter would give
  // back, are the child's copies of the parent's: kept, unused (the
  // deleter too, so that the memory stays reachable for leak checks).
  if (fork_check_.forked()) [[unlikely]] {
    if (on_deleted) abandon(std::make_unique<VarDeleter>(std::move(on_deleted)));
    return;
  }
  TAGFLOW_CHECK(var != nullptr, "delete_var: expected a variable, got null");
  std::unique_lock lock(push_lock_);
  check_live(var, "delete_var");
  VarBlock* record = var_block(var);
  end_generation(record);  // stale from here on (Note [Variable generations])
  if (!profiled_writers_.empty()) profiled_writers_.erase(record);
  if (idle(*record)) {
    // Nothing pending and no device work in flight: no operation needed.
    // (Arrays die at the rate of operations; most are idle by then.)
    lock.unlock();
    free_var(record);
    if (on_deleted) run_deleter(on_deleted);
    return;
  }
  record->deleted_generation = var.generation();
  if (delete_after_writer(record, on_deleted, lock)) return;
  std::unique_ptr<OpBlock> op;
  try {
    op = std::make_unique<OpBlock>();
    op->name = "delete_var";
    op->kind = OpKind::kDelete;
    op->extra().engine = this;  // for dumps (OpBlock::owner)
    op->deps.push_back(Dep{record, Access::kWrite, var.generation()});
    reserve_links(*op);
    if (on_deleted) {
      op->fn = [d = std::move(on_deleted)](const RunContext&) mutable { run_deleter(d); };
    }
  } catch (...) {
    // No memory for the deletion (Note [Linking cannot fail]): the variable
    // stays, and so does its handle.
    reopen_generation(record, var.generation());
    throw;
  }
  submit(op.release());
}

bool ThreadedEngine::delete_after_writer(VarBlock* var, VarDeleter& on_deleted,
                                         std::unique_lock<SpinLock>& lock) {
  // Note [Deletion after the last writer]. Not idle, no reader pending: the
  // last writer may be, or only its device work. Its fields read here are
  // set before it was published. A writer completed and recycled is another
  // operation now, maybe a CPU one: riding on it would free the memory
  // while the device work that made the variable busy is still to run.
  const OpRef& last = var->last_writer;
  OpBlock* writer = last.op;
  if (!var->readers.empty() || writer == nullptr || writer->seq != last.seq ||
      writer->kind != OpKind::kUser || writer->pool == nullptr ||
      writer->pool->stream() != nullptr) {
    return false;
  }
  var->deleter = std::move(on_deleted);
  var->deletion_seq = next_seq_;  // taken below if the deletion rides on the writer
  OpBlock* const tagged = deletion_successor(var);
  std::uint32_t n = writer->successor_count.load(std::memory_order_acquire);
  while (n < OpBlock::kInlineSuccessors) {
    writer->inline_successors[n].store(tagged, std::memory_order_relaxed);
    if (writer->successor_count.compare_exchange_weak(n, n + 1, std::memory_order_release,
                                                      std::memory_order_acquire)) {
      ++next_seq_;
      return true;  // the writer's completion deletes it
    }
  }
  if ((n & OpBlock::kCompleted) != 0 && idle(*var)) {  // it completed meanwhile
    lock.unlock();
    delete_now(var);
    return true;
  }
  on_deleted = std::move(var->deleter);  // slots full: a deletion operation
  return false;
}

void ThreadedEngine::delete_now(VarBlock* var) {
  VarDeleter deleter = std::move(var->deleter);
  free_var(var);
  if (deleter) run_deleter(deleter);
}

bool ThreadedEngine::idle(VarBlock& var) {
  // Under the push lock: no new operation can claim `var` meanwhile. An
  // operation's completed bit is set after it has left its variables, so
  // once it is seen, the variable's fences are final and may be read.
  const OpRef& writer = var.last_writer;
  if (writer.op != nullptr && writer.op->seq == writer.seq && !writer.op->completed()) return false;
  drop_completed_readers(var);
  if (!var.readers.empty()) return false;
  auto finished = [](const Fence& f) { return !f || f.stream->finished(f.seq); };
  if (!finished(var.write_fence)) return false;
  for (const Fence& f : var.read_fences) {
    if (!finished(f)) return false;
  }
  return true;
}

}  // namespace tagflow::detail

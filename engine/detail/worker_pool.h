#pragma once
// WorkerPool: the threads of one device queue and their ready queue. A CPU
// device has one pool of N workers; a GPU has a compute pool and a copy pool
// of one worker each, each owning a stream. Internal to engine/.

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <thread>
#include <vector>

#include "engine/context.h"
#include "engine/detail/device_backend.h"
#include "engine/detail/op_block.h"
#include "engine/detail/ready_queue.h"
#include "engine/detail/spin_lock.h"
#include "engine/detail/wake_word.h"
#include "engine/engine.h"
#include "engine/stream.h"

namespace tagflow::detail {

class ThreadedEngine;

/// Identifies the pool and worker the current thread belongs to, if any.
struct WorkerIdentity {
  WorkerPool* pool = nullptr;
  int index = 0;
  const char* running = nullptr;  ///< name of the operation being run
};
/// The calling thread's identity. Inline: every operation asks, twice.
inline WorkerIdentity& this_worker() {
  thread_local WorkerIdentity identity;
  return identity;
}
/// Throws WaitInsideOperationError when the calling thread runs an operation.
void check_not_inside_operation(const char* what);
/// Runs a variable's deleter; one that throws is logged and otherwise
/// ignored, since nothing waits on a deleted variable.
void run_deleter(Engine::VarDeleter& deleter) noexcept;

class WorkerPool {
 public:
  /// A GPU's pool gets its stream and the backend that selects the GPU on
  /// each worker thread as it starts (the device is per thread, and a kernel
  /// launched from a thread whose current device is another GPU fails).
  WorkerPool(ThreadedEngine& engine, Context ctx, QueueKind kind, int num_workers,
             std::unique_ptr<Stream> stream, DeviceBackend* backend = nullptr);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  /// Hands a ready operation to the pool; wakes a sleeping worker.
  void enqueue(OpBlock* op);
  /// Stops the workers once their queue is empty and joins them.
  void stop();

  ThreadedEngine* engine() const { return &engine_; }
  Context context() const { return ctx_; }
  QueueKind kind() const { return kind_; }
  Stream* stream() const { return stream_.get(); }
  /// Why the GPU could not be selected on the worker (read by that worker
  /// only: every operation it runs then fails with it), or null.
  const std::exception_ptr& device_error() const { return device_error_; }
  int num_workers() const { return static_cast<int>(threads_.size()); }
  ReadyQueue& queue() { return queue_; }
  /// Set once the stream's sticky error has been passed to wait_for_all
  /// (only touched by drain(), under the engine's drain lock).
  bool stream_error_reported = false;
  /// Operations of epoch slot `slot` completed by this pool's workers
  /// (summed by wait_for_all, Note [Waiting for all] in threaded_engine.h).
  std::uint64_t completed(int slot) const;
  /// Counts one completion of an operation of slot `slot` made by worker `index`.
  void count_completion(int index, int slot) {
    auto& c = counters_[static_cast<std::size_t>(index)].completed[slot];
    c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

 private:
  void run(int index);
  OpBlock* next_op();
  void wake_one();

  // idle_ packs the idle workers: sleepers in the low half, spinners above.
  static constexpr std::uint32_t kOneSleeper = 1;
  static constexpr std::uint32_t kOneSpinner = 1u << 16;
  static std::uint32_t sleepers(std::uint32_t idle) { return idle & 0xffffu; }
  static std::uint32_t spinners(std::uint32_t idle) { return idle >> 16; }

  ThreadedEngine& engine_;
  Context ctx_;
  QueueKind kind_;
  std::unique_ptr<Stream> stream_;
  DeviceBackend* backend_;
  std::exception_ptr device_error_;
  ReadyQueue queue_;
  struct alignas(64) Counter {
    std::atomic<std::uint64_t> completed[2] = {0, 0};
  };
  std::unique_ptr<Counter[]> counters_;
  alignas(64) std::atomic<std::uint32_t> idle_{0};
  WakeWord wake_;
  /// On a line of its own: the polling worker reads it on every poll, and
  /// every enqueue writes idle_ (Note [Idle workers] in threaded_engine.h).
  alignas(64) std::atomic<bool> stopping_{false};
  std::vector<std::thread> threads_;
};

}  // namespace tagflow::detail

#pragma once
// NaiveEngine: runs every operation synchronously in the pushing thread,
// device work included (each GPU operation synchronises its stream). For
// debugging: a failure then points at the push that caused it. Same
// semantics as the threaded engine, errors on variables included.
// Internal to engine/; reach it through make_engine() with TAGFLOW_ENGINE=naive.

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/detail/device_backend.h"
#include "engine/detail/lifetime.h"
#include "engine/detail/op_block.h"
#include "engine/engine.h"

namespace tagflow::detail {

class NaiveEngine final : public Engine, public EngineCore {
 public:
  explicit NaiveEngine(const EngineConfig& config);
  ~NaiveEngine() override;

  VarHandle new_var() override;
  using Engine::delete_var;
  void delete_var(VarHandle var, VarDeleter on_deleted) override;
  void push(Operation op) override;
  void wait_to_read(VarHandle var) override;
  void wait_to_write(VarHandle var) override;
  void wait_for_all() override;
  OperationCounts operation_counts() const override;
  /// Lists the operations running at the moment (several when closures push).
  DependencyState dependency_state() override;
  const EngineConfig& config() const override { return config_; }
  const std::vector<GpuInfo>& gpus() const override { return backend_->devices(); }
  std::string device_status() const override { return backend_->status(); }
  void complete_async(OpBlock* op, std::exception_ptr error) override;
  bool finish_pending(std::chrono::milliseconds stall) override;
  /// Nothing to stop: operations run in their pushers.
  void stop_workers() override {}

 private:
  Stream* stream_for(Context ctx, QueueKind queue);
  void rethrow_error_of(VarHandle var, const char* what);

  EngineConfig config_;
  /// Tells a forked child, where the streams' threads do not exist, and the
  /// mutex may be held by a thread that does not either (Note [Engine lifetime]).
  ForkCheck fork_check_;
  std::unique_ptr<DeviceBackend> backend_;
  std::recursive_mutex mutex_;  // one operation at a time; closures may push
  std::map<std::pair<int, QueueKind>, std::unique_ptr<Stream>> streams_;
  std::exception_ptr first_error_;
  /// Profiling: push numbers, and the last profiled writer of each variable.
  std::uint64_t next_seq_ = 1;
  std::map<const VarBlock*, std::uint64_t> profiled_writers_;
  /// For the dump: counts, and the operations being run (innermost last).
  std::atomic<std::uint64_t> pushed_{0};
  std::atomic<std::uint64_t> completed_{0};
  std::mutex running_mutex_;
  std::vector<const OpBlock*> running_;
};

}  // namespace tagflow::detail

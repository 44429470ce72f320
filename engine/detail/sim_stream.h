#pragma once
// SimStream: a simulated GPU stream. An in-order queue run by one host
// thread; a counter plays the CUDA event. It enforces CUDA's rules (Note
// [Simulated CUDA rules] in sim_runtime.h). Internal to engine/.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "engine/stream.h"

namespace tagflow::detail {

class SimStream final : public Stream {
 public:
  SimStream(Context ctx, QueueKind kind);
  ~SimStream() override;

  void enqueue_host(HostFunction fn) override;
  void enqueue_timestamp(std::int64_t* out) override;
  std::uint64_t record() override;
  void wait(Stream& other, std::uint64_t seq) override;
  bool finished(std::uint64_t seq) override;
  void synchronize(std::uint64_t seq) override;
  void when_finished(std::uint64_t seq, HostFunction fn) override;
  void make_device_current() override;

 private:
  struct Item {
    enum class Type { kHost, kMark, kWait } type;
    HostFunction fn;          // kHost
    std::uint64_t seq = 0;    // kMark: this stream's mark; kWait: other's
    Stream* other = nullptr;  // kWait
  };
  void push_item(Item item);
  /// Throws DeviceError (cudaErrorNotPermitted) when called from host work.
  void check_not_in_host_work(const char* call) const;
  void run();
  void mark_finished(std::uint64_t seq);

  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable progress_;
  std::deque<Item> items_;
  std::uint64_t recorded_ = 0;
  std::atomic<std::uint64_t> finished_{0};
  std::multimap<std::uint64_t, HostFunction> callbacks_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tagflow::detail

#include "engine/detail/sim_collective.h"

#include <algorithm>
#include <utility>

#include "engine/detail/sim_stream.h"

namespace tagflow::detail::sim {

Collective::Collective(int parts, std::int64_t duration_ns, std::function<void()> combine)
    : parts_(parts), duration_ns_(duration_ns), combine_(std::move(combine)) {}

std::int64_t Collective::meet(std::int64_t arrived_ns, bool skip_combine) {
  std::unique_lock lock(mutex_);
  latest_ns_ = std::max(latest_ns_, arrived_ns);
  if (++arrived_ == parts_) {
    if (!skip_combine && combine_) {
      try {
        combine_();
      } catch (...) {
        error_ = std::current_exception();
      }
    }
    done_ = true;
    all_arrived_.notify_all();
  } else {
    all_arrived_.wait(lock, [&] { return done_; });
  }
  if (error_) std::rethrow_exception(error_);
  return latest_ns_ + duration_ns_;
}

void enqueue_collective(Stream& stream, std::shared_ptr<Collective> collective) {
  static_cast<SimStream&>(stream).enqueue_collective(std::move(collective));
}

}  // namespace tagflow::detail::sim

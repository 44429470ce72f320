#include "storage/detail/release_gate.h"

#include <algorithm>
#include <cassert>

namespace tagflow::detail {

ReleaseGate& ReleaseGate::process() {
  // Never destroyed: allocators and aggregators in static storage may use
  // it during exit.
  static ReleaseGate* gate = new ReleaseGate;
  return *gate;
}

void ReleaseGate::collective_began() {
  std::unique_lock lock(mutex_);
  released_.wait(lock, [this] { return releasing_ == 0; });
  ++in_flight_;
}

void ReleaseGate::collective_ended() noexcept {
  std::vector<Client*> put_off;
  {
    const std::lock_guard lock(mutex_);
    assert(in_flight_ > 0);
    --in_flight_;
    if (in_flight_ != 0 || deferred_.empty()) return;
    put_off.swap(deferred_);
    ++releasing_;
  }
  const EndRelease end{*this};
  for (Client* client : put_off) client->release_deferred();
}

std::size_t ReleaseGate::collectives_in_flight() const {
  const std::lock_guard lock(mutex_);
  return in_flight_;
}

std::size_t ReleaseGate::begin_release(Client& client) {
  const std::lock_guard lock(mutex_);
  if (in_flight_ == 0) {
    ++releasing_;
    return 0;
  }
  if (std::find(deferred_.begin(), deferred_.end(), &client) == deferred_.end()) {
    deferred_.push_back(&client);
  }
  return in_flight_;
}

void ReleaseGate::end_release() noexcept {
  {
    const std::lock_guard lock(mutex_);
    --releasing_;
  }
  released_.notify_all();
}

void ReleaseGate::forget(Client& client) noexcept {
  std::unique_lock lock(mutex_);
  released_.wait(lock, [this] { return releasing_ == 0; });
  std::erase(deferred_, &client);
}

}  // namespace tagflow::detail

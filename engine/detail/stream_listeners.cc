#include "engine/detail/stream_listeners.h"

#include <exception>
#include <vector>

#include "engine/detail/lifetime.h"
#include "engine/error.h"

namespace tagflow::detail {

namespace {

struct Registry {
  std::mutex mutex;
  std::vector<CudaStreamDestroyedListener> listeners;
};

/// Never destroyed (Note [Per-stream library handles]): streams may outlive
/// every static destructor.
Registry& registry() {
  static auto* registry = new Registry;
  return *registry;
}

}  // namespace

void on_cuda_stream_destroyed(CudaStreamDestroyedListener listener) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.listeners.push_back(std::move(listener));
}

void notify_cuda_stream_destroyed(int device, void* stream) noexcept {
  Registry& r = registry();
  // Held while the listeners run (which is why they must not register
  // others): the list is never copied on a destructor's path.
  std::lock_guard lock(r.mutex);
  for (const CudaStreamDestroyedListener& listener : r.listeners) {
    try {
      listener(device, stream);
    } catch (...) {
      try {
        log_error("a listener of a CUDA stream's destruction threw: ",
                  describe(std::current_exception()));
      } catch (...) {  // NOLINT(bugprone-empty-catch): no memory left for the message
      }
    }
  }
}

}  // namespace tagflow::detail

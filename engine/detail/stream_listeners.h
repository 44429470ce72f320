#pragma once
// What other layers keep per CUDA stream, and how it goes away with the
// stream: process-wide listeners the engine calls when it destroys a stream,
// and PerStreamHandles, a map of library handles (cuBLAS, cuDNN) keyed by
// (device, stream) that drops a stream's handle from such a listener.
// Internal; needs no CUDA header, so its logic is tested without a GPU.
//
// Note [Per-stream library handles]
// cuBLAS and cuDNN handles are bound to one stream (cublasSetStream,
// cudnnSetStream) and to the device current when they were made, and making
// one costs device memory and time, so ops/kernels makes one per stream on
// first use and keeps it. A cudaStream_t is only a pointer that the driver
// may hand out again once the stream is destroyed: an engine made after
// another one was destroyed can get a stream whose value equals a dead one,
// possibly on another device. A map keyed by the raw stream would then give
// the new stream a handle bound to a dead stream of another GPU. So the key
// is (device, stream), and CudaStream's destructor calls
// notify_cuda_stream_destroyed after its last work has finished and before
// cudaStreamDestroy: each PerStreamHandles then erases and destroys that
// stream's handle, and the value may safely come back. Destroying a cuBLAS or
// cuDNN handle synchronizes its device (both libraries say so), which is
// acceptable there: the stream is going away and its work is done.
// The registry and the maps are never destroyed (leaked statics): a stream
// may be destroyed during exit (an engine from make_engine() kept in a
// static), in an order no library controls, and handles destroyed by static
// destructors would race the CUDA context's own teardown.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <utility>

namespace tagflow::detail {

/// Called with the GPU index and the native stream (a cudaStream_t as
/// `void*`) of a stream about to be destroyed. Must not throw (an exception is
/// logged and dropped) and must not register listeners itself.
using CudaStreamDestroyedListener = std::function<void(int device, void* stream)>;

/// Registers `listener` for the rest of the process (Note [Per-stream library
/// handles]). Thread-safe.
///
///   on_cuda_stream_destroyed([](int device, void* stream) { forget(device, stream); });
void on_cuda_stream_destroyed(CudaStreamDestroyedListener listener);

/// Calls every listener, in the order they were registered, with (device,
/// stream). Called by the CUDA backend's stream destructor once the stream
/// has no work left and before it is destroyed. Thread-safe; never throws.
void notify_cuda_stream_destroyed(int device, void* stream) noexcept;

/// A process-wide map from (device, native stream) to one library handle
/// per stream, made on first use and destroyed when the engine destroys the
/// stream (Note [Per-stream library handles]). Make it with `new` and never
/// delete it: its listener stays registered for the life of the process.
///
///   static auto* handles = new PerStreamHandles<cublasHandle_t>(&destroy_cublas_handle);
///   cublasHandle_t h = handles->get(device, stream, [&] { return make_cublas_handle(...); });
template <typename Handle>
class PerStreamHandles {
 public:
  /// Releases the handle of a stream of `device`; must not throw.
  using Destroy = void (*)(int device, Handle handle);

  explicit PerStreamHandles(Destroy destroy) : destroy_(destroy) {
    on_cuda_stream_destroyed([this](int device, void* stream) { erase(device, stream); });
  }
  PerStreamHandles(const PerStreamHandles&) = delete;
  PerStreamHandles& operator=(const PerStreamHandles&) = delete;

  /// The handle of `stream` on `device`; on first use the one `make()`
  /// returns, made under the map's lock so that each stream gets one. If
  /// `make` throws, nothing is kept and the exception propagates.
  template <typename Make>
  Handle get(int device, void* stream, Make&& make) {
    const Key key = key_of(device, stream);
    std::lock_guard lock(mutex_);
    auto it = handles_.find(key);
    if (it != handles_.end()) return it->second;
    Handle handle = make();
    try {
      handles_.emplace(key, handle);
    } catch (...) {
      destroy_(device, handle);
      throw;
    }
    return handle;
  }

  /// Destroys and forgets the handle of `stream` on `device`, if it has one
  /// (the listener registered by the constructor calls this).
  void erase(int device, void* stream) noexcept {
    Handle handle{};
    {
      std::lock_guard lock(mutex_);
      auto it = handles_.find(key_of(device, stream));
      if (it == handles_.end()) return;
      handle = it->second;
      handles_.erase(it);
    }
    destroy_(device, handle);  // outside the lock: it may synchronize the device
  }

  /// How many streams have a handle now.
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return handles_.size();
  }

 private:
  /// The stream as an integer: std::less orders unrelated pointers, but
  /// std::pair compares them with the built-in <, which need not.
  using Key = std::pair<int, std::uintptr_t>;
  static Key key_of(int device, void* stream) {
    return {device, reinterpret_cast<std::uintptr_t>(stream)};
  }

  Destroy destroy_;
  mutable std::mutex mutex_;
  std::map<Key, Handle> handles_;
};

}  // namespace tagflow::detail

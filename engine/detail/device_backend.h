#pragma once
// DeviceBackend: where GPUs come from. The simulated backend (TAGFLOW_SIM_GPUS)
// backs each GPU with host threads; the CUDA backend uses the driver.
// Internal to engine/.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/stream.h"

namespace tagflow::detail {

namespace sim {
class ModelClock;
}  // namespace sim

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  /// The GPUs of this backend, in index order.
  virtual const std::vector<GpuInfo>& devices() const = 0;
  /// A new stream on `ctx` (a GPU of this backend).
  virtual std::unique_ptr<Stream> make_stream(Context ctx, QueueKind kind) = 0;
  /// Makes GPU `index` current on the calling thread (cudaSetDevice, or the
  /// simulated runtime's); throws DeviceError on failure. The current device
  /// is per thread and decides where kernels may be launched.
  virtual void set_device(int index) = 0;
  /// The calling thread's current GPU.
  virtual int current_device() const = 0;
  /// The modelled time of simulated GPUs with a device model, else null.
  virtual sim::ModelClock* model_clock() { return nullptr; }
  /// One line on the backend's state, e.g. "no GPU: CUDA driver not found".
  virtual std::string status() const = 0;
};

/// Makes a GPU current on the calling thread for the guard's lifetime, then
/// restores the previous one (best effort: a destructor cannot report).
///
///   ScopedDevice on_device(*backend_, ctx.index);
class ScopedDevice {
 public:
  ScopedDevice(DeviceBackend& backend, int index)
      : backend_(backend), previous_(backend.current_device()) {
    if (index != previous_) {
      backend.set_device(index);
      restore_ = true;
    }
  }
  ~ScopedDevice() {
    if (!restore_) return;
    try {
      backend_.set_device(previous_);
    } catch (...) {  // NOLINT(bugprone-empty-catch): the next launch reports a broken device
    }
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  DeviceBackend& backend_;
  int previous_;
  bool restore_ = false;
};

/// Simulated GPUs when `config.sim_gpus > 0`, else the CUDA backend when it
/// was built and finds a driver, else a backend with no devices.
std::unique_ptr<DeviceBackend> make_device_backend(const EngineConfig& config);

/// N simulated GPUs backed by host memory and one thread per stream,
/// keeping modelled time when `model` is given (Note [Modelled time] in
/// engine/device_model.h), and only timing their work when `timing_only`.
std::unique_ptr<DeviceBackend> make_sim_backend(int num_gpus,
                                                const std::optional<DeviceModel>& model = {},
                                                bool timing_only = false);

/// The CUDA backend, or null when CUDA was not built or no driver/device is
/// usable; `why_not` then says why.
std::unique_ptr<DeviceBackend> make_cuda_backend(std::string& why_not);

/// Build facts for `tagflow info`: CUDA on/off and library versions.
std::vector<std::pair<std::string, std::string>> build_info();

}  // namespace tagflow::detail

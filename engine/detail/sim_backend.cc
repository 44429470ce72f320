// The simulated backend (TAGFLOW_SIM_GPUS), the backend with no GPU, and
// the choice between them and CUDA's.

#include <memory>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "engine/detail/device_backend.h"
#include "engine/detail/model_clock.h"
#include "engine/detail/sim_runtime.h"
#include "engine/detail/sim_stream.h"
#include "engine/error.h"

namespace tagflow::detail {

namespace {

class SimBackend final : public DeviceBackend {
 public:
  SimBackend(int n, const std::optional<DeviceModel>& model, bool timing_only) {
    sim::register_devices(n);
    if (model) clock_ = std::make_unique<sim::ModelClock>(*model, n, timing_only);
    for (int i = 0; i < n; ++i) {
      devices_.push_back(
          {.index = i,
           .name = model ? fmt::format("simulated {} ({}{})", model->name,
                                       timing_only ? "timing only, " : "", "modelled time")
                         : "simulated GPU",
           .total_memory = model ? model->memory_bytes : 0,
           .compute_major = 0,
           .compute_minor = 0,
           .simulated = true,
           .model = model ? model->name : std::string(),
           .timing_only = model && timing_only});
    }
  }
  const std::vector<GpuInfo>& devices() const override { return devices_; }
  std::unique_ptr<Stream> make_stream(Context ctx, QueueKind kind) override {
    return std::make_unique<SimStream>(ctx, kind, clock_.get());
  }
  sim::ModelClock* model_clock() override { return clock_.get(); }
  void set_device(int index) override {
    sim::check_status(sim::set_device(index), "cudaSetDevice", gpu(index));
  }
  int current_device() const override { return sim::current_device(); }
  std::string status() const override {
    if (!clock_) return fmt::format("{} simulated GPU(s) (TAGFLOW_SIM_GPUS)", devices_.size());
    return fmt::format("{} simulated GPU(s) keeping modelled time as {}{} (TAGFLOW_SIM_GPUS)",
                       devices_.size(), clock_->model().name,
                       clock_->timing_only() ? ", timing only" : "");
  }

 private:
  std::vector<GpuInfo> devices_;
  /// Outlives the streams: the engines destroy their pools first.
  std::unique_ptr<sim::ModelClock> clock_;
};

class NoGpuBackend final : public DeviceBackend {
 public:
  explicit NoGpuBackend(std::string why) : why_(std::move(why)) {}
  const std::vector<GpuInfo>& devices() const override { return devices_; }
  std::unique_ptr<Stream> make_stream(Context, QueueKind) override { return nullptr; }
  void set_device(int index) override {
    throw_error<DeviceError>("gpu({}) does not exist: {}", index, why_);
  }
  int current_device() const override { return 0; }
  std::string status() const override { return why_; }

 private:
  std::vector<GpuInfo> devices_;
  std::string why_;
};

}  // namespace

std::unique_ptr<DeviceBackend> make_sim_backend(int num_gpus,
                                                const std::optional<DeviceModel>& model,
                                                bool timing_only) {
  return std::make_unique<SimBackend>(num_gpus, model, timing_only);
}

std::unique_ptr<DeviceBackend> make_device_backend(const EngineConfig& config) {
  if (config.sim_gpus > 0)
    return make_sim_backend(config.sim_gpus, config.sim_model, config.sim_timing_only);
  std::string why_not;
  if (auto cuda = make_cuda_backend(why_not)) return cuda;
  return std::make_unique<NoGpuBackend>(std::move(why_not));
}

}  // namespace tagflow::detail

#include "tools/info_text.h"

#include <iterator>
#include <string>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "nn/dist/nccl_aggregator.h"
#include "tagflow/tagflow.h"

namespace tagflow::tools {

namespace {

/// "gpu(1), gpu(2)", or "none (copies to other GPUs stage through host memory)".
std::string peers_of(const GpuInfo& gpu) {
  if (gpu.peers.empty()) return "none (copies to other GPUs stage through host memory)";
  std::string text;
  for (int peer : gpu.peers) text += fmt::format("{}gpu({})", text.empty() ? "" : ", ", peer);
  return text;
}

}  // namespace

std::string info_text() {
  std::string text;
  const auto print = [&text]<typename... Args>(fmt::format_string<Args...> format, Args&&... args) {
    fmt::format_to(std::back_inserter(text), format, std::forward<Args>(args)...);
  };
  Engine& engine = Engine::get();
  const EngineConfig& config = engine.config();

  print("Devices\n");
  print("  CPU cores            {}\n", std::thread::hardware_concurrency());
  print("  cpu(i) devices       started on first use, {} worker thread(s) each\n",
        config.cpu_workers);
  if (engine.num_gpus() == 0) {
    print("  GPUs                 {}\n", engine.device_status());
  } else {
    print("  GPUs                 {}\n", engine.device_status());
    for (const auto& gpu : engine.gpus()) {
      if (gpu.simulated && !gpu.model.empty()) {
        print(
            "  gpu({})               simulated as a modelled {} ({:.1f} GiB), {}: times are "
            "predictions\n",
            gpu.index, gpu.model, static_cast<double>(gpu.total_memory) / (1u << 30),
            gpu.timing_only ? "kernels timed, not run" : "kernels run on the host");
      } else if (gpu.simulated) {
        print("  gpu({})               simulated (host memory, host threads as streams)\n",
              gpu.index);
      } else {
        print("  gpu({})               {}, {:.1f} GiB, compute capability {}.{}\n", gpu.index,
              gpu.name, static_cast<double>(gpu.total_memory) / (1u << 30), gpu.compute_major,
              gpu.compute_minor);
        if (engine.num_gpus() > 1) {
          print("                       peer access to {}\n", peers_of(gpu));
        }
      }
    }
  }
  print("\nConfiguration (value, and where it came from: default, environment or code)\n");
  for (const ConfigSetting& setting : Engine::settings()) {
    print("  {:<24} {:<20} {}\n", setting.variable, setting.value, setting.source);
  }
  print("\nBuild\n");
  for (const auto& [name, value] : build_info()) print("  {:<20} {}\n", name, value);
  for (const auto& [name, value] : cpu_kernel_libraries()) {
    print("  {:<20} {}\n", name, value);
  }
  print("  {:<20} {}\n", "NCCL", dist::nccl_available() ? "yes" : "no");
  return text;
}

}  // namespace tagflow::tools

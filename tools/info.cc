#include "tools/info.h"

#include <string>
#include <thread>

#include <fmt/format.h>

#include "tagflow/dist.h"
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

int run_info() {
  Engine& engine = Engine::get();
  const EngineConfig& config = engine.config();

  fmt::print("Devices\n");
  fmt::print("  CPU cores            {}\n", std::thread::hardware_concurrency());
  fmt::print("  cpu(i) devices       started on first use, {} worker thread(s) each\n",
             config.cpu_workers);
  if (engine.num_gpus() == 0) {
    fmt::print("  GPUs                 {}\n", engine.device_status());
  } else {
    fmt::print("  GPUs                 {}\n", engine.device_status());
    for (const auto& gpu : engine.gpus()) {
      if (gpu.simulated && !gpu.model.empty()) {
        fmt::print(
            "  gpu({})               simulated as a modelled {} ({:.1f} GiB), {}: times are "
            "predictions\n",
            gpu.index, gpu.model, static_cast<double>(gpu.total_memory) / (1u << 30),
            gpu.timing_only ? "kernels timed, not run" : "kernels run on the host");
      } else if (gpu.simulated) {
        fmt::print("  gpu({})               simulated (host memory, host threads as streams)\n",
                   gpu.index);
      } else {
        fmt::print("  gpu({})               {}, {:.1f} GiB, compute capability {}.{}\n", gpu.index,
                   gpu.name, static_cast<double>(gpu.total_memory) / (1u << 30), gpu.compute_major,
                   gpu.compute_minor);
        if (engine.num_gpus() > 1) {
          fmt::print("                       peer access to {}\n", peers_of(gpu));
        }
      }
    }
  }
  fmt::print("\nConfiguration (environment)\n");
  for (const auto& [name, value] : config.describe()) fmt::print("  {:<20} {}\n", name, value);
  fmt::print("\nBuild\n");
  for (const auto& [name, value] : build_info()) fmt::print("  {:<20} {}\n", name, value);
  for (const auto& [name, value] : cpu_kernel_libraries()) {
    fmt::print("  {:<20} {}\n", name, value);
  }
  fmt::print("  {:<20} {}\n", "MPI", dist::mpi_library_version());
  fmt::print("  {:<20} {}\n", "NCCL", dist::nccl_available() ? "yes" : "no");
  return 0;
}

}  // namespace tagflow::tools

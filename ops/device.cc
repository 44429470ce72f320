#include "ops/device.h"

#include <cblas.h>

#include <fmt/format.h>

#ifdef TAGFLOW_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

#include "engine/engine.h"
#include "ops/kernels/gemm_kernels.h"
#ifdef TAGFLOW_HAVE_ONEDNN
#include "ops/kernels/onednn_threads.h"
#endif

namespace tagflow {

Context try_gpu(int i) { return i >= 0 && i < num_gpus() ? gpu(i) : cpu(0); }

std::vector<Context> try_all_gpus() {
  std::vector<Context> devices;
  for (int i = 0; i < num_gpus(); ++i) devices.push_back(gpu(i));
  if (devices.empty()) devices.push_back(cpu(0));
  return devices;
}

bool is_real_gpu(Context ctx) {
  if (!ctx.is_gpu() || ctx.index < 0 || ctx.index >= num_gpus()) return false;
  return !Engine::get().gpus()[static_cast<std::size_t>(ctx.index)].simulated;
}

std::vector<std::pair<std::string, std::string>> cpu_kernel_libraries() {
  std::vector<std::pair<std::string, std::string>> libraries;
  // Its configuration names the kernels it runs ("... Prescott MAX_THREADS=64").
  libraries.emplace_back("OpenBLAS", openblas_get_config());
#ifdef TAGFLOW_HAVE_ONEDNN
  const dnnl_version_t* v = dnnl_version();
  libraries.emplace_back(
      "oneDNN",
      fmt::format("{}.{}.{}, {} kernels (convolutions: TAGFLOW_CPU_CONV)", v->major, v->minor,
                  v->patch, detail::onednn::isa_name(dnnl_get_effective_cpu_isa())));
#else
  libraries.emplace_back("oneDNN", "not in this build (convolutions lowered to matrix products)");
#endif
  libraries.emplace_back("matrix products", detail::cpu_kernels::cpu_gemm_kernels());
  return libraries;
}

}  // namespace tagflow

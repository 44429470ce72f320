#include "ops/kernels/onednn_threads.h"

#include <dlfcn.h>

#include <oneapi/dnnl/dnnl.h>

namespace tagflow::detail::onednn {

namespace {

/// OpenMP's omp_set_num_threads and omp_get_max_threads, from the runtime
/// oneDNN itself loads (looked up, so that nothing else links it); null
/// without one.
struct OpenMp {
  void (*set_threads)(int) = nullptr;
  int (*max_threads)() = nullptr;
};

const OpenMp& open_mp() {
  static const OpenMp functions = [] {
    OpenMp f;
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
    auto find = [](const char* name) {
      void* symbol = ::dlsym(RTLD_DEFAULT, name);
      if (symbol == nullptr) {
        void* gomp = ::dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (gomp != nullptr) symbol = ::dlsym(gomp, name);
      }
      return symbol;
    };
    f.set_threads = reinterpret_cast<void (*)(int)>(find("omp_set_num_threads"));
    f.max_threads = reinterpret_cast<int (*)()>(find("omp_get_max_threads"));
    if (f.set_threads == nullptr || f.max_threads == nullptr) f = {};
#endif
    return f;
  }();
  return functions;
}

}  // namespace

void use_this_thread_only() {
  // Every time (a write to the thread's OpenMP state): a program may have
  // changed the setting of its own thread since.
  if (open_mp().set_threads != nullptr) open_mp().set_threads(1);
}

ThisThreadOnly::ThisThreadOnly() {
  if (open_mp().set_threads == nullptr) return;
  threads_ = open_mp().max_threads();
  open_mp().set_threads(1);
}

ThisThreadOnly::~ThisThreadOnly() {
  if (threads_ > 0) open_mp().set_threads(threads_);
}

const char* isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41:
      return "SSE4.1";
    case dnnl_cpu_isa_avx:
      return "AVX";
    case dnnl_cpu_isa_avx2:
      return "AVX2";
    case dnnl_cpu_isa_avx2_vnni:
      return "AVX2 with VNNI";
    case dnnl_cpu_isa_avx512_mic:
    case dnnl_cpu_isa_avx512_mic_4ops:
      return "AVX-512 (Xeon Phi)";
    case dnnl_cpu_isa_avx512_core:
      return "AVX-512";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "AVX-512 with VNNI";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "AVX-512 with bfloat16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "AVX-512 with AMX";
    default:
      break;
  }
  return "generic";
}

}  // namespace tagflow::detail::onednn

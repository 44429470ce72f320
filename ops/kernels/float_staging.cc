#include "ops/kernels/float_staging.h"

#include "ops/kernels/elementwise_kernels.h"

namespace tagflow::detail {

Float32Staging::Float32Staging(Context ctx, DType dtype) : ctx_(ctx), dtype_(dtype) {
  if (!is_floating(dtype)) throw_dtype_unsupported("Float32Staging", dtype);
}

float* Float32Staging::scratch(std::int64_t n) {
  buffers_.push_back(std::make_unique<CpuScratch>(
      ctx_, static_cast<std::uint64_t>(n > 0 ? n : 1) * sizeof(float)));
  return buffers_.back()->floats();
}

const float* Float32Staging::input(const void* data, std::int64_t n) {
  if (dtype_ == DType::kFloat32) return static_cast<const float*>(data);
  float* widened = scratch(n);
  cpu_kernels::cast(dtype_, DType::kFloat32, data, widened, n);
  return widened;
}

float* Float32Staging::output(void* data, std::int64_t n, bool keep) {
  if (dtype_ == DType::kFloat32) return static_cast<float*>(data);
  float* staged = scratch(n);
  if (keep) cpu_kernels::cast(dtype_, DType::kFloat32, data, staged, n);
  outputs_.push_back({staged, data, n});
  return staged;
}

void Float32Staging::commit() {
  for (const Staged& s : outputs_) cpu_kernels::cast(DType::kFloat32, dtype_, s.from, s.to, s.n);
  outputs_.clear();
}

}  // namespace tagflow::detail

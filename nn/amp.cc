#include "nn/amp.h"

#include "engine/error.h"

namespace tagflow::nn::amp {

namespace {
thread_local DType current = DType::kFloat32;
}  // namespace

DType compute_dtype() { return current; }

AutocastScope::AutocastScope(DType dtype) : previous_(current) {
  TAGFLOW_CHECK(is_floating(dtype),
                "amp::autocast: expected float16, bfloat16 or float32 (off), got {}",
                dtype_name(dtype));
  current = dtype;
}

AutocastScope::~AutocastScope() { current = previous_; }

AutocastScope autocast(DType dtype) { return AutocastScope(dtype); }

NDArray to_compute_dtype(const NDArray& x) {
  if (!is_half(current) || !x.defined() || x.dtype() != DType::kFloat32) return x;
  return x.astype(current);
}

NDArray to_float32(const NDArray& x) {
  if (!is_half(current) || !x.defined() || !is_half(x.dtype())) return x;
  return x.astype(DType::kFloat32);
}

}  // namespace tagflow::nn::amp

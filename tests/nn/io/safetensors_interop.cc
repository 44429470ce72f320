// A helper of safetensors_python_test.py: writes a safetensors file of
// float16, bfloat16 and float32 tensors for Python's `safetensors` to read,
// and prints the tensors of a file Python wrote, as JSON with each
// element's bits, for the script to compare.
//
//   safetensors_interop write FILE   (the values are the script's too)
//   safetensors_interop dump FILE

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "nn/io/safetensors.h"
#include "tagflow/tagflow.h"

namespace {

using namespace tagflow;

/// The values written, as floats (the script lists the same ones).
std::vector<float> written_values() {
  const float inf = std::numeric_limits<float>::infinity();
  return {0.1f,     -2.5f, 65504.f, 1e-7f,
          3.14159f, inf,   -inf,    std::numeric_limits<float>::quiet_NaN(),
          1e10f,    -0.f,  65520.f, 6.1e-5f};
}

std::string bits_json(const NDArray& a) {
  std::vector<std::uint64_t> bits;
  if (a.dtype() == DType::kFloat16) {
    for (const Half h : a.to_vector<Half>()) bits.push_back(h.bits);
  } else if (a.dtype() == DType::kBFloat16) {
    for (const BFloat16 b : a.to_vector<BFloat16>()) bits.push_back(b.bits);
  } else if (a.dtype() == DType::kFloat32) {
    for (const float f : a.to_vector<float>()) {
      std::uint32_t u = 0;
      std::memcpy(&u, &f, sizeof u);
      bits.push_back(u);
    }
  } else {
    for (const std::int64_t v : a.to_vector<std::int64_t>())
      bits.push_back(static_cast<std::uint64_t>(v));
  }
  return fmt::format("{{\"dtype\":\"{}\",\"shape\":[{}],\"bits\":[{}]}}", dtype_name(a.dtype()),
                     fmt::join(a.shape().dims(), ","), fmt::join(bits, ","));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s write|dump FILE\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  try {
    if (mode == "write") {
      const std::vector<float> v = written_values();
      const NDArray f = array(v, {3, 4}, cpu(0));
      io::save_safetensors(argv[2], {{"half", f.astype(DType::kFloat16)},
                                     {"brain", f.astype(DType::kBFloat16)},
                                     {"single", f}});
      return 0;
    }
    if (mode == "dump") {
      std::string out = "{";
      for (const auto& [name, value] : io::load_safetensors(argv[2], cpu(0))) {
        if (out.size() > 1) out += ",";
        out += fmt::format("\"{}\":{}", name, bits_json(value));
      }
      std::printf("%s}\n", out.c_str());
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}

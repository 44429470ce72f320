#include "ops/kernels/conv_algorithm.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "engine/engine.h"
#include "engine/error.h"

namespace tagflow::detail {

namespace {

/// True the first time it sees (pass, device, geometry) in this process.
bool first_time(ConvPass pass, int device, const ConvGeometry& g) {
  static std::mutex mutex;
  static auto* seen = new std::set<ConvKey>;  // never destroyed: kernels may run during exit
  std::lock_guard lock(mutex);
  return seen->insert(conv_key(pass, device, g)).second;
}

/// "conv2d forward on gpu(0) (input 8x3x32x32, weight 16x3x3x3, stride 1x1,
/// padding 1x1, dilation 1x1, 1 group(s))".
std::string describe(ConvPass pass, int device, const ConvGeometry& g) {
  return fmt::format(
      "conv2d {} on gpu({}) (input {}x{}x{}x{}, weight {}x{}x{}x{}, stride {}x{}, padding {}x{}, "
      "dilation {}x{}, {} group(s))",
      to_string(pass), device, g.batch, g.in_channels, g.in_h, g.in_w, g.out_channels,
      g.group_in_channels(), g.kernel_h, g.kernel_w, g.stride_h, g.stride_w, g.pad_h, g.pad_w,
      g.dilation_h, g.dilation_w, g.groups);
}

std::string bytes(std::uint64_t n) {
  return fmt::format("{} bytes ({:.1f} MiB)", n, static_cast<double>(n) / (1 << 20));
}

template <typename Pred>
std::optional<std::size_t> first(std::span<const ConvAlgorithm> candidates, Pred&& pred) {
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].supported && pred(candidates[i])) return i;
  }
  return std::nullopt;
}

}  // namespace

ConvKey conv_key(ConvPass pass, int device, const ConvGeometry& g) {
  ConvKey key{static_cast<std::int64_t>(pass), device};
  const auto extents = g.extents();
  std::copy(extents.begin(), extents.end(), key.begin() + 2);
  return key;
}

const char* to_string(ConvPass pass) {
  switch (pass) {
    case ConvPass::kForward:
      return "forward";
    case ConvPass::kBackwardData:
      return "backward-data";
    case ConvPass::kBackwardFilter:
      return "backward-filter";
  }
  return "?";
}

std::size_t choose_conv_algorithm(std::span<const ConvAlgorithm> candidates, ConvPass pass,
                                  int device, const ConvGeometry& g, std::uint64_t max_workspace,
                                  ConvTf32 policy) {
  const auto fits = [&](const ConvAlgorithm& a) { return a.workspace <= max_workspace; };
  // 1 and 2: float32 within the limit, deterministic first.
  if (auto i = first(candidates, [&](const ConvAlgorithm& a) {
        return a.fma_math && fits(a) && a.deterministic;
      })) {
    return *i;
  }
  if (auto i = first(candidates, [&](const ConvAlgorithm& a) { return a.fma_math && fits(a); })) {
    return *i;
  }
  if (policy == ConvTf32::kForbid) {
    std::optional<std::uint64_t> smallest;  // of the float32 algorithms
    for (const ConvAlgorithm& a : candidates) {
      if (a.supported && a.fma_math && (!smallest || a.workspace < *smallest)) {
        smallest = a.workspace;
      }
    }
    const bool tf32_fits = first(candidates, fits).has_value();
    throw_error<DeviceError>(
        "{}: no float32 (FMA-math) cuDNN algorithm fits the workspace limit of {}: {}; {}. "
        "TF32 is forbidden (TAGFLOW_CONV_TF32=forbid): set TAGFLOW_CONV_TF32=allow to accept "
        "TF32 tensor-op math for such shapes, or raise the workspace limit (kMaxWorkspace in "
        "ops/kernels/conv.cu) or make the convolution smaller (a smaller batch)",
        describe(pass, device, g), bytes(max_workspace),
        smallest ? "the smallest float32 one needs " + bytes(*smallest)
                 : std::string("cuDNN offers no float32 one for this geometry"),
        tf32_fits ? "a TF32 tensor-op one would fit" : "no TF32 one fits either");
  }
  // 3 and 4: whatever cuDNN supports, within the limit first.
  auto i = first(candidates, fits);
  if (!i) i = first(candidates, [](const ConvAlgorithm&) { return true; });
  if (!i) {
    throw_error<DeviceError>("{}: cuDNN supports none of its {} candidate algorithm(s)",
                             describe(pass, device, g), candidates.size());
  }
  const ConvAlgorithm& chosen = candidates[*i];
  if (first_time(pass, device, g)) {
    spdlog::warn(
        "{}: no float32 (FMA-math) cuDNN algorithm fits the workspace limit of {}; running "
        "algorithm {} with {} math{} and a workspace of {} instead. Logged once per shape; "
        "TAGFLOW_CONV_TF32=forbid makes this an error",
        describe(pass, device, g), bytes(max_workspace), chosen.algo,
        chosen.fma_math ? "FMA (float32)" : "tensor-op",
        chosen.fma_math ? "" : ", which may round float32 inputs to TF32 (Ampere and later GPUs)",
        bytes(chosen.workspace));
  }
  return *i;
}

ConvTf32 conv_tf32_policy() { return Engine::get().config().conv_tf32; }

}  // namespace tagflow::detail

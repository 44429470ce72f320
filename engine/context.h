#pragma once
// Context: the device an array lives on and an operation runs on.
//
// Threads: concurrent reads, exclusive writes (a value, as an int). parse()
// and the functions here keep no state.

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>

namespace tagflow {

/// The kinds of device tagflow schedules work on.
enum class DeviceType : std::uint8_t {
  kCPU = 0,        ///< host memory, run by the worker pool of `cpu(i)`
  kGPU = 1,        ///< a CUDA device, or a simulated one (TAGFLOW_SIM_GPUS)
  kCPUPinned = 2,  ///< page-locked host memory used to stage GPU copies
};

/// A device: a type and an index. A small value type: compare, hash, print
/// (`gpu(1)`) and parse (`"gpu:1"`).
///
///   Context c = Context::parse("gpu:1");   // c == gpu(1)
///   std::cout << c;                         // prints "gpu(1)"
struct Context {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  constexpr bool is_cpu() const { return type == DeviceType::kCPU; }
  constexpr bool is_gpu() const { return type == DeviceType::kGPU; }
  constexpr bool is_cpu_pinned() const { return type == DeviceType::kCPUPinned; }
  /// True for every context whose memory the host can touch directly.
  constexpr bool is_host() const { return type != DeviceType::kGPU; }

  /// "cpu(0)", "gpu(1)", "cpu_pinned(0)".
  std::string str() const;

  /// Accepts "cpu", "gpu", "cpu_pinned" followed by ":i" or "(i)", e.g.
  /// "gpu:1", "cpu(0)", "gpu" (index 0). Throws tagflow::Error otherwise.
  static Context parse(std::string_view text);

  friend constexpr bool operator==(const Context&, const Context&) = default;
  friend constexpr auto operator<=>(const Context&, const Context&) = default;
};

/// CPU devices an engine runs: cpu(0) .. cpu(kMaxCpuDevices - 1) (and the
/// cpu_pinned(i) of the same indices); push refuses others with DeviceError.
inline constexpr int kMaxCpuDevices = 64;

/// `cpu(i)`: the i-th logical CPU device, with its own worker pool.
constexpr Context cpu(int index = 0) { return {DeviceType::kCPU, index}; }
/// `gpu(i)`: the i-th GPU (real or simulated).
constexpr Context gpu(int index = 0) { return {DeviceType::kGPU, index}; }
/// `cpu_pinned(i)`: pinned host memory; its operations run on `cpu(i)`'s pool.
constexpr Context cpu_pinned(int index = 0) { return {DeviceType::kCPUPinned, index}; }

std::ostream& operator<<(std::ostream& os, const Context& ctx);

}  // namespace tagflow

template <>
struct std::hash<tagflow::Context> {
  std::size_t operator()(const tagflow::Context& c) const noexcept {
    return std::hash<std::uint64_t>{}((static_cast<std::uint64_t>(c.type) << 32) ^
                                      static_cast<std::uint32_t>(c.index));
  }
};

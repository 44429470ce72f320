#include "storage/memory_stats.h"

#include <fmt/format.h>

namespace tagflow {

namespace detail {

std::string format_bytes(std::uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  const double b = static_cast<double>(bytes);
  if (bytes < (1u << 20)) return fmt::format("{:.1f} KiB", b / 1024.0);
  if (bytes < (1u << 30)) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024.0));
  return fmt::format("{:.2f} GiB", b / (1024.0 * 1024.0 * 1024.0));
}

namespace {

std::string describe_out_of_memory(Context device, std::uint64_t requested, const MemoryStats& s) {
  std::string text = fmt::format(
      "out of memory on {}: tried to allocate {}; {} in use, {} cached (released and retried)",
      device.str(), format_bytes(requested), format_bytes(s.in_use), format_bytes(s.cached));
  if (s.limit != 0) {
    text +=
        fmt::format(", limit {} (TAGFLOW_MEMORY_LIMIT or set_memory_limit)", format_bytes(s.limit));
  }
  if (s.capacity != 0) text += fmt::format(", device total {}", format_bytes(s.capacity));
  return text;
}

}  // namespace
}  // namespace detail

OutOfMemoryError::OutOfMemoryError(Context device, std::uint64_t requested,
                                   const MemoryStats& stats)
    : Error(detail::describe_out_of_memory(device, requested, stats)),
      device_(device),
      requested_(requested),
      stats_(stats) {}

}  // namespace tagflow

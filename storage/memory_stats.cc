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

std::string describe_out_of_memory(Context device, std::uint64_t requested, const MemoryStats& s,
                                   std::size_t collectives_in_flight) {
  std::string text =
      fmt::format("out of memory on {}: tried to allocate {}; {} in use, {} cached ", device.str(),
                  format_bytes(requested), format_bytes(s.in_use), format_bytes(s.cached));
  if (collectives_in_flight == 0) {
    text += "(released and retried)";
  } else {
    // Note [No release during collectives] in storage/detail/release_gate.h
    text += fmt::format(
        "(kept: {} collective{} in flight, which may wait for this thread; the cache goes back "
        "once they end)",
        collectives_in_flight, collectives_in_flight == 1 ? "" : "s");
  }
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
                                   const MemoryStats& stats, std::size_t collectives_in_flight)
    : Error(detail::describe_out_of_memory(device, requested, stats, collectives_in_flight)),
      device_(device),
      requested_(requested),
      stats_(stats),
      collectives_in_flight_(collectives_in_flight) {}

}  // namespace tagflow

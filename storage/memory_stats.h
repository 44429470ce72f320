#pragma once
// MemoryStats: what a device's allocator reports; OutOfMemoryError: what it
// throws when a request cannot be met even after releasing its cache.
//
// Threads: concurrent reads, exclusive writes. MemoryStats is a value (as an
// int).
// Threads: safe to call concurrently. An OutOfMemoryError is immutable once
// thrown.

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/context.h"
#include "engine/error.h"

namespace tagflow {

/// Memory figures of one device, in bytes (sizes as the allocator hands
/// them out: a pooled allocator rounds requests up to its size classes).
struct MemoryStats {
  std::uint64_t in_use = 0;  ///< held by live arrays (and pending operations)
  std::uint64_t cached = 0;  ///< freed blocks kept for reuse (pooled devices)
  /// Highest `in_use` since start or reset_peak; with several threads
  /// allocating and releasing blocks of up to 32 KiB, within 64 KiB per
  /// other such thread (Note [Figures of the magazines] in
  /// storage/detail/pooled_allocator.h).
  std::uint64_t peak = 0;
  std::uint64_t allocations = 0;         ///< requests served
  std::uint64_t device_allocations = 0;  ///< of which went to the device (cudaMalloc, ...)
  std::uint64_t limit = 0;               ///< bytes the device may hold; 0: no limit
  std::uint64_t capacity = 0;            ///< the device's total memory when known, else 0
};

/// A request a device cannot meet, even after releasing its cached blocks,
/// or with its cached blocks kept because collectives were in flight.
class OutOfMemoryError : public Error {
 public:
  /// `collectives_in_flight`: 0 when the cache was released and the request
  /// retried; else how many collectives kept the cache on the device.
  OutOfMemoryError(Context device, std::uint64_t requested, const MemoryStats& stats,
                   std::size_t collectives_in_flight = 0);
  Context device() const { return device_; }
  std::uint64_t requested() const { return requested_; }
  /// The device's figures when the request failed.
  const MemoryStats& stats() const { return stats_; }
  /// The collectives in flight that kept the cache, 0 when it was released.
  std::size_t collectives_in_flight() const { return collectives_in_flight_; }

 private:
  Context device_;
  std::uint64_t requested_;
  MemoryStats stats_;
  std::size_t collectives_in_flight_;
};

namespace detail {
/// "512 B", "1.5 KiB", "64.0 MiB", "2.00 GiB".
std::string format_bytes(std::uint64_t bytes);
}  // namespace detail

}  // namespace tagflow

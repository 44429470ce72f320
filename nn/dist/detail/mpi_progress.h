#pragma once
// The communication thread of MpiCommunicator and the collectives it works
// on: internal to nn/dist/mpi_communicator.cc and nn/dist/detail/mpi_progress.cc, built only
// with MPI. See Notes [Collectives as engine operations], [Issue order] and
// [Failures and timeouts] in mpi_communicator.h.

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <tbb/global_control.h>

#include "engine/inline_function.h"
#include "nn/dist/mpi_communicator.h"

namespace tagflow::dist {
namespace mpi {

using Clock = std::chrono::steady_clock;

/// MPI's text for an error code.
std::string mpi_error_text(int code);
/// The MPI type of `dtype`'s elements.
MPI_Datatype mpi_type(DType dtype);
/// Writes 1 or 0 as one element of `dtype` at `at` (the message's flag).
void store_flag(std::byte* at, DType dtype, bool sound);
/// The flag element at `at` read back as an integer (the number of processes
/// whose input was sound, after a sum).
std::int64_t load_flag(const std::byte* at, DType dtype);

enum class Kind : std::uint8_t { kAllreduce, kBroadcast, kAllgather, kBarrier };

/// One collective, from its ticket to its end on the communication thread.
struct Request {
  using Finish = detail::InlineFunction<void(Request&, std::exception_ptr), 64>;

  std::uint64_t ticket = 0;
  Kind kind = Kind::kBarrier;
  MPI_Datatype type = MPI_BYTE;
  int count = 0;  ///< elements of `type` in the message, flag included
  int root = 0;
  std::vector<std::byte> message;
  std::vector<std::byte> received;  ///< kAllgather's result
  /// "allreduce of 3 arrays (241,572 bytes)", for errors.
  std::string what;
  /// Called once on the communication thread: with null when MPI finished
  /// the collective, else with the CommunicationError that ended it.
  Finish finish;
  MPI_Request handle = MPI_REQUEST_NULL;
  Clock::time_point issued;
};

}  // namespace mpi

/// What MpiCommunicator shares with its communication thread.
struct MpiCommunicator::State {
  MpiOptions options;
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  int local_size = 1;
  std::string host;
  bool finalize_mpi = false;  ///< tagflow initialised MPI, so it finalises it
  /// With several processes of the job on this machine, this one's share of
  /// its cores for the CPU kernels.
  std::optional<tbb::global_control> cores;

  std::mutex mutex;
  std::condition_variable wake;   ///< the communication thread: work handed over, or stop
  std::uint64_t next_ticket = 0;  ///< the next ticket to hand out
  std::uint64_t next_to_issue = 0;
  std::map<std::uint64_t, std::unique_ptr<mpi::Request>> handed_over;
  bool stopping = false;
  std::atomic<bool> broken{false};
  std::string broken_reason;  ///< set once, before `broken`
  /// Message buffers of finished collectives, for reuse.
  std::vector<std::vector<std::byte>> spare;

  // The communication thread's own.
  std::deque<std::unique_ptr<mpi::Request>> in_flight;
  std::vector<std::unique_ptr<mpi::Request>> abandoned;
  std::thread thread;

  std::uint64_t reserve() {
    std::lock_guard lock(mutex);
    return next_ticket++;
  }

  std::vector<std::byte> take_buffer(std::size_t bytes) {
    std::vector<std::byte> buffer;
    {
      std::lock_guard lock(mutex);
      const auto fits = std::find_if(spare.begin(), spare.end(),
                                     [&](const auto& b) { return b.capacity() >= bytes; });
      if (fits != spare.end()) {
        buffer = std::move(*fits);
        spare.erase(fits);
      }
    }
    buffer.resize(bytes);
    return buffer;
  }

  void hand_over(std::unique_ptr<mpi::Request> request) {
    // Notified under the lock: once it is released, the communication thread
    // may take the request, end it, and let the communicator be destroyed.
    std::lock_guard lock(mutex);
    handed_over.emplace(request->ticket, std::move(request));
    wake.notify_one();
  }

  void run();
  void issue(std::unique_ptr<mpi::Request> request);
  bool poll();
  void break_down(std::string reason);
  void end(mpi::Request& request, std::exception_ptr error);
  /// Takes a ticket, hands `request` over and waits for it; `on_success`
  /// reads the result (the blocking helpers).
  void run_blocking(std::unique_ptr<mpi::Request> request,
                    detail::InlineFunction<void(mpi::Request&)> on_success);
};

}  // namespace tagflow::dist

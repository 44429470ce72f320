#include "nn/dist/detail/mpi_progress.h"

#include <algorithm>
#include <cstring>
#include <future>

#include <spdlog/spdlog.h>

#include "engine/engine.h"

namespace tagflow::dist {

namespace mpi {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<std::size_t>(length));
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return MPI_FLOAT;
    case DType::kInt32:
      return MPI_INT32_T;
    case DType::kInt64:
      return MPI_INT64_T;
    case DType::kUInt8:
      return MPI_UINT8_T;
    case DType::kFloat16:
    case DType::kBFloat16:
      break;  // MPI has no 16-bit float type to sum
  }
  detail::throw_error("MpiCommunicator: no MPI type for dtype {}", dtype_name(dtype));
}

void store_flag(std::byte* at, DType dtype, bool sound) {
  switch (dtype) {
    case DType::kFloat32: {
      const float v = sound ? 1.f : 0.f;
      std::memcpy(at, &v, sizeof v);
      return;
    }
    case DType::kInt32: {
      const std::int32_t v = sound ? 1 : 0;
      std::memcpy(at, &v, sizeof v);
      return;
    }
    case DType::kInt64: {
      const std::int64_t v = sound ? 1 : 0;
      std::memcpy(at, &v, sizeof v);
      return;
    }
    case DType::kUInt8:
      *at = std::byte{sound ? std::uint8_t{1} : std::uint8_t{0}};
      return;
    case DType::kFloat16: {
      const Half v(sound ? 1.f : 0.f);
      std::memcpy(at, &v, sizeof v);
      return;
    }
    case DType::kBFloat16: {
      const BFloat16 v(sound ? 1.f : 0.f);
      std::memcpy(at, &v, sizeof v);
      return;
    }
  }
}

std::int64_t load_flag(const std::byte* at, DType dtype) {
  switch (dtype) {
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, at, sizeof v);
      return static_cast<std::int64_t>(v);
    }
    case DType::kInt32: {
      std::int32_t v;
      std::memcpy(&v, at, sizeof v);
      return v;
    }
    case DType::kInt64: {
      std::int64_t v;
      std::memcpy(&v, at, sizeof v);
      return v;
    }
    case DType::kUInt8:
      return static_cast<std::int64_t>(*at);
    case DType::kFloat16: {
      Half v;
      std::memcpy(&v, at, sizeof v);
      return static_cast<std::int64_t>(static_cast<float>(v));
    }
    case DType::kBFloat16: {
      BFloat16 v;
      std::memcpy(&v, at, sizeof v);
      return static_cast<std::int64_t>(static_cast<float>(v));
    }
  }
  return 0;
}

}  // namespace mpi

namespace {

using mpi::Clock;
using mpi::Kind;
using mpi::mpi_error_text;
using mpi::Request;

/// Polling a collective in flight: a short interval first (a message on the
/// same machine takes microseconds), doubling while nothing arrives, up to a
/// ceiling that bounds the latency it adds without taking a core from the
/// workers. Abandoned collectives are polled at the slow rate.
constexpr auto kFirstPoll = std::chrono::microseconds(5);
constexpr auto kLastPoll = std::chrono::microseconds(500);

}  // namespace

void MpiCommunicator::State::break_down(std::string reason) {
  if (broken.load(std::memory_order_acquire)) return;
  spdlog::error("MpiCommunicator (rank {} of {}): {}", rank, size, reason);
  {
    std::lock_guard lock(mutex);
    broken_reason = std::move(reason);
  }
  broken.store(true, std::memory_order_release);
}

void MpiCommunicator::State::end(Request& request, std::exception_ptr error) {
  try {
    request.finish(request, std::move(error));
  } catch (const std::exception& e) {
    spdlog::error("MpiCommunicator: finishing the {} threw (ignored): {}", request.what, e.what());
  }
}

void MpiCommunicator::State::issue(std::unique_ptr<Request> request) {
  if (broken.load(std::memory_order_acquire)) {
    std::string reason;
    {
      std::lock_guard lock(mutex);
      reason = broken_reason;
    }
    end(*request, std::make_exception_ptr(CommunicationError(fmt::format(
                      "{} (rank {} of {}) was not run: the communicator broke down earlier: {}",
                      request->what, rank, size, reason))));
    return;
  }
  int status = MPI_SUCCESS;
  void* data = request->message.data();
  switch (request->kind) {
    case Kind::kAllreduce:
      status = MPI_Iallreduce(MPI_IN_PLACE, data, request->count, request->type, MPI_SUM, comm,
                              &request->handle);
      break;
    case Kind::kBroadcast:
      status =
          MPI_Ibcast(data, request->count, request->type, request->root, comm, &request->handle);
      break;
    case Kind::kAllgather:
      status = MPI_Iallgather(data, request->count, request->type, request->received.data(),
                              request->count, request->type, comm, &request->handle);
      break;
    case Kind::kBarrier:
      status = MPI_Ibarrier(comm, &request->handle);
      break;
  }
  if (status != MPI_SUCCESS) {
    const std::string reason =
        fmt::format("starting the {} failed: {}", request->what, mpi_error_text(status));
    break_down(reason);
    end(*request, std::make_exception_ptr(CommunicationError(
                      fmt::format("MpiCommunicator (rank {} of {}): {}", rank, size, reason))));
    return;
  }
  request->issued = Clock::now();
  in_flight.push_back(std::move(request));
}

bool MpiCommunicator::State::poll() {
  bool progressed = false;
  for (auto it = in_flight.begin(); it != in_flight.end();) {
    Request& request = **it;
    int done = 0;
    const int status = MPI_Test(&request.handle, &done, MPI_STATUS_IGNORE);
    if (status != MPI_SUCCESS) {
      break_down(fmt::format("the {} failed: {}", request.what, mpi_error_text(status)));
      break;
    }
    if (done == 0) {
      ++it;
      continue;
    }
    progressed = true;
    end(request, nullptr);
    if (request.message.capacity() > 0) {
      std::lock_guard lock(mutex);
      spare.push_back(std::move(request.message));
    }
    it = in_flight.erase(it);
  }
  if (!broken.load(std::memory_order_acquire) && !in_flight.empty()) {
    const Request& oldest = *in_flight.front();
    const double waited = std::chrono::duration<double>(Clock::now() - oldest.issued).count();
    if (waited > options.timeout_seconds) {
      break_down(fmt::format(
          "the {} did not complete within {} s: a process of the job is gone, stopped or stuck "
          "elsewhere (this is rank {} of {} on {})",
          oldest.what, options.timeout_seconds, rank, size, host));
    }
  }
  if (broken.load(std::memory_order_acquire) && !in_flight.empty()) {
    std::string reason;
    {
      std::lock_guard lock(mutex);
      reason = broken_reason;
    }
    // MPI cannot cancel a collective: its message stays allocated and polled.
    for (std::unique_ptr<Request>& request : in_flight) {
      end(*request, std::make_exception_ptr(CommunicationError(fmt::format(
                        "{} (rank {} of {}) failed: {}", request->what, rank, size, reason))));
      request->finish = nullptr;
      abandoned.push_back(std::move(request));
    }
    in_flight.clear();
    progressed = true;
  }
  std::erase_if(abandoned, [](std::unique_ptr<Request>& request) {
    int done = 0;
    return MPI_Test(&request->handle, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done != 0;
  });
  return progressed;
}

void MpiCommunicator::State::run() {
  std::vector<std::unique_ptr<Request>> ready;
  auto interval = kFirstPoll;
  for (;;) {
    {
      std::unique_lock lock(mutex);
      const auto next_is_here = [&] {
        return !handed_over.empty() && handed_over.begin()->first == next_to_issue;
      };
      // Stopping waits for every ticket handed out to be issued and ended.
      const auto all_done = [&] { return stopping && next_to_issue == next_ticket; };
      if (in_flight.empty()) {
        if (all_done()) return;
        const auto woken = [&] { return next_is_here() || all_done(); };
        if (abandoned.empty()) {
          wake.wait(lock, woken);
        } else {
          wake.wait_for(lock, kLastPoll, woken);
        }
      } else {
        wake.wait_for(lock, interval, next_is_here);
      }
      while (next_is_here()) {
        ready.push_back(std::move(handed_over.begin()->second));
        handed_over.erase(handed_over.begin());
        ++next_to_issue;
      }
    }
    for (std::unique_ptr<Request>& request : ready) issue(std::move(request));
    const bool issued = !ready.empty();
    ready.clear();
    const bool progressed = poll();
    interval = progressed || issued ? kFirstPoll : std::min(interval * 2, kLastPoll);
  }
}

void MpiCommunicator::State::run_blocking(std::unique_ptr<Request> request,
                                          detail::InlineFunction<void(Request&)> on_success) {
  if (inside_engine_operation()) [[unlikely]] {
    detail::throw_error<WaitInsideOperationError>(
        "MpiCommunicator: the {} was called from inside an engine operation: it would block the "
        "worker that may have to run an earlier collective (deadlock); call it from a host thread",
        request->what);
  }
  std::promise<void> promise;
  std::future<void> result = promise.get_future();
  request->finish = [&promise, &on_success](Request& r, std::exception_ptr error) {
    if (!error) {
      try {
        on_success(r);
      } catch (...) {
        error = std::current_exception();
      }
    }
    if (error) {
      promise.set_exception(std::move(error));
    } else {
      promise.set_value();
    }
  };
  request->ticket = reserve();
  hand_over(std::move(request));
  result.get();
}
}  // namespace tagflow::dist

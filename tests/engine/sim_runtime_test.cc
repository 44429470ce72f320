// Tests of the rules the simulated GPUs enforce (Note [Simulated CUDA rules]
// in engine/detail/sim_runtime.h). Each rule is shown refusing a planted
// violation, and letting the same work through once it follows the rule.

#include "engine/detail/sim_runtime.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "engine/detail/sim_stream.h"
#include "engine/error.h"
#include "tests/engine/watchdog.h"

namespace tagflow::detail {
namespace {

using namespace std::chrono_literals;
using testing::run_with_timeout;

constexpr auto kLimit = 30s;

/// The message of `e`, or "" when null.
std::string message_of(const std::exception_ptr& e) { return e ? describe(e) : std::string(); }

/// Clears the simulated devices' sticky faults and this thread's state, so
/// that one test's planted fault does not leak into the next.
class SimRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim::register_devices(2);
    reset();
  }
  void TearDown() override { reset(); }
  static void reset() {
    for (int i = 0; i < sim::device_count(); ++i) sim::reset_device(i);
    static_cast<void>(sim::set_device(0));
    static_cast<void>(sim::get_last_error());
  }
};

// --- the current device -------------------------------------------------------------

TEST_F(SimRuntimeTest, CurrentDeviceIsPerThreadAndZeroOnANewThread) {
  ASSERT_EQ(sim::set_device(1), sim::Status::kSuccess);
  EXPECT_EQ(sim::current_device(), 1);
  int seen_by_new_thread = -1;
  std::thread([&] { seen_by_new_thread = sim::current_device(); }).join();
  EXPECT_EQ(seen_by_new_thread, 0) << "a new thread starts on device 0, as in CUDA";
  EXPECT_EQ(sim::current_device(), 1) << "another thread's device is its own";
}

TEST_F(SimRuntimeTest, SelectingADeviceThatDoesNotExistFailsAndKeepsTheCurrentOne) {
  ASSERT_EQ(sim::set_device(1), sim::Status::kSuccess);
  EXPECT_EQ(sim::set_device(sim::device_count()), sim::Status::kInvalidDevice);
  EXPECT_EQ(sim::set_device(-1), sim::Status::kInvalidDevice);
  EXPECT_EQ(sim::current_device(), 1);
  try {
    sim::ScopedDevice guard(sim::device_count() + 3);
    FAIL() << "selected a device that does not exist";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("invalid device ordinal (cudaErrorInvalidDevice)"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(SimRuntimeTest, ScopedDeviceRestoresThePreviousDevice) {
  {
    sim::ScopedDevice guard(1);
    EXPECT_EQ(sim::current_device(), 1);
    {
      sim::ScopedDevice inner(0);
      EXPECT_EQ(sim::current_device(), 0);
    }
    EXPECT_EQ(sim::current_device(), 1);
  }
  EXPECT_EQ(sim::current_device(), 0);
}

TEST_F(SimRuntimeTest, AKernelLaunchIntoAnotherDevicesStreamIsRefused) {
  run_with_timeout(kLimit, [] {
    SimStream stream(gpu(1), QueueKind::kCompute);
    std::atomic<bool> ran{false};
    // Planted violation: this thread's current device is gpu(0). The launch
    // enqueues nothing and leaves the failure in the slot, as on a GPU.
    sim::launch_kernel(stream, [&ran] { ran.store(true); });
    try {
      sim::check_status(sim::get_last_error(), "kernel launch", stream.context());
      FAIL() << "a launch from gpu(0) into gpu(1)'s stream was accepted";
    } catch (const DeviceError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("kernel launch failed on gpu(1)"), std::string::npos) << what;
      EXPECT_NE(what.find("invalid resource handle (cudaErrorInvalidResourceHandle)"),
                std::string::npos)
          << what;
    }
    EXPECT_EQ(sim::get_last_error(), sim::Status::kSuccess)
        << "the throwing check must leave the last-error slot clear";
    stream.synchronize(stream.record());
    EXPECT_FALSE(ran.load());
    // Host functions, marks and waits need no current device, as in CUDA.
    std::atomic<bool> host_function_ran{false};
    stream.enqueue_host([&] { host_function_ran.store(true); });
    stream.synchronize(stream.record());
    EXPECT_TRUE(host_function_ran.load());
    // Following the rule, the same launch runs.
    {
      sim::ScopedDevice on_device(1);
      sim::launch_kernel(stream, [&ran] { ran.store(true); });
      EXPECT_EQ(sim::get_last_error(), sim::Status::kSuccess);
    }
    stream.synchronize(stream.record());
    EXPECT_TRUE(ran.load());
    // A thread of the user's own selects the stream's device through the stream.
    std::atomic<bool> ran_from_other_thread{false};
    sim::Status other_thread_status = sim::Status::kDeviceFault;
    std::thread([&] {
      stream.make_device_current();
      sim::launch_kernel(stream, [&] { ran_from_other_thread.store(true); });
      other_thread_status = sim::get_last_error();
    }).join();
    stream.synchronize(stream.record());
    EXPECT_EQ(other_thread_status, sim::Status::kSuccess);
    EXPECT_TRUE(ran_from_other_thread.load());
    EXPECT_EQ(stream.error(), nullptr);
  });
}

// --- the last-error slot -------------------------------------------------------------

TEST_F(SimRuntimeTest, LastErrorStaysUntilReadAndReadingClearsIt) {
  EXPECT_EQ(sim::get_last_error(), sim::Status::kSuccess);
  // Planted: a failure nobody checks.
  static_cast<void>(sim::set_device(99));
  EXPECT_EQ(sim::peek_last_error(), sim::Status::kInvalidDevice);
  EXPECT_EQ(sim::set_device(1), sim::Status::kSuccess) << "a success does not clear the slot";
  EXPECT_EQ(sim::peek_last_error(), sim::Status::kInvalidDevice);
  EXPECT_EQ(sim::get_last_error(), sim::Status::kInvalidDevice);
  EXPECT_EQ(sim::get_last_error(), sim::Status::kSuccess);
  // Per thread: another thread's failure is not ours.
  std::thread([] { static_cast<void>(sim::set_device(99)); }).join();
  EXPECT_EQ(sim::peek_last_error(), sim::Status::kSuccess);
}

TEST_F(SimRuntimeTest, TheCheckHelperClearsTheSlotBeforeThrowing) {
  // A failure reported through the check helper must not fail the next,
  // healthy launch check on this thread (the stale-error bug).
  EXPECT_THROW(sim::check_status(sim::set_device(99), "cudaSetDevice", gpu(99)), DeviceError);
  EXPECT_EQ(sim::get_last_error(), sim::Status::kSuccess);
  // Without the helper, the stale failure is what the next launch check sees.
  static_cast<void>(sim::set_device(99));
  try {
    sim::check_status(sim::get_last_error(), "kernel launch", gpu(0));
    FAIL() << "the stale failure was not reported";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("kernel launch failed on gpu(0): invalid device ordinal"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(sim::check_status(sim::get_last_error(), "kernel launch", gpu(0)));
}

// --- sticky device faults --------------------------------------------------------------

TEST_F(SimRuntimeTest, AFaultStopsTheDevicesHostWorkOnEveryStreamUntilReset) {
  run_with_timeout(kLimit, [] {
    SimStream compute(gpu(0), QueueKind::kCompute);
    SimStream copy(gpu(0), QueueKind::kCopy);
    SimStream other_device(gpu(1), QueueKind::kCompute);
    std::atomic<int> ran{0};
    compute.enqueue_host([&ran] { ran.fetch_add(1); });
    const std::uint64_t before = compute.record();
    compute.synchronize(before);
    const std::uint64_t copy_before = copy.record();
    copy.synchronize(copy_before);

    // Held until everything is enqueued: a launch after the fault would be refused.
    std::promise<void> go;
    compute.enqueue_host([held = go.get_future().share()] { held.wait(); });
    compute.enqueue_host([] { throw std::runtime_error("illegal address"); });
    compute.enqueue_host([&ran] { ran.fetch_add(100); });
    const std::uint64_t after = compute.record();
    go.set_value();
    compute.synchronize(after);
    EXPECT_EQ(ran.load(), 1) << "host work ran on a device after its fault";
    EXPECT_EQ(compute.error_at(before), nullptr) << "work before the fault succeeded";
    EXPECT_EQ(message_of(compute.error_at(after)), "illegal address");
    EXPECT_EQ(message_of(compute.error()), "illegal address");
    EXPECT_EQ(message_of(sim::device_fault(0)), "illegal address");

    // The device's other stream is lost too; its earlier marks stay clean.
    EXPECT_EQ(copy.error_at(copy_before), nullptr);
    try {
      copy.enqueue_host([&ran] { ran.fetch_add(1000); });
      FAIL() << "a lost device accepted new work";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "illegal address");
    }
    const std::uint64_t copy_after = copy.record();
    copy.synchronize(copy_after);
    EXPECT_EQ(message_of(copy.error_at(copy_after)), "illegal address");
    EXPECT_EQ(ran.load(), 1);

    // Another device is unaffected.
    {
      sim::ScopedDevice on_device(1);
      other_device.enqueue_host([&ran] { ran.fetch_add(1); });
    }
    const std::uint64_t elsewhere = other_device.record();
    other_device.synchronize(elsewhere);
    EXPECT_EQ(other_device.error_at(elsewhere), nullptr);
    EXPECT_EQ(ran.load(), 2);

    // Only a reset brings the device back (new streams: the old ones keep
    // their failed marks, as CUDA's do).
    sim::reset_device(0);
    SimStream fresh(gpu(0), QueueKind::kCompute);
    fresh.enqueue_host([&ran] { ran.fetch_add(1); });
    const std::uint64_t mark = fresh.record();
    fresh.synchronize(mark);
    EXPECT_EQ(fresh.error_at(mark), nullptr);
    EXPECT_EQ(ran.load(), 3);
  });
}

TEST_F(SimRuntimeTest, AStreamThatWaitedOnAFailedMarkFailsFromItsNextMark) {
  run_with_timeout(kLimit, [] {
    SimStream failing(gpu(0), QueueKind::kCompute);
    SimStream consumer(gpu(1), QueueKind::kCompute);
    const std::uint64_t clean = consumer.record();
    failing.enqueue_host([] { throw std::runtime_error("illegal address"); });
    const std::uint64_t failed = failing.record();
    consumer.wait(failing, failed);
    std::atomic<bool> consumer_ran{false};
    {
      sim::ScopedDevice on_device(1);
      consumer.enqueue_host([&consumer_ran] { consumer_ran.store(true); });
    }
    const std::uint64_t tainted = consumer.record();
    consumer.synchronize(tainted);
    EXPECT_TRUE(consumer_ran.load()) << "gpu(1) itself is healthy";
    EXPECT_EQ(consumer.error_at(clean), nullptr);
    EXPECT_EQ(message_of(consumer.error_at(tainted)), "illegal address");
    // The same when the failed mark had already finished at the wait.
    SimStream late(gpu(1), QueueKind::kCopy);
    late.wait(failing, failed);
    const std::uint64_t late_mark = late.record();
    late.synchronize(late_mark);
    EXPECT_EQ(message_of(late.error_at(late_mark)), "illegal address");
  });
}

// --- host work must not call the device API -----------------------------------------

TEST_F(SimRuntimeTest, HostWorkCallingTheDeviceApiIsRefused) {
  run_with_timeout(kLimit, [] {
    SimStream stream(gpu(0), QueueKind::kCompute);
    std::string record_error;
    std::string launch_error;
    sim::Status set_device_status = sim::Status::kSuccess;
    // Planted violations, from inside host work.
    stream.enqueue_host([&] {
      try {
        static_cast<void>(stream.record());
      } catch (const DeviceError& e) {
        record_error = e.what();
      }
      try {
        stream.enqueue_host([] {});
      } catch (const DeviceError& e) {
        launch_error = e.what();
      }
      set_device_status = sim::set_device(0);
      static_cast<void>(sim::get_last_error());
    });
    std::atomic<bool> callback_recorded{false};
    // A completion callback is not host work: it may use the API.
    stream.when_finished(stream.record(), [&] {
      static_cast<void>(stream.record());
      callback_recorded.store(true);
    });
    stream.synchronize(stream.record());
    EXPECT_NE(record_error.find("operation not permitted (cudaErrorNotPermitted)"),
              std::string::npos)
        << record_error;
    EXPECT_NE(launch_error.find("operation not permitted (cudaErrorNotPermitted)"),
              std::string::npos)
        << launch_error;
    EXPECT_EQ(set_device_status, sim::Status::kNotPermitted);
    EXPECT_TRUE(callback_recorded.load());
    EXPECT_EQ(stream.error(), nullptr) << "the refusals were caught inside the host work";
  });
}

}  // namespace
}  // namespace tagflow::detail

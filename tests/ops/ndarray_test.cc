// NDArray itself: creation, views sharing memory, copies between every pair
// of devices, host access, laziness and errors surfacing at the wait, and
// the memory of arrays going back to their device.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/detail/sim_runtime.h"
#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using namespace std::chrono_literals;
using testing::all_devices;

std::vector<float> iota(int n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(i);
  return v;
}

TEST(NDArrayTest, CreationFunctionsOnEveryDevice) {
  for (Context ctx : all_devices()) {
    EXPECT_EQ(zeros({2, 2}, DType::kFloat32, ctx).to_vector<float>(), std::vector<float>(4, 0.f));
    EXPECT_EQ(ones({3}, DType::kInt64, ctx).to_vector<std::int64_t>(),
              std::vector<std::int64_t>(3, 1));
    EXPECT_EQ(full({2}, 7, DType::kUInt8, ctx).to_vector<int>().size(), 0u + 2u);
    EXPECT_EQ(full({2}, 7, DType::kUInt8, ctx).to_vector<std::int32_t>(),
              (std::vector<std::int32_t>{7, 7}));
    EXPECT_EQ(arange(0, 5, 1, DType::kFloat32, ctx).to_vector<float>(), iota(5));
    EXPECT_EQ(arange(5, 0, -2, DType::kInt32, ctx).to_vector<std::int32_t>(),
              (std::vector<std::int32_t>{5, 3, 1}));
    EXPECT_EQ(arange(0, 1, 0.25, DType::kFloat32, ctx).to_vector<float>(),
              (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
    NDArray e = empty({0, 3}, DType::kFloat32, ctx);
    EXPECT_EQ(e.size(), 0);
    EXPECT_TRUE(e.to_vector<float>().empty());
    EXPECT_EQ((e + 1).shape(), (Shape{0, 3}));
    const std::vector<std::uint8_t> bytes = {1, 2, 255};
    EXPECT_EQ(array(bytes, {3}, ctx).to_vector<std::int32_t>(),
              (std::vector<std::int32_t>{1, 2, 255}));
  }
  EXPECT_THROW((void)array(std::vector<float>{1, 2, 3}, {2, 2}), Error);
  EXPECT_THROW((void)arange(0, 1, 0), Error);
  EXPECT_THROW((void)full({2}, 300, DType::kUInt8), Error);
}

TEST(NDArrayTest, CreationWithOnlyADeviceIsFloat32) {
  for (Context ctx : all_devices()) {
    const NDArray o = ones({3, 4}, ctx);
    EXPECT_EQ(o.context(), ctx);
    EXPECT_EQ(o.dtype(), DType::kFloat32);
    EXPECT_EQ(o.to_vector<float>(), std::vector<float>(12, 1.f));
    EXPECT_EQ(zeros({2}, ctx).to_vector<float>(), std::vector<float>(2, 0.f));
    EXPECT_EQ(full({2}, 2.5, ctx).to_vector<float>(), std::vector<float>(2, 2.5f));
    const NDArray e = empty({5}, ctx);
    EXPECT_EQ(e.context(), ctx);
    EXPECT_EQ(e.dtype(), DType::kFloat32);
    EXPECT_EQ(e.size(), 5);
  }
  EXPECT_THROW((void)ones({2}, gpu(9)), DeviceError);
}

TEST(NDArrayTest, MethodsAreTheFreeFunctions) {
  const NDArray x = array(std::vector<float>{-1.5f, 0.25f, 2.f, 3.f, -0.5f, 1.f}, {2, 3});
  const auto same = [](const NDArray& a, const NDArray& b) {
    EXPECT_EQ(a.shape(), b.shape());
    EXPECT_EQ(a.dtype(), b.dtype());
    if (a.dtype() == DType::kFloat32) {
      EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
    } else {
      EXPECT_EQ(a.to_vector<std::int64_t>(), b.to_vector<std::int64_t>());
    }
  };
  same(x.exp(), exp(x));
  same(x.abs().log(), log(abs(x)));
  same(x.abs().sqrt(), sqrt(abs(x)));
  same(x.square(), square(x));
  same(x.relu(), relu(x));
  same(x.sigmoid(), sigmoid(x));
  same(x.tanh(), tanh(x));
  same(x.clip(-1, 1), clip(x, -1, 1));
  same(x.sum(), sum(x));
  same(x.sum(1), sum(x, 1));
  same(x.sum({0, 1}, true), sum(x, {0, 1}, true));
  same(x.mean(0), mean(x, 0));
  same(x.mean({1}), mean(x, {1}));
  same(x.max(), max(x));
  same(x.max(1, true), max(x, 1, true));
  same(x.min(0), min(x, 0));
  same(x.norm(), norm(x));
  same(x.norm(1), norm(x, 1));
  same(x.argmax(1), argmax(x, 1));
  same(x.softmax(), softmax(x));
  same(x.log_softmax(0), log_softmax(x, 0));
  same(x.T(), transpose(x));
  same(x.transpose({1, 0}), transpose(x, {1, 0}));
  same(x.dot(x.T()), dot(x, transpose(x)));
  EXPECT_EQ(x.sum().asscalar<float>(), 4.25f);
}

TEST(NDArrayTest, FromMemoryComputesInPlaceAndReleasesOnceAfterTheLastOperation) {
  std::vector<float> owned = {1.f, 2.f, 3.f, 4.f, 5.f, 6.f};
  std::atomic<int> released{0};
  {
    NDArray a = NDArray::from_memory(owned.data(), {2, 3}, DType::kFloat32, cpu(0),
                                     [&] { released.fetch_add(1); });
    EXPECT_EQ((a * 2.f).to_vector<float>(), (std::vector<float>{2, 4, 6, 8, 10, 12}));
    a += 1.f;  // writes the owner's memory
    a.wait_to_read();
    EXPECT_EQ(owned, (std::vector<float>{2, 3, 4, 5, 6, 7}));
    NDArray row = a[1];  // a view keeps the memory too
    a = NDArray();
    EXPECT_EQ(released.load(), 0);
    EXPECT_EQ(row.to_vector<float>(), (std::vector<float>{5, 6, 7}));
  }
  Engine::get().wait_for_all();
  EXPECT_EQ(released.load(), 1);
}

TEST(NDArrayTest, FromMemoryRefusesWhatCannotBeAnArray) {
  std::vector<float> owned(4);
  bool released = false;
  const auto release = [&] { released = true; };
  const std::string misaligned = testing::error_of([&] {
    NDArray::from_memory(reinterpret_cast<char*>(owned.data()) + 1, {2}, DType::kFloat32, cpu(0),
                         release);
  });
  EXPECT_NE(misaligned.find("aligned to 4 bytes"), std::string::npos) << misaligned;
  EXPECT_NE(testing::error_of([&] {
              NDArray::from_memory(nullptr, {2}, DType::kFloat32, cpu(0), release);
            }).find("got null"),
            std::string::npos);
  EXPECT_THROW(NDArray::from_memory(owned.data(), {4}, DType::kFloat32, gpu(99), release),
               DeviceError);
  Engine::get().wait_for_all();
  EXPECT_FALSE(released);  // still the caller's
}

TEST(NDArrayTest, ViewsShareMemoryAndVariable) {
  for (Context ctx : all_devices()) {
    NDArray a = array(iota(24), {2, 3, 4}, ctx);
    NDArray flat = a.reshape({-1});
    NDArray matrix = a.reshape({6, -1});
    NDArray second = a[1];
    NDArray rows = a.slice(1, 2);
    NDArray column = a.reshape({24, 1}).squeeze(1);
    NDArray lifted = a.expand_dims(0).expand_dims(-1);
    EXPECT_EQ(flat.shape(), (Shape{24}));
    EXPECT_EQ(matrix.shape(), (Shape{6, 4}));
    EXPECT_EQ(second.shape(), (Shape{3, 4}));
    EXPECT_EQ(rows.shape(), (Shape{1, 3, 4}));
    EXPECT_EQ(column.shape(), (Shape{24}));
    EXPECT_EQ(lifted.shape(), (Shape{1, 2, 3, 4, 1}));
    EXPECT_EQ(lifted.squeeze().shape(), (Shape{2, 3, 4}));
    EXPECT_EQ(second.var(), a.var());
    const std::vector<float> all = iota(24);
    EXPECT_EQ(second.to_vector<float>(), std::vector<float>(all.begin() + 12, all.end()));
    EXPECT_EQ(a[1][2].to_vector<float>(), (std::vector<float>{20, 21, 22, 23}));
    // Writing through a view is seen by the array and its other views.
    NDArray view = a[0];
    view += 100;
    EXPECT_EQ(flat.to_vector<float>()[0], 100.f);
    EXPECT_EQ(flat.to_vector<float>()[12], 12.f);
    EXPECT_EQ(matrix.slice(2, 3).to_vector<float>(), (std::vector<float>{108, 109, 110, 111}));
  }
  NDArray a = zeros({2, 3});
  EXPECT_THROW((void)a.reshape({4, 2}), Error);
  EXPECT_THROW((void)a.reshape({-1, -1}), Error);
  EXPECT_THROW((void)a.slice(1, 3), Error);
  EXPECT_THROW((void)a[2], Error);
  EXPECT_THROW((void)a.squeeze(0), Error);
  EXPECT_THROW((void)a.expand_dims(4), Error);
}

TEST(NDArrayTest, CopiesBetweenEveryPairOfDevices) {
  std::vector<Context> devices = all_devices();
  devices.push_back(cpu_pinned(0));
  const std::vector<float> values = testing::random_floats(10007, -1, 1);
  for (Context from : devices) {
    NDArray source = array(values, {10007}, from);
    for (Context to : devices) {
      NDArray copy = source.copyto(to);
      EXPECT_EQ(copy.context(), to);
      EXPECT_NE(copy.raw_data(), source.raw_data());
      EXPECT_EQ(copy.to_vector<float>(), values) << from << " -> " << to;
      NDArray moved = source.as_in_context(to);
      EXPECT_EQ(moved.same_as(source), from == to) << from << " -> " << to;
    }
    // Into an existing array, and of a view.
    NDArray dst = zeros({5}, DType::kFloat32, gpu(1));
    source.slice(10, 15).copyto(dst);
    EXPECT_EQ(dst.to_vector<float>(), std::vector<float>(values.begin() + 10, values.begin() + 15));
  }
  EXPECT_THROW(zeros({3}).copyto(zeros({4}, DType::kFloat32, gpu(0))), Error);
  EXPECT_THROW(zeros({3}).copyto(zeros({3}, DType::kInt32)), Error);
}

TEST(NDArrayTest, HostAccessConvertsAndChecks) {
  NDArray a = array(std::vector<std::int64_t>{1, -2, 3}, {3});
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, -2, 3}));
  EXPECT_EQ(a[1].asscalar<std::int64_t>(), -2);
  EXPECT_THROW((void)a.asscalar<float>(), Error);
  EXPECT_THROW((void)a.data<float>(), Error);
  EXPECT_THROW((void)NDArray().to_vector<float>(), Error);
  EXPECT_EQ(a.str(), "[ 1 -2  3]\n<NDArray 3 @cpu(0)>");
}

/// Pushes an operation that writes `a` after `delay`, through the engine
/// directly: how a slow or failing kernel looks to the arrays.
void push_write(const NDArray& a, std::chrono::milliseconds delay, bool fail) {
  Engine::get().push({.name = "slow write",
                      .ctx = a.context(),
                      .writes = {a.var()},
                      .fn = [a, delay, fail](const RunContext& rc) {
                        // A kernel that fails a check before it is launched;
                        // a fault of the device work itself is tested below
                        // (DeviceFaultTest).
                        if (fail) throw std::runtime_error("kernel failed on purpose");
                        auto body = [a, delay] {
                          std::this_thread::sleep_for(delay);
                          a.data<float>()[0] = 42;
                        };
                        if (rc.stream != nullptr) {
                          rc.stream->enqueue_host(body);
                        } else {
                          body();
                        }
                      }});
}

TEST(NDArrayTest, HostReadsAreOrderedWithWritesOtherThreadsPush) {
  // Note [Host reads]: to_vector reads in an operation of its own, so an
  // in-place write pushed by another thread meanwhile comes before or after
  // it, never during it. Each write adds 1 to every element, so a read torn
  // by a write would see two values (and ThreadSanitizer a race).
  for (Context ctx : {cpu(0), gpu(0)}) {
    NDArray x = zeros({1 << 16}, ctx);
    constexpr int kWrites = 200;
    std::atomic<bool> writing{true};
    std::thread writer([&] {
      for (int i = 0; i < kWrites; ++i) x += 1.f;
      writing.store(false);
    });
    float last = 0;
    int reads = 0;
    while (writing.load() || reads < 3) {
      const std::vector<float> values = x.to_vector<float>();
      ++reads;
      for (float v : values) ASSERT_EQ(v, values[0]) << ctx << ": a torn read";
      ASSERT_GE(values[0], last) << ctx;
      last = values[0];
    }
    writer.join();
    EXPECT_EQ(x.to_vector<float>()[0], static_cast<float>(kWrites)) << ctx;
  }
}

TEST(NDArrayTest, OperatorsReturnBeforeTheWorkEndsAndErrorsSurfaceAtTheWait) {
  for (Context ctx : all_devices()) {
    NDArray a = zeros({4}, DType::kFloat32, ctx);
    push_write(a, 200ms, false);
    const auto start = std::chrono::steady_clock::now();
    NDArray b = exp(a * 0) + a;  // three operations queued behind the slow one
    const auto pushed = std::chrono::steady_clock::now() - start;
    EXPECT_LT(pushed, 150ms) << ctx << ": operators must not wait for their inputs";
    EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{43, 1, 1, 1})) << ctx;

    NDArray c = zeros({4}, DType::kFloat32, ctx);
    push_write(c, 10ms, true);
    NDArray d = c + 1;  // depends on the failure
    NDArray e = a + 1;  // does not
    try {
      d.wait_to_read();
      ADD_FAILURE() << ctx << ": the failure must reach d";
    } catch (const OperationError& err) {
      EXPECT_EQ(err.op_name(), "slow write");
      EXPECT_NE(std::string(err.what()).find("kernel failed on purpose"), std::string::npos);
    }
    EXPECT_THROW((void)d.to_vector<float>(), OperationError);
    EXPECT_EQ(e.to_vector<float>()[0], 43.f) << ctx;
    fill(c, 5);  // overwriting clears the error
    EXPECT_EQ(c.to_vector<float>(), std::vector<float>(4, 5.f)) << ctx;
    try {
      Engine::get().wait_for_all();
    } catch (const OperationError&) {  // the failure above, reported once
    }
  }
}

// Device work that fails after its operation completed (Note [Errors of
// device work] in engine/stream.h): a fault on a simulated GPU loses the
// device for the process, as on a real one, so each case runs in a process
// of its own (a death test that re-runs this binary, and must exit with 0).
/// Faults `ctx` through the device work of an operation writing `a`.
void fault_device(const NDArray& a) {
  Engine::get().push({.name = "faulting kernel",
                      .ctx = a.context(),
                      .writes = {a.var()},
                      .fn = [](const RunContext& rc) {
                        rc.stream->enqueue_host(
                            [] { throw std::runtime_error("illegal address"); });
                      }});
}

/// True when `a`'s wait throws an OperationError mentioning the fault.
bool reports_fault(const NDArray& a) {
  try {
    a.wait_to_read();
  } catch (const OperationError& e) {
    return std::string(e.what()).find("illegal address") != std::string::npos;
  }
  return false;
}

/// True when `a`'s wait does not throw. (Reading its values would: a copy
/// from a lost device fails, as on a real GPU.)
bool waits_cleanly(const NDArray& a) {
  try {
    a.wait_to_read();
    return true;
  } catch (const Error&) {
    return false;
  }
}

/// Exits with 0 when every check held, else prints the first that did not.
void check_in_child(std::initializer_list<std::pair<const char*, bool>> checks) {
  for (const auto& [what, held] : checks) {
    if (!held) {
      std::fprintf(stderr, "failed: %s\n", what);
      std::exit(1);
    }
  }
  std::exit(0);
}

TEST(DeviceFaultTest, ReachesCopiesToTheHostReadersAndLaterWork) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (Context ctx : {gpu(0), gpu(1)}) {
    EXPECT_EXIT(
        {
          NDArray before = ones({3}, DType::kFloat32, ctx);
          before.wait_to_read();
          NDArray a = ones({4}, DType::kFloat32, ctx);
          fault_device(a);
          NDArray on_host = a.copyto(cpu(0));                   // through the copy stream
          NDArray on_cpu_reader = on_host + 1;                  // a CPU operation after it
          NDArray on_other_gpu = a.copyto(gpu(1 - ctx.index));  // a healthy device
          NDArray later = ones({2}, DType::kFloat32, ctx);      // unrelated, same device
          // wait_for_all first: nothing has reported the fault yet (a wait
          // that rethrew it would have: Note [Errors seen by wait_for_all]).
          bool wait_for_all_threw = false;
          try {
            Engine::get().wait_for_all();
          } catch (const OperationError&) {
            wait_for_all_threw = true;
          }
          bool to_vector_threw = false;
          try {
            static_cast<void>(a.to_vector<float>());
          } catch (const OperationError&) {
            to_vector_threw = true;
          }
          check_in_child({{"the faulting operation's output", reports_fault(a)},
                          {"a copy to the host", reports_fault(on_host)},
                          {"a CPU reader of that copy", reports_fault(on_cpu_reader)},
                          {"a copy to the other GPU", reports_fault(on_other_gpu)},
                          {"later work on the lost device", reports_fault(later)},
                          {"to_vector", to_vector_threw},
                          {"wait_for_all", wait_for_all_threw},
                          {"work finished before the fault", waits_cleanly(before)}});
        },
        ::testing::ExitedWithCode(0), "")
        << ctx;
  }
}

TEST(DeviceFaultTest, AStaleLaunchFailureFailsTheNextKernelUnlessItWasChecked) {
  // The last-error slot of Note [Simulated CUDA rules]: a failure whose
  // status nobody cleared is what the next launch check on that worker sees.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        NDArray x = ones({4}, DType::kFloat32, gpu(0));
        x.wait_to_read();
        // Planted: a device call whose failure is ignored on gpu(0)'s worker.
        NDArray marker = zeros({1}, DType::kFloat32, gpu(0));
        Engine::get().push(
            {.name = "unchecked call",
             .ctx = gpu(0),
             .writes = {marker.var()},
             .fn = [](const RunContext&) { static_cast<void>(detail::sim::set_device(99)); }});
        NDArray y = x + 1;  // a healthy kernel, on the same worker
        bool stale_failure_reported = false;
        try {
          y.wait_to_read();
        } catch (const OperationError& e) {
          stale_failure_reported =
              std::string(e.what()).find("invalid device ordinal") != std::string::npos;
        }
        NDArray z = x + 2;  // the check cleared the slot: the next kernel runs
        check_in_child(
            {{"the stale failure reaches the next launch", stale_failure_reported},
             {"the launch after it runs", z.to_vector<float>() == std::vector<float>(4, 3.f)}});
      },
      ::testing::ExitedWithCode(0), "");
}

/// Polls until the bytes in use of `ctx` are back to `in_use` (freed arrays
/// return their memory once their operations finish, asynchronously).
bool wait_for_in_use(Context ctx, std::uint64_t in_use) {
  for (int i = 0; i < 5000 && memory_stats(ctx).in_use != in_use; ++i) {
    std::this_thread::sleep_for(1ms);
  }
  return memory_stats(ctx).in_use == in_use;
}

TEST(NDArrayTest, ArrayMemoryReturnsToTheDevicePoolAndIsReused) {
  const Context ctx = gpu(1);
  Engine::get().wait_for_all();
  const MemoryStats start = memory_stats(ctx);
  auto iterations = [ctx] {
    for (int i = 0; i < 100; ++i) {
      NDArray x = zeros({1000}, DType::kFloat32, ctx);
      NDArray y = x + 1;
      y.wait_to_read();  // a training loop that logs each step
    }
  };
  // All blocks come back, and the next pass reuses them. (Without the
  // waits the host runs ahead of the device by a varying amount, and so
  // does the number of blocks alive at once.)
  iterations();
  ASSERT_TRUE(wait_for_in_use(ctx, start.in_use));
  const MemoryStats warm = memory_stats(ctx);
  EXPECT_EQ(warm.allocations - start.allocations, 200u);
  EXPECT_GT(warm.cached, 0u);
  iterations();
  ASSERT_TRUE(wait_for_in_use(ctx, start.in_use));
  const MemoryStats steady = memory_stats(ctx);
  EXPECT_EQ(steady.allocations - warm.allocations, 200u);
  EXPECT_EQ(steady.device_allocations, warm.device_allocations)
      << "a repeated loop must be served from the cache";
  EXPECT_GE(steady.peak, steady.in_use + 2 * 4000);
}

TEST(NDArrayTest, OutOfMemoryOnASimulatedGpuSaysWhyAndLosesNothing) {
  const Context ctx = gpu(0);
  Engine::get().wait_for_all();
  empty_cache(ctx);
  const MemoryStats start = memory_stats(ctx);
  set_memory_limit(ctx, start.in_use + (8u << 20));      // 8 MiB more than now
  NDArray kept = ones({1 << 20}, DType::kFloat32, ctx);  // 4 MiB
  try {
    NDArray too_big = zeros({3 << 20}, DType::kFloat32, ctx);  // 12 MiB
    ADD_FAILURE() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.device(), ctx);
    EXPECT_EQ(e.requested(), 12u << 20);
    const std::string text = e.what();
    EXPECT_NE(text.find("out of memory on gpu(0): tried to allocate 12.0 MiB"), std::string::npos)
        << text;
    EXPECT_NE(text.find("limit"), std::string::npos) << text;
  }
  EXPECT_EQ(kept.to_vector<float>()[12345], 1.f);  // nothing lost
  set_memory_limit(ctx, 0);
  NDArray fits_now = zeros({3 << 20}, DType::kFloat32, ctx);
  EXPECT_EQ(fits_now.to_vector<float>()[7], 0.f);
}

}  // namespace
}  // namespace tagflow

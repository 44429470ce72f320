#pragma once
// A watchdog for concurrency tests: a deadlocked engine cannot be abandoned
// safely, so a body that overruns its time aborts the test binary with a
// message naming the test, and ctest reports the failure instead of hanging.

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

namespace tagflow::testing {

template <typename Body>
void run_with_timeout(std::chrono::seconds limit, Body&& body) {
  std::mutex mutex;
  std::condition_variable cv;
  bool finished = false;
  std::thread watchdog([&] {
    std::unique_lock lock(mutex);
    if (!cv.wait_for(lock, limit, [&] { return finished; })) {
      const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
      std::fprintf(stderr, "\nWATCHDOG: %s.%s did not finish within %llds (deadlock?)\n",
                   info ? info->test_suite_name() : "?", info ? info->name() : "?",
                   static_cast<long long>(limit.count()));
      std::fflush(stderr);
      std::abort();
    }
  });
  try {
    body();
  } catch (...) {
    {
      std::lock_guard lock(mutex);
      finished = true;
    }
    cv.notify_one();
    watchdog.join();
    throw;
  }
  {
    std::lock_guard lock(mutex);
    finished = true;
  }
  cv.notify_one();
  watchdog.join();
}

}  // namespace tagflow::testing

// Which waits report an error (Note [Errors seen by wait_for_all] in
// engine/detail/error_report.h), on every engine: a wait on what failed
// rethrows the error each time it is asked and marks it seen; wait_for_all
// reports only errors no wait has rethrown; the warning at exit names only
// an error nothing reported. Checked with several threads waiting at once.

#include <atomic>
#include <chrono>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "engine/engine.h"
#include "engine/error.h"
#include "tests/engine/engine_fixture.h"
#include "tests/engine/watchdog.h"

namespace tagflow {
namespace {

using namespace std::chrono_literals;
using testing::EngineTest;
using testing::run_with_timeout;

/// What the default logger writes while it lives.
class CapturedLog {
 public:
  CapturedLog() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)) {
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  ~CapturedLog() {
    auto& sinks = spdlog::default_logger()->sinks();
    std::erase(sinks, sink_);
  }
  std::string text() {
    spdlog::default_logger()->flush();
    return text_.str();
  }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

class ErrorReportTest : public EngineTest {
 protected:
  /// Pushes an operation writing `var` that throws `message`.
  void fail(VarHandle var, const std::string& message) {
    engine_->push(
        {.name = "failing", .ctx = cpu(0), .writes = {var}, .fn = [message](const RunContext&) {
           throw std::runtime_error(message);
         }});
  }
  /// Pushes an operation that succeeds, writing `var`.
  void succeed(VarHandle var) {
    engine_->push(
        {.name = "healthy", .ctx = cpu(1), .writes = {var}, .fn = [](const RunContext&) {}});
  }
  /// The message of what `call` throws, or "" when it throws nothing.
  template <typename Call>
  static std::string error_of(Call call) {
    try {
      call();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }
  static bool mentions(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  }
};

TEST_P(ErrorReportTest, AnErrorCaughtFromAWaitIsNotReportedAgain) {
  CapturedLog log;
  run_with_timeout(30s, [&] {
    VarHandle failed = engine_->new_var();
    VarHandle other = engine_->new_var();
    fail(failed, "caught once");
    EXPECT_TRUE(mentions(error_of([&] { engine_->wait_to_read(failed); }), "caught once"));
    // Asked again, the variable still answers.
    EXPECT_TRUE(mentions(error_of([&] { engine_->wait_to_write(failed); }), "caught once"));
    succeed(other);  // only healthy work since
    EXPECT_EQ(error_of([&] { engine_->wait_for_all(); }), "");
    EXPECT_TRUE(mentions(error_of([&] { engine_->wait_to_read(failed); }), "caught once"));
    engine_->delete_var(failed);
    engine_->delete_var(other);
  });
  engine_.reset();
  EXPECT_FALSE(mentions(log.text(), "never waited for")) << log.text();
}

TEST_P(ErrorReportTest, AnErrorCaughtFromAHandleIsNotReportedAgain) {
  CapturedLog log;
  run_with_timeout(30s, [&] {
    VarHandle out = engine_->new_var();
    OperationHandle handle = engine_->push_tracked(
        {.name = "failing", .ctx = cpu(0), .writes = {out}, .fn = [](const RunContext&) {
           throw std::runtime_error("through a handle");
         }});
    EXPECT_TRUE(mentions(error_of([&] { handle.wait(); }), "through a handle"));
    EXPECT_EQ(error_of([&] { engine_->wait_for_all(); }), "");
    engine_->delete_var(out);
  });
  engine_.reset();
  EXPECT_FALSE(mentions(log.text(), "never waited for")) << log.text();
}

TEST_P(ErrorReportTest, WaitForAllReportsTheFirstErrorNoWaitSaw) {
  run_with_timeout(30s, [&] {
    VarHandle first = engine_->new_var();
    VarHandle second = engine_->new_var();
    VarHandle inherits = engine_->new_var();
    fail(first, "first failure");
    // Skipped, and carrying the first failure: the same error, not a new one.
    engine_->push({.name = "reader",
                   .ctx = cpu(1),
                   .reads = {first},
                   .writes = {inherits},
                   .fn = [](const RunContext&) {}});
    EXPECT_TRUE(mentions(error_of([&] { engine_->wait_to_read(first); }), "first failure"));
    fail(second, "second failure");
    const std::string reported = error_of([&] { engine_->wait_for_all(); });
    EXPECT_TRUE(mentions(reported, "second failure")) << reported;
    EXPECT_EQ(error_of([&] { engine_->wait_for_all(); }), "");
    EXPECT_TRUE(mentions(error_of([&] { engine_->wait_to_read(inherits); }), "first failure"));
    for (VarHandle v : {first, second, inherits}) engine_->delete_var(v);
  });
}

TEST_P(ErrorReportTest, AnErrorNobodyWaitedOnIsReportedOnceAndWarnedAtExit) {
  CapturedLog log;
  run_with_timeout(30s, [&] {
    VarHandle failed = engine_->new_var();
    fail(failed, "unwaited");
    EXPECT_TRUE(mentions(error_of([&] { engine_->wait_for_all(); }), "unwaited"));
    EXPECT_EQ(error_of([&] { engine_->wait_for_all(); }), "");
    fail(failed, "left at exit");
    engine_->delete_var(failed);
  });
  engine_.reset();
  const std::string text = log.text();
  EXPECT_TRUE(mentions(text, "never waited for")) << text;
  EXPECT_TRUE(mentions(text, "left at exit")) << text;
  EXPECT_FALSE(mentions(text, "unwaited")) << text;
}

TEST_P(ErrorReportTest, ThreadsWaitingOnTheFailureEachSeeItAndWaitForAllDoesNot) {
  CapturedLog log;
  run_with_timeout(60s, [&] {
    constexpr int kRounds = 20;
    constexpr int kReaders = 3;
    constexpr int kAllWaiters = 3;
    for (int round = 0; round < kRounds; ++round) {
      VarHandle failed = engine_->new_var();
      VarHandle healthy = engine_->new_var();
      fail(failed, "seen by every reader");
      std::atomic<int> saw{0};
      std::vector<std::thread> readers;
      for (int r = 0; r < kReaders; ++r) {
        readers.emplace_back([&] {
          if (mentions(error_of([&] { engine_->wait_to_read(failed); }), "every reader")) {
            saw.fetch_add(1);
          }
        });
      }
      for (std::thread& t : readers) t.join();
      EXPECT_EQ(saw.load(), kReaders) << "round " << round;
      succeed(healthy);
      std::atomic<int> reported{0};
      std::vector<std::thread> all_waiters;
      for (int w = 0; w < kAllWaiters; ++w) {
        all_waiters.emplace_back([&] {
          if (!error_of([&] { engine_->wait_for_all(); }).empty()) reported.fetch_add(1);
        });
      }
      for (std::thread& t : all_waiters) t.join();
      EXPECT_EQ(reported.load(), 0) << "round " << round << ": a seen error came back";
      engine_->delete_var(failed);
      engine_->delete_var(healthy);
    }
  });
  engine_.reset();
  EXPECT_FALSE(mentions(log.text(), "never waited for")) << log.text();
}

INSTANTIATE_TEST_SUITE_P(Engines, ErrorReportTest, testing::engine_params(),
                         testing::engine_param_name);

}  // namespace
}  // namespace tagflow

// A program that returns from main while an operation never completes (an
// asynchronous operation whose Completion is kept and never called): the
// exit hook gives up once nothing has completed for TAGFLOW_EXIT_TIMEOUT
// seconds, logs what is stuck, and the process exits with main's status
// instead of hanging (Note [Engine lifetime] in engine/engine.h). With
// TAGFLOW_EXIT_TIMEOUT=0 it does not wait at all.
//
// Run without arguments, it runs each case as a child process of its own
// and checks how and when it ended.

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "tagflow/tagflow.h"
#include "tests/engine/lifecycle/lifecycle.h"

using namespace tagflow;
using namespace std::chrono_literals;

namespace {

/// The stuck operation's Completion: made before the engine, so destroyed
/// after the exit hook, which fails the operation then.
std::optional<Completion> never_called;
std::atomic<bool> started{false};

NDArray x;
NDArray y;

int return_with_a_stuck_operation() {
  x = ones({4});
  Engine::get().push({.name = "never completes",
                      .ctx = cpu(0),
                      .writes = {x.var()},
                      .fn = [](const RunContext&, Completion c) {
                        never_called.emplace(std::move(c));
                        started.store(true, std::memory_order_release);
                      }});
  y = x + 1.0;  // queued behind it
  while (!started.load(std::memory_order_acquire)) std::this_thread::sleep_for(1ms);
  return 0;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--case") return return_with_a_stuck_operation();

  // Gives up after about a second, naming the operation.
  const std::string log = "exit_with_stuck_operation.log";
  lifecycle::Ended ended =
      lifecycle::run_self({"--case"}, {"TAGFLOW_EXIT_TIMEOUT=1", "TAGFLOW_SIM_GPUS=0"}, log, 60s);
  std::string output = lifecycle::read_file(log);
  LIFECYCLE_CHECK(ended.exited_with(0), ended.describe() + "; its standard error:\n" + output);
  LIFECYCLE_CHECK(ended.seconds >= 1.0 && ended.seconds < 30,
                  "expected to give up after 1 s, " + ended.describe());
  LIFECYCLE_CHECK(contains(output, "TAGFLOW_EXIT_TIMEOUT") && contains(output, "never completes"),
                  "expected the stuck operation named in the log, got:\n" + output);
  std::printf("TAGFLOW_EXIT_TIMEOUT=1: %s\n", ended.describe().c_str());

  // Does not wait.
  ended =
      lifecycle::run_self({"--case"}, {"TAGFLOW_EXIT_TIMEOUT=0", "TAGFLOW_SIM_GPUS=0"}, log, 60s);
  output = lifecycle::read_file(log);
  LIFECYCLE_CHECK(ended.exited_with(0), ended.describe() + "; its standard error:\n" + output);
  LIFECYCLE_CHECK(ended.seconds < 5, "expected no wait at exit, " + ended.describe());
  LIFECYCLE_CHECK(!contains(output, "TAGFLOW_EXIT_TIMEOUT"),
                  "expected no message, got:\n" + output);
  std::printf("TAGFLOW_EXIT_TIMEOUT=0: %s\n", ended.describe().c_str());
  return 0;
}

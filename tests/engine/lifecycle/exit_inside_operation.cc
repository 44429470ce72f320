// A program that calls exit() from inside an engine operation (an error
// handler in its closure) while other operations are pending: the process
// must end with that status, promptly, and the operations not yet started
// must not run while the statics they use are destroyed (Note [Engine
// lifetime] in engine/engine.h).
//
// Run without arguments, it runs each case as a child process of its own
// (this program again, with the case's name and environment), waits for it
// with a time limit and checks how it ended.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/stream.h"
#include "tagflow/tagflow.h"
#include "tests/engine/lifecycle/lifecycle.h"

using namespace tagflow;
using namespace std::chrono_literals;

namespace {

/// Operations pushed behind the one that exits that ran anyway.
std::atomic<int> ran_behind{0};
/// Set once the main thread has pushed everything and only waits: exit()
/// while another thread still calls into a library (its logging, say)
/// would destroy statics under it, in any program.
std::atomic<bool> all_pushed{false};
void wait_until_all_pushed() {
  while (!all_pushed.load()) std::this_thread::sleep_for(1ms);
}

/// Made first, destroyed last: a teardown that takes its time (flushing
/// logs, say), during which stray operations would run on destroyed statics.
struct SlowTeardown {
  ~SlowTeardown() {
    std::this_thread::sleep_for(300ms);
    if (ran_behind.load() != 0) {
      std::fprintf(stderr, "exit_inside_operation: %d operation(s) ran after exit() began\n",
                   ran_behind.load());
      std::_Exit(3);
    }
  }
} slow_teardown;

// Statics the pending operations use; destroyed during exit.
std::vector<int> written;
NDArray a;
NDArray b;

/// Pushes `count` operations writing `var` on `ctx` that append to `written`.
void push_behind(Context ctx, VarHandle var, int count) {
  for (int i = 0; i < count; ++i) {
    Engine::get().push({.name = "behind", .ctx = ctx, .writes = {var}, .fn = [](const RunContext&) {
                          ran_behind.fetch_add(1);
                          written.push_back(1);
                        }});
  }
}

/// The closure's error handler: what a service does when a batch is broken.
[[noreturn]] void fail_and_exit(int status) {
  wait_until_all_pushed();
  try {
    throw std::runtime_error("corrupt batch");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exit_inside_operation: %s; exiting with status %d\n", e.what(), status);
    std::exit(status);
  }
}

/// exit(42) from an operation on cpu(0); a slow operation on cpu(1) ends
/// after exit() began, with 100 operations queued behind each.
int exit_on_cpu_worker() {
  Engine& engine = Engine::get();
  a = ones({256});
  b = zeros({256});
  engine.push({.name = "slow", .ctx = cpu(1), .writes = {b.var()}, .fn = [](const RunContext&) {
                 wait_until_all_pushed();
                 std::this_thread::sleep_for(150ms);
               }});
  push_behind(cpu(1), b.var(), 100);
  engine.push(
      {.name = "load batch", .ctx = cpu(0), .writes = {a.var()}, .fn = [](const RunContext&) {
         fail_and_exit(42);
       }});
  push_behind(cpu(0), a.var(), 100);
  const NDArray c = a + b;
  all_pushed.store(true);
  engine.wait_for_all();  // does not return: the process exits from the operation
  return 1;
}

/// exit(43) from device work on a simulated GPU's stream thread, with
/// device work and CPU operations queued behind it.
int exit_in_device_work() {
  Engine& engine = Engine::get();
  a = ones({256}, DType::kFloat32, gpu(0));
  engine.push(
      {.name = "kernel", .ctx = gpu(0), .writes = {a.var()}, .fn = [](const RunContext& rc) {
         rc.stream->enqueue_host([] { fail_and_exit(43); });
       }});
  // Behind it on the GPU, device work; on the CPU, operations that wait
  // for the device work to finish.
  for (int i = 0; i < 100; ++i) {
    engine.push(
        {.name = "behind", .ctx = gpu(0), .writes = {a.var()}, .fn = [](const RunContext& rc) {
           rc.stream->enqueue_host([] {
             ran_behind.fetch_add(1);
             written.push_back(1);
           });
         }});
  }
  push_behind(cpu(0), a.var(), 100);
  all_pushed.store(true);
  engine.wait_for_all();
  return 1;
}

/// exit(44) from an operation of the naive engine, run by the pushing thread.
int exit_on_naive_engine() {
  a = ones({256});
  all_pushed.store(true);
  Engine::get().push(
      {.name = "load batch", .ctx = cpu(0), .writes = {a.var()}, .fn = [](const RunContext&) {
         fail_and_exit(44);
       }});
  return 1;
}

struct Case {
  const char* name;
  int (*run)();
  std::vector<std::string> env;
  int status;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"cpu-worker", exit_on_cpu_worker, {"TAGFLOW_CPU_WORKERS=2", "TAGFLOW_SIM_GPUS=0"}, 42},
      {"device-work", exit_in_device_work, {"TAGFLOW_SIM_GPUS=1"}, 43},
      {"naive-engine", exit_on_naive_engine, {"TAGFLOW_ENGINE=naive"}, 44},
  };
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--case") {
    for (const Case& c : cases()) {
      if (argv[2] == std::string(c.name)) return c.run();
    }
    LIFECYCLE_CHECK(false, std::string("unknown case ") + argv[2]);
  }
  for (const Case& c : cases()) {
    const std::string log = std::string("exit_inside_operation.") + c.name + ".log";
    const lifecycle::Ended ended = lifecycle::run_self({"--case", c.name}, c.env, log, 30s);
    LIFECYCLE_CHECK(ended.exited_with(c.status),
                    std::string(c.name) + ": expected status " + std::to_string(c.status) + ", " +
                        ended.describe() + "; its standard error:\n" + lifecycle::read_file(log));
    std::printf("%s: %s\n", c.name, ended.describe().c_str());
  }
  return 0;
}

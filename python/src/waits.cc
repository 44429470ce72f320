// Waits from Python: with the GIL released, and interruptible by Ctrl-C.

#include <chrono>
#include <condition_variable>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#include "bindings.h"

namespace tagflow::python {
namespace {

// Note [Waiting from Python]
// A wait blocks in C++ with the GIL released, so that other Python threads
// (a DataLoader's workers) run meanwhile. Python runs signal handlers only on
// its main thread and only between bytecodes: a wait blocked in the engine
// would hold Ctrl-C back until the awaited operations finished, which for a
// hung operation is never. So on the main thread a wait sleeps in slices of
// 50 ms and runs PyErr_CheckSignals between them: Ctrl-C raises
// KeyboardInterrupt at once, the engine's operations go on, and nothing the
// wait was about changes. Waiting on an array in slices needs something to
// poll: the wait pushes an operation that only reads the array (on cpu(0);
// it completes when wait_to_read would return) and polls its handle. The
// probe runs first among the ready operations of cpu(0) (the highest
// priority), so that the host wakes when the array is done, not after the
// queue of work pushed since. Other threads never get signals and wait
// directly.

constexpr auto kSlice = std::chrono::milliseconds(50);

std::thread::id main_thread_id;

struct DoneSignal {
  std::mutex mutex;
  std::condition_variable changed;
  bool done = false;
  std::exception_ptr error;

  void set(std::exception_ptr e) {
    {
      std::lock_guard lock(mutex);
      done = true;
      error = std::move(e);
    }
    changed.notify_all();
  }
};

/// Sleeps until `signal` is set, a slice at a time, raising
/// KeyboardInterrupt (or what a signal handler raised) between slices.
void wait_in_slices(DoneSignal& signal) {
  for (;;) {
    {
      py::gil_scoped_release released;
      std::unique_lock lock(signal.mutex);
      if (signal.changed.wait_for(lock, kSlice, [&] { return signal.done; })) return;
    }
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
}

bool on_main_thread() { return std::this_thread::get_id() == main_thread_id; }

}  // namespace

void wait_to_read(const NDArray& array) {
  if (on_main_thread()) {
    auto signal = std::make_shared<DoneSignal>();
    OperationHandle probe = Engine::get().push_tracked({.name = "python wait",
                                                        .ctx = cpu(0),
                                                        .reads = {array.var()},
                                                        .priority = std::numeric_limits<int>::max(),
                                                        .fn = [](const RunContext&) {}});
    probe.on_done([signal](std::exception_ptr e) { signal->set(std::move(e)); });
    wait_in_slices(*signal);
  }
  // Done (or on another thread): returns at once, or rethrows the error
  // stored on the array, as wait_to_read does.
  py::gil_scoped_release released;
  array.wait_to_read();
}

void wait_for_all() {
  if (!on_main_thread()) {
    py::gil_scoped_release released;
    Engine::get().wait_for_all();
    return;
  }
  // A waiter thread, which outlives an interrupted wait and keeps the
  // signal alive until it returns.
  auto signal = std::make_shared<DoneSignal>();
  std::thread([signal] {
    std::exception_ptr error;
    try {
      Engine::get().wait_for_all();
    } catch (...) {
      error = std::current_exception();
    }
    signal->set(error);
  }).detach();
  wait_in_slices(*signal);
  if (signal->error) std::rethrow_exception(signal->error);
}

void bind_waits(py::module_& m) {
  main_thread_id = std::this_thread::get_id();
  py::module_ threading = py::module_::import("threading");
  if (!threading.attr("current_thread")().is(threading.attr("main_thread")())) {
    // Imported first from another thread: no wait is treated as the main
    // thread's, so none is interruptible, and none is wrong.
    main_thread_id = std::thread::id();
  }
  m.def("waitall", &wait_for_all, R"doc(
Waits for every operation pushed so far, then raises the first error one of
them raised since the last waitall (as MXNet's nd.waitall()).)doc");
}

}  // namespace tagflow::python

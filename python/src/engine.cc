// The engine seen from Python: its configuration, and the profiler.

#include <memory>
#include <mutex>
#include <string>

#include "bindings.h"
#include "tools/info_text.h"

namespace tagflow::python {

bool engine_runs_inline() {
  static const bool inline_engine = Engine::get().config().kind == EngineKind::kNaive;
  return inline_engine;
}

void bind_engine(py::module_& m) {
  py::module_ engine = m.def_submodule("engine", "The engine's configuration (tagflow.engine).");
  engine.def(
      "kind",
      [] { return Engine::get().config().kind == EngineKind::kNaive ? "naive" : "threaded"; },
      "The engine in use: 'threaded' or 'naive' (TAGFLOW_ENGINE).");
  m.def(
      "info",
      [] {
        std::string text = tools::info_text();
        text +=
            fmt::format("  {:<20} {}\n", "MPI", "in libtagflow_dist, which Python does not load");
        return text;
      },
      "What `tagflow info` prints: devices, configuration (environment) and build.");
  engine.def(
      "device_status", [] { return Engine::get().device_status(); },
      "The GPUs present, real or simulated, in words.");

  py::module_ profiler = m.def_submodule("profiler", "The engine's profiler (tagflow.profiler).");
  // One recording scope for the Python side, started and stopped by calls
  // rather than by a C++ block.
  static std::mutex scope_mutex;
  static std::unique_ptr<profiler::Scope> scope;
  profiler.def(
      "start",
      [] {
        std::lock_guard lock(scope_mutex);
        if (!scope) scope = std::make_unique<profiler::Scope>();
      },
      "Starts recording every operation (the profiler's state 'run').");
  profiler.def(
      "stop",
      [] {
        std::lock_guard lock(scope_mutex);
        scope.reset();
      },
      "Stops recording; what was recorded is kept until clear().");
  profiler.def("enabled", &profiler::enabled, "True while the profiler records.");
  profiler.def("clear", &profiler::clear, "Drops everything recorded so far.");
  profiler.def(
      "write_chrome_trace",
      [](const std::string& path) {
        py::gil_scoped_release released;
        profiler::write_chrome_trace(profiler::collect(), path);
      },
      py::arg("path"), "Writes what was recorded so far as a Chrome trace (JSON).");
}

}  // namespace tagflow::python

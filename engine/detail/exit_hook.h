#pragma once
// The process-wide engine's exit hook, registered again after statics that a
// kernel library makes lazily (Note [Engine lifetime] in engine.h). Internal
// to the library.

namespace tagflow::detail {

/// Registers the process-wide engine's exit hook once more (starting the
/// engine), so that at exit it waits for the work pending before anything
/// registered with std::atexit until now is destroyed. Called once a kernel
/// library has made the statics it makes on first use (oneDNN's JIT kernels
/// are function statics, destroyed at exit before a hook registered earlier
/// runs: while a worker may still be multiplying). Whichever registration
/// runs first waits; the other then does nothing. Safe to call from several
/// threads, never from inside an operation that exit() may run from.
void register_exit_hook_again();

}  // namespace tagflow::detail

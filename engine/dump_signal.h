#pragma once
// A signal that makes a running program print what its engine is doing:
//
//   kill -USR1 <pid>    # the dependency state of every pending operation
//                       # appears on the program's standard error
//
// The process-wide engine installs it when it starts (TAGFLOW_DUMP_SIGNAL,
// SIGUSR1 by default), unless the program already handles that signal.
//
// Threads: safe to call concurrently. install_dump_signal() takes a lock.

namespace tagflow {

/// Makes `signal` print Engine::get().dependency_state() to standard error.
/// The handler only wakes a thread of its own, which takes the snapshot and
/// writes it, so the signal may arrive at any moment. Returns false, and
/// changes nothing, when the program already has a handler for `signal` or
/// ignores it; true when installed (or installed before).
bool install_dump_signal(int signal);

/// How many dumps the signal thread has written so far (for tests).
int dump_signal_count();

}  // namespace tagflow

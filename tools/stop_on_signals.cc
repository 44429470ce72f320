#include "tools/stop_on_signals.h"

namespace tagflow::tools {

// Note [Stopping at a batch boundary]
// With a checkpoint directory, SIGINT and SIGTERM only set a flag (the
// handler does nothing else, as a handler must); the training loop reads
// it before each batch, writes a checkpoint there and stops. Across
// processes a signal does not reach every rank at the same batch, and a
// rank that stopped alone would leave the others waiting in a collective:
// there the flag is summed over processes with the epoch's figures, and
// all ranks stop together at the end of the epoch, after its checkpoint.
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void request_stop(int signal) { g_stop_signal = signal; }

}  // namespace

StopOnSignals::StopOnSignals(bool active) : active_(active) {
  if (!active_) return;
  g_stop_signal = 0;
  struct sigaction action {};
  action.sa_handler = request_stop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous_int_);
  sigaction(SIGTERM, &action, &previous_term_);
}

StopOnSignals::~StopOnSignals() {
  if (!active_) return;
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
}

int StopOnSignals::requested() const { return active_ ? static_cast<int>(g_stop_signal) : 0; }

}  // namespace tagflow::tools

#pragma once
// StopOnSignals: SIGINT and SIGTERM turned into a request that the training
// loop reads at its next batch (Note [Stopping at a batch boundary]).

#include <csignal>

namespace tagflow::tools {

/// Sets a handler for SIGINT and SIGTERM that only records the signal,
/// while it lives (when `active`), then puts the previous handlers back.
class StopOnSignals {
 public:
  explicit StopOnSignals(bool active);
  ~StopOnSignals();
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

  /// The signal received since the object was made, or 0.
  int requested() const;

 private:
  bool active_;
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
};

}  // namespace tagflow::tools

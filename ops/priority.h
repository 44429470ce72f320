#pragma once
// PriorityScope: the engine priority of the operators a thread pushes.
//
//   {
//     PriorityScope urgent(kCommunicationPriority);
//     grad.copyto(buffer);   // runs before the ready ordinary operations of its device
//     total += buffer;
//   }
//
// Every operator (and copy) is an engine operation with a priority: among the
// ready operations of a device, the higher one runs first. Outside any scope
// it is 0. Scopes nest, the innermost wins, and each thread has its own.
//
// Threads: one thread at a time. A PriorityScope holds for the thread that
// made it and ends there; current_priority() answers for the calling thread.

namespace tagflow {

/// The priority of gradient aggregation and other communication that the
/// rest of a step waits for (Note [Aggregating as gradients become ready] in
/// nn/dist/gradient_aggregator.h).
inline constexpr int kCommunicationPriority = 100;

class PriorityScope {
 public:
  explicit PriorityScope(int priority);
  ~PriorityScope();
  PriorityScope(const PriorityScope&) = delete;
  PriorityScope& operator=(const PriorityScope&) = delete;

 private:
  int previous_;
};

/// The priority the calling thread's operators are pushed with.
int current_priority();

}  // namespace tagflow

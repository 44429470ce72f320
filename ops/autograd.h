#pragma once
// Autograd: operators run while recording remember how to map their
// output's gradient to their inputs'; backward() walks that graph from a
// head and pushes the gradient computations to the engine like any other
// operators, so the backward pass of one device overlaps work elsewhere.
//
//   NDArray w = random::normal(0, 0.1, {10, 4});
//   w.attach_grad();                         // w.grad(): zeros, written by backward
//   {
//     auto recording = autograd::record();   // `with autograd.record():`
//     NDArray loss = sum(square(dot(x, w) - y));
//     loss.backward();                       // w.grad() = d loss / d w
//   }
//
// Threads: one thread at a time. A RecordScope (record(), pause()) holds for
// the thread that made it and ends there; is_recording() and is_training()
// answer for the calling thread. A recorded graph belongs to one thread at a
// time, since backward() frees it. Threads may record through the same
// leaves at once and each run backward on its own graph: a kWrite gradient
// then holds the last one pushed, a kAdd gradient their sum.
//
// Note [The recorded graph]
// Recording is per thread. An operator records a node when recording is on
// and one of its inputs needs a gradient (a leaf with attach_grad, or the
// output of a recorded operator). The node holds the producers of its inputs
// and a closure from the output's gradient to one gradient per input; the
// closure keeps the arrays it needs alive. A leaf's node holds its gradient
// array and how to update it: kWrite overwrites it on each backward, kAdd
// accumulates. backward() visits the nodes reachable from the head in
// reverse topological order, sums the gradients reaching each node, and
// frees the graph afterwards unless asked to retain it. In-place operators
// (`+=`) on arrays that need a gradient are refused while recording.

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "ops/ndarray.h"

namespace tagflow {

namespace autograd {

/// While alive, the calling thread records operators (and is in training
/// mode when `train_mode`, which dropout and batch norm read). Scopes nest.
class RecordScope {
 public:
  RecordScope(bool recording, bool training);
  ~RecordScope();
  RecordScope(const RecordScope&) = delete;
  RecordScope& operator=(const RecordScope&) = delete;

 private:
  bool saved_recording_;
  bool saved_training_;
};

/// `with autograd.record():`: records, in training mode by default.
[[nodiscard]] RecordScope record(bool train_mode = true);
/// `with autograd.pause():`: stops recording inside a recorded block.
[[nodiscard]] RecordScope pause(bool train_mode = false);
bool is_recording();
bool is_training();

/// Computes the gradients of `head` with respect to every leaf it depends
/// on. `head_grad` defaults to ones of head's shape. The graph is freed
/// afterwards unless `retain_graph`.
void backward(const NDArray& head, const NDArray& head_grad = NDArray(), bool retain_graph = false);

/// The gradients of `head` with respect to `variables` (arrays marked by
/// attach_grad), returned, in order, instead of written: no leaf's grad()
/// changes, `variables`' or any other's (MXNet's autograd.grad). A variable
/// the head does not depend on gets zeros. Throws for a variable that was
/// never marked, or marked again after the recording (a new leaf).
std::vector<NDArray> grad(const NDArray& head, std::span<const NDArray> variables,
                          const NDArray& head_grad = NDArray(), bool retain_graph = false);

}  // namespace autograd

namespace detail {

/// Gradients of an operator's inputs, in input order, from its output's
/// gradient; an undefined array where an input needs none.
using BackwardFunction = std::function<std::vector<NDArray>(const NDArray& out_grad)>;

struct GradNode {
  const char* op = "leaf";
  /// Producers of the inputs; null where an input needs no gradient.
  std::vector<std::shared_ptr<GradNode>> inputs;
  BackwardFunction backward;
  /// Leaves only: the gradient buffer and how backward updates it.
  NDArray grad;
  GradReq req = GradReq::kNull;
};

/// True when the calling thread records (cheap: a thread-local flag).
bool recording();

/// When recording and an input needs a gradient, attaches to `out` a node
/// whose backward is `backward` (built only then: pass a callable that
/// makes it). Refuses in-place outputs of inputs needing gradients.
template <typename MakeBackward>
void record(const char* op, NDArray& out, std::initializer_list<const NDArray*> inputs,
            MakeBackward&& make_backward);
/// Same for a run of inputs (concat, stack).
void record_node(const char* op, NDArray& out, std::vector<std::shared_ptr<GradNode>> inputs,
                 BackwardFunction backward);
bool any_needs_grad(std::initializer_list<const NDArray*> inputs);

/// Throws unless `grads`, given by the backward of the user-defined `op`,
/// holds one gradient per input, each empty or of its input's shape, dtype
/// and context.
void check_user_gradients(const char* op, const std::vector<NDArray>& inputs,
                          const std::vector<NDArray>& grads);

/// Sums `grad` (the gradient of a broadcast result) down to `shape`: over
/// the leading axes it lacks and the axes where it has extent 1.
NDArray sum_to(const NDArray& grad, const Shape& shape);

template <typename MakeBackward>
void record(const char* op, NDArray& out, std::initializer_list<const NDArray*> inputs,
            MakeBackward&& make_backward) {
  if (!recording() || !any_needs_grad(inputs)) return;
  std::vector<std::shared_ptr<GradNode>> producers;
  for (const NDArray* in : inputs) producers.push_back(in->grad_node());
  record_node(op, out, std::move(producers), make_backward());
}

}  // namespace detail
}  // namespace tagflow

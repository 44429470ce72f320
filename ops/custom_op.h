#pragma once
// Custom operators: a kernel of your own, run through the engine on arrays
// exactly as a built-in operator runs (MXNet's CustomOp, PyTorch's
// torch.library ops). Define it once, as a value; calling it checks the
// inputs with the built-in operators' checks and wording, allocates the
// outputs, pushes the kernel tagged with what it reads and writes, records
// its gradient while autograd records, and returns at once.
//
//   const CustomOp swish({
//       .name = "swish",
//       .cpu = [](const KernelArgs& k) {            // y = x * sigmoid(x)
//         const float* x = k.inputs[0].data<float>();
//         float* y = k.outputs[0].data<float>();
//         for (std::int64_t i = 0; i < k.inputs[0].size(); ++i) y[i] = x[i] / (1 +
//         std::exp(-x[i]));
//       },
//       .backward = [](const GradientArgs& g) {     // dy/dx = s + y (1 - s)
//         NDArray s = sigmoid(g.inputs[0]);
//         return std::vector<NDArray>{g.output_grads[0] * (s + g.outputs[0] * (1.f - s))};
//       }});
//   NDArray y = swish(x);                           // on x's device
//
// Note [Where a custom kernel runs]
// On a CPU device the `cpu` function runs on a worker of that device. On a
// real GPU the `cuda` function runs on the device's worker with the compute
// stream in `KernelArgs::cuda_stream`: it enqueues its work there (its own
// kernels, cuBLAS or cuDNN calls after setting their stream) and returns;
// the engine records the stream's event after it, so successors and host
// reads wait for the work itself (Note [Completion on device queues] in
// DESIGN.md). On a simulated GPU the `cpu` function runs as that device's
// kernel, in stream order: an exception thrown there is a device fault, as
// a faulting kernel is on a real GPU (Note [Simulated CUDA rules] in
// engine/detail/sim_runtime.h), so a CPU-only operator runs on a simulated
// GPU as the built-in operators' CPU kernels do, without a `cuda` function.
// On a real GPU an operator without a `cuda` function (and on a simulated
// one, an operator whose `cpu` function is asynchronous) refuses the inputs
// unless `host_fallback` is set: it then copies them to cpu(0), runs the
// `cpu` function there and copies the outputs back (engine copies;
// gradients flow through them).
//
// Note [Custom operator shapes]
// A kernel walks its arrays by their sizes, so inputs of shapes it does not
// expect would make it read or write out of bounds on a worker. A
// definition therefore states how its inputs' shapes relate
// (`input_shapes`), and a call checks that before anything is allocated or
// pushed, with the built-in operators' wording: the same shape (the
// default), NumPy broadcasting (the default output then has the broadcast
// shape; the kernel reads each input by its own shape), or any shapes the
// `outputs` function accepts (it throws tagflow::Error for those it refuses).
//
// Threads: safe to call concurrently. A CustomOp is immutable once made, so
// one definition may be called from several threads at once; its functions
// (`outputs`, `backward`, the kernels) must then be safe to run concurrently
// too, as the kernels run on the device's workers anyway.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/operation.h"
#include "engine/operation_handle.h"
#include "ops/kernel_args.h"
#include "ops/ndarray.h"

namespace tagflow {

namespace detail {
struct CustomOpImpl;
}  // namespace detail

/// A kernel's host function. Built from either
///  - `void(const KernelArgs&)`: synchronous, finished when it returns; or
///  - `void(KernelArgs, Completion)`: asynchronous, finished when the
///    Completion is called, from any thread (its arguments are its own
///    copy; the arrays' memory stays valid until then). CPU devices only.
class CustomKernel {
 public:
  CustomKernel() = default;

  template <typename F, typename D = std::decay_t<F>,
            typename = std::enable_if_t<!std::is_same_v<D, CustomKernel>>>
  CustomKernel(F&& f) {  // NOLINT: implicit, so `.cpu = [](const KernelArgs&) {...}` reads well
    if constexpr (std::is_invocable_v<D&, KernelArgs, Completion>) {
      async_ = std::forward<F>(f);
    } else {
      static_assert(std::is_invocable_v<D&, const KernelArgs&>,
                    "a custom kernel takes (const KernelArgs&) or (KernelArgs, Completion)");
      sync_ = std::forward<F>(f);
    }
  }

  explicit operator bool() const { return sync_ || async_; }
  bool is_async() const { return static_cast<bool>(async_); }
  const std::function<void(const KernelArgs&)>& sync() const { return sync_; }
  const std::function<void(KernelArgs, Completion)>& async() const { return async_; }

 private:
  std::function<void(const KernelArgs&)> sync_;
  std::function<void(KernelArgs, Completion)> async_;
};

/// How a custom operator's inputs' shapes must relate (Note [Custom operator
/// shapes]); checked by every call before anything is pushed.
enum class InputShapes {
  kSame,       ///< every input has the first input's shape (the default)
  kBroadcast,  ///< NumPy broadcasting; the default output gets the broadcast shape
  kChecked,    ///< any shapes the `outputs` function accepts (it throws for the others)
};

/// The shape and dtype of one output.
struct OutputSpec {
  Shape shape;
  DType dtype = DType::kFloat32;
};

/// What a custom operator's backward receives. Arrays without history: the
/// backward runs outside recording, as a built-in operator's gradient does.
struct GradientArgs {
  std::vector<NDArray> inputs;
  std::vector<NDArray> outputs;
  /// One per output, of its shape; zeros for an output no gradient reached.
  std::vector<NDArray> output_grads;
};

/// The definition of a custom operator. Fields in the order they are read.
struct CustomOpDef {
  /// Shown in errors, traces and the profile ("swish").
  std::string name;
  /// How many input arrays it takes (at least one; they fix the device).
  int num_inputs = 1;
  /// The dtypes its inputs may have; every input has the same one.
  std::vector<DType> dtypes = {DType::kFloat32};
  /// How its inputs' shapes relate (Note [Custom operator shapes]).
  InputShapes input_shapes = InputShapes::kSame;
  /// Without a `cuda` function, run GPU calls on host copies instead of
  /// refusing them (Note [Where a custom kernel runs]).
  bool host_fallback = false;
  /// The outputs' shapes and dtypes from the inputs; unset: one output of
  /// the first input's shape (the broadcast shape under kBroadcast) and
  /// dtype. Required with InputShapes::kChecked, where it is the shape
  /// check: it throws tagflow::Error for inputs it refuses.
  std::function<std::vector<OutputSpec>(const std::vector<NDArray>& inputs)> outputs;
  /// The host kernel: CPU devices, simulated GPUs, host fallback. Required.
  CustomKernel cpu;
  /// The GPU kernel: enqueues its work on `cuda_stream` and returns.
  std::function<void(const KernelArgs&)> cuda;
  /// The gradients of the inputs (one per input, in order; an empty
  /// NDArray for an input without one) from GradientArgs, computed with
  /// NDArray operators or other custom operators. Unset: a backward that
  /// reaches the operator throws.
  std::function<std::vector<NDArray>(const GradientArgs&)> backward;
};

/// A custom operator: define it once, call it like a function.
class CustomOp {
 public:
  /// Throws tagflow::Error for a definition that cannot run: an empty name,
  /// fewer than one input, no accepted dtype, a float16 or bfloat16 one
  /// (operators do not take those yet), no `cpu` function, InputShapes::kChecked
  /// without an `outputs` function.
  explicit CustomOp(CustomOpDef def);

  /// Runs the operator on `inputs` (all on one device, of one accepted
  /// dtype, of shapes its `input_shapes` accepts) and returns its outputs,
  /// on the same device, at once. Throws tagflow::Error naming the operator
  /// for inputs it refuses, before anything is pushed.
  std::vector<NDArray> operator()(const std::vector<NDArray>& inputs) const;
  /// The one output of a one-output operator of one or two inputs.
  NDArray operator()(const NDArray& x) const;
  NDArray operator()(const NDArray& a, const NDArray& b) const;

  const std::string& name() const;

 private:
  /// The outputs of `inputs`, which must be exactly one.
  NDArray only_output(const std::vector<NDArray>& inputs) const;

  std::shared_ptr<const detail::CustomOpImpl> impl_;
};

/// An operation on arrays for the engine: your closure, run once every
/// earlier operation writing `reads`, or reading or writing `writes`, has
/// completed, on the device where the arrays live (MXNet's PushAsyncND).
/// The closure receives the RunContext (its stream on a GPU) and, if it
/// takes one, a Completion to call from any thread when it has finished.
///
///   NDArray out = zeros({4});
///   push_arrays({.name = "fill iota", .reads = {}, .writes = {out},
///                .fn = [p = out.data<float>()](const RunContext&) {
///                  for (int i = 0; i < 4; ++i) p[i] = float(i);
///                }});
struct ArrayOperation {
  /// Shown in errors and traces (kept for the process: name by kind).
  std::string_view name = "array operation";
  std::vector<NDArray> reads;
  std::vector<NDArray> writes;
  /// Unset: the calling thread's current priority (ops/priority.h).
  std::optional<int> priority;
  QueueKind queue = QueueKind::kCompute;
  OpFunction fn;
};

/// Pushes `op` on the device of its arrays (all on one device, at least one
/// array) and returns a handle to wait on, poll or attach a callback to. An
/// exception thrown by the closure, or passed to Completion::fail, is
/// stored on the arrays it writes and rethrown by their waits.
OperationHandle push_arrays(ArrayOperation op);

}  // namespace tagflow

#pragma once
// autograd::Function: a function built from existing operators whose
// gradient you write yourself (MXNet's autograd.Function, PyTorch's
// torch.autograd.Function): for a numerically stable or cheaper backward,
// or to stop a gradient in a custom way. Subclass it, make one object per
// call with std::make_shared, and call it; while autograd records, its
// outputs get one graph node whose gradient is your backward().
//
//   struct StableSigmoid : autograd::Function {
//     std::vector<NDArray> forward(const std::vector<NDArray>& in) override {
//       NDArray y = 1.f / (1.f + exp(-in[0]));
//       save_for_backward({y});
//       return {y};
//     }
//     std::vector<NDArray> backward(const std::vector<NDArray>& out_grads) override {
//       const NDArray& y = saved()[0];
//       return {out_grads[0] * y * (1.f - y)};
//     }
//   };
//   NDArray y = (*std::make_shared<StableSigmoid>())(x);
//
// forward() runs with recording paused, so its own operators record
// nothing; backward() runs outside recording, as every gradient does. With
// several outputs, backward() is called once per output that a gradient
// reaches, with zeros for the other outputs' gradients (a gradient is
// linear in them, so the calls sum to the whole).
//
// Threads: one thread at a time. A Function keeps what its call saved for
// its backward, so each thread makes its own objects (one per call anyway).

#include <memory>
#include <vector>

#include "ops/ndarray.h"

namespace tagflow::autograd {

class Function : public std::enable_shared_from_this<Function> {
 public:
  virtual ~Function() = default;

  /// Runs forward(inputs) and records the outputs' gradient as backward().
  /// While recording with an input that needs a gradient, the object must
  /// be owned by a std::shared_ptr (it is kept until the graph is freed),
  /// and after such a call the object refuses any other.
  std::vector<NDArray> operator()(const std::vector<NDArray>& inputs);
  /// The one output of a one-output function of one input.
  NDArray operator()(const NDArray& x);

  /// Shown in errors ("StableSigmoid"); "autograd::Function" by default.
  virtual const char* name() const { return "autograd::Function"; }

 protected:
  /// The outputs from the inputs, with NDArray operators.
  virtual std::vector<NDArray> forward(const std::vector<NDArray>& inputs) = 0;
  /// The gradients of the inputs (one per input, in order; an empty NDArray
  /// for an input without one) from one gradient per output.
  virtual std::vector<NDArray> backward(const std::vector<NDArray>& output_grads) = 0;

  /// Keeps arrays for backward() (without their history).
  void save_for_backward(std::vector<NDArray> arrays);
  const std::vector<NDArray>& saved() const { return saved_; }

 private:
  std::vector<NDArray> backward_checked(std::size_t index, const NDArray& out_grad);

  std::vector<NDArray> saved_;
  std::vector<NDArray> inputs_;   ///< without history, for the shape checks
  std::vector<NDArray> outputs_;  ///< without history, for the zero gradients
};

}  // namespace tagflow::autograd

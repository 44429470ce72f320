#include <initializer_list>

#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/ndarray.h"
#include "ops/reduce.h"
#include "ops/softmax.h"
#include "ops/transpose.h"

// NDArray's operator methods: each forwards to the free function of its name.

namespace tagflow {

NDArray NDArray::exp() const { return tagflow::exp(*this); }
NDArray NDArray::log() const { return tagflow::log(*this); }
NDArray NDArray::sqrt() const { return tagflow::sqrt(*this); }
NDArray NDArray::square() const { return tagflow::square(*this); }
NDArray NDArray::abs() const { return tagflow::abs(*this); }
NDArray NDArray::relu() const { return tagflow::relu(*this); }
NDArray NDArray::sigmoid() const { return tagflow::sigmoid(*this); }
NDArray NDArray::tanh() const { return tagflow::tanh(*this); }
NDArray NDArray::clip(double low, double high) const { return tagflow::clip(*this, low, high); }
NDArray NDArray::sum(bool keepdims) const { return tagflow::sum(*this, keepdims); }
NDArray NDArray::sum(int axis, bool keepdims) const { return tagflow::sum(*this, axis, keepdims); }
NDArray NDArray::mean(bool keepdims) const { return tagflow::mean(*this, keepdims); }
NDArray NDArray::mean(int axis, bool keepdims) const {
  return tagflow::mean(*this, axis, keepdims);
}
NDArray NDArray::max(bool keepdims) const { return tagflow::max(*this, keepdims); }
NDArray NDArray::max(int axis, bool keepdims) const { return tagflow::max(*this, axis, keepdims); }
NDArray NDArray::min(bool keepdims) const { return tagflow::min(*this, keepdims); }
NDArray NDArray::min(int axis, bool keepdims) const { return tagflow::min(*this, axis, keepdims); }
NDArray NDArray::norm(bool keepdims) const { return tagflow::norm(*this, keepdims); }
NDArray NDArray::norm(int axis, bool keepdims) const {
  return tagflow::norm(*this, axis, keepdims);
}
NDArray NDArray::sum(std::initializer_list<int> axes, bool keepdims) const {
  return tagflow::sum(*this, axes, keepdims);
}
NDArray NDArray::mean(std::initializer_list<int> axes, bool keepdims) const {
  return tagflow::mean(*this, axes, keepdims);
}
NDArray NDArray::argmax(int axis, bool keepdims) const {
  return tagflow::argmax(*this, axis, keepdims);
}
NDArray NDArray::softmax(int axis) const { return tagflow::softmax(*this, axis); }
NDArray NDArray::log_softmax(int axis) const { return tagflow::log_softmax(*this, axis); }
NDArray NDArray::transpose() const { return tagflow::transpose(*this); }
NDArray NDArray::transpose(std::initializer_list<int> axes) const {
  return tagflow::transpose(*this, axes);
}
NDArray NDArray::dot(const NDArray& other) const { return tagflow::dot(*this, other); }

}  // namespace tagflow

#include "ops/shape.h"

#include <limits>
#include <ostream>

#include "engine/error.h"

namespace tagflow {

Shape::Shape(std::initializer_list<std::int64_t> dims)
    : Shape(std::span<const std::int64_t>(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const std::int64_t> dims) {
  TAGFLOW_CHECK(dims.size() <= kMaxDims, "shape: expected at most {} dimensions, got {}", kMaxDims,
                dims.size());
  for (std::int64_t d : dims) push_back(d);
}

void Shape::push_back(std::int64_t extent) {
  TAGFLOW_CHECK(ndim_ < kMaxDims, "shape: expected at most {} dimensions, got {}", kMaxDims,
                ndim_ + 1);
  TAGFLOW_CHECK(extent >= 0, "shape: expected non-negative extents, got {} at axis {}", extent,
                ndim_);
  // The product of the non-zero extents fits in 64 bits, so that no size,
  // stride or offset computed from a shape overflows.
  std::int64_t product = 1;
  for (int i = 0; i < ndim_; ++i) product *= dims_[i] == 0 ? 1 : dims_[i];
  TAGFLOW_CHECK(extent == 0 || product <= std::numeric_limits<std::int64_t>::max() / extent,
                "shape: expected at most 2^63 - 1 elements, got extents ({}x{})", str(), extent);
  dims_[ndim_++] = extent;
}

int Shape::normalize_axis(int axis, const char* op) const {
  TAGFLOW_CHECK(axis >= -ndim_ && axis < ndim_,
                "{}: axis {} is out of range for an array of shape ({}), which has {} "
                "dimension(s)",
                op, axis, str(), ndim_);
  return axis < 0 ? axis + ndim_ : axis;
}

std::string Shape::str() const {
  std::string s;
  for (int i = 0; i < ndim_; ++i) {
    if (i > 0) s += 'x';
    s += std::to_string(dims_[i]);
  }
  return s;
}

std::ostream& operator<<(std::ostream& os, const Shape& shape) { return os << shape.str(); }

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const int ndim = std::max(a.ndim(), b.ndim());
  Shape out;
  for (int i = 0; i < ndim; ++i) {
    // Aligned from the right: missing leading dimensions count as 1.
    const int ia = i - (ndim - a.ndim());
    const int ib = i - (ndim - b.ndim());
    const std::int64_t da = ia >= 0 ? a[ia] : 1;
    const std::int64_t db = ib >= 0 ? b[ib] : 1;
    TAGFLOW_CHECK(da == db || da == 1 || db == 1,
                  "{}: shapes ({}) and ({}) do not broadcast: axis {} has {} against {}", op,
                  a.str(), b.str(), i, da, db);
    out.push_back(da == 1 ? db : da);
  }
  return out;
}

}  // namespace tagflow

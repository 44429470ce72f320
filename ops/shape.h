#pragma once
// Shape: the extents of an array, outermost first. Up to kMaxDims dimensions,
// kept inline. Prints as MXNet does: "2x3" (and "" for no dimension).
//
// Threads: concurrent reads, exclusive writes (a value, as an int).

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <span>
#include <string>

namespace tagflow {

class Shape {
 public:
  static constexpr int kMaxDims = 8;

  Shape() = default;
  /// Throws tagflow::Error for more than kMaxDims dimensions, a negative
  /// extent, or more than 2^63 - 1 elements (zero extents aside).
  Shape(std::initializer_list<std::int64_t> dims);
  explicit Shape(std::span<const std::int64_t> dims);

  int ndim() const { return ndim_; }
  std::int64_t operator[](int axis) const { return dims_[axis]; }
  std::int64_t& operator[](int axis) { return dims_[axis]; }
  /// Number of elements (1 for no dimension). Inline, as the equality:
  /// every operator asks, on every push.
  std::int64_t size() const {
    std::int64_t n = 1;
    for (int i = 0; i < ndim_; ++i) n *= dims_[i];
    return n;
  }
  std::span<const std::int64_t> dims() const { return {dims_, static_cast<std::size_t>(ndim_)}; }

  /// Appends an extent (checked as the constructor checks them).
  void push_back(std::int64_t extent);
  /// `axis` made non-negative: -1 is the last axis. Throws tagflow::Error
  /// naming `op` when out of range.
  int normalize_axis(int axis, const char* op) const;

  /// "2x3".
  std::string str() const;
  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.ndim_ != b.ndim_) return false;
    for (int i = 0; i < a.ndim_; ++i) {
      if (a.dims_[i] != b.dims_[i]) return false;
    }
    return true;
  }

 private:
  std::int64_t dims_[kMaxDims] = {};
  int ndim_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Shape& shape);

/// The shape NumPy broadcasting gives `a` and `b`; throws tagflow::Error
/// naming `op` and both shapes when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace tagflow

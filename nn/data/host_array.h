#pragma once
// HostArray: an n-dimensional array in ordinary host memory, outside the
// engine: what data sets hand out and transforms work on, one sample at a
// time (Note [Samples live on the host] in data_loader.h says why).
//
//   HostArray image({28, 28, 1}, DType::kUInt8);
//   std::span<std::uint8_t> pixels = image.values<std::uint8_t>();
//   HostArray label = HostArray::scalar<std::int32_t>(7);     // shape ()
//   NDArray x = image.to_ndarray(gpu(0));                     // one engine copy
//
// A value type: copying a HostArray copies its values, moving it moves them.
//
// Threads: concurrent reads, exclusive writes (a value, as a std::vector).
// The non-const values() and bytes() give access for writing.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "ops/dtype.h"
#include "ops/ndarray.h"
#include "ops/shape.h"

namespace tagflow::data {

class HostArray {
 public:
  /// An empty array: shape (0), float32, no element (unlike
  /// `HostArray({}, dtype)`, a scalar of one element).
  HostArray() = default;
  /// An array of `shape` whose values are uninitialised (written next).
  HostArray(Shape shape, DType dtype);

  HostArray(const HostArray& other);
  HostArray& operator=(const HostArray& other);
  /// Leaves `other` empty (shape (0)).
  HostArray(HostArray&& other) noexcept;
  HostArray& operator=(HostArray&& other) noexcept;
  ~HostArray() = default;

  /// An array of `shape` from row-major `values`; throws tagflow::Error when
  /// their count is not the shape's size.
  template <typename T>
  static HostArray from(std::span<const T> values, Shape shape);
  /// A scalar (shape ()), the usual label of a sample.
  template <typename T>
  static HostArray scalar(T value) {
    return from(std::span<const T>(&value, 1), Shape{});
  }
  /// The values of `array` copied to the host (waits for them).
  static HostArray from(const NDArray& array);

  /// An NDArray on `ctx` holding these values: filled directly on a host
  /// context, through one engine copy on a GPU.
  NDArray to_ndarray(Context ctx = cpu()) const;

  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int ndim() const { return shape_.ndim(); }
  /// Number of elements.
  std::int64_t size() const { return shape_.size(); }
  std::uint64_t nbytes() const { return static_cast<std::uint64_t>(size()) * dtype_size(dtype_); }

  /// The elements, row-major; throws tagflow::Error unless T is the dtype.
  template <typename T>
  std::span<const T> values() const {
    check_dtype(dtype_of<T>);
    return {reinterpret_cast<const T*>(bytes_.get()), static_cast<std::size_t>(size())};
  }
  template <typename T>
  std::span<T> values() {
    check_dtype(dtype_of<T>);
    return {reinterpret_cast<T*>(bytes_.get()), static_cast<std::size_t>(size())};
  }
  /// The raw bytes, `nbytes()` of them.
  const std::byte* bytes() const { return bytes_.get(); }
  std::byte* bytes() { return bytes_.get(); }

 private:
  void check_dtype(DType requested) const;

  Shape shape_{0};
  DType dtype_ = DType::kFloat32;
  std::unique_ptr<std::byte[]> bytes_;
};

}  // namespace tagflow::data

#include "nn/data/host_array.h"

#include <cstring>
#include <utility>

#include "engine/error.h"
#include "ops/creation.h"

namespace tagflow::data {

HostArray::HostArray(Shape shape, DType dtype)
    : shape_(shape),
      dtype_(dtype),
      // Uninitialised on purpose: every producer overwrites all of it, and
      // zeroing would cost as much as a transform (Note [Samples live on the
      // host] in data_loader.h).
      bytes_(std::make_unique_for_overwrite<std::byte[]>(static_cast<std::size_t>(shape.size()) *
                                                         dtype_size(dtype))) {}

HostArray::HostArray(const HostArray& other) : shape_(other.shape_), dtype_(other.dtype_) {
  if (other.bytes_) {
    bytes_ = std::make_unique_for_overwrite<std::byte[]>(other.nbytes());
    std::memcpy(bytes_.get(), other.bytes_.get(), other.nbytes());
  }
}

HostArray& HostArray::operator=(const HostArray& other) {
  if (this != &other) *this = HostArray(other);
  return *this;
}

HostArray::HostArray(HostArray&& other) noexcept
    : shape_(std::exchange(other.shape_, Shape{0})),
      dtype_(other.dtype_),
      bytes_(std::move(other.bytes_)) {}

HostArray& HostArray::operator=(HostArray&& other) noexcept {
  shape_ = std::exchange(other.shape_, Shape{0});
  dtype_ = other.dtype_;
  bytes_ = std::move(other.bytes_);
  return *this;
}

template <typename T>
HostArray HostArray::from(std::span<const T> values, Shape shape) {
  TAGFLOW_CHECK(static_cast<std::int64_t>(values.size()) == shape.size(),
                "HostArray::from: expected {} values for shape ({}), got {}", shape.size(),
                shape.str(), values.size());
  HostArray out(shape, dtype_of<T>);
  if (!values.empty()) std::memcpy(out.bytes(), values.data(), values.size_bytes());
  return out;
}

template HostArray HostArray::from<float>(std::span<const float>, Shape);
template HostArray HostArray::from<std::int32_t>(std::span<const std::int32_t>, Shape);
template HostArray HostArray::from<std::int64_t>(std::span<const std::int64_t>, Shape);
template HostArray HostArray::from<std::uint8_t>(std::span<const std::uint8_t>, Shape);

HostArray HostArray::from(const NDArray& array) {
  TAGFLOW_CHECK(array.defined(),
                "HostArray::from: expected an array, got an empty (default-constructed) NDArray");
  TAGFLOW_CHECK(!is_half(array.dtype()),
                "HostArray::from: expected a float32, int32, int64 or uint8 array, got {} "
                "(convert it with astype(DType::kFloat32))",
                dtype_name(array.dtype()));
  HostArray out(array.shape(), array.dtype());
  TAGFLOW_DTYPE_SWITCH(array.dtype(), T, {
    const std::vector<T> values = array.to_vector<T>();
    if (!values.empty()) std::memcpy(out.bytes(), values.data(), values.size() * sizeof(T));
  });
  return out;
}

NDArray HostArray::to_ndarray(Context ctx) const {
  if (ctx.is_host()) {
    // A new array has no pending operation: its memory is ours to fill.
    NDArray out(shape_, dtype_, ctx);
    if (nbytes() > 0) std::memcpy(out.raw_data(), bytes(), nbytes());
    return out;
  }
  return to_ndarray(cpu()).copyto(ctx);
}

void HostArray::check_dtype(DType requested) const {
  TAGFLOW_CHECK(requested == dtype_, "HostArray::values<{}>: the array holds {} ({})",
                dtype_name(requested), dtype_name(dtype_), shape_.str());
}

}  // namespace tagflow::data

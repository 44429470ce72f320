#include "ops/ndarray.h"

#include <cstring>
#include <limits>
#include <ostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/detail/lifetime.h"
#include "engine/detail/object_pool.h"
#include "engine/engine.h"
#include "ops/autograd.h"
#include "ops/creation.h"
#include "ops/detail/format.h"
#include "ops/elementwise.h"
#include "ops/kernels/copy.h"
#include "storage/storage.h"

namespace tagflow {

namespace detail {

Chunk::Chunk(Context ctx, std::uint64_t bytes) : ctx_(ctx) {
  // The variable first: in a forked child, new_var refuses (ForkError)
  // before the allocator, whose lock a thread of the parent may hold, is
  // touched (Note [Engine lifetime] in engine.h).
  Engine& engine = Engine::get();
  var_ = engine.new_var();
  try {
    allocator_ = &Storage::get().allocator(ctx);
    block_ = allocator_->allocate(bytes);
  } catch (...) {
    engine.delete_var(var_);
    throw;
  }
}

Chunk::Chunk(Context ctx, void* data, std::uint64_t bytes, std::function<void()> release)
    : ctx_(ctx), block_{data, bytes}, release_(std::move(release)) {
  Engine& engine = Engine::get();
  (void)Storage::get().allocator(ctx);  // refuses a device that does not exist
  var_ = engine.new_var();
}

Chunk::~Chunk() {
  // The memory goes back once the variable's last operation has completed,
  // device work included (Engine::delete_var's deleter): to its allocator,
  // or to whoever owns it.
  if (allocator_ == nullptr) {
    Engine::get().delete_var(var_, [release = std::move(release_)] {
      if (release) release();
    });
    return;
  }
  Engine::get().delete_var(var_,
                           [allocator = allocator_, block = block_] { allocator->release(block); });
}

}  // namespace detail

namespace {

/// The bytes of an array of `shape` and `dtype`: at most 2^63 - 1, so that
/// byte counts and offsets never overflow.
std::uint64_t bytes_of(const Shape& shape, DType dtype) {
  const auto element_bytes = static_cast<std::int64_t>(dtype_size(dtype));
  TAGFLOW_CHECK(shape.size() <= std::numeric_limits<std::int64_t>::max() / element_bytes,
                "array of shape ({}) and dtype {}: expected at most 2^63 - 1 bytes, got {} "
                "elements of {} bytes",
                shape.str(), dtype_name(dtype), shape.size(), element_bytes);
  return static_cast<std::uint64_t>(shape.size() * element_bytes);
}

/// A new array's chunk. Pooled: an operator's result makes one, and malloc
/// and free took about 110 of the 2,100 instructions of a 4-element
/// `c = a + b` (callgrind). Not in a forked child, where a thread of the
/// parent may have held the pool's lock at the fork: there the chunk's
/// variable refuses with ForkError, as before (Note [Engine lifetime]).
std::shared_ptr<detail::Chunk> make_chunk(Context ctx, std::uint64_t bytes) {
  if (detail::g_forks.load(std::memory_order_relaxed) != 0) [[unlikely]]
    return std::make_shared<detail::Chunk>(ctx, bytes);
  return std::allocate_shared<detail::Chunk>(detail::ObjectPoolAllocator<detail::Chunk>{}, ctx,
                                             bytes);
}

}  // namespace

NDArray::NDArray(Shape shape, DType dtype, Context ctx)
    : chunk_(make_chunk(ctx, bytes_of(shape, dtype))), shape_(shape), dtype_(dtype) {}

NDArray NDArray::from_memory(void* data, Shape shape, DType dtype, Context ctx,
                             std::function<void()> release) {
  TAGFLOW_CHECK(data != nullptr || shape.size() == 0,
                "from_memory: expected the address of {} elements, got null", shape.size());
  TAGFLOW_CHECK(reinterpret_cast<std::uintptr_t>(data) % dtype_size(dtype) == 0,
                "from_memory: expected {} memory aligned to {} bytes, got address {}",
                dtype_name(dtype), dtype_size(dtype), data);
  auto chunk =
      std::make_shared<detail::Chunk>(ctx, data, bytes_of(shape, dtype), std::move(release));
  return NDArray(std::move(chunk), shape, dtype, 0);
}

void NDArray::throw_undefined(const char* what) {
  detail::throw_error("{}: the array is empty (default-constructed NDArray)", what);
}

bool NDArray::same_as(const NDArray& other) const {
  return chunk_ == other.chunk_ && offset_ == other.offset_ && shape_ == other.shape_ &&
         dtype_ == other.dtype_;
}

// --- waiting and host access ------------------------------------------------------

void NDArray::wait_to_read() const {
  check_defined("wait_to_read");
  Engine::get().wait_to_read(chunk_->var());
}

void NDArray::wait_to_write() const {
  check_defined("wait_to_write");
  Engine::get().wait_to_write(chunk_->var());
}

NDArray NDArray::on_host() const {
  if (context().is_host()) return *this;
  return copyto(cpu(0));
}

// Note [Host reads]
// to_vector (and asscalar, printing, saving) reads the values in an engine
// operation that declares the array as read, then waits for that operation,
// instead of waiting for the array and reading it afterwards. A write that
// another thread pushes meanwhile (a Trainer's update while a service
// thread prints or saves the weights) then runs after the read, in push
// order, instead of racing it. An array on a GPU is first copied to the
// host, into an array nothing else writes. The operation is skipped when
// the array carries an error, and the wait rethrows it, as wait_to_read does.
template <typename T>
std::vector<T> NDArray::to_vector() const {
  check_defined("to_vector");
  const NDArray host = on_host();
  std::vector<T> values(static_cast<std::size_t>(size()));
  const OperationHandle read =
      Engine::get().push_tracked({.name = "to_vector",
                                  .ctx = host.context(),
                                  .reads = {host.var()},
                                  .fn = [&values, &host](const RunContext&) {
                                    TAGFLOW_ANY_DTYPE_SWITCH(host.dtype(), Stored, {
                                      const Stored* src = host.data<Stored>();
                                      for (std::size_t i = 0; i < values.size(); ++i)
                                        values[i] = convert_element<T>(src[i]);
                                    });
                                  }});
  read.wait();
  return values;
}

template <typename T>
T NDArray::asscalar() const {
  check_defined("asscalar");
  TAGFLOW_CHECK(size() == 1, "asscalar: expected an array of one element, got shape ({})",
                shape_.str());
  return to_vector<T>()[0];
}

template std::vector<float> NDArray::to_vector<float>() const;
template std::vector<double> NDArray::to_vector<double>() const;
template std::vector<std::int32_t> NDArray::to_vector<std::int32_t>() const;
template std::vector<std::int64_t> NDArray::to_vector<std::int64_t>() const;
template std::vector<std::uint8_t> NDArray::to_vector<std::uint8_t>() const;
template std::vector<Half> NDArray::to_vector<Half>() const;
template std::vector<BFloat16> NDArray::to_vector<BFloat16>() const;
template float NDArray::asscalar<float>() const;
template double NDArray::asscalar<double>() const;
template std::int32_t NDArray::asscalar<std::int32_t>() const;
template std::int64_t NDArray::asscalar<std::int64_t>() const;
template std::uint8_t NDArray::asscalar<std::uint8_t>() const;
template Half NDArray::asscalar<Half>() const;
template BFloat16 NDArray::asscalar<BFloat16>() const;

std::string NDArray::str() const {
  check_defined("str");
  std::string values;
  if (is_floating(dtype_)) {  // bfloat16 as its float values
    values = detail::format_array(
        to_vector<float>(), shape_.dims(),
        dtype_ == DType::kFloat16 ? detail::FloatWidth::kFloat16 : detail::FloatWidth::kFloat32);
  } else {
    values = detail::format_array(to_vector<std::int64_t>(), shape_.dims());
  }
  return fmt::format("{}\n<NDArray {} @{}>", values, shape_.str(), context().str());
}

std::ostream& operator<<(std::ostream& os, const NDArray& array) { return os << array.str(); }

// --- copies -------------------------------------------------------------------

NDArray NDArray::copyto(Context ctx) const {
  check_defined("copyto");
  NDArray dst(shape_, dtype_, ctx);
  copyto(dst);
  detail::record("copyto", dst, {this}, [&] {
    return [from = context()](const NDArray& dy) {
      return std::vector<NDArray>{dy.copyto(from)};  // back to the source's device
    };
  });
  return dst;
}

void NDArray::copyto(const NDArray& dst) const {
  check_defined("copyto");
  TAGFLOW_CHECK(dst.defined(), "copyto: the destination array is empty");
  TAGFLOW_CHECK(dst.shape_ == shape_ && dst.dtype_ == dtype_,
                "copyto: expected a destination of shape ({}) and dtype {}, got ({}) {}",
                shape_.str(), dtype_name(dtype_), dst.shape_.str(), dtype_name(dst.dtype_));
  if (dst.chunk_ == chunk_ && dst.offset_ == offset_) return;  // the same memory
  // Views are contiguous runs of their chunk's elements; a copy between
  // overlapping runs would read what it has already written.
  TAGFLOW_CHECK(
      dst.chunk_ != chunk_ || offset_ + size() <= dst.offset_ || dst.offset_ + size() <= offset_,
      "copyto: the destination overlaps the source: both are views of shape ({}) of one "
      "array, at its elements [{}, {}) and [{}, {}); copy to a new array first",
      shape_.str(), offset_, offset_ + size(), dst.offset_, dst.offset_ + size());
  detail::push_copy({.src_ctx = context(),
                     .src = raw_data(),
                     .src_var = chunk_->var(),
                     .dst_ctx = dst.context(),
                     .dst = dst.raw_data(),
                     .dst_var = dst.chunk_->var(),
                     .bytes = nbytes()});
}

NDArray NDArray::as_in_context(Context ctx) const {
  check_defined("as_in_context");
  if (ctx == context()) return *this;
  return copyto(ctx);
}

// --- views ----------------------------------------------------------------------

NDArray NDArray::view(Shape shape, std::int64_t offset) const {
  NDArray out(chunk_, shape, dtype_, offset);
  detail::record("view", out, {this}, [&] {
    // A view of every element passes the gradient back reshaped; a view of
    // some rows scatters it into zeros at the rows' place.
    const bool whole = offset == offset_ && shape.size() == size();
    return [full = shape_, start = offset - offset_, whole, dtype = dtype_](const NDArray& dy) {
      if (whole) return std::vector<NDArray>{dy.reshape(full)};
      NDArray dx = zeros(full, dtype, dy.context());
      dy.copyto(NDArray(dx.chunk_, dy.shape(), dtype, start));
      return std::vector<NDArray>{dx};
    };
  });
  return out;
}

NDArray NDArray::reshape(std::initializer_list<std::int64_t> dims) const {
  return reshape(std::span<const std::int64_t>(dims.begin(), dims.size()));
}

NDArray NDArray::reshape(std::span<const std::int64_t> dims) const {
  check_defined("reshape");
  auto text = [&] { return fmt::format("{}", fmt::join(dims, "x")); };
  int inferred = -1;
  std::int64_t known = 1;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1 && inferred < 0) {
      inferred = static_cast<int>(i);
      continue;
    }
    TAGFLOW_CHECK(dims[i] >= 0, "reshape: expected extents >= 0 and at most one -1, got ({})",
                  text());
    // A product beyond 64 bits is the size of no array.
    TAGFLOW_CHECK(dims[i] == 0 || known <= std::numeric_limits<std::int64_t>::max() / dims[i],
                  "reshape: cannot view an array of shape ({}) ({} elements) as ({})", shape_.str(),
                  size(), text());
    known *= dims[i];
  }
  std::vector<std::int64_t> target(dims.begin(), dims.end());
  if (inferred >= 0) {
    TAGFLOW_CHECK(known > 0 && size() % known == 0,
                  "reshape: cannot view an array of shape ({}) ({} elements) as ({})", shape_.str(),
                  size(), text());
    target[static_cast<std::size_t>(inferred)] = size() / known;
    known = size();
  }
  TAGFLOW_CHECK(known == size(),
                "reshape: cannot view an array of shape ({}) ({} elements) as ({})", shape_.str(),
                size(), text());
  return view(Shape(target), offset_);
}

NDArray NDArray::slice(std::int64_t begin, std::int64_t end) const {
  check_defined("slice");
  TAGFLOW_CHECK(ndim() >= 1, "slice: expected an array with at least one axis, got shape ({})",
                shape_.str());
  TAGFLOW_CHECK(0 <= begin && begin <= end && end <= shape_[0],
                "slice: expected 0 <= begin <= end <= {} for shape ({}), got [{}, {})", shape_[0],
                shape_.str(), begin, end);
  Shape shape = shape_;
  shape[0] = end - begin;
  return view(shape, offset_ + begin * (shape_[0] == 0 ? 0 : size() / shape_[0]));
}

NDArray NDArray::operator[](std::int64_t index) const {
  check_defined("operator[]");
  TAGFLOW_CHECK(ndim() >= 1 && index >= 0 && index < shape_[0],
                "operator[]: index {} is out of range for shape ({})", index, shape_.str());
  Shape shape(shape_.dims().subspan(1));
  if (shape.ndim() == 0) shape.push_back(1);  // a row of a 1-D array is a 1-element array
  return view(shape, offset_ + index * (size() / shape_[0]));
}

NDArray NDArray::squeeze() const {
  check_defined("squeeze");
  Shape shape;
  for (std::int64_t d : shape_.dims()) {
    if (d != 1) shape.push_back(d);
  }
  if (shape.ndim() == 0) shape.push_back(1);
  return view(shape, offset_);
}

NDArray NDArray::squeeze(int axis) const {
  check_defined("squeeze");
  axis = shape_.normalize_axis(axis, "squeeze");
  TAGFLOW_CHECK(shape_[axis] == 1, "squeeze: axis {} of shape ({}) has extent {}, expected 1", axis,
                shape_.str(), shape_[axis]);
  Shape shape;
  for (int i = 0; i < ndim(); ++i) {
    if (i != axis) shape.push_back(shape_[i]);
  }
  if (shape.ndim() == 0) shape.push_back(1);
  return view(shape, offset_);
}

NDArray NDArray::expand_dims(int axis) const {
  check_defined("expand_dims");
  TAGFLOW_CHECK(axis >= -(ndim() + 1) && axis <= ndim(),
                "expand_dims: axis {} is out of range for shape ({}): expected [{}, {}]", axis,
                shape_.str(), -(ndim() + 1), ndim());
  TAGFLOW_CHECK(ndim() < Shape::kMaxDims,
                "expand_dims: the result would have {} dimensions, but arrays have at most {}",
                ndim() + 1, Shape::kMaxDims);
  if (axis < 0) axis += ndim() + 1;
  Shape shape;
  for (int i = 0; i < ndim(); ++i) {
    if (i == axis) shape.push_back(1);
    shape.push_back(shape_[i]);
  }
  if (axis == ndim()) shape.push_back(1);
  return view(shape, offset_);
}

}  // namespace tagflow

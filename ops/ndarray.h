#pragma once
// NDArray: a lazy n-dimensional array on one device. A handle to memory
// plus one engine variable: every operator returns at once, having pushed
// its work tagged with the variables it reads and writes, and only host
// access (printing, to_vector, asscalar) and the waits block.
//
//   NDArray x = array({1.f, 2.f, 3.f});               // on cpu(0)
//   NDArray y = x.copyto(gpu(0));                     // an engine copy
//   NDArray z = exp(y + 2.f) * y;                     // computed on gpu(0)
//   std::cout << z;   // [ 20.085537 109.1963   445.2395  ]
//                     // <NDArray 3 @gpu(0)>
//
// Copying an NDArray copies the handle, not the values (like a Python
// reference): both name the same memory. Views (reshape, slice, squeeze,
// expand_dims) share the memory and the variable of the array they view.
//
// Threads: concurrent reads, exclusive writes. Every const member is a read:
// several threads may copy one handle, wait on it and push operators on it
// (the engine runs them in push order). Assigning to one NDArray object,
// attach_grad() and set_grad_node() are writes. to_vector(), asscalar() and
// printing read the values in an engine operation of their own, so a write
// another thread pushes meanwhile comes before or after the read, never
// during it (Note [Host reads] in ops/ndarray.cc).

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/context.h"
#include "engine/error.h"
#include "engine/operation.h"
#include "ops/dtype.h"
#include "ops/shape.h"
#include "storage/allocator.h"

namespace tagflow {

/// How backward() updates a gradient buffer (see ops/autograd.h).
enum class GradReq : std::uint8_t {
  kNull,   ///< no gradient
  kWrite,  ///< overwritten by each backward
  kAdd,    ///< accumulated over backward calls
};

namespace detail {

struct GradNode;

/// The memory and the engine variable that an array and its views share.
/// Destroyed with the last handle; the memory returns to its allocator once
/// every operation pushed on the variable has completed.
class Chunk {
 public:
  /// Allocates `bytes` on `ctx`; throws DeviceError or OutOfMemoryError.
  Chunk(Context ctx, std::uint64_t bytes);
  /// Memory owned elsewhere (NDArray::from_memory): `release` is called
  /// instead of an allocator once the variable's last operation completed.
  Chunk(Context ctx, void* data, std::uint64_t bytes, std::function<void()> release);
  ~Chunk();
  Chunk(const Chunk&) = delete;
  Chunk& operator=(const Chunk&) = delete;

  Context ctx() const { return ctx_; }
  VarHandle var() const { return var_; }
  void* data() const { return block_.data; }

 private:
  Context ctx_;
  Allocator* allocator_ = nullptr;  ///< null for memory owned elsewhere
  MemoryBlock block_;
  std::function<void()> release_;  ///< that memory's owner's release
  VarHandle var_ = nullptr;
};

}  // namespace detail

class NDArray {
 public:
  /// An empty handle: `defined()` is false.
  NDArray() = default;
  /// A new, uninitialised array (see `empty()` in creation.h).
  NDArray(Shape shape, DType dtype, Context ctx);
  /// An array over memory that something else owns (a tensor of another
  /// library, passed by DLPack), without a copy: `data` holds a row-major
  /// `shape` of `dtype` on `ctx`, aligned to the element size, and stays
  /// valid until `release` is called. That happens once, on an engine
  /// thread or the caller's, after the last handle to the array is gone and
  /// every operation pushed on it has completed, as memory of tagflow's own
  /// goes back to its allocator. Throws DeviceError for a device that does
  /// not exist, tagflow::Error for a null or misaligned `data`; `release`
  /// is then not called (the memory is still the caller's).
  static NDArray from_memory(void* data, Shape shape, DType dtype, Context ctx,
                             std::function<void()> release);

  bool defined() const { return chunk_ != nullptr; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Context context() const { return chunk_ ? chunk_->ctx() : Context{}; }
  int ndim() const { return shape_.ndim(); }
  std::int64_t size() const { return shape_.size(); }
  std::uint64_t nbytes() const { return static_cast<std::uint64_t>(size()) * dtype_size(dtype_); }

  /// The engine variable guarding the memory (shared with views). Inline,
  /// with raw_data(): every operator asks for both, on every push.
  VarHandle var() const {
    check_defined("var");
    return chunk_->var();
  }
  /// Device pointer to the first element, for kernels; checks the dtype.
  template <typename T>
  T* data() const;
  void* raw_data() const {
    check_defined("raw_data");
    return static_cast<char*>(chunk_->data()) +
           offset_ * static_cast<std::int64_t>(dtype_size(dtype_));
  }

  /// True when both handles name the same array: the identity the
  /// tutorials check with Python's `is` (`y.as_in_context(gpu()) is y`).
  bool same_as(const NDArray& other) const;

  // --- waiting and host access ------------------------------------------------
  /// Blocks until every pending write of the array has completed; rethrows
  /// the error of a failed operation that produced it.
  void wait_to_read() const;
  /// Blocks until every pending read and write has completed.
  void wait_to_write() const;
  /// The values, in row-major order, copied to the host (waits) and
  /// converted to `T` (float, double, int32_t, int64_t, uint8_t, Half or
  /// BFloat16): a float16 or bfloat16 element through its exact float, an
  /// element to Half or BFloat16 rounded to nearest even.
  template <typename T>
  std::vector<T> to_vector() const;
  /// The value of a one-element array (waits).
  template <typename T>
  T asscalar() const;

  // --- copies -----------------------------------------------------------------
  /// A copy on `ctx`, in new memory, always (an engine copy operation).
  NDArray copyto(Context ctx) const;
  /// Copies the values into `dst` (same shape and dtype, any device).
  void copyto(const NDArray& dst) const;
  /// This very array when it already lives on `ctx`, else `copyto(ctx)`.
  NDArray as_in_context(Context ctx) const;
  /// The values converted to `dtype`, on the same device (a copy when the
  /// dtype is already `dtype`), by one rule on every device: float32 to an
  /// integer type truncates toward zero, saturates beyond the type's range
  /// (+-inf included: -1.5f gives uint8 0, 300.f gives 255) and gives 0 for
  /// NaN; an integer to a narrower one wraps around as NumPy's astype does
  /// (int32 -1 gives uint8 255); an integer to float32 rounds to the
  /// nearest; anything to float16 or bfloat16 rounds to nearest even, NaN
  /// and infinities kept, and they convert as their exact float (Note
  /// [Rounding to 16 bits] in half.h). Gradients pass through a float32
  /// copy only.
  NDArray astype(DType dtype) const;

  // --- views: share the memory and the variable --------------------------------
  /// Same elements, another shape; one extent may be -1 (inferred):
  /// `x.reshape({-1, 4})`.
  NDArray reshape(std::initializer_list<std::int64_t> dims) const;
  NDArray reshape(std::span<const std::int64_t> dims) const;
  NDArray reshape(const Shape& shape) const { return reshape(shape.dims()); }
  /// Rows [begin, end) along the first axis.
  NDArray slice(std::int64_t begin, std::int64_t end) const;
  /// Row `index` along the first axis, without that axis.
  NDArray operator[](std::int64_t index) const;
  /// Without axis `axis` (which must have extent 1); all such axes when omitted.
  NDArray squeeze() const;
  NDArray squeeze(int axis) const;
  /// With a new axis of extent 1 at `axis`.
  NDArray expand_dims(int axis) const;

  // --- the common operators as methods, as MXNet's NDArray has them -----------
  // Each is the free function of the same name: `x.exp()` is `exp(x)`,
  // `x.sum(1)` is `sum(x, 1)`, `x.T()` is `transpose(x)`.
  NDArray exp() const;
  NDArray log() const;
  NDArray sqrt() const;
  NDArray square() const;
  NDArray abs() const;
  NDArray relu() const;
  NDArray sigmoid() const;
  NDArray tanh() const;
  NDArray clip(double low, double high) const;
  NDArray sum(bool keepdims = false) const;
  NDArray sum(int axis, bool keepdims = false) const;
  NDArray sum(std::initializer_list<int> axes, bool keepdims = false) const;
  NDArray mean(bool keepdims = false) const;
  NDArray mean(int axis, bool keepdims = false) const;
  NDArray mean(std::initializer_list<int> axes, bool keepdims = false) const;
  NDArray max(bool keepdims = false) const;
  NDArray max(int axis, bool keepdims = false) const;
  NDArray min(bool keepdims = false) const;
  NDArray min(int axis, bool keepdims = false) const;
  NDArray norm(bool keepdims = false) const;
  NDArray norm(int axis, bool keepdims = false) const;
  NDArray argmax(int axis, bool keepdims = false) const;
  NDArray softmax(int axis = -1) const;
  NDArray log_softmax(int axis = -1) const;
  NDArray transpose() const;
  NDArray transpose(std::initializer_list<int> axes) const;
  NDArray T() const { return transpose(); }
  NDArray dot(const NDArray& other) const;

  // --- autograd (ops/autograd.h) ---------------------------------------------
  /// Gives the array a gradient buffer, zeros on its device, that backward()
  /// fills; `GradReq::kNull` detaches it. The array becomes a leaf.
  void attach_grad(GradReq req = GradReq::kWrite);
  /// The gradient buffer given by attach_grad (throws without one).
  NDArray grad() const;
  /// `autograd::backward(*this)`: the gradients of this array (ones as the
  /// head gradient) reach every leaf it depends on.
  void backward() const;
  /// `autograd::backward(*this, head_grad, retain_graph)`.
  void backward(const NDArray& head_grad, bool retain_graph = false) const;
  /// The same memory with no recorded history.
  NDArray detach() const;
  /// The graph node that produced this array while recording, or null.
  const std::shared_ptr<detail::GradNode>& grad_node() const { return grad_node_; }
  void set_grad_node(std::shared_ptr<detail::GradNode> node) { grad_node_ = std::move(node); }

  /// What `operator<<` prints: the values as NumPy prints them, then a line
  /// "<NDArray 2x3 @gpu(0)>" (waits).
  std::string str() const;

 private:
  NDArray(std::shared_ptr<detail::Chunk> chunk, Shape shape, DType dtype, std::int64_t offset)
      : chunk_(std::move(chunk)), shape_(shape), dtype_(dtype), offset_(offset) {}
  NDArray view(Shape shape, std::int64_t offset) const;
  void check_defined(const char* what) const {
    if (chunk_ == nullptr) [[unlikely]]
      throw_undefined(what);
  }
  [[noreturn, gnu::cold]] static void throw_undefined(const char* what);
  /// The values of this array on the host (a host array itself, or a copy).
  NDArray on_host() const;

  std::shared_ptr<detail::Chunk> chunk_;
  Shape shape_;
  DType dtype_ = DType::kFloat32;
  std::int64_t offset_ = 0;  ///< in elements, from the start of the chunk
  std::shared_ptr<detail::GradNode> grad_node_;
};

std::ostream& operator<<(std::ostream& os, const NDArray& array);

// --- template definitions ---------------------------------------------------------

template <typename T>
T* NDArray::data() const {
  check_defined("data");
  TAGFLOW_CHECK(dtype_of<T> == dtype_, "data<{}>: the array holds {}", dtype_name(dtype_of<T>),
                dtype_name(dtype_));
  return static_cast<T*>(chunk_->data()) + offset_;
}

}  // namespace tagflow

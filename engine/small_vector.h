#pragma once
// SmallVector: a vector that keeps its first N elements inline. Used for the
// variable lists of an operation, which almost always hold a handful.
//
// Threads: concurrent reads, exclusive writes (a value, as a std::vector).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

namespace tagflow::detail {

/// A vector of trivially copyable T with N elements of inline storage.
/// Sixteen bytes of bookkeeping: the data pointer and two 32-bit counts.
template <typename T, std::size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector holds trivially copyable types");
  static_assert(N > 0 && N < (1u << 16), "inline capacity out of range");

 public:
  SmallVector() noexcept {}  // leaves the inline storage unwritten
  SmallVector(std::initializer_list<T> items) { assign(items.begin(), items.size()); }
  SmallVector(std::span<const T> items) { assign(items.data(), items.size()); }     // NOLINT
  SmallVector(const std::vector<T>& items) { assign(items.data(), items.size()); }  // NOLINT

  SmallVector(const SmallVector& other) { assign(other.data(), other.size()); }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) {
      size_ = 0;
      assign(other.data(), other.size());
    }
    return *this;
  }
  SmallVector(SmallVector&& other) noexcept { steal(other); }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this != &other) {
      release();
      steal(other);
    }
    return *this;
  }
  ~SmallVector() { release(); }

  std::size_t size() const { return size_; }
  std::size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }

  void push_back(const T& value) {
    if (size_ == capacity_) [[unlikely]]
      reserve(static_cast<std::size_t>(size_) + 1);
    std::construct_at(data_ + size_, value);
    ++size_;
  }
  void clear() { size_ = 0; }
  /// Drops the elements from `new_size` on.
  void truncate(std::size_t new_size) {
    if (new_size < size_) size_ = static_cast<std::uint32_t>(new_size);
  }

  /// Sets the size to `n`, at most the capacity: for elements made through
  /// data() after reserve(). Those below `n` must all have been made there
  /// (std::construct_at: the inline storage holds no element until then).
  void resize_within_capacity(std::size_t n) {
    size_ = static_cast<std::uint32_t>(std::min<std::size_t>(n, capacity_));
  }

  void reserve(std::size_t wanted) {
    if (wanted <= capacity_) return;
    const std::size_t grown = std::max<std::size_t>(wanted, std::size_t{capacity_} * 2);
    T* bigger = new T[grown];
    std::copy(data_, data_ + size_, bigger);  // over elements new[] made
    release();
    data_ = bigger;
    capacity_ = static_cast<std::uint32_t>(grown);
  }

 private:
  bool on_heap() const { return data_ != inline_; }
  void release() {
    if (on_heap()) delete[] data_;
    data_ = inline_;
    capacity_ = N;
  }
  void assign(const T* items, std::size_t count) {
    reserve(count);
    std::uninitialized_copy(items, items + count, data_);
    size_ = static_cast<std::uint32_t>(count);
  }
  void steal(SmallVector& other) noexcept {
    size_ = other.size_;
    if (other.on_heap()) {
      data_ = other.data_;
      capacity_ = other.capacity_;
      other.data_ = other.inline_;
      other.capacity_ = N;
    } else {
      data_ = inline_;
      capacity_ = N;
      for (std::size_t i = 0; i < other.size_ && i < N; ++i) {
        std::construct_at(inline_ + i, other.inline_[i]);
      }
    }
    other.size_ = 0;
  }

  T* data_ = inline_;
  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = N;
  /// In a union, so that no element is made until one is put there
  /// (std::construct_at): a T with a default value (a null VarHandle) would
  /// otherwise be written N times for every list made.
  union {
    T inline_[N];
  };
};

}  // namespace tagflow::detail

#pragma once
// SmallVector: a vector that keeps its first N elements inline. Used for the
// variable lists of an operation, which almost always hold a handful.

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

namespace tagflow::detail {

/// A vector of trivially copyable T with N elements of inline storage.
template <typename T, std::size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector holds trivially copyable types");

 public:
  SmallVector() noexcept = default;
  SmallVector(std::initializer_list<T> items) { assign(items.begin(), items.size()); }
  SmallVector(std::span<const T> items) { assign(items.data(), items.size()); }  // NOLINT
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
      heap_.reset();
      steal(other);
    }
    return *this;
  }
  ~SmallVector() = default;

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return heap_ ? heap_.get() : inline_; }
  const T* data() const { return heap_ ? heap_.get() : inline_; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }

  void push_back(const T& value) {
    reserve(size_ + 1);
    data()[size_++] = value;
  }
  void clear() { size_ = 0; }
  /// Drops the elements from `new_size` on.
  void truncate(std::size_t new_size) { size_ = std::min(size_, new_size); }

  void reserve(std::size_t wanted) {
    if (wanted <= capacity_) return;
    std::size_t grown = std::max(wanted, capacity_ * 2);
    auto bigger = std::make_unique<T[]>(grown);
    std::copy(data(), data() + size_, bigger.get());
    heap_ = std::move(bigger);
    capacity_ = grown;
  }

 private:
  void assign(const T* items, std::size_t count) {
    reserve(count);
    std::copy(items, items + count, data());
    size_ = count;
  }
  void steal(SmallVector& other) noexcept {
    size_ = other.size_;
    capacity_ = other.capacity_;
    if (other.heap_) {
      heap_ = std::move(other.heap_);
    } else {
      for (std::size_t i = 0; i < other.size_ && i < N; ++i) inline_[i] = other.inline_[i];
    }
    other.size_ = 0;
    other.capacity_ = N;
  }

  T inline_[N];
  std::unique_ptr<T[]> heap_;
  std::size_t size_ = 0;
  std::size_t capacity_ = N;
};

}  // namespace tagflow::detail

#pragma once
// InlineFunction: a move-only std::function that keeps small closures inside
// itself, so pushing an operation does not allocate.
//
// Threads: one thread at a time. It is move-only, and calling it is not
// const: the closure it holds may change when called.

#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace tagflow::detail {

template <typename Signature, std::size_t Capacity = 48>
class InlineFunction;

/// Holds any callable of the signature; closures up to `Capacity` bytes (and
/// nothrow-movable) live inline, larger ones on the heap.
template <typename R, typename... Args, std::size_t Capacity>
class InlineFunction<R(Args...), Capacity> {
 public:
  InlineFunction() noexcept = default;
  InlineFunction(std::nullptr_t) noexcept {}  // NOLINT: mirrors std::function

  template <typename F, typename D = std::decay_t<F>,
            typename = std::enable_if_t<!std::is_same_v<D, InlineFunction> &&
                                        std::is_invocable_r_v<R, D&, Args...>>>
  InlineFunction(F&& f)  // NOLINT: implicit like std::function
      : InlineFunction(std::in_place_type<D>, std::forward<F>(f)) {}

  /// Holds a D made from `args` in place (an aggregate from braces), so that
  /// a closure wrapped in another type is copied once, not once per layer.
  template <typename D, typename... A>
  explicit InlineFunction(std::in_place_type_t<D>, A&&... args) {
    static_assert(std::is_invocable_r_v<R, D&, Args...>, "not callable with the signature");
    if constexpr (fits_inline<D>()) {
      if constexpr (std::is_trivially_copyable_v<D> && std::is_trivially_destructible_v<D>) {
        // Moves copy the whole buffer: the bytes past the callable are
        // cleared (a fixed size per type, a store or two), so that no copy
        // reads bytes nothing wrote. An empty callable writes none.
        if constexpr (std::is_empty_v<D>) {
          std::memset(storage_, 0, Capacity);
        } else if constexpr (sizeof(D) < Capacity) {
          std::memset(storage_ + sizeof(D), 0, Capacity - sizeof(D));
        }
        make<D>(storage_, std::forward<A>(args)...);
        ops_ = &kTrivialOps<D>;
      } else {
        make<D>(storage_, std::forward<A>(args)...);
        ops_ = &kInlineOps<D>;
      }
    } else {
      if constexpr (std::is_constructible_v<D, A&&...>) {
        *reinterpret_cast<D**>(storage_) = new D(std::forward<A>(args)...);
      } else {
        *reinterpret_cast<D**>(storage_) = new D{std::forward<A>(args)...};
      }
      ops_ = &kHeapOps<D>;
    }
  }

  InlineFunction(InlineFunction&& other) noexcept : ops_(other.ops_) {
    if (ops_ != nullptr) {
      move_storage(other);
      other.ops_ = nullptr;
    }
  }

  InlineFunction& operator=(InlineFunction&& other) noexcept {
    if (this != &other) {
      reset();
      if (other.ops_ != nullptr) {
        ops_ = other.ops_;
        move_storage(other);
        other.ops_ = nullptr;
      }
    }
    return *this;
  }

  InlineFunction(const InlineFunction&) = delete;
  InlineFunction& operator=(const InlineFunction&) = delete;
  ~InlineFunction() { reset(); }

  explicit operator bool() const noexcept { return ops_ != nullptr; }

  /// The held callable's type's `kInlineFunctionTag` (false without one, or
  /// when empty): one bit a wrapper can keep about the type it erased
  /// without a field of its own.
  bool tag() const noexcept { return ops_ != nullptr && ops_->tag; }

  R operator()(Args... args) { return ops_->call(storage_, std::forward<Args>(args)...); }

  /// Destroys the held callable (and what it captured) now.
  void reset() noexcept {
    if (ops_ != nullptr) {
      if (ops_->destroy != nullptr) ops_->destroy(storage_);
      ops_ = nullptr;
    }
  }

 private:
  /// How to call, move and destroy the held callable. A closure that is
  /// trivially copyable and destructible (the usual one: pointers, sizes,
  /// indices) has no move or destroy: it is copied as bytes and dropped, with
  /// no indirect call on the push path.
  struct Ops {
    R (*call)(void*, Args&&...);
    void (*move)(void* from, void* to) noexcept;
    void (*destroy)(void*) noexcept;
    bool tag;
  };

  template <typename D>
  static constexpr bool tag_of() {
    if constexpr (requires { D::kInlineFunctionTag; }) {
      return D::kInlineFunctionTag;
    } else {
      return false;
    }
  }

  /// Takes `other`'s callable into this one's storage; ops_ is already other's.
  void move_storage(InlineFunction& other) noexcept {
    if (ops_->move != nullptr) {
      ops_->move(other.storage_, storage_);
    } else {
      // The whole buffer, a fixed size copied in a few moves (the bytes
      // past the callable cleared when it was made).
      std::memcpy(storage_, other.storage_, Capacity);
    }
  }

  /// Constructs a D at `at`: parentheses where a constructor takes `args`,
  /// braces for an aggregate.
  template <typename D, typename... A>
  static void make(void* at, A&&... args) {
    if constexpr (std::is_constructible_v<D, A&&...>) {
      ::new (at) D(std::forward<A>(args)...);
    } else {
      ::new (at) D{std::forward<A>(args)...};
    }
  }

  template <typename D>
  static constexpr bool fits_inline() {
    return sizeof(D) <= Capacity && alignof(D) <= kAlign && std::is_nothrow_move_constructible_v<D>;
  }

  template <typename D>
  static constexpr Ops kInlineOps{
      [](void* s, Args&&... a) -> R { return (*static_cast<D*>(s))(std::forward<Args>(a)...); },
      [](void* from, void* to) noexcept {
        ::new (to) D(std::move(*static_cast<D*>(from)));
        static_cast<D*>(from)->~D();
      },
      [](void* s) noexcept { static_cast<D*>(s)->~D(); }, tag_of<D>()};

  template <typename D>
  static constexpr Ops kTrivialOps{
      [](void* s, Args&&... a) -> R { return (*static_cast<D*>(s))(std::forward<Args>(a)...); },
      nullptr, nullptr, tag_of<D>()};

  template <typename D>
  static constexpr Ops kHeapOps{
      [](void* s, Args&&... a) -> R { return (**static_cast<D**>(s))(std::forward<Args>(a)...); },
      [](void* from, void* to) noexcept { *static_cast<D**>(to) = *static_cast<D**>(from); },
      [](void* s) noexcept { delete *static_cast<D**>(s); }, tag_of<D>()};

  // Pointer alignment keeps the holder small; over-aligned closures go to the heap.
  static constexpr std::size_t kAlign = alignof(void*);
  alignas(kAlign) unsigned char storage_[Capacity];
  const Ops* ops_ = nullptr;
};

}  // namespace tagflow::detail

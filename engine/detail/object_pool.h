#pragma once
// ObjectPool: fixed-size blocks recycled per thread, for the engine's
// operation and variable records, and (ObjectPoolAllocator) arrays' chunks.
// Allocation pops a thread-local list; a block freed by another thread goes
// back to its owner's lock-free return list, which the owner takes whole
// when its own list runs dry.
//
// Note [Operation memory]
// Operations are allocated by the pushing thread and freed by whichever
// worker completes them. A general-purpose allocator's per-thread caches
// then drain on one side and overflow on the other; returning each block to
// the cache that made it keeps steady-state pushing free of malloc and of
// contended locks. Blocks freed for another thread's cache are gathered and
// handed back in batches; a thread about to idle flushes its batch. Caches are never destroyed: a
// thread that exits hands its cache to the next thread that starts, so a late remote free always
// has a live destination. Memory is kept at its peak, like every caching pool.
//
// Note [Inspecting pooled records]
// Chunks are zero-filled when made and never returned, and a slot only ever
// holds objects of one type, so a diagnostic can walk every slot and tell a
// never-used one (zero bytes) from one that held an object (its fields, as
// the object left them when it was destroyed). That is sound only where the
// caller knows no object is being built meanwhile and keeps the objects it
// reads from being destroyed: the engine's dependency dump does both
// (Note [Dependency state] in threaded_engine.h).

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace tagflow::detail {

class ObjectPoolCache;

/// Asks for a cache line in exclusive state, ready to be written. PREFETCHW
/// is a no-op on x86 processors that predate it, so it is emitted directly
/// rather than left to -march.
inline void prefetch_for_write(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1, 3);
#endif
}

/// Registry of every cache and chunk for one block size (never freed).
class ObjectPoolRegistry {
 public:
  ObjectPoolRegistry(std::size_t block_size, std::size_t header_offset, std::size_t stride)
      : block_size_(block_size), header_offset_(header_offset), stride_(stride) {}
  std::size_t block_size() const { return block_size_; }
  /// Bytes from a slot's start (its object, cache-line aligned) to the
  /// pool's header behind the object.
  std::size_t header_offset() const { return header_offset_; }
  /// Bytes from one slot to the next: object and header in whole cache lines.
  std::size_t stride() const { return stride_; }
  ObjectPoolCache* adopt();
  void release(ObjectPoolCache* cache);
  /// A zero-filled chunk of `slots` slots of `stride` bytes each.
  void* new_chunk(std::size_t stride, std::size_t slots);
  /// Calls `visit` with the start of every slot of every chunk: zero bytes
  /// until a first object is built there, then the last object built there,
  /// alive or destroyed (Note [Inspecting pooled records]).
  template <typename F>
  void for_each_slot(F&& visit) {
    std::lock_guard lock(mutex_);
    for (const Chunk& chunk : chunks_) {
      for (std::size_t i = 0; i < chunk.slots; ++i)
        visit(static_cast<char*>(chunk.bytes) + i * chunk.stride);
    }
  }

 private:
  std::size_t block_size_;
  std::size_t header_offset_;
  std::size_t stride_;
  std::mutex mutex_;
  std::vector<ObjectPoolCache*> idle_;
  std::vector<ObjectPoolCache*> all_;
  struct Chunk {
    void* bytes;
    std::size_t stride;
    std::size_t slots;
  };
  std::vector<Chunk> chunks_;
};

/// A slot: the object's bytes from the start of a cache line, then this
/// header (so that the object's first line is entirely its own).
struct PoolSlotHeader {
  ObjectPoolCache* owner;
  PoolSlotHeader* next;
};

/// The header of a slot whose type asks for a generation (declares
/// `kSlotGeneration`): zero in a fresh slot, and kept across recycling
/// (neither the pool nor the object's construction writes it). Variable
/// records count their variables in it (Note [Variable generations] in
/// var_block.h). Other types go without: sixteen bytes, not twenty-four,
/// are what lets an operation's record and its header fill whole lines
/// (Note [The record's size] in op_block.h).
struct GenerationSlotHeader {
  PoolSlotHeader slot;  ///< first: the pool sees this header as a PoolSlotHeader
  std::atomic<std::uint32_t> generation;
};
static_assert(offsetof(GenerationSlotHeader, slot) == 0);

class alignas(64) ObjectPoolCache {
 public:
  explicit ObjectPoolCache(ObjectPoolRegistry* registry);

  /// The registry's header offset and stride, known to the caller at
  /// compile time: the prefetches below then unroll.
  template <std::size_t kHeaderOffset, std::size_t kStride>
  void* allocate() {
    PoolSlotHeader* slot = local_;
    if (slot == nullptr) [[unlikely]]
      slot = refill();
    local_ = slot->next;
    // The next block was most likely freed on another core: start moving its
    // lines here now, so the next allocation finds them (Note [Operation memory]).
    if (local_ != nullptr) {
      const char* bytes = reinterpret_cast<const char*>(local_) - kHeaderOffset;
      for (std::size_t off = 0; off < kStride; off += 64) prefetch_for_write(bytes + off);
    }
    return reinterpret_cast<char*>(slot) - kHeaderOffset;
  }

  /// Takes back a block of its own, freed by its owner thread.
  void take_back(PoolSlotHeader* slot) noexcept {
    slot->next = local_;
    local_ = slot;
  }

  /// Returns a chain of this cache's blocks freed by another thread.
  void give_back(PoolSlotHeader* head, PoolSlotHeader* tail) noexcept {
    PoolSlotHeader* top = remote_.load(std::memory_order_relaxed);
    do {
      tail->next = top;
    } while (!remote_.compare_exchange_weak(top, head, std::memory_order_release,
                                            std::memory_order_relaxed));
  }

 private:
  PoolSlotHeader* refill();

  ObjectPoolRegistry* registry_;
  std::size_t header_offset_;
  std::size_t stride_;                                        ///< bytes from one slot to the next
  PoolSlotHeader* local_ = nullptr;                           // owner thread only
  alignas(64) std::atomic<PoolSlotHeader*> remote_{nullptr};  // any thread pushes
};

/// A thread's blocks freed for another cache, handed back in one go: one
/// contended compare-and-swap per batch instead of one per block.
struct ReturnBatch {
  static constexpr unsigned kSize = 32;
  ObjectPoolCache* owner = nullptr;
  PoolSlotHeader* head = nullptr;
  PoolSlotHeader* tail = nullptr;
  unsigned count = 0;

  void add(PoolSlotHeader* slot) noexcept {
    if (slot->owner != owner || count == kSize) flush();
    owner = slot->owner;
    slot->next = head;
    head = slot;
    if (tail == nullptr) tail = slot;
    ++count;
  }
  void flush() noexcept {
    if (head != nullptr) owner->give_back(head, tail);
    head = tail = nullptr;
    count = 0;
  }
};

/// Thread-local handle to a cache of the registry for objects of type `T`
/// (aligned to at most a cache line). Each type has its own registry, so
/// every slot of it only ever holds a `T`.
template <typename T>
class ObjectPool {
  static_assert(alignof(T) <= 64, "slots are aligned to cache lines");
  static constexpr bool kGeneration = requires { T::kSlotGeneration; };

 public:
  /// The slot header behind each object.
  using Header = std::conditional_t<kGeneration, GenerationSlotHeader, PoolSlotHeader>;

 private:
  static constexpr std::size_t kHeaderOffset =
      (sizeof(T) + alignof(Header) - 1) / alignof(Header) * alignof(Header);
  /// Object and header rounded up to whole cache lines.
  static constexpr std::size_t kStride = (kHeaderOffset + sizeof(Header) + 63) / 64 * 64;

 public:
  static void* allocate() { return local().template allocate<kHeaderOffset, kStride>(); }
  /// Bytes from one slot to the next.
  static constexpr std::size_t stride() { return kStride; }

  static void deallocate(void* p) noexcept {
    auto* slot = reinterpret_cast<PoolSlotHeader*>(static_cast<char*>(p) + kHeaderOffset);
    ObjectPoolCache& mine = local();
    if (slot->owner == &mine) {
      mine.take_back(slot);
    } else {
      returns().add(slot);
    }
  }

  /// Hands back this thread's pending returns now (a thread about to idle).
  static void flush_returns() noexcept { returns().flush(); }

  /// The header of the slot holding `p` (an object of this pool, alive or not).
  static Header& header(const void* p) noexcept {
    return *reinterpret_cast<Header*>(const_cast<char*>(static_cast<const char*>(p)) +
                                      kHeaderOffset);
  }

  /// See ObjectPoolRegistry::for_each_slot.
  template <typename F>
  static void for_each_slot(F&& visit) {
    registry().for_each_slot(std::forward<F>(visit));
  }

 private:
  static ReturnBatch& returns() {
    thread_local ReturnBatch batch;  // trivially destructible: valid for the whole thread
    return batch;
  }
  static ObjectPoolRegistry& registry() {
    // Leaked on purpose: blocks may be freed during static destruction.
    static ObjectPoolRegistry* registry = new ObjectPoolRegistry(sizeof(T), kHeaderOffset, kStride);
    return *registry;
  }
  // The thread's cache: a plain thread-local pointer, valid for the whole
  // thread, so that objects destroyed late (statics, after the main
  // thread's thread-local destructors) still allocate and free (Note
  // [Engine lifetime] in engine.h). A thread that ends hands its cache back
  // through a pthread key's destructor rather than a thread_local object's:
  // those are listed in memory only the thread's own storage points to,
  // which a forked child's leak check would report as lost.
  static ObjectPoolCache*& cache_slot() {
    thread_local ObjectPoolCache* cache = nullptr;
    return cache;
  }
  static void release_at_thread_exit(void* cache) {
    returns().flush();
    cache_slot() = nullptr;
    registry().release(static_cast<ObjectPoolCache*>(cache));
  }
  struct ExitKey {
    pthread_key_t key{};
    bool made = pthread_key_create(&key, release_at_thread_exit) == 0;
  };
  [[gnu::noinline]] static ObjectPoolCache& adopt() {
    static const ExitKey exit_key;
    ObjectPoolCache* cache = registry().adopt();
    cache_slot() = cache;
    // Without a key, the cache stays with its thread: memory, not correctness.
    if (exit_key.made) (void)pthread_setspecific(exit_key.key, cache);
    return *cache;
  }
  static ObjectPoolCache& local() {
    ObjectPoolCache* cache = cache_slot();
    if (cache == nullptr) [[unlikely]]
      return adopt();
    return *cache;
  }
};

/// A standard allocator over ObjectPool, for one object at a time: with
/// std::allocate_shared, a shared object and its counts come from the pool
/// of their joint block (an array's chunk: one per operator's result).
/// Larger requests go to the global allocator.
template <typename T>
class ObjectPoolAllocator {
 public:
  using value_type = T;
  ObjectPoolAllocator() noexcept = default;
  template <typename U>
  ObjectPoolAllocator(const ObjectPoolAllocator<U>&) noexcept {}  // NOLINT: rebinding

  T* allocate(std::size_t n) {
    if (n != 1) [[unlikely]]
      return std::allocator<T>().allocate(n);
    return static_cast<T*>(ObjectPool<T>::allocate());
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n != 1) [[unlikely]] {
      std::allocator<T>().deallocate(p, n);
      return;
    }
    ObjectPool<T>::deallocate(p);
  }
  template <typename U>
  bool operator==(const ObjectPoolAllocator<U>&) const noexcept {
    return true;
  }
};

/// Base for types allocated from their own ObjectPool with plain new/delete.
template <typename T>
struct Pooled {
  static void* operator new(std::size_t size) {
    (void)size;
    return ObjectPool<T>::allocate();
  }
  static void operator delete(void* p) noexcept { ObjectPool<T>::deallocate(p); }
  /// Hands back the blocks of T this thread freed for other threads.
  static void flush_returns() noexcept { ObjectPool<T>::flush_returns(); }
};

}  // namespace tagflow::detail

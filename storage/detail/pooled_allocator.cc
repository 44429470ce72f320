#include "storage/detail/pooled_allocator.h"

#include "engine/detail/profile_marks.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>

namespace tagflow::detail {

namespace {

/// The size of class `index` (the inverse of class_index).
std::uint64_t class_size(std::size_t index) {
  if (index == 0) return 512;
  const std::uint64_t power = std::uint64_t{512} << ((index - 1) / 4);
  return power / 4 * (5 + (index - 1) % 4);
}

/// Threads are numbered as they first use a pooled allocator; the number
/// picks the thread's magazine (Note [Per-thread magazines]).
std::atomic<std::uint32_t> next_thread_number{0};

}  // namespace

PooledAllocator::PooledAllocator(Context ctx, std::unique_ptr<DeviceMemory> memory,
                                 std::uint64_t limit, std::uint64_t max_cached_block,
                                 ReleaseGate* gate)
    : ctx_(ctx),
      memory_(std::move(memory)),
      max_cached_block_(max_cached_block),
      limit_(limit),
      capacity_(memory_->capacity()),
      gate_(gate) {}

std::uint32_t PooledAllocator::magazine_capacity(std::size_t index) {
  static_assert(kMagazineClasses == 25, "classes up to 32 KiB: class 24 is 32 KiB");
  const std::uint64_t blocks = (std::uint64_t{256} << 10) / class_size(index);
  return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(blocks, 8, kMagazineBlocks)) & ~1u;
}

PooledAllocator::~PooledAllocator() {
  if (gate_ != nullptr) gate_->forget(*this);
  // Blocks still in use belong to arrays that outlive the allocator (a
  // process exiting); only the cache is ours to return.
  release_cache();
  for (auto& slot : magazines_) delete slot.load(std::memory_order_acquire);
}

std::atomic<PooledAllocator::Magazine*>& PooledAllocator::my_slot() noexcept {
  // Zero until the thread's first use, then 1 + its number (a plain
  // thread-local, so that it needs no initialisation call).
  thread_local std::uint32_t number = 0;
  if (number == 0) [[unlikely]]
    number = 1 + next_thread_number.fetch_add(1, std::memory_order_relaxed) % kMagazines;
  return magazines_[number - 1];
}

PooledAllocator::Magazine* PooledAllocator::my_magazine() noexcept {
  std::atomic<Magazine*>& slot = my_slot();
  Magazine* magazine = slot.load(std::memory_order_acquire);
  if (magazine != nullptr) [[likely]]
    return magazine;
  auto* made = new (std::nothrow) Magazine;
  if (made == nullptr) return nullptr;
  if (slot.compare_exchange_strong(magazine, made, std::memory_order_acq_rel)) return made;
  delete made;  // another thread of the same number made it first
  return magazine;
}

void* PooledAllocator::take_from_magazine(Magazine& m, std::size_t index) {
  std::uint32_t& count = m.counts[index];
  if (count == 0) {
    // Half a magazine from the shared list, the most recently freed first.
    std::lock_guard lock(lock_);
    std::vector<void*>& list = free_lists_[index];
    const std::uint32_t n = std::min<std::uint32_t>(magazine_capacity(index) / 2,
                                                    static_cast<std::uint32_t>(list.size()));
    if (n == 0) return nullptr;
    std::memcpy(m.blocks[index].data(), list.data() + list.size() - n, n * sizeof(void*));
    list.resize(list.size() - n);
    count = n;
  }
  ++m.allocations;
  return m.blocks[index][--count];
}

void* PooledAllocator::take_from_other_magazines(Magazine& own, std::size_t index,
                                                 std::uint64_t size) {
  const std::uint32_t capacity = magazine_capacity(index);
  for (const auto& slot : magazines_) {
    Magazine* other = slot.load(std::memory_order_acquire);
    if (other == nullptr || other == &own) continue;
    // Two magazine locks at once: std::scoped_lock takes them without
    // deadlock whatever order another thread asks in; lock_ is not held.
    std::scoped_lock locks(own.lock, other->lock);
    std::uint32_t& theirs = other->counts[index];
    std::uint32_t& mine = own.counts[index];
    // Half of theirs, the older half, and no more than fits here (a thread
    // sharing `own` may have filled it meanwhile).
    const std::uint32_t n = std::min({(theirs + 1) / 2, capacity - mine + 1, theirs});
    if (n == 0) continue;
    std::array<void*, kMagazineBlocks>& from = other->blocks[index];
    std::array<void*, kMagazineBlocks>& to = own.blocks[index];
    void* data = from[0];
    std::copy_n(from.begin() + 1, n - 1, to.begin() + mine);
    mine += n - 1;
    std::memmove(from.data(), from.data() + n, (theirs - n) * sizeof(void*));
    theirs -= n;
    ++own.allocations;
    count_in_magazine(own, static_cast<std::int64_t>(size));
    return data;
  }
  return nullptr;
}

bool PooledAllocator::keep_in_magazine(Magazine& m, std::size_t index, void* data) noexcept {
  std::uint32_t& count = m.counts[index];
  const std::uint32_t capacity = magazine_capacity(index);
  if (count >= capacity) {
    // Full: the older half goes to the shared list, the recent half stays.
    const std::uint32_t half = capacity / 2;
    std::array<void*, kMagazineBlocks>& blocks = m.blocks[index];
    {
      std::lock_guard lock(lock_);
      std::vector<void*>& list = free_lists_[index];
      try {
        list.insert(list.end(), blocks.begin(), blocks.begin() + half);
      } catch (...) {  // no memory for the list: the caller hands the block back
        return false;
      }
    }
    std::memmove(blocks.data(), blocks.data() + half, (count - half) * sizeof(void*));
    count -= half;
  }
  m.blocks[index][count++] = data;
  return true;
}

void PooledAllocator::raise_peak(std::uint64_t in_use) noexcept {
  std::uint64_t peak = peak_.load(std::memory_order_relaxed);
  while (in_use > peak && !peak_.compare_exchange_weak(peak, in_use, std::memory_order_relaxed)) {
  }
}

void PooledAllocator::count_in_use(std::uint64_t size) noexcept {
  // The thread's unposted bytes go with it, so that the peak it checks
  // counts them (Note [Figures of the magazines]).
  std::int64_t delta = static_cast<std::int64_t>(size);
  if (Magazine* m = my_slot().load(std::memory_order_acquire)) {
    std::lock_guard lock(m->lock);
    delta += std::exchange(m->unposted, 0);
  }
  const std::int64_t now = in_use_.fetch_add(delta, std::memory_order_relaxed) + delta;
  if (now > 0) raise_peak(static_cast<std::uint64_t>(now));
}

void PooledAllocator::count_in_magazine(Magazine& m, std::int64_t delta) noexcept {
  // Note [Figures of the magazines].
  constexpr std::int64_t kPostAt = 64 * 1024;
  m.unposted += delta;
  if (m.unposted >= kPostAt || m.unposted <= -kPostAt) {
    in_use_.fetch_add(std::exchange(m.unposted, 0), std::memory_order_relaxed);
  }
  if (delta > 0) {
    const std::int64_t now = in_use_.load(std::memory_order_relaxed) + m.unposted;
    if (now > 0 && static_cast<std::uint64_t>(now) > peak_.load(std::memory_order_relaxed)) {
      raise_peak(static_cast<std::uint64_t>(now));
    }
  }
}

std::uint64_t PooledAllocator::exact_in_use() const {
  // The shared count first: bytes a magazine posts meanwhile are then missed
  // rather than counted twice, so the figure errs low, on the side of
  // "something is cached" for release_cache_unless_collectives().
  std::int64_t in_use = in_use_.load(std::memory_order_relaxed);
  for (const auto& slot : magazines_) {
    Magazine* m = slot.load(std::memory_order_acquire);
    if (m == nullptr) continue;
    std::lock_guard lock(m->lock);
    in_use += m->unposted;
  }
  return in_use > 0 ? static_cast<std::uint64_t>(in_use) : 0;
}

MemoryBlock PooledAllocator::allocate(std::uint64_t bytes) {
  const MemoryBlock block = allocate_block(bytes);
  if (profiling() && block.data != nullptr) [[unlikely]] {
    // No memory for the record: the profile misses one allocation, and the
    // caller still gets its block (thrown, it would be lost).
    try {
      record_allocation(ctx_, block.size, /*release=*/false);
    } catch (...) {
    }
  }
  return block;
}

MemoryBlock PooledAllocator::allocate_block(std::uint64_t bytes) {
  if (bytes == 0) return {};
  const std::uint64_t size = size_class(bytes);
  const std::size_t index = class_index(size);
  // The common case first, as one look into the thread's magazine: a block
  // of this class, which was cacheable when it was released there.
  if (index < kMagazineClasses) [[likely]] {
    if (Magazine* m = my_slot().load(std::memory_order_acquire)) [[likely]] {
      std::lock_guard lock(m->lock);
      std::uint32_t& count = m->counts[index];
      if (count != 0) [[likely]] {
        ++m->allocations;
        count_in_magazine(*m, static_cast<std::int64_t>(size));
        return {m->blocks[index][--count], size};
      }
    }
  }
  return allocate_elsewhere(bytes, size, index);
}

MemoryBlock PooledAllocator::allocate_elsewhere(std::uint64_t bytes, std::uint64_t size,
                                                std::size_t index) {
  if (!cacheable(size)) {
    size = (bytes + 63) / 64 * 64;
    return allocate_from_device(bytes, size);
  }
  void* data = nullptr;
  Magazine* magazine = index < kMagazineClasses ? my_magazine() : nullptr;
  if (magazine != nullptr) {
    {
      std::lock_guard lock(magazine->lock);
      data = take_from_magazine(*magazine, index);
      if (data != nullptr) {
        count_in_magazine(*magazine, static_cast<std::int64_t>(size));
        return {data, size};
      }
    }
    data = take_from_other_magazines(*magazine, index, size);
    if (data != nullptr) return {data, size};
  } else {
    std::lock_guard lock(lock_);
    std::vector<void*>& list = free_lists_[index];
    if (!list.empty()) {
      data = list.back();
      list.pop_back();
      ++allocations_;
    }
  }
  if (data == nullptr) return allocate_from_device(bytes, size);
  count_in_use(size);
  return {data, size};
}

MemoryBlock PooledAllocator::allocate_from_device(std::uint64_t bytes, std::uint64_t size) {
  std::lock_guard slow(device_mutex_);
  void* data = try_device_allocation(size);
  std::size_t kept_by = 0;  // collectives in flight that kept the cache
  if (data == nullptr) {
    // Not waiting for them: this thread may be one a collective waits for
    // (Note [No release during collectives] in release_gate.h).
    kept_by = release_cache_unless_collectives();
    if (kept_by == 0) data = try_device_allocation(size);
  }
  if (data == nullptr) throw OutOfMemoryError(ctx_, bytes, stats(), kept_by);
  {
    std::lock_guard lock(lock_);
    ++allocations_;
    ++device_allocations_;
  }
  count_in_use(size);
  return {data, size};
}

void* PooledAllocator::try_device_allocation(std::uint64_t size) {
  {
    std::lock_guard lock(lock_);
    if (limit_ != 0 && owned_ + size > limit_) return nullptr;
    owned_ += size;  // reserved: concurrent requests count it against the limit
  }
  void* data = nullptr;
  try {
    data = memory_->allocate(size);
  } catch (...) {
    std::lock_guard lock(lock_);
    owned_ -= size;
    throw;
  }
  if (data == nullptr) {
    std::lock_guard lock(lock_);
    owned_ -= size;
  }
  return data;
}

void PooledAllocator::release(MemoryBlock block) noexcept {
  if (block.data == nullptr) return;
  if (profiling()) [[unlikely]] {
    try {
      record_allocation(ctx_, block.size, /*release=*/true);
    } catch (...) {  // no memory for the record: the profile misses one release
    }
  }
  if (cacheable(block.size)) {
    const std::size_t index = class_index(block.size);
    Magazine* magazine = index < kMagazineClasses ? my_magazine() : nullptr;
    bool kept = false;
    if (magazine != nullptr) {
      std::lock_guard lock(magazine->lock);
      if (keep_in_magazine(*magazine, index, block.data)) {
        count_in_magazine(*magazine, -static_cast<std::int64_t>(block.size));
        return;
      }
    } else {
      std::lock_guard lock(lock_);
      try {
        free_lists_[index].push_back(block.data);
        kept = true;
      } catch (...) {  // no memory for the list itself: hand the block back instead
      }
    }
    if (kept) {
      in_use_.fetch_sub(static_cast<std::int64_t>(block.size), std::memory_order_relaxed);
      return;
    }
  }
  if (gate_ != nullptr) {
    try {
      const std::size_t kept_by =
          gate_->release_or_defer(*this, [&] { memory_->release(block.data, block.size); });
      {
        std::lock_guard lock(lock_);
        if (kept_by != 0) {
          held_.push_back({block.data, block.size});  // counted as cached
        } else {
          owned_ -= block.size;
        }
      }
      in_use_.fetch_sub(static_cast<std::int64_t>(block.size), std::memory_order_relaxed);
      return;
    } catch (...) {  // no memory to hold the block: it goes back now, as ungated
    }
  }
  memory_->release(block.data, block.size);
  {
    std::lock_guard lock(lock_);
    owned_ -= block.size;
  }
  in_use_.fetch_sub(static_cast<std::int64_t>(block.size), std::memory_order_relaxed);
}

void PooledAllocator::release_cache() {
  std::uint64_t released = 0;
  // The magazines first, one at a time (their locks come before lock_):
  // blocks they pass to the shared lists meanwhile are taken below.
  for (auto& slot : magazines_) {
    Magazine* m = slot.load(std::memory_order_acquire);
    if (m == nullptr) continue;
    for (std::size_t index = 0; index < kMagazineClasses; ++index) {
      std::array<void*, kMagazineBlocks> taken;
      std::uint32_t n;
      {
        std::lock_guard lock(m->lock);
        n = std::exchange(m->counts[index], 0);
        std::copy_n(m->blocks[index].begin(), n, taken.begin());
      }
      for (std::uint32_t i = 0; i < n; ++i) memory_->release(taken[i], class_size(index));
      released += n * class_size(index);
    }
  }
  std::array<std::vector<void*>, kClasses> taken;
  std::vector<HeldBlock> held;
  {
    std::lock_guard lock(lock_);
    taken.swap(free_lists_);
    held.swap(held_);
  }
  for (const HeldBlock& block : held) {
    memory_->release(block.data, block.size);
    released += block.size;
  }
  for (std::size_t index = 0; index < kClasses; ++index) {
    for (void* data : taken[index]) memory_->release(data, class_size(index));
    released += taken[index].size() * class_size(index);
  }
  std::lock_guard lock(lock_);
  owned_ -= released;
}

std::size_t PooledAllocator::release_cache_unless_collectives() {
  const std::uint64_t in_use = exact_in_use();
  {
    std::lock_guard lock(lock_);
    if (owned_ <= in_use) return 0;  // nothing cached: nothing to release, nothing to put off
  }
  if (gate_ == nullptr) {
    release_cache();
    return 0;
  }
  return gate_->release_or_defer(*this, [this] { release_cache(); });
}

void PooledAllocator::release_deferred() noexcept {
  std::lock_guard slow(device_mutex_);
  release_cache();
}

void PooledAllocator::empty_cache() {
  std::lock_guard slow(device_mutex_);
  (void)release_cache_unless_collectives();
}

MemoryStats PooledAllocator::stats() const {
  std::uint64_t from_magazines = 0;
  std::int64_t in_use = in_use_.load(std::memory_order_relaxed);  // first: see exact_in_use()
  for (const auto& slot : magazines_) {
    Magazine* m = slot.load(std::memory_order_acquire);
    if (m == nullptr) continue;
    std::lock_guard lock(m->lock);
    from_magazines += m->allocations;
    in_use += m->unposted;
  }
  MemoryStats s;
  {
    std::lock_guard lock(lock_);
    s.in_use = in_use > 0 ? static_cast<std::uint64_t>(in_use) : 0;
    // Blocks on their way to or from the device make the difference
    // negative for a moment; at rest it is exact.
    s.cached = owned_ > s.in_use ? owned_ - s.in_use : 0;
    s.allocations = allocations_ + from_magazines;
    s.device_allocations = device_allocations_;
    s.limit = limit_;
    s.capacity = capacity_;
  }
  s.peak = std::max(peak_.load(std::memory_order_relaxed), s.in_use);
  return s;
}

void PooledAllocator::set_limit(std::uint64_t bytes) {
  std::lock_guard lock(lock_);
  limit_ = bytes;
}

void PooledAllocator::reset_peak() { peak_.store(exact_in_use(), std::memory_order_relaxed); }

}  // namespace tagflow::detail

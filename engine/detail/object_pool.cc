#include "engine/detail/object_pool.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace tagflow::detail {

namespace {
constexpr std::size_t kSlotsPerChunk = 256;
}

ObjectPoolCache* ObjectPoolRegistry::adopt() {
  std::lock_guard lock(mutex_);
  if (!idle_.empty()) {
    ObjectPoolCache* cache = idle_.back();
    idle_.pop_back();
    return cache;
  }
  auto cache = std::make_unique<ObjectPoolCache>(this);
  all_.push_back(cache.get());  // may throw std::bad_alloc: then nothing is kept
  return cache.release();
}

void ObjectPoolRegistry::release(ObjectPoolCache* cache) {
  std::lock_guard lock(mutex_);
  idle_.push_back(cache);
}

void* ObjectPoolRegistry::new_chunk(std::size_t stride, std::size_t slots) {
  void* chunk = ::operator new (stride* slots, std::align_val_t{64});
  std::memset(chunk, 0, stride * slots);
  std::lock_guard lock(mutex_);
  try {
    chunks_.push_back(Chunk{chunk, stride, slots});
  } catch (...) {  // no room to remember it: give it back rather than leak it
    ::operator delete (chunk, std::align_val_t{64});
    throw;
  }
  return chunk;
}

ObjectPoolCache::ObjectPoolCache(ObjectPoolRegistry* registry)
    : registry_(registry), header_offset_(registry->header_offset()), stride_(registry->stride()) {}

PoolSlotHeader* ObjectPoolCache::refill() {
  PoolSlotHeader* taken = remote_.exchange(nullptr, std::memory_order_acquire);
  if (taken != nullptr) return taken;
  auto* bytes = static_cast<unsigned char*>(registry_->new_chunk(stride_, kSlotsPerChunk));
  PoolSlotHeader* head = nullptr;
  for (std::size_t i = kSlotsPerChunk; i-- > 0;) {
    auto* slot = reinterpret_cast<PoolSlotHeader*>(bytes + i * stride_ + header_offset_);
    slot->owner = this;
    slot->next = head;
    head = slot;
  }
  return head;
}

}  // namespace tagflow::detail

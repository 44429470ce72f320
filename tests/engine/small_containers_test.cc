// InlineFunction, SmallVector and ObjectPool: the engine's building blocks.

#include <array>
#include <atomic>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/detail/object_pool.h"
#include "engine/inline_function.h"
#include "engine/operation.h"
#include "engine/small_vector.h"

namespace tagflow::detail {
namespace {

TEST(InlineFunction, CallsSmallAndLargeClosures) {
  int small_hits = 0;
  InlineFunction<int(int), 32> small = [&small_hits](int x) { return x + ++small_hits; };
  EXPECT_EQ(small(10), 11);
  EXPECT_EQ(small(10), 12);

  std::array<long, 16> big{};  // 128 bytes: stored on the heap
  big[15] = 5;
  InlineFunction<long(), 32> large = [big] { return big[15] * 2; };
  EXPECT_EQ(large(), 10);
}

TEST(InlineFunction, MovesAndDestroysCapturesExactlyOnce) {
  auto token = std::make_shared<int>(7);
  {
    InlineFunction<int(), 48> f = [token] { return *token; };
    EXPECT_EQ(token.use_count(), 2);
    InlineFunction<int(), 48> g = std::move(f);
    EXPECT_FALSE(static_cast<bool>(f));
    EXPECT_EQ(g(), 7);
    EXPECT_EQ(token.use_count(), 2);
    std::array<char, 200> pad{};
    InlineFunction<int(), 48> h = [token, pad] { return *token + pad[0]; };
    EXPECT_EQ(token.use_count(), 3);
    g = std::move(h);
    EXPECT_EQ(token.use_count(), 2);
    EXPECT_EQ(g(), 7);
  }
  EXPECT_EQ(token.use_count(), 1);
}

/// Counts how it was copied and moved.
struct Tally {
  int* copies;
  int* moves;
  Tally(int* c, int* m) : copies(c), moves(m) {}
  Tally(const Tally& other) : copies(other.copies), moves(other.moves) { ++*copies; }
  Tally(Tally&& other) noexcept : copies(other.copies), moves(other.moves) { ++*moves; }
  Tally& operator=(const Tally&) = delete;
  Tally& operator=(Tally&&) = delete;
};

TEST(InlineFunction, MakesAnAggregateInPlace) {
  struct Plus {
    int base;
    int operator()(int x) const { return base + x; }
  };
  InlineFunction<int(int), 48> f(std::in_place_type<Plus>, 40);
  EXPECT_EQ(f(2), 42);
  int copies = 0, moves = 0;
  struct Holder {
    Tally tally;
    int operator()() const { return *tally.moves; }
  };
  InlineFunction<int(), 48> g(std::in_place_type<Holder>, Tally(&copies, &moves));
  EXPECT_EQ(copies, 0);
  EXPECT_EQ(moves, 1);  // the argument, moved once into its place
}

TEST(OpFunction, TakesTheClosureWithOneMoveOrOneCopy) {
  // An operation's closure is made once, in place: what it captured is
  // moved (or, from an lvalue, copied) exactly once, whatever wraps it.
  int copies = 0, moves = 0;
  Tally tally(&copies, &moves);
  auto sync_body = [t = std::move(tally)](const RunContext&) { ++*t.copies; };
  copies = moves = 0;
  OpFunction from_rvalue = std::move(sync_body);
  EXPECT_EQ(copies, 0);
  EXPECT_EQ(moves, 1);
  EXPECT_FALSE(from_rvalue.is_async());

  copies = moves = 0;
  OpFunction from_lvalue = sync_body;
  EXPECT_EQ(copies, 1);
  EXPECT_EQ(moves, 0);

  copies = moves = 0;
  from_lvalue.body()(RunContext{}, nullptr);  // the closure's own body runs
  EXPECT_EQ(copies, 1);

  int async_runs = 0;
  OpFunction async = [&async_runs](const RunContext&, Completion c) {
    ++async_runs;
    EXPECT_FALSE(c.pending());  // an empty Completion was handed over
  };
  EXPECT_TRUE(async.is_async());
  Completion none;
  async.body()(RunContext{}, &none);
  EXPECT_EQ(async_runs, 1);
}

/// Callables that declare a tag, held inline (trivially copyable or not)
/// and on the heap.
struct TaggedTrivial {
  static constexpr bool kInlineFunctionTag = true;
  int operator()() const { return 1; }
};
struct TaggedNotTrivial {
  static constexpr bool kInlineFunctionTag = true;
  std::shared_ptr<int> held = std::make_shared<int>(2);
  int operator()() const { return *held; }
};
struct TaggedLarge {
  static constexpr bool kInlineFunctionTag = true;
  std::array<long, 16> pad{};
  int operator()() const { return 3 + static_cast<int>(pad[0]); }
};
struct Untagged {
  static constexpr bool kInlineFunctionTag = false;
  int operator()() const { return 4; }
};

TEST(InlineFunction, KeepsTheTagOfTheTypeItHoldsThroughMoves) {
  InlineFunction<int(), 48> empty;
  EXPECT_FALSE(empty.tag());
  InlineFunction<int(), 48> plain = [] { return 0; };
  EXPECT_FALSE(plain.tag());
  InlineFunction<int(), 48> untagged = Untagged{};
  EXPECT_FALSE(untagged.tag());

  InlineFunction<int(), 48> trivial = TaggedTrivial{};
  InlineFunction<int(), 48> not_trivial = TaggedNotTrivial{};
  InlineFunction<int(), 48> large = TaggedLarge{};  // 128 bytes: on the heap
  for (InlineFunction<int(), 48>* f : {&trivial, &not_trivial, &large}) {
    EXPECT_TRUE(f->tag());
    InlineFunction<int(), 48> moved = std::move(*f);
    EXPECT_TRUE(moved.tag());
    EXPECT_FALSE(f->tag());  // moved from: empty
    InlineFunction<int(), 48> assigned = [] { return 0; };
    assigned = std::move(moved);
    EXPECT_TRUE(assigned.tag());
    EXPECT_GE(assigned(), 1);
    assigned.reset();
    EXPECT_FALSE(assigned.tag());
  }
}

TEST(OpFunction, IsAsynchronousWhateverHoldsTheClosureAndAfterMoves) {
  std::array<long, 16> big{};  // on the heap
  OpFunction small_async = [](const RunContext&, Completion) {};
  OpFunction large_async = [big](const RunContext&, Completion) { (void)big; };
  OpFunction large_sync = [big](const RunContext&) { (void)big; };
  EXPECT_TRUE(small_async.is_async());
  EXPECT_TRUE(large_async.is_async());
  EXPECT_FALSE(large_sync.is_async());
  EXPECT_FALSE(OpFunction{}.is_async());
  OpFunction moved = std::move(large_async);
  EXPECT_TRUE(moved.is_async());
  EXPECT_FALSE(large_async.is_async());
  moved = std::move(large_sync);
  EXPECT_FALSE(moved.is_async());
  // No field beside the body: an operation's record counts on it.
  static_assert(sizeof(OpFunction) == sizeof(OpFunction::Body));
}

Operation moved_through(Operation op) { return op; }

TEST(OpFunction, AnEmptyClosureMovesThroughALocalOperation) {
  // A captureless closure writes no byte of the buffer it is held in; the
  // moves that copy the whole buffer must still compile warning-free
  // (-Werror) and call it.
  int calls = 0;
  Operation op{.name = "noop", .fn = [](const RunContext&) {}};
  op.reads.push_back(VarHandle{});
  Operation moved = moved_through(std::move(op));
  ASSERT_TRUE(static_cast<bool>(moved.fn));
  moved.fn.body()(RunContext{}, nullptr);
  InlineFunction<void(), 48> h = [] {};
  InlineFunction<void(), 48> g = std::move(h);
  EXPECT_FALSE(static_cast<bool>(h));
  g();
  InlineFunction<void(), 48> counted = [&calls] { ++calls; };
  InlineFunction<void(), 48> moved_counted = std::move(counted);
  moved_counted();
  EXPECT_EQ(calls, 1);
}

TEST(SmallVector, ElementsWithADefaultValueAreKeptThroughCopiesAndMoves) {
  // The inline elements are left unwritten until assigned: what is read
  // back is only ever what was put there.
  struct Tagged {
    std::uint64_t bits = 0xdead;
  };
  SmallVector<Tagged, 3> v;
  EXPECT_TRUE(v.empty());
  v.push_back(Tagged{1});
  v.push_back(Tagged{2});
  SmallVector<Tagged, 3> copy = v;
  SmallVector<Tagged, 3> moved = std::move(v);
  ASSERT_EQ(copy.size(), 2u);
  ASSERT_EQ(moved.size(), 2u);
  EXPECT_EQ(copy[0].bits, 1u);
  EXPECT_EQ(copy[1].bits, 2u);
  EXPECT_EQ(moved[1].bits, 2u);
  SmallVector<Tagged, 3> listed{Tagged{}, Tagged{7}};
  EXPECT_EQ(listed[0].bits, 0xdeadu);
  EXPECT_EQ(listed[1].bits, 7u);
}

TEST(SmallVector, GrowsPastInlineCapacityAndCopies) {
  SmallVector<int, 2> v{1, 2};
  for (int i = 3; i <= 10; ++i) v.push_back(i);
  ASSERT_EQ(v.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(v[static_cast<std::size_t>(i)], i + 1);
  SmallVector<int, 2> copy = v;
  SmallVector<int, 2> moved = std::move(v);
  EXPECT_EQ(copy.size(), 10u);
  EXPECT_EQ(moved.size(), 10u);
  EXPECT_EQ(moved[9], 10);
  moved.truncate(3);
  EXPECT_EQ(moved.size(), 3u);
}

struct Blob : Pooled<Blob> {
  std::uint64_t payload[5];
};

/// Slot types: one asking for a generation, one not.
struct alignas(64) WithGeneration : Pooled<WithGeneration> {
  static constexpr bool kSlotGeneration = true;
  char bytes[192];
};
struct alignas(64) WithoutGeneration : Pooled<WithoutGeneration> {
  char bytes[192];
};

TEST(ObjectPool, OnlyATypeThatAsksForAGenerationPaysForItsHeader) {
  // Three lines of object: a sixteen-byte header fits a fourth line, a
  // header with a generation does too; the generation survives recycling.
  EXPECT_EQ(sizeof(ObjectPool<WithoutGeneration>::Header), 16u);
  EXPECT_EQ(ObjectPool<WithoutGeneration>::stride(), 256u);
  EXPECT_EQ(ObjectPool<WithGeneration>::stride(), 256u);
  auto* first = new WithGeneration;
  std::atomic<std::uint32_t>& generation = ObjectPool<WithGeneration>::header(first).generation;
  EXPECT_EQ(generation.load(), 0u);  // a fresh slot
  generation.store(41);
  delete first;
  auto* second = new WithGeneration;  // this thread's last freed slot comes back first
  EXPECT_EQ(second, first);
  EXPECT_EQ(ObjectPool<WithGeneration>::header(second).generation.load(), 41u);
  delete second;
}

TEST(ObjectPool, RecyclesBlocksFreedOnOtherThreads) {
  // Allocate here, free on another thread, allocate again: the blocks come back.
  std::vector<Blob*> first;
  for (int i = 0; i < 1000; ++i) first.push_back(new Blob);
  std::set<Blob*> seen(first.begin(), first.end());
  EXPECT_EQ(seen.size(), 1000u);
  std::thread([&] {
    for (Blob* b : first) delete b;
  }).join();
  // The thread's own cache hands out what it has left of its last chunk
  // (under 256 blocks) before it takes back the remote frees: within 1256
  // allocations every freed block must come back, and none is handed twice.
  std::vector<Blob*> second;
  std::set<Blob*> handed;
  int reused = 0;
  for (int i = 0; i < 1256; ++i) {
    second.push_back(new Blob);
    EXPECT_TRUE(handed.insert(second.back()).second);
    reused += seen.contains(second.back()) ? 1 : 0;
  }
  EXPECT_EQ(reused, 1000);
  for (Blob* b : second) delete b;
}

TEST(ObjectPool, ConcurrentAllocateAndRemoteFreeKeepBlocksDistinct) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 20000;
  std::atomic<bool> overlap{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<Blob*> mine;
      for (int i = 0; i < kRounds; ++i) {
        Blob* b = new Blob;
        for (auto& p : b->payload) p = static_cast<std::uint64_t>(t * kRounds + i);
        mine.push_back(b);
        if (mine.size() == 64) {
          for (Blob* m : mine) {
            const std::uint64_t want = m->payload[0];
            for (auto p : m->payload) overlap = overlap || p != want;
          }
          // Free on a helper thread: remote frees racing this thread's allocations.
          std::thread([batch = std::move(mine)] {
            for (Blob* m : batch) delete m;
          }).join();
          mine.clear();
        }
      }
      for (Blob* m : mine) delete m;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(overlap.load());
}

/// Counts its live instances, to see shared objects destroyed exactly once.
struct Counted {
  static inline std::atomic<int> live{0};
  std::uint64_t value;
  explicit Counted(std::uint64_t v) : value(v) { live.fetch_add(1); }
  ~Counted() { live.fetch_sub(1); }
};

TEST(ObjectPoolAllocator, SharedObjectsComeFromThePoolAndAreDestroyedOnce) {
  using Alloc = ObjectPoolAllocator<Counted>;
  {
    std::vector<std::shared_ptr<Counted>> held;
    std::set<const void*> addresses;
    for (std::uint64_t i = 0; i < 600; ++i) {
      held.push_back(std::allocate_shared<Counted>(Alloc{}, i));
      EXPECT_TRUE(addresses.insert(held.back().get()).second) << "a block handed out twice";
    }
    EXPECT_EQ(Counted::live.load(), 600);
    // Released on another thread (as an array's last handle may be): the
    // blocks go back to this thread's cache and are handed out again.
    std::thread([moved = std::move(held)]() mutable { moved.clear(); }).join();
    EXPECT_EQ(Counted::live.load(), 0);
    // As for Blob above: what is left of the cache's last chunk (600 blocks
    // took three chunks of 256) comes first, then every block freed there.
    std::vector<std::shared_ptr<Counted>> again;
    int reused = 0;
    for (std::uint64_t i = 0; i < 3 * 256; ++i) {
      again.push_back(std::allocate_shared<Counted>(Alloc{}, i));
      reused += addresses.contains(again.back().get()) ? 1 : 0;
      EXPECT_EQ(again.back()->value, i);
    }
    EXPECT_EQ(reused, 600);
  }
  EXPECT_EQ(Counted::live.load(), 0);
  // Several objects at once go to the global allocator.
  std::vector<std::uint64_t, ObjectPoolAllocator<std::uint64_t>> many(1000, 7);
  EXPECT_EQ(many.size(), 1000u);
  EXPECT_EQ(many[999], 7u);
  const auto* begin = reinterpret_cast<const char*>(many.data());
  ObjectPool<std::uint64_t>::for_each_slot([&](void* slot) {
    const auto* start = static_cast<const char*>(slot);
    EXPECT_FALSE(begin >= start && begin < start + ObjectPool<std::uint64_t>::stride())
        << "8,000 bytes handed out of a pool slot";
  });
}

}  // namespace
}  // namespace tagflow::detail

// DataLoader: the batches of every epoch against the data set read directly
// in plain loops, at several worker counts: order, shuffling, last_batch,
// sharding by rank, errors raised by workers, abandoned epochs and
// destruction mid-epoch (each under a timeout, so a deadlock fails instead of
// hanging), then a run over the real Fashion-MNIST test set.

#include "nn/data/data_loader.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <latch>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow::data {
namespace {

using namespace std::chrono_literals;

/// The worker counts every loader test runs at.
const std::vector<int> kWorkerCounts = {0, 1, 3};

/// Runs `f`, aborting the test binary if it takes longer than `limit`: a
/// deadlock in the loader then fails loudly instead of hanging the suite.
void with_timeout(std::chrono::seconds limit, const std::string& what,
                  const std::function<void()>& f) {
  std::packaged_task<void()> task(f);
  std::future<void> done = task.get_future();
  std::thread runner(std::move(task));
  if (done.wait_for(limit) == std::future_status::timeout) {
    std::fprintf(stderr, "%s: still running after %lld s, deadlocked?\n", what.c_str(),
                 static_cast<long long>(limit.count()));
    std::abort();
  }
  runner.join();
  done.get();  // rethrows what f threw
}

/// Sample i: data (2, 3) float32 with values 100 * i + k, label i (int32).
Sample numbered_sample(std::int64_t i) {
  HostArray data({2, 3}, DType::kFloat32);
  auto values = data.values<float>();
  for (std::size_t k = 0; k < values.size(); ++k) {
    values[k] = static_cast<float>(100 * i + static_cast<std::int64_t>(k));
  }
  return Sample{std::move(data), HostArray::scalar<std::int32_t>(static_cast<std::int32_t>(i))};
}

Dataset numbered(std::int64_t n) { return Dataset(n, numbered_sample); }

std::vector<std::int32_t> labels_of(const Batch& batch) {
  return batch.label.to_vector<std::int32_t>();
}

/// Checks that `batch` holds exactly samples `expected` of `dataset`, in
/// order, read back from the data set directly.
void expect_batch_is(const Batch& batch, const Dataset& dataset,
                     const std::vector<std::int32_t>& expected, const std::string& what) {
  const auto count = static_cast<std::int64_t>(expected.size());
  ASSERT_EQ(batch.data.shape(), (Shape{count, 2, 3})) << what;
  ASSERT_EQ(batch.label.shape(), (Shape{count})) << what;
  ASSERT_EQ(batch.data.dtype(), DType::kFloat32) << what;
  ASSERT_EQ(batch.label.dtype(), DType::kInt32) << what;
  EXPECT_EQ(labels_of(batch), expected) << what;
  std::vector<float> reference;
  for (std::int32_t i : expected) {
    const Sample s = dataset.get(i);
    for (float v : s.data.values<float>()) reference.push_back(v);
  }
  EXPECT_EQ(batch.data.to_vector<float>(), reference) << what;
}

/// The labels of every batch of one epoch, one vector per batch.
std::vector<std::vector<std::int32_t>> epoch_labels(DataLoader& loader) {
  std::vector<std::vector<std::int32_t>> batches;
  for (const Batch& batch : loader) batches.push_back(labels_of(batch));
  return batches;
}

std::vector<std::int32_t> flatten(const std::vector<std::vector<std::int32_t>>& batches) {
  std::vector<std::int32_t> all;
  for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  return all;
}

std::vector<std::int32_t> iota(std::int32_t begin, std::int32_t end) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(end - begin));
  std::iota(v.begin(), v.end(), begin);
  return v;
}

/// The loaders of shards 0..num_shards-1 of `dataset`, each with `options`
/// otherwise.
std::vector<DataLoader> shard_loaders(const Dataset& dataset, std::int64_t batch_size,
                                      int num_shards, DataLoaderOptions options) {
  std::vector<DataLoader> loaders;
  loaders.reserve(static_cast<std::size_t>(num_shards));
  for (int r = 0; r < num_shards; ++r) {
    options.num_shards = num_shards;
    options.shard_index = r;
    loaders.emplace_back(dataset, batch_size, options);
  }
  return loaders;
}

using tagflow::testing::error_of;

TEST(DataLoaderTest, WithoutShuffleBatchesAreTheDatasetInOrder) {
  const Dataset dataset = numbered(10);
  for (int workers : kWorkerCounts) {
    with_timeout(30s, "in order", [&] {
      DataLoader loader(dataset, 3, {.num_workers = workers});
      EXPECT_EQ(loader.size(), 4);
      EXPECT_EQ(loader.context(), cpu(0)) << "pinned only when asked";
      for (int epoch = 0; epoch < 2; ++epoch) {
        std::int64_t b = 0;
        for (const Batch& batch : loader) {
          const std::string what =
              "workers " + std::to_string(workers) + " batch " + std::to_string(b);
          const auto begin = static_cast<std::int32_t>(3 * b);
          expect_batch_is(batch, dataset, iota(begin, std::min(begin + 3, 10)), what);
          EXPECT_EQ(batch.data.context(), loader.context()) << what;
          EXPECT_EQ(batch.label.context(), loader.context()) << what;
          ++b;
        }
        EXPECT_EQ(b, 4) << "workers " << workers;
      }
      EXPECT_EQ(loader.epochs(), 2u);

      // The tutorials' `for data, label in train_data`.
      std::vector<std::int32_t> seen;
      for (const auto& [data, label] : loader) {
        EXPECT_EQ(data.shape()[0], label.shape()[0]);
        for (std::int32_t l : label.to_vector<std::int32_t>()) seen.push_back(l);
      }
      EXPECT_EQ(seen, iota(0, 10));
    });
  }
}

TEST(DataLoaderTest, ShuffledEpochsArePermutationsFixedBySeedAndEpoch) {
  const std::int64_t n = 103;
  const Dataset dataset = numbered(n);
  const int epochs = 3;
  std::vector<std::vector<std::int32_t>> orders_at_zero_workers;
  for (int workers : kWorkerCounts) {
    with_timeout(30s, "shuffle", [&] {
      DataLoader loader(dataset, 8, {.shuffle = true, .seed = 7, .num_workers = workers});
      std::vector<std::vector<std::int32_t>> orders;
      for (int e = 0; e < epochs; ++e) {
        std::vector<std::int32_t> order;
        std::int64_t batches = 0;
        for (const Batch& batch : loader) {
          const std::vector<std::int32_t> labels = labels_of(batch);
          expect_batch_is(batch, dataset, labels, "shuffled batch");
          order.insert(order.end(), labels.begin(), labels.end());
          ++batches;
        }
        EXPECT_EQ(batches, 13);
        std::vector<std::int32_t> sorted = order;
        std::sort(sorted.begin(), sorted.end());
        EXPECT_EQ(sorted, iota(0, static_cast<std::int32_t>(n)))
            << "epoch " << e << " is not a permutation, workers " << workers;
        EXPECT_NE(order, iota(0, static_cast<std::int32_t>(n))) << "epoch " << e;
        orders.push_back(order);
      }
      EXPECT_NE(orders[0], orders[1]);
      EXPECT_NE(orders[1], orders[2]);
      if (workers == 0) {
        orders_at_zero_workers = orders;
      } else {
        EXPECT_EQ(orders, orders_at_zero_workers) << "order depends on num_workers " << workers;
      }
      // A loader that starts at epoch 2, as a resumed run does, gives epoch
      // 2's order first.
      DataLoader resumed(dataset, 8,
                         {.shuffle = true, .seed = 7, .first_epoch = 2, .num_workers = workers});
      std::vector<std::int32_t> order;
      for (const Batch& batch : resumed) {
        const std::vector<std::int32_t> labels = labels_of(batch);
        order.insert(order.end(), labels.begin(), labels.end());
      }
      EXPECT_EQ(order, orders[2]) << "workers " << workers;
      EXPECT_EQ(resumed.epochs(), 3u);
    });
  }
  // The same seed gives the same epochs in a new loader; another seed does not.
  DataLoader same(dataset, 8, {.shuffle = true, .seed = 7});
  DataLoader other(dataset, 8, {.shuffle = true, .seed = 8});
  EXPECT_EQ(flatten(epoch_labels(same)), orders_at_zero_workers[0]);
  EXPECT_NE(flatten(epoch_labels(other)), orders_at_zero_workers[0]);
}

TEST(DataLoaderTest, LastBatchKeepDiscardAndRollover) {
  const Dataset dataset = numbered(10);
  for (int workers : kWorkerCounts) {
    with_timeout(30s, "last_batch", [&] {
      const std::string what = "workers " + std::to_string(workers);
      DataLoader keep(dataset, 4, {.last_batch = LastBatch::kKeep, .num_workers = workers});
      EXPECT_EQ(keep.size(), 3);
      EXPECT_EQ(epoch_labels(keep),
                (std::vector<std::vector<std::int32_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}))
          << what;

      DataLoader discard(dataset, 4, {.last_batch = LastBatch::kDiscard, .num_workers = workers});
      EXPECT_EQ(discard.size(), 2);
      for (int e = 0; e < 2; ++e) {
        EXPECT_EQ(epoch_labels(discard),
                  (std::vector<std::vector<std::int32_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}))
            << what;
      }

      // Gluon's rollover: 8 and 9 open the next epoch, which then holds 12
      // samples; size() counts what the next epoch will hold.
      DataLoader rollover(dataset, 4, {.last_batch = LastBatch::kRollover, .num_workers = workers});
      EXPECT_EQ(rollover.size(), 2);
      EXPECT_EQ(epoch_labels(rollover),
                (std::vector<std::vector<std::int32_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}))
          << what;
      EXPECT_EQ(rollover.size(), 3);
      EXPECT_EQ(epoch_labels(rollover),
                (std::vector<std::vector<std::int32_t>>{{8, 9, 0, 1}, {2, 3, 4, 5}, {6, 7, 8, 9}}))
          << what;
      EXPECT_EQ(rollover.size(), 2);
      EXPECT_EQ(epoch_labels(rollover),
                (std::vector<std::vector<std::int32_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}))
          << what;
    });
  }
}

TEST(DataLoaderTest, ShuffledRolloverCarriesTheUnseenSamples) {
  const Dataset dataset = numbered(10);
  for (int workers : kWorkerCounts) {
    DataLoader loader(
        dataset, 4,
        {.shuffle = true, .seed = 3, .last_batch = LastBatch::kRollover, .num_workers = workers});
    const std::vector<std::int32_t> first = flatten(epoch_labels(loader));
    const std::vector<std::int32_t> second = flatten(epoch_labels(loader));
    ASSERT_EQ(first.size(), 8u);
    ASSERT_EQ(second.size(), 12u);
    std::set<std::int32_t> unseen;
    for (std::int32_t i = 0; i < 10; ++i) unseen.insert(i);
    for (std::int32_t i : first) unseen.erase(i);
    EXPECT_EQ(std::set<std::int32_t>(second.begin(), second.begin() + 2), unseen);
    std::vector<std::int32_t> rest(second.begin() + 2, second.end());
    std::sort(rest.begin(), rest.end());
    EXPECT_EQ(rest, iota(0, 10)) << "after the carried samples, a whole epoch";
  }
}

TEST(DataLoaderTest, ShardsTogetherHoldTheBatchesOfALoaderWithALargerBatch) {
  // Note [Sharding]: with batch b on each of S shards, the shards' batch t
  // together is batch t of an unsharded loader of batch S * b and the same
  // seed, less the N mod S samples the shards cut off the end of the order.
  const std::int64_t n = 103;
  const std::int64_t b = 4;
  const Dataset dataset = numbered(n);
  for (int shards : {2, 3}) {
    with_timeout(30s, "union of shards", [&] {
      const std::string what = "num_shards " + std::to_string(shards);
      const std::int64_t kept = shards * (n / shards);  // 102 for 2 and 3 shards
      DataLoader whole(dataset, shards * b, {.shuffle = true, .seed = 5});
      std::vector<DataLoader> parts =
          shard_loaders(dataset, b, shards, {.shuffle = true, .seed = 5});
      for (int epoch = 0; epoch < 2; ++epoch) {
        const std::vector<std::vector<std::int32_t>> whole_batches = epoch_labels(whole);
        std::vector<std::vector<std::vector<std::int32_t>>> shard_batches;
        for (DataLoader& part : parts) shard_batches.push_back(epoch_labels(part));

        // 103 = 12 * 8 + 7 = 8 * 12 + 7: the unsharded last batch holds 7
        // samples, the 6 of the first 102 positions and the one cut.
        const auto expected_batches = static_cast<std::size_t>(shards == 2 ? 13 : 9);
        ASSERT_EQ(whole_batches.size(), expected_batches) << what;
        ASSERT_EQ(whole_batches.back().size(), 7u) << what;
        std::int64_t position = 0;  // in the unsharded epoch's order
        for (std::size_t t = 0; t < whole_batches.size(); ++t) {
          std::vector<std::int32_t> expected;  // batch t less the cut samples
          for (std::int32_t sample : whole_batches[t]) {
            if (position++ < kept) expected.push_back(sample);
          }
          std::vector<std::int32_t> joined;
          for (int r = 0; r < shards; ++r) {
            const auto& batches = shard_batches[static_cast<std::size_t>(r)];
            ASSERT_EQ(batches.size(), expected_batches) << what << " shard " << r;
            // Shard batches hold b samples but the last: 51 = 12 * 4 + 3 and
            // 34 = 8 * 4 + 2 samples per shard.
            const std::size_t size =
                t + 1 < expected_batches ? static_cast<std::size_t>(b) : (shards == 2 ? 3u : 2u);
            ASSERT_EQ(batches[t].size(), size) << what << " shard " << r << " batch " << t;
            joined.insert(joined.end(), batches[t].begin(), batches[t].end());
          }
          ASSERT_EQ(expected.size(), joined.size()) << what << " batch " << t;
          std::sort(expected.begin(), expected.end());
          std::sort(joined.begin(), joined.end());
          EXPECT_EQ(joined, expected) << what << " epoch " << epoch << " batch " << t;
        }
        EXPECT_EQ(position, n);
      }
    });
  }
}

TEST(DataLoaderTest, ShardsAreDisjointEqualAndCoverTheCutOrder) {
  const std::int64_t n = 103;
  const Dataset dataset = numbered(n);
  for (bool shuffle : {false, true}) {
    for (int shards : {1, 2, 3, 4, 7}) {
      const std::string what =
          "shuffle " + std::to_string(shuffle) + " num_shards " + std::to_string(shards);
      const std::int64_t per_shard = n / shards;
      DataLoader whole(dataset, 5, {.shuffle = shuffle, .seed = 9});
      std::vector<DataLoader> parts =
          shard_loaders(dataset, 5, shards, {.shuffle = shuffle, .seed = 9});
      for (int epoch = 0; epoch < 2; ++epoch) {
        const std::vector<std::int32_t> order = flatten(epoch_labels(whole));
        ASSERT_EQ(order.size(), static_cast<std::size_t>(n));
        std::multiset<std::int32_t> covered;
        for (int r = 0; r < shards; ++r) {
          const std::vector<std::int32_t> part =
              flatten(epoch_labels(parts[static_cast<std::size_t>(r)]));
          ASSERT_EQ(part.size(), static_cast<std::size_t>(per_shard)) << what << " shard " << r;
          // Positions r, r + S, r + 2S, ... of the whole order, exactly.
          for (std::int64_t j = 0; j < per_shard; ++j) {
            EXPECT_EQ(part[static_cast<std::size_t>(j)],
                      order[static_cast<std::size_t>(j * shards + r)])
                << what << " shard " << r << " position " << j << " epoch " << epoch;
          }
          covered.insert(part.begin(), part.end());
        }
        // Disjoint and together the first S * floor(N / S) of the order.
        const std::multiset<std::int32_t> cut(order.begin(), order.begin() + shards * per_shard);
        EXPECT_EQ(covered, cut) << what << " epoch " << epoch;
        EXPECT_EQ(std::set<std::int32_t>(covered.begin(), covered.end()).size(), covered.size())
            << what << ": a sample in two shards";
      }
    }
  }
}

TEST(DataLoaderTest, OneShardIsTheUnshardedLoader) {
  const Dataset dataset = numbered(23);
  for (LastBatch last : {LastBatch::kKeep, LastBatch::kDiscard, LastBatch::kRollover}) {
    for (bool shuffle : {false, true}) {
      const std::string what = "last_batch " + std::to_string(static_cast<int>(last)) +
                               " shuffle " + std::to_string(shuffle);
      DataLoader plain(dataset, 5, {.shuffle = shuffle, .seed = 4, .last_batch = last});
      DataLoader sharded(
          dataset, 5,
          {.shuffle = shuffle, .seed = 4, .last_batch = last, .num_shards = 1, .shard_index = 0});
      for (int epoch = 0; epoch < 3; ++epoch) {
        ASSERT_EQ(sharded.size(), plain.size()) << what;
        std::vector<std::vector<float>> plain_data, sharded_data;
        std::vector<std::vector<std::int32_t>> plain_labels, sharded_labels;
        for (const Batch& batch : plain) {
          plain_data.push_back(batch.data.to_vector<float>());
          plain_labels.push_back(labels_of(batch));
        }
        for (const Batch& batch : sharded) {
          sharded_data.push_back(batch.data.to_vector<float>());
          sharded_labels.push_back(labels_of(batch));
        }
        EXPECT_EQ(sharded_labels, plain_labels) << what << " epoch " << epoch;
        EXPECT_EQ(sharded_data, plain_data) << what << " epoch " << epoch;
      }
    }
  }
}

TEST(DataLoaderTest, ShardSizesForKeepDiscardAndRollover) {
  // 10 samples in 3 shards: 9 kept, shard 1 takes 1, 4, 7 and shard 2 takes
  // 2, 5, 8; sample 9 is cut.
  const Dataset ten = numbered(10);
  DataLoader keep(ten, 2, {.last_batch = LastBatch::kKeep, .num_shards = 3, .shard_index = 2});
  EXPECT_EQ(keep.size(), 2);
  EXPECT_EQ(epoch_labels(keep), (std::vector<std::vector<std::int32_t>>{{2, 5}, {8}}));
  DataLoader discard(ten, 2,
                     {.last_batch = LastBatch::kDiscard, .num_shards = 3, .shard_index = 2});
  EXPECT_EQ(discard.size(), 1);
  EXPECT_EQ(epoch_labels(discard), (std::vector<std::vector<std::int32_t>>{{2, 5}}));
  // The shard carries its own 7 into its next epoch, before its part of it.
  DataLoader rollover(ten, 2,
                      {.last_batch = LastBatch::kRollover, .num_shards = 3, .shard_index = 1});
  EXPECT_EQ(rollover.size(), 1);
  EXPECT_EQ(epoch_labels(rollover), (std::vector<std::vector<std::int32_t>>{{1, 4}}));
  EXPECT_EQ(rollover.size(), 2);
  EXPECT_EQ(epoch_labels(rollover), (std::vector<std::vector<std::int32_t>>{{7, 1}, {4, 7}}));
  EXPECT_EQ(rollover.size(), 1);
  EXPECT_EQ(epoch_labels(rollover), (std::vector<std::vector<std::int32_t>>{{1, 4}}));

  // 103 samples in 3 shards of 34, batches of 4: size() is what each shard's
  // epochs then hold, shuffled or not.
  const Dataset dataset = numbered(103);
  for (bool shuffle : {false, true}) {
    for (int r = 0; r < 3; ++r) {
      const std::string what = "shuffle " + std::to_string(shuffle) + " shard " + std::to_string(r);
      const DataLoaderOptions options{
          .shuffle = shuffle, .seed = 2, .num_shards = 3, .shard_index = r};
      auto with_last = [&](LastBatch last) {
        DataLoaderOptions o = options;
        o.last_batch = last;
        return DataLoader(dataset, 4, o);
      };
      DataLoader keep_103 = with_last(LastBatch::kKeep);
      DataLoader discard_103 = with_last(LastBatch::kDiscard);
      DataLoader rollover_103 = with_last(LastBatch::kRollover);
      // Rollover: 34 = 8 * 4 + 2, then 2 + 34 = 9 * 4, then 34 again.
      const std::vector<std::int64_t> rollover_sizes = {8, 9, 8};
      for (std::size_t e = 0; e < 3; ++e) {
        EXPECT_EQ(keep_103.size(), 9) << what;
        const auto kept = epoch_labels(keep_103);
        ASSERT_EQ(kept.size(), 9u) << what;
        EXPECT_EQ(kept.back().size(), 2u) << what;
        EXPECT_EQ(discard_103.size(), 8) << what;
        EXPECT_EQ(epoch_labels(discard_103).size(), 8u) << what;
        EXPECT_EQ(rollover_103.size(), rollover_sizes[e]) << what << " epoch " << e;
        EXPECT_EQ(epoch_labels(rollover_103).size(), static_cast<std::size_t>(rollover_sizes[e]))
            << what << " epoch " << e;
      }
    }
  }

  // Fewer samples than shards: every shard is empty, whatever last_batch.
  for (LastBatch last : {LastBatch::kKeep, LastBatch::kDiscard, LastBatch::kRollover}) {
    for (int r = 0; r < 3; ++r) {
      DataLoader empty(numbered(2), 4,
                       {.last_batch = last, .num_workers = 1, .num_shards = 3, .shard_index = r});
      for (int e = 0; e < 2; ++e) {
        EXPECT_EQ(empty.size(), 0);
        EXPECT_TRUE(empty.begin() == empty.end());
      }
    }
  }
}

TEST(DataLoaderTest, ShardBatchesDoNotDependOnNumWorkers) {
  const Dataset dataset = numbered(103);
  for (LastBatch last : {LastBatch::kKeep, LastBatch::kRollover}) {
    for (int r = 0; r < 3; ++r) {
      with_timeout(30s, "shards and workers", [&] {
        const std::string what =
            "last_batch " + std::to_string(static_cast<int>(last)) + " shard " + std::to_string(r);
        DataLoader serial(dataset, 4,
                          {.shuffle = true,
                           .seed = 6,
                           .last_batch = last,
                           .num_workers = 0,
                           .num_shards = 3,
                           .shard_index = r});
        DataLoader threaded(dataset, 4,
                            {.shuffle = true,
                             .seed = 6,
                             .last_batch = last,
                             .num_workers = 2,
                             .num_shards = 3,
                             .shard_index = r});
        for (int epoch = 0; epoch < 3; ++epoch) {
          const std::vector<std::vector<std::int32_t>> expected = epoch_labels(serial);
          ASSERT_FALSE(expected.empty());
          std::size_t t = 0;
          for (const Batch& batch : threaded) {
            ASSERT_LT(t, expected.size()) << what;
            expect_batch_is(
                batch, dataset, expected[t],
                what + " epoch " + std::to_string(epoch) + " batch " + std::to_string(t));
            ++t;
          }
          EXPECT_EQ(t, expected.size()) << what << " epoch " << epoch;
        }
      });
    }
  }
}

TEST(DataLoaderTest, AWorkerErrorSurfacesAtItsBatchAsItsOwnType) {
  // Sample 13 is unreadable: batch 3 of 4-sample batches fails, the others not.
  const Dataset dataset(24, [](std::int64_t i) {
    if (i == 13) throw io::FileError("sample13.bin", "truncated");
    return numbered_sample(i);
  });
  for (int workers : kWorkerCounts) {
    with_timeout(30s, "worker error", [&] {
      const std::string what = "workers " + std::to_string(workers);
      DataLoader loader(dataset, 4, {.num_workers = workers, .prefetch = 2});
      for (int epoch = 0; epoch < 2; ++epoch) {
        loader.start_epoch();
        for (std::int32_t b = 0; b < 6; ++b) {
          if (b == 3) {
            try {
              loader.next();
              ADD_FAILURE() << what << ": batch 3 should have failed";
            } catch (const io::FileError& e) {
              EXPECT_EQ(std::string(e.what()), "sample13.bin: truncated") << what;
              EXPECT_EQ(e.path(), "sample13.bin");
            }
            continue;
          }
          const std::optional<Batch> batch = loader.next();
          ASSERT_TRUE(batch.has_value()) << what << " batch " << b;
          expect_batch_is(*batch, dataset, iota(4 * b, 4 * b + 4), what);
        }
        EXPECT_FALSE(loader.next().has_value()) << what;
      }

      // In a range-for, the error leaves the loop after batches 0..2.
      int seen = 0;
      EXPECT_THROW(
          {
            for (const Batch& batch : loader) {
              EXPECT_EQ(labels_of(batch)[0], 4 * seen);
              ++seen;
            }
          },
          io::FileError);
      EXPECT_EQ(seen, 3) << what;
    });
  }

  // An error from a transform travels the same way, whatever its type.
  struct BadPixel : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  const Dataset transformed = numbered(12).transform_first([](HostArray x) {
    if (x.values<float>()[0] == 500.f) throw BadPixel("bad pixel in sample 5");
    return x;
  });
  for (int workers : kWorkerCounts) {
    DataLoader loader(transformed, 4, {.num_workers = workers});
    auto it = loader.begin();
    EXPECT_EQ(labels_of(*it), iota(0, 4));
    ++it;
    ASSERT_FALSE(it == loader.end()) << "a failed batch is still a position of the epoch";
    EXPECT_THROW((void)*it, BadPixel);
    ++it;  // the epoch goes on after the failed batch
    EXPECT_EQ(labels_of(*it), iota(8, 12));
    ++it;
    EXPECT_TRUE(it == loader.end());
  }

  // The first batch failing: begin() returns, the error waits at *it, and a
  // loop that catches it goes on with the next batch.
  const Dataset first_bad(8, [](std::int64_t i) {
    if (i == 1) throw io::FileError("sample1.bin", "truncated");
    return numbered_sample(i);
  });
  for (int workers : kWorkerCounts) {
    DataLoader loader(first_bad, 4, {.num_workers = workers});
    int errors = 0;
    std::vector<std::vector<std::int32_t>> seen;
    for (auto it = loader.begin(); it != loader.end(); ++it) {
      try {
        seen.push_back(labels_of(*it));
      } catch (const io::FileError&) {
        ++errors;
      }
    }
    EXPECT_EQ(errors, 1) << "workers " << workers;
    EXPECT_EQ(seen, std::vector<std::vector<std::int32_t>>{iota(4, 8)}) << "workers " << workers;
  }
}

TEST(DataLoaderTest, AbandonedEpochsAndDestructionMidEpochReturnPromptly) {
  // Slow samples, so that workers are busy when the epoch or loader goes.
  std::atomic<std::int64_t> reads{0};
  const Dataset slow(10000, [&reads](std::int64_t i) {
    reads.fetch_add(1, std::memory_order_relaxed);
    std::this_thread::sleep_for(1ms);
    return numbered_sample(i);
  });
  for (int workers : {1, 3, 8}) {
    with_timeout(60s, "abandon and destroy", [&] {
      const std::string what = "workers " + std::to_string(workers);
      const auto start = std::chrono::steady_clock::now();
      {
        DataLoader loader(slow, 16, {.shuffle = true, .num_workers = workers});
        // Abandon epochs after 0, 1 and 2 batches, with batches in flight
        // (AnAbandonedEpochDoesNotLeakIntoTheNext checks their contents).
        for (int taken = 0; taken < 3; ++taken) {
          auto it = loader.begin();
          for (int i = 0; i < taken; ++i) ++it;
        }
        auto it = loader.begin();
        ++it;
        EXPECT_EQ(labels_of(*it).size(), 16u) << what;
        // The loader (and its workers) go here, mid-epoch, with batches in flight.
      }
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      // 4 epochs of at most 3 batches, plus at most a sample per worker to
      // stop: far below a second without the sleeps of a whole epoch.
      EXPECT_LT(took.count(), 5.0) << what;
      EXPECT_LT(reads.load(), 2000) << what << ": workers went on reading an abandoned epoch";
    });
  }

  // A loader destroyed before use, and an iterator of an abandoned epoch.
  with_timeout(30s, "unused loader", [&] { DataLoader unused(slow, 16, {.num_workers = 4}); });
  DataLoader loader(numbered(8), 2, {.num_workers = 2});
  auto stale = loader.begin();
  auto fresh = loader.begin();
  EXPECT_EQ(error_of([&] { ++stale; }),
            "DataLoader::Iterator: this iterator belongs to epoch 0, but the loader has since "
            "started epoch 1; only the latest epoch's iterator may be advanced");
  EXPECT_EQ(labels_of(*fresh), (std::vector<std::int32_t>{0, 1}));
}

TEST(DataLoaderTest, AnAbandonedEpochDoesNotLeakIntoTheNext) {
  // Slowish samples, so that workers are often finishing a batch of the old
  // epoch when the next one starts.
  const Dataset fast = numbered(64);
  const Dataset slow(64, [](std::int64_t i) {
    std::this_thread::sleep_for(100us);
    return numbered_sample(i);
  });
  for (int workers : kWorkerCounts) {
    with_timeout(60s, "abandon", [&] {
      DataLoader loader(slow, 4, {.shuffle = true, .seed = 11, .num_workers = workers});
      DataLoader reference(fast, 4, {.shuffle = true, .seed = 11});
      for (int e = 0; e < 30; ++e) {
        // Take e % 5 batches of epoch e, then move on; the reference reads
        // whole epochs. Each batch must be the one the reference has there.
        const std::vector<std::vector<std::int32_t>> expected = epoch_labels(reference);
        int b = 0;
        for (const Batch& batch : loader) {
          if (b == e % 5) break;
          expect_batch_is(batch, fast, expected[static_cast<std::size_t>(b)],
                          "workers " + std::to_string(workers) + " epoch " + std::to_string(e) +
                              " batch " + std::to_string(b));
          ++b;
        }
      }
    });
  }
}

TEST(DataLoaderTest, ABatchFinishedAfterItsEpochEndedIsDropped) {
  // Sample 3, the last of batch 0, blocks in epoch 0 until the test has
  // started epoch 1, so that a worker finishes batch 0 of the old epoch once
  // the new one runs. Samples read in epoch 1 hold other values (negated)
  // and are slow, so the old batch arrives first and must be dropped.
  for (int workers : {1, 2, 3}) {
    with_timeout(30s, "late batch", [&] {
      std::atomic<int> phase{0};
      std::latch reached(1);
      std::latch release(1);
      const Dataset dataset(16, [&](std::int64_t i) {
        Sample s = numbered_sample(i);
        if (phase.load() == 1) {
          for (float& v : s.data.values<float>()) v = -v;
          std::this_thread::sleep_for(5ms);
        } else if (i == 3) {
          reached.count_down();
          release.wait();
        }
        return s;
      });
      DataLoader loader(dataset, 4, {.num_workers = workers, .prefetch = 2});
      loader.start_epoch();
      reached.wait();  // a worker is inside batch 0's last sample
      phase = 1;
      loader.start_epoch();
      release.count_down();
      for (std::int32_t b = 0; b < 4; ++b) {
        const std::optional<Batch> batch = loader.next();
        ASSERT_TRUE(batch.has_value());
        EXPECT_EQ(labels_of(*batch), iota(4 * b, 4 * b + 4));
        std::vector<float> negated;
        for (std::int32_t i = 4 * b; i < 4 * b + 4; ++i) {
          const Sample sample = numbered_sample(i);
          for (float v : sample.data.values<float>()) negated.push_back(-v);
        }
        EXPECT_EQ(batch->data.to_vector<float>(), negated)
            << "workers " << workers << ": batch " << b << " comes from the abandoned epoch";
      }
      EXPECT_FALSE(loader.next().has_value());
    });
  }
}

TEST(DataLoaderTest, EmptyDatasetsRawDtypesAndContexts) {
  DataLoader empty(numbered(0), 4, {.num_workers = 2});
  EXPECT_EQ(empty.size(), 0);
  EXPECT_TRUE(empty.begin() == empty.end());

  // Without transforms, batches keep the samples' dtype.
  std::vector<std::uint8_t> pixels(5 * 4);
  std::iota(pixels.begin(), pixels.end(), std::uint8_t{0});
  const ArrayDataset raw(HostArray::from<std::uint8_t>(pixels, {5, 2, 2}),
                         HostArray::from<std::int32_t>(iota(0, 5), {5}));
  for (Context ctx : {cpu(0), cpu(1), cpu_pinned(0)}) {
    DataLoader loader(raw, 5, {.num_workers = 1, .context = ctx});
    auto it = loader.begin();
    EXPECT_EQ(it->data.dtype(), DType::kUInt8);
    EXPECT_EQ(it->data.shape(), (Shape{5, 2, 2}));
    EXPECT_EQ(it->data.context(), ctx);
    EXPECT_EQ(it->data.to_vector<std::uint8_t>(), pixels);
  }
}

TEST(DataLoaderTest, BadArgumentsAndUnstackableSamples) {
  const Dataset dataset = numbered(4);
  EXPECT_EQ(error_of([&] { DataLoader(dataset, 0); }),
            "DataLoader: expected a batch_size of at least 1, got 0");
  EXPECT_EQ(error_of([&] { DataLoader(dataset, 2, {.num_workers = -1}); }),
            "DataLoader: expected num_workers of at least 0, got -1");
  EXPECT_EQ(error_of([&] { DataLoader(dataset, 2, {.prefetch = -2}); }),
            "DataLoader: expected prefetch of at least 0, got -2");
  EXPECT_EQ(error_of([&] { DataLoader(dataset, 2, {.context = gpu(0)}); }),
            "DataLoader: expected a host context for the batches (cpu(i) or cpu_pinned(i)), got "
            "gpu(0); move batches to a GPU with split_and_load or as_in_context");

  const Dataset ragged(4, [](std::int64_t i) {
    Sample s = numbered_sample(i);
    if (i == 3) s.data = HostArray({3, 2}, DType::kFloat32);
    return s;
  });
  for (int workers : kWorkerCounts) {
    DataLoader loader(ragged, 2, {.num_workers = workers});
    loader.start_epoch();
    EXPECT_TRUE(loader.next().has_value());
    EXPECT_EQ(error_of([&] { loader.next(); }),
              "DataLoader: cannot stack batch 1: the data of sample 3 is float32 of shape (3x2), "
              "expected float32 of shape (2x3) as for sample 2");
  }
}

TEST(DataLoaderTest, BadShardOptionsAreRefused) {
  const Dataset dataset = numbered(4);
  EXPECT_EQ(error_of([&] { DataLoader(dataset, 2, {.num_shards = 0}); }),
            "DataLoader: expected num_shards of at least 1, got 0");
  EXPECT_EQ(error_of([&] { DataLoader(dataset, 2, {.num_shards = -3}); }),
            "DataLoader: expected num_shards of at least 1, got -3");
  EXPECT_EQ(error_of([&] { DataLoader(dataset, 2, {.num_shards = 2, .shard_index = -1}); }),
            "DataLoader: expected a shard_index in [0, 2) for num_shards 2, got -1");
  EXPECT_EQ(error_of([&] { DataLoader(dataset, 2, {.num_shards = 3, .shard_index = 3}); }),
            "DataLoader: expected a shard_index in [0, 3) for num_shards 3, got 3");
  EXPECT_EQ(error_of([&] { DataLoader(dataset, 2, {.shard_index = 1}); }),
            "DataLoader: expected a shard_index in [0, 1) for num_shards 1, got 1");
  // The last shard and more shards than samples are fine.
  EXPECT_EQ(error_of([&] { DataLoader(dataset, 2, {.num_shards = 3, .shard_index = 2}); }),
            "(no error)");
  EXPECT_EQ(error_of([&] { DataLoader(dataset, 2, {.num_shards = 8, .shard_index = 7}); }),
            "(no error)");
}

TEST(DataLoaderTest, FashionMnistTestSetWithToTensorAndNormalize) {
  const auto dir = data::default_fashion_mnist_dir();
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << dir << " is missing";
  namespace T = transforms;
  const Dataset test =
      FashionMNIST(dir, /*train=*/false)
          .transform_first(T::Compose({T::ToTensor(), T::Normalize(0.13f, 0.31f)}));
  const data::FashionMnist direct = data::load_fashion_mnist(dir, false);
  const std::vector<std::uint8_t> images = direct.images.to_vector<std::uint8_t>();
  const std::vector<std::int32_t> labels = direct.labels.to_vector<std::int32_t>();

  with_timeout(120s, "Fashion-MNIST", [&] {
    DataLoader loader(test, 256, {.num_workers = 2});
    ASSERT_EQ(loader.size(), 40);
    std::int64_t seen = 0;
    std::int64_t b = 0;
    for (const Batch& batch : loader) {
      const std::int64_t count = b < 39 ? 256 : 10000 - 39 * 256;
      ASSERT_EQ(batch.data.shape(), (Shape{count, 1, 28, 28}));
      ASSERT_EQ(batch.data.dtype(), DType::kFloat32);
      const std::vector<float> values = batch.data.to_vector<float>();
      const std::vector<std::int32_t> batch_labels = labels_of(batch);
      // A few samples of each batch, against the loaded arrays directly.
      for (std::int64_t row : {std::int64_t{0}, count / 2, count - 1}) {
        const std::int64_t i = seen + row;
        EXPECT_EQ(batch_labels[static_cast<std::size_t>(row)], labels[static_cast<std::size_t>(i)]);
        for (std::int64_t p = 0; p < 784; p += 37) {
          const float expected =
              (images[static_cast<std::size_t>(i * 784 + p)] / 255.f - 0.13f) / 0.31f;
          ASSERT_NEAR(values[static_cast<std::size_t>(row * 784 + p)], expected, 1e-5f)
              << "sample " << i << " pixel " << p;
        }
      }
      seen += count;
      ++b;
    }
    EXPECT_EQ(seen, 10000);

    // Shuffled, every sample exactly once: the class counts are the data set's.
    DataLoader shuffled(test, 256, {.shuffle = true, .seed = 1, .num_workers = 3});
    std::vector<std::int64_t> counts(10, 0), expected_counts(10, 0);
    for (std::int32_t l : labels) ++expected_counts[static_cast<std::size_t>(l)];
    for (const Batch& batch : shuffled) {
      for (std::int32_t l : labels_of(batch)) ++counts[static_cast<std::size_t>(l)];
    }
    EXPECT_EQ(counts, expected_counts);
  });
}

}  // namespace
}  // namespace tagflow::data

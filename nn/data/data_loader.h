#pragma once
// DataLoader: batches of a data set, as Gluon's gluon.data.DataLoader,
// prepared by background threads while the devices work on the current one.
//
//   data::DataLoader train_data(train, 256, {.shuffle = true, .num_workers = 4});
//   for (const auto& [data, label] : train_data) {
//     // data: 256x1x28x28 float32, label: 256 int32, on cpu(0): for a
//     // network on cpu(0), or to split_and_load onto devices
//   }
//   std::cout << train_data.size();   // batches per epoch: 235
//
// Each loop over the loader (each begin()) is a new epoch: with `shuffle`,
// the samples in a new order drawn from `seed` and the epoch number, so the
// same seed gives the same epochs whatever num_workers is.
//
// Threads: one thread at a time. One thread iterates a loader and its
// iterators (its workers are internal); the data set's get() and transforms
// are called from the workers concurrently. batch_size(), context() and
// dataset() never change and may be read from any thread.
// Threads: concurrent reads, exclusive writes. DataLoaderOptions and Batch
// are values.
//
// For data-parallel training over several processes, each process (rank)
// reads its own part of every epoch, as PyTorch's DistributedSampler:
//
//   data::DataLoader train_data(train, 64, {.shuffle = true, .seed = 1,
//                                           .num_shards = 4, .shard_index = rank});
//
// Note [Sharding]
// A loader with num_shards = S and shard_index = r forms the epoch's order
// over the whole data set exactly as an unsharded one (same seed, same
// epoch), cuts it to its first S * floor(N / S) positions and keeps positions
// r, r + S, r + 2S, ... of that. Every shard thus has floor(N / S) samples
// and the same number of batches, so ranks step in lockstep; the N mod S
// samples cut are the last of the order: other ones every epoch with
// `shuffle`, the data set's last ones without. Taking every S-th position
// rather than a contiguous block gives the union property: with batch size b
// on every shard, the S shards' batch t together hold exactly the samples of
// batch t of an unsharded loader of batch size S * b and the same seed, less
// the cut samples (only its last batch can hold them; with kKeep it may hold
// nothing else, and then has no counterpart in the shards). So S ranks train
// on the batches of one process with an S times larger batch. With
// kRollover, the samples a shard carries over are its own: they open its next
// epoch, before its part of the new epoch's order (so from the second epoch
// on, the union property holds for kKeep and kDiscard only). num_shards = 1
// is the unsharded loader.
//
// Note [Samples live on the host]
// Samples and transforms work on HostArrays, plain host memory, never on
// NDArrays: an NDArray per sample would cost an engine operation (and a
// variable) per sample, far more than ToTensor on a 28x28 image. The loader
// stacks a batch's samples directly into the memory of one new NDArray per
// batch for the data and one for the labels; as a new array has no pending
// operation, that memory is the loader's to fill, without the engine, until
// the batch is handed over. So the engine sees two arrays per batch, and
// with `.context = cpu_pinned(0)` (for batches bound for GPUs) pinned memory
// lets split_and_load copy them straight away.
//
// Note [Loader workers]
// With num_workers = n > 0, n threads (made with the loader, joined by its
// destructor) prepare whole batches: each claims the next batch number of the
// epoch, builds it without holding any lock, and files it (or the exception
// it threw) in a slot of a ring of `prefetch` slots. A worker may claim batch
// k only while k < delivered + prefetch, so at most `prefetch` batches are
// in flight and every claimed batch has a free slot; the consumer takes the
// slot of the next batch in order, waiting on a condition variable if it is
// not there yet. Starting a new epoch drops the old one's batches: workers
// building one give up between two samples, and results that still arrive
// are discarded. Destroying the loader requests a stop, which wakes idle
// workers and makes busy ones leave between two samples, so it waits for no
// more than one sample per worker. Nothing spins; every wait is on a
// condition variable.

#include <cstdint>
#include <exception>
#include <iterator>
#include <memory>
#include <optional>

#include "engine/context.h"
#include "nn/data/dataset.h"
#include "ops/ndarray.h"

namespace tagflow::data {

/// What happens to the last samples of an epoch when they do not fill a batch
/// (Gluon's last_batch).
enum class LastBatch : std::uint8_t {
  kKeep,      ///< a smaller last batch
  kDiscard,   ///< dropped
  kRollover,  ///< carried to the front of the next epoch
};

struct DataLoaderOptions {
  /// Samples in a new random order every epoch.
  bool shuffle = false;
  /// With `shuffle`: epoch e's order is a function of (seed, e) alone.
  std::uint64_t seed = 0;
  /// The number of the first epoch started: a run resumed at epoch e starts
  /// there and sees the orders an uninterrupted run would.
  std::uint64_t first_epoch = 0;
  LastBatch last_batch = LastBatch::kKeep;
  /// 0: batches are built in the calling thread when asked for; n > 0: by n
  /// background threads, ahead of use (Note [Loader workers]).
  int num_workers = 0;
  /// Batches in flight with workers (being built or ready); 0: 2 * num_workers.
  int prefetch = 0;
  /// Where batches live: a host context, cpu(0) unless set. Batches bound
  /// for GPUs copy faster from cpu_pinned(0) (as pin_memory in Gluon's and
  /// PyTorch's loaders); a network on a CPU device takes cpu(i) batches.
  std::optional<Context> context;
  /// Parts every epoch is split into, one per process (Note [Sharding]).
  int num_shards = 1;
  /// The part this loader delivers, in [0, num_shards): usually the rank.
  int shard_index = 0;
};

/// One batch: the samples' data stacked along a new first axis, (batch, ...)
/// in the samples' dtype, and their labels likewise, (batch, ...).
struct Batch {
  NDArray data;
  NDArray label;
};

class DataLoader {
 public:
  /// Throws tagflow::Error for a batch_size below 1, a negative num_workers
  /// or prefetch, a context that is not a host context of this process, a
  /// num_shards below 1 or a shard_index outside [0, num_shards). A shard may
  /// be empty (fewer samples than shards): its epochs have no batch.
  DataLoader(Dataset dataset, std::int64_t batch_size, DataLoaderOptions options = {});
  /// Stops and joins the workers, mid-epoch included (Note [Loader workers]).
  /// In a child forked since the workers started, where they do not exist,
  /// it lets go of them instead, and next() and begin() throw ForkError
  /// (Note [Engine lifetime] in engine/engine.h).
  ~DataLoader();
  DataLoader(DataLoader&&) noexcept;
  DataLoader& operator=(DataLoader&&) noexcept;

  /// The batches of one epoch, in order. An input iterator: begin() and
  /// advancing wait for the next batch. A batch whose building raised an
  /// error (in get() or a transform) is still a position of the epoch:
  /// dereferencing the iterator there rethrows the error as its original
  /// type, and advancing goes on with the batch after it, so a range-for
  /// leaves with the error and a loop of your own may catch it and go on:
  ///
  ///   for (auto it = loader.begin(); it != loader.end(); ++it) {
  ///     try { train(*it); } catch (const io::FileError& e) { log(e); }
  ///   }
  ///
  /// Only the iterator of the latest epoch may be advanced (others throw
  /// tagflow::Error).
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = Batch*;
    using reference = Batch&;

    /// The end of every epoch.
    Iterator() = default;
    /// The batch; rethrows the error of a batch that failed.
    Batch& operator*() const;
    Batch* operator->() const { return &**this; }
    Iterator& operator++();
    void operator++(int) { ++*this; }
    friend bool operator==(const Iterator& a, const Iterator& b) {
      return a.at_end() == b.at_end() &&
             (a.at_end() || (a.epoch_ == b.epoch_ && a.position_ == b.position_));
    }

   private:
    friend class DataLoader;
    bool at_end() const { return !batch_ && !error_; }
    /// Waits for the loader's next batch, or its error.
    void fetch();

    DataLoader* loader_ = nullptr;
    std::uint64_t epoch_ = 0;
    std::int64_t position_ = 0;
    mutable std::optional<Batch> batch_;
    std::exception_ptr error_;  ///< set instead of batch_ when building it failed
  };

  /// Starts a new epoch (abandoning the current one, if any) and returns its
  /// first batch, waiting for it.
  Iterator begin();
  Iterator end() { return {}; }

  /// Starts a new epoch without waiting for a batch; next() then gives them.
  void start_epoch();
  /// The next batch of the current epoch (starting the first epoch if none
  /// was), or nullopt when the epoch is over. Throws what building the batch
  /// threw; the following call goes on with the batch after it.
  std::optional<Batch> next();

  /// Batches in the next epoch to start (Gluon's len(loader)): with M =
  /// floor(N / num_shards) samples of this shard per epoch (M = N unsharded,
  /// Note [Sharding]), ceil(M / batch_size) for kKeep, floor(M / batch_size)
  /// for kDiscard, and for kRollover floor((carried + M) / batch_size),
  /// counting the samples the epoch started last carries over.
  std::int64_t size() const;
  std::int64_t batch_size() const;
  /// Epochs started so far, counting from first_epoch; the current one, if
  /// any, is number epochs() - 1.
  std::uint64_t epochs() const;
  /// Where the batches live.
  Context context() const;
  /// The whole data set, whatever the shard.
  const Dataset& dataset() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tagflow::data

#include "nn/data/data_loader.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <numeric>
#include <stop_token>
#include <thread>
#include <utility>
#include <vector>

#include "engine/detail/lifetime.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "engine/splitmix.h"
#include "storage/storage.h"

namespace tagflow::data {
namespace {

/// 0..n-1 in the order of epoch `epoch` drawn from `seed` (Fisher-Yates).
std::vector<std::int64_t> shuffled_indices(std::int64_t n, std::uint64_t seed,
                                           std::uint64_t epoch) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  // The seed and the epoch each go through SplitMix64's mixer, so the
  // streams of consecutive epochs are unrelated.
  SplitMix64 rng(splitmix64(seed) ^ splitmix64(~epoch));
  for (std::size_t i = order.size(); i > 1; --i) {
    // The modulo's bias is below i / 2^64: immaterial for any data set.
    std::swap(order[i - 1], order[rng() % i]);
  }
  return order;
}

/// This shard's part of an epoch's `order` (Note [Sharding]): positions
/// shard_index, shard_index + num_shards, ... of its first num_shards *
/// floor(size / num_shards) positions, appended to `out`.
void append_shard(const std::vector<std::int64_t>& order, int num_shards, int shard_index,
                  std::vector<std::int64_t>& out) {
  const auto shards = static_cast<std::size_t>(num_shards);
  const std::size_t per_shard = order.size() / shards;
  out.reserve(out.size() + per_shard);
  for (std::size_t j = 0; j < per_shard; ++j) {
    out.push_back(order[j * shards + static_cast<std::size_t>(shard_index)]);
  }
}

/// `extent` followed by the dimensions of `shape`.
Shape with_first_axis(std::int64_t extent, const Shape& shape) {
  TAGFLOW_CHECK(shape.ndim() < Shape::kMaxDims,
                "DataLoader: samples of {} dimensions ({}) cannot be stacked into batches of "
                "at most {}",
                shape.ndim(), shape.str(), Shape::kMaxDims);
  Shape out{extent};
  for (std::int64_t d : shape.dims()) out.push_back(d);
  return out;
}

/// The samples of one epoch, in order, and how they split into batches:
/// batch k is order[k * batch_size, min((k + 1) * batch_size, order.size())).
struct EpochPlan {
  std::uint64_t epoch = 0;
  std::vector<std::int64_t> order;
  std::int64_t num_batches = 0;
};

/// A batch built by a worker, or what building it threw.
struct BatchResult {
  std::optional<Batch> batch;
  std::exception_ptr error;
};

/// One place of the ring of batches in flight (Note [Loader workers]).
struct Slot {
  std::int64_t batch_index = -1;  ///< -1: empty
  BatchResult result;
};

}  // namespace

class DataLoader::Impl {
 public:
  Impl(Dataset dataset, std::int64_t batch_size, DataLoaderOptions options)
      : dataset_(std::move(dataset)), batch_size_(batch_size), options_(std::move(options)) {
    TAGFLOW_CHECK(batch_size_ >= 1, "DataLoader: expected a batch_size of at least 1, got {}",
                  batch_size_);
    TAGFLOW_CHECK(options_.num_workers >= 0,
                  "DataLoader: expected num_workers of at least 0, got {}", options_.num_workers);
    TAGFLOW_CHECK(options_.last_batch == LastBatch::kKeep ||
                      options_.last_batch == LastBatch::kDiscard ||
                      options_.last_batch == LastBatch::kRollover,
                  "DataLoader: expected last_batch keep, discard or rollover, got the value {}",
                  static_cast<int>(options_.last_batch));
    TAGFLOW_CHECK(options_.prefetch >= 0, "DataLoader: expected prefetch of at least 0, got {}",
                  options_.prefetch);
    TAGFLOW_CHECK(options_.num_shards >= 1, "DataLoader: expected num_shards of at least 1, got {}",
                  options_.num_shards);
    TAGFLOW_CHECK(options_.shard_index >= 0 && options_.shard_index < options_.num_shards,
                  "DataLoader: expected a shard_index in [0, {}) for num_shards {}, got {}",
                  options_.num_shards, options_.num_shards, options_.shard_index);
    context_ = options_.context.value_or(cpu(0));
    TAGFLOW_CHECK(context_.is_host(),
                  "DataLoader: expected a host context for the batches (cpu(i) or "
                  "cpu_pinned(i)), got {}; move batches to a GPU with split_and_load or "
                  "as_in_context",
                  context_.str());
    check_device(context_);
    epochs_started_ = options_.first_epoch;
    prefetch_ = options_.prefetch > 0 ? options_.prefetch : 2 * options_.num_workers;
    slots_.resize(static_cast<std::size_t>(prefetch_));
    workers_.reserve(static_cast<std::size_t>(options_.num_workers));
    for (int i = 0; i < options_.num_workers; ++i) {
      workers_.emplace_back([this](std::stop_token stop) { work(stop); });
    }
  }

  ~Impl() {
    // Stop every worker first, then join them, so that they wind down in
    // parallel rather than one after the other.
    for (std::jthread& worker : workers_) worker.request_stop();
    workers_.clear();
  }

  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void start_epoch() {
    check_not_forked("DataLoader::start_epoch");
    auto plan = std::make_shared<EpochPlan>();
    plan->epoch = epochs_started_++;
    const std::int64_t n = dataset_.size();
    // The carried samples (kRollover), then this shard's part of the whole
    // data set's order for the epoch (Note [Sharding]).
    plan->order = std::move(carried_);
    carried_.clear();
    std::vector<std::int64_t> order;
    if (options_.shuffle) {
      order = shuffled_indices(n, options_.seed, plan->epoch);
    } else {
      order.resize(static_cast<std::size_t>(n));
      std::iota(order.begin(), order.end(), std::int64_t{0});
    }
    append_shard(order, options_.num_shards, options_.shard_index, plan->order);
    const auto total = static_cast<std::int64_t>(plan->order.size());
    plan->num_batches = options_.last_batch == LastBatch::kKeep
                            ? (total + batch_size_ - 1) / batch_size_
                            : total / batch_size_;
    if (options_.last_batch == LastBatch::kRollover) {
      carried_.assign(plan->order.begin() + plan->num_batches * batch_size_, plan->order.end());
      plan->order.resize(static_cast<std::size_t>(plan->num_batches * batch_size_));
    }
    plan_ = std::move(plan);
    next_to_deliver_ = 0;
    if (workers_.empty()) return;

    std::vector<Slot> dropped(slots_.size());
    {
      std::lock_guard lock(mutex_);
      current_epoch_.store(plan_->epoch, std::memory_order_relaxed);
      shared_plan_ = plan_;
      next_to_claim_ = 0;
      delivered_ = 0;
      slots_.swap(dropped);
    }
    work_ready_.notify_all();
    // `dropped`: batches of the abandoned epoch, released outside the lock.
  }

  std::optional<Batch> next() {
    check_not_forked("DataLoader::next");
    if (!plan_) start_epoch();
    if (next_to_deliver_ >= plan_->num_batches) return std::nullopt;
    const std::int64_t k = next_to_deliver_++;
    if (workers_.empty()) return build_batch(*plan_, k, std::stop_token{});

    BatchResult result;
    {
      std::unique_lock lock(mutex_);
      Slot& slot = slots_[static_cast<std::size_t>(k % prefetch_)];
      batch_ready_.wait(lock, [&] { return slot.batch_index == k; });
      result = std::move(slot.result);
      slot = Slot{};
      delivered_ = k + 1;
    }
    // The window moved by one: one more batch may be claimed.
    work_ready_.notify_one();
    if (result.error) std::rethrow_exception(result.error);
    return std::move(result.batch);
  }

  std::int64_t size() const {
    const std::int64_t n = dataset_.size() / options_.num_shards;  // of this shard, an epoch
    switch (options_.last_batch) {
      case LastBatch::kKeep:
        return (n + batch_size_ - 1) / batch_size_;
      case LastBatch::kDiscard:
        return n / batch_size_;
      case LastBatch::kRollover:
        return (static_cast<std::int64_t>(carried_.size()) + n) / batch_size_;
    }
    return 0;
  }

  std::int64_t batch_size() const { return batch_size_; }
  std::uint64_t epochs() const { return epochs_started_; }
  Context context() const { return context_; }
  const Dataset& dataset() const { return dataset_; }

  /// True in a child forked since the workers started: they exist only in
  /// the parent (Note [Engine lifetime] in engine/engine.h).
  bool forked_with_workers() const { return !workers_.empty() && fork_check_.forked(); }
  /// Lets go of the workers without stopping them: a forked child's part of
  /// the destructor, which must neither join them nor destroy what they wait on.
  void detach_workers() {
    for (std::jthread& worker : workers_) worker.detach();
  }

 private:
  void check_not_forked(const char* what) const {
    if (forked_with_workers()) [[unlikely]]
      detail::throw_fork_error(what, "the DataLoader's workers were");
  }

  /// A worker's life: claim a batch of the current epoch, build it, file it.
  void work(std::stop_token stop) {
    std::unique_lock lock(mutex_);
    while (true) {
      const bool has_work = work_ready_.wait(lock, stop, [&] {
        return shared_plan_ && next_to_claim_ < shared_plan_->num_batches &&
               next_to_claim_ < delivered_ + prefetch_;
      });
      if (!has_work) return;  // stop requested
      const std::shared_ptr<const EpochPlan> plan = shared_plan_;
      const std::int64_t k = next_to_claim_++;
      lock.unlock();

      BatchResult result;
      try {
        result.batch = build_batch(*plan, k, stop);
      } catch (...) {
        result.error = std::current_exception();
      }
      const bool cancelled = !result.error && !result.batch;

      lock.lock();
      if (!cancelled && shared_plan_ == plan) {
        // delivered_ <= k < delivered_ + prefetch_: the slot is free.
        Slot& slot = slots_[static_cast<std::size_t>(k % prefetch_)];
        slot.batch_index = k;
        slot.result = std::move(result);
        batch_ready_.notify_one();
      } else if (!cancelled) {
        // A batch of an abandoned epoch: dropped, outside the lock.
        lock.unlock();
        result = BatchResult{};
        lock.lock();
      }
    }
  }

  /// Batch `k` of `plan`: its samples read and transformed, stacked into
  /// one new array for the data and one for the labels (Note [Samples live
  /// on the host]). nullopt when `stop` is requested or the epoch was
  /// abandoned before it was done.
  std::optional<Batch> build_batch(const EpochPlan& plan, std::int64_t k,
                                   const std::stop_token& stop) const {
    const std::int64_t begin = k * batch_size_;
    const std::int64_t count =
        std::min(batch_size_, static_cast<std::int64_t>(plan.order.size()) - begin);
    const std::int64_t* indices = plan.order.data() + begin;

    Sample first = dataset_.get(indices[0]);
    Batch batch{
        NDArray(with_first_axis(count, first.data.shape()), first.data.dtype(), context_),
        NDArray(with_first_axis(count, first.label.shape()), first.label.dtype(), context_)};
    auto* data = static_cast<std::byte*>(batch.data.raw_data());
    auto* label = static_cast<std::byte*>(batch.label.raw_data());
    const std::uint64_t data_bytes = first.data.nbytes();
    const std::uint64_t label_bytes = first.label.nbytes();
    if (data_bytes > 0) std::memcpy(data, first.data.bytes(), data_bytes);
    if (label_bytes > 0) std::memcpy(label, first.label.bytes(), label_bytes);

    for (std::int64_t j = 1; j < count; ++j) {
      if (stop.stop_requested() || (options_.num_workers > 0 &&
                                    current_epoch_.load(std::memory_order_relaxed) != plan.epoch)) {
        return std::nullopt;
      }
      const Sample sample = dataset_.get(indices[j]);
      check_stackable(sample.data, first.data, "data", indices[j], indices[0], k);
      check_stackable(sample.label, first.label, "label", indices[j], indices[0], k);
      const auto row = static_cast<std::uint64_t>(j);
      if (data_bytes > 0) std::memcpy(data + row * data_bytes, sample.data.bytes(), data_bytes);
      if (label_bytes > 0) {
        std::memcpy(label + row * label_bytes, sample.label.bytes(), label_bytes);
      }
    }
    return batch;
  }

  /// Throws unless `part` of sample `index` has the shape and dtype of the
  /// same part of sample `first_index`, the first of batch `k`.
  static void check_stackable(const HostArray& part, const HostArray& first, const char* what,
                              std::int64_t index, std::int64_t first_index, std::int64_t k) {
    TAGFLOW_CHECK(part.shape() == first.shape() && part.dtype() == first.dtype(),
                  "DataLoader: cannot stack batch {}: the {} of sample {} is {} of shape ({}), "
                  "expected {} of shape ({}) as for sample {}",
                  k, what, index, dtype_name(part.dtype()), part.shape().str(),
                  dtype_name(first.dtype()), first.shape().str(), first_index);
  }

  // Set at construction, read by every thread.
  Dataset dataset_;
  std::int64_t batch_size_;
  DataLoaderOptions options_;
  Context context_;
  std::int64_t prefetch_ = 0;

  // The consumer's side, used by the thread iterating only.
  std::uint64_t epochs_started_ = 0;
  std::vector<std::int64_t> carried_;  ///< kRollover: the front of the next epoch
  std::shared_ptr<const EpochPlan> plan_;
  std::int64_t next_to_deliver_ = 0;

  // Shared with the workers, under mutex_ (Note [Loader workers]).
  std::mutex mutex_;
  std::condition_variable_any work_ready_;  ///< a batch may be claimed, or stop
  std::condition_variable batch_ready_;     ///< a slot was filled
  std::shared_ptr<const EpochPlan> shared_plan_;
  std::int64_t next_to_claim_ = 0;
  std::int64_t delivered_ = 0;  ///< batches of the epoch the consumer has taken
  std::vector<Slot> slots_;
  /// The epoch of shared_plan_, also read without the lock by workers
  /// between samples to give up on an abandoned epoch early.
  std::atomic<std::uint64_t> current_epoch_{0};
  detail::ForkCheck fork_check_;

  // Last, so that they are made after and stopped before everything above.
  std::vector<std::jthread> workers_;
};

DataLoader::DataLoader(Dataset dataset, std::int64_t batch_size, DataLoaderOptions options)
    : impl_(std::make_unique<Impl>(std::move(dataset), batch_size, std::move(options))) {}

DataLoader::~DataLoader() {
  if (impl_ && impl_->forked_with_workers()) [[unlikely]] {
    // A forked child: the workers wait on the loader's condition variables
    // in the parent only; destroying those would wait for them forever.
    impl_->detach_workers();
    detail::abandon(std::move(impl_));
  }
}
DataLoader::DataLoader(DataLoader&&) noexcept = default;
DataLoader& DataLoader::operator=(DataLoader&& other) noexcept {
  if (this != &other) {
    DataLoader old(std::move(*this));  // goes as a loader does, in a forked child too
    impl_ = std::move(other.impl_);
  }
  return *this;
}

DataLoader::Iterator DataLoader::begin() {
  impl_->start_epoch();
  Iterator it;
  it.loader_ = this;
  it.epoch_ = impl_->epochs() - 1;
  it.position_ = 0;
  it.fetch();
  return it;
}

void DataLoader::Iterator::fetch() {
  batch_.reset();
  error_ = nullptr;
  try {
    batch_ = loader_->next();
  } catch (...) {
    error_ = std::current_exception();
  }
}

Batch& DataLoader::Iterator::operator*() const {
  if (error_) std::rethrow_exception(error_);
  TAGFLOW_CHECK(batch_.has_value(),
                "DataLoader::Iterator: the end of an epoch has no batch to dereference");
  return *batch_;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  TAGFLOW_CHECK(loader_ != nullptr,
                "DataLoader::Iterator: expected an iterator from DataLoader::begin(), got a "
                "default-constructed (end) one");
  TAGFLOW_CHECK(loader_->epochs() == epoch_ + 1,
                "DataLoader::Iterator: this iterator belongs to epoch {}, but the loader has "
                "since started epoch {}; only the latest epoch's iterator may be advanced",
                epoch_, loader_->epochs() - 1);
  ++position_;
  fetch();
  return *this;
}

void DataLoader::start_epoch() { impl_->start_epoch(); }
std::optional<Batch> DataLoader::next() { return impl_->next(); }
std::int64_t DataLoader::size() const { return impl_->size(); }
std::int64_t DataLoader::batch_size() const { return impl_->batch_size(); }
std::uint64_t DataLoader::epochs() const { return impl_->epochs(); }
Context DataLoader::context() const { return impl_->context(); }
const Dataset& DataLoader::dataset() const { return impl_->dataset(); }

}  // namespace tagflow::data

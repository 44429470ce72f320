#include "nn/dist/mpi_aggregator.h"

#include "engine/engine.h"
#include "ops/elementwise.h"
#include "ops/priority.h"

namespace tagflow::dist {

namespace {

constexpr std::uint64_t kHashStart = 14695981039346656037ull;  // FNV-1a

void mix(std::uint64_t& hash, std::uint64_t value) {
  for (int byte = 0; byte < 8; ++byte) {
    hash ^= (value >> (8 * byte)) & 0xff;
    hash *= 1099511628211ull;
  }
}

/// Throws unless `array` fits in one message.
void check_message_size(const NDArray& array, int key, const char* who) {
  TAGFLOW_CHECK(array.nbytes() <= static_cast<std::uint64_t>(kMaxMessageBytes),
                "{}: parameter {} has {} bytes, more than the {} one MPI message carries here", who,
                key, array.nbytes(), kMaxMessageBytes);
}

/// The copy whose device holds the process's result: the first in host
/// memory (its result needs no staging), else one that rotates with the key.
std::size_t result_copy(std::span<const NDArray> copies, int key) {
  for (std::size_t i = 0; i < copies.size(); ++i) {
    if (copies[i].context().is_host()) return i;
  }
  return static_cast<std::size_t>(key) % copies.size();
}

}  // namespace

MpiAggregator::MpiAggregator(std::shared_ptr<MpiCommunicator> processes,
                             MpiAggregatorOptions options)
    : processes_(std::move(processes)), options_(options), running_hash_(kHashStart) {
  TAGFLOW_CHECK(processes_ != nullptr, "MpiAggregator: expected a communicator, got null");
  TAGFLOW_CHECK(options_.bucket_bytes >= 1 && options_.bucket_bytes <= kMaxMessageBytes,
                "MpiAggregator: expected bucket_bytes in [1, {}], got {}", kMaxMessageBytes,
                options_.bucket_bytes);
}

void MpiAggregator::check_in_step(const char* who) const {
  TAGFLOW_CHECK_AS(CommunicationError, failure_.empty(),
                   "{}: an earlier call failed midway ({}), so the processes are out of step; "
                   "end the job",
                   who, failure_);
}

NDArray MpiAggregator::host_array(const NDArray& sum, int key) {
  if (sum.context().is_host()) return sum;
  NDArray& staged = staging_[key];
  if (!staged.defined() || staged.shape() != sum.shape() || staged.dtype() != sum.dtype()) {
    staged = NDArray(sum.shape(), sum.dtype(), num_gpus() > 0 ? cpu_pinned(0) : cpu(0));
  }
  return staged;
}

void MpiAggregator::allreduce(std::span<const NDArray> copies, int key) {
  const char* who = "MpiAggregator::allreduce";
  check_in_step(who);
  check_aggregation_input(copies, key, who);
  TAGFLOW_CHECK(copies[0].dtype() != DType::kUInt8,
                "{}: expected float32, int32 or int64 gradients, got uint8 (key {})", who, key);
  check_message_size(copies[0], key, who);
  try {
    const PriorityScope urgent(kCommunicationPriority);
    const std::size_t n = copies.size();
    const std::size_t root = result_copy(copies, key);
    NDArray sum = copies[root];
    for (std::size_t i = 1; i < n; ++i) sum += copies[(root + i) % n].copyto(sum.context());
    Entry entry{{copies.begin(), copies.end()}, root, host_array(sum, key)};
    if (!entry.host.same_as(sum)) sum.copyto(entry.host);
    add(Kind::kSum, std::move(entry), key);
  } catch (const std::exception& e) {
    failure_ = e.what();
    throw;
  }
}

void MpiAggregator::broadcast(std::span<const NDArray> copies, int key) {
  const char* who = "MpiAggregator::broadcast";
  check_in_step(who);
  check_aggregation_input(copies, key, who);
  check_message_size(copies[0], key, who);
  try {
    const PriorityScope urgent(kCommunicationPriority);
    const std::size_t root = result_copy(copies, key);
    Entry entry{{copies.begin(), copies.end()}, root, host_array(copies[root], key)};
    if (processes_->rank() == 0 && !entry.host.same_as(copies[root])) {
      copies[root].copyto(entry.host);
    }
    add(Kind::kBroadcast, std::move(entry), key);
  } catch (const std::exception& e) {
    failure_ = e.what();
    throw;
  }
}

void MpiAggregator::add(Kind kind, Entry entry, int key) {
  const NDArray& host = entry.host;
  if (!open_.entries.empty() &&
      (open_.kind != kind || open_.dtype != host.dtype() ||
       open_.bytes + host.nbytes() > static_cast<std::uint64_t>(kMaxMessageBytes))) {
    close_bucket();
  }
  open_.kind = kind;
  open_.dtype = host.dtype();
  open_.bytes += host.nbytes();
  mix(running_hash_, static_cast<std::uint64_t>(kind));
  mix(running_hash_, static_cast<std::uint64_t>(key));
  mix(running_hash_, static_cast<std::uint64_t>(host.dtype()));
  mix(running_hash_, static_cast<std::uint64_t>(host.size()));
  open_.entries.push_back(std::move(entry));
  if (open_.bytes >= static_cast<std::uint64_t>(options_.bucket_bytes)) close_bucket();
}

void MpiAggregator::close_bucket() {
  if (open_.entries.empty()) return;
  mix(running_hash_, ~std::uint64_t{0});  // the bucket's end
  step_hashes_.push_back(running_hash_);
  if (held_.empty() && checked_hashes_.count(running_hash_) != 0) {
    send(open_);
  } else {
    held_.push_back(std::move(open_));
  }
  open_ = Bucket{};
}

std::size_t MpiAggregator::copies_summed(std::size_t local_copies) const {
  return local_copies * static_cast<std::size_t>(processes_->size());
}

void MpiAggregator::flush() {
  check_in_step("MpiAggregator::flush");
  try {
    send_held();
  } catch (const std::exception& e) {
    failure_ = e.what();
    throw;
  }
}

void MpiAggregator::send_held() {
  close_bucket();
  const std::uint64_t hash = running_hash_;
  running_hash_ = kHashStart;
  std::vector<std::uint64_t> step_hashes = std::move(step_hashes_);
  step_hashes_.clear();
  if (held_.empty()) return;
  std::vector<Bucket> held = std::move(held_);
  held_.clear();
  const std::vector<std::int64_t> hashes = processes_->gather(static_cast<std::int64_t>(hash));
  for (std::size_t r = 1; r < hashes.size(); ++r) {
    TAGFLOW_CHECK_AS(CommunicationError, hashes[r] == hashes[0],
                     "MpiAggregator: the processes do not aggregate the same arrays: what rank {} "
                     "sends (parameters, dtypes, sizes, in call order) differs from rank 0's; "
                     "every process must train the same parameters in the same order",
                     r);
  }
  checked_hashes_.insert(step_hashes.begin(), step_hashes.end());
  for (Bucket& bucket : held) send(bucket);
}

void MpiAggregator::send(Bucket& bucket) {
  const PriorityScope urgent(kCommunicationPriority);
  std::vector<NDArray> hosts;
  hosts.reserve(bucket.entries.size());
  for (const Entry& entry : bucket.entries) hosts.push_back(entry.host);
  if (bucket.kind == Kind::kSum) {
    processes_->allreduce(hosts);
  } else {
    processes_->broadcast(hosts, 0);
  }
  for (const Entry& entry : bucket.entries) {
    const NDArray& result = entry.copies[entry.root];
    if (!entry.host.same_as(result)) entry.host.copyto(result);
    for (std::size_t i = 0; i < entry.copies.size(); ++i) {
      if (i != entry.root) result.copyto(entry.copies[i]);
    }
  }
}

}  // namespace tagflow::dist

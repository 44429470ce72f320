#pragma once
// MpiAggregator: gradient sums across the processes of an MPI job, behind
// the same interface as the aggregator of one process.
//
//   auto world = dist::MpiCommunicator::world();
//   auto aggregator = std::make_shared<dist::MpiAggregator>(world);
//   nn::Trainer trainer(net.collect_params(), "sgd", {.learning_rate = 0.1}, aggregator);
//   trainer.broadcast_parameters();   // every process starts from rank 0's weights
//   ... forward and backward on this process's shard of the batch ...
//   trainer.step(global_batch_size);  // gradients summed over every device of every process
//
// Threads: one thread at a time. It keeps the open bucket and the hashes of
// what it sent between calls, and every process must make the same calls in
// the same order (Note [Issue order] in mpi_communicator.h).
// Threads: concurrent reads, exclusive writes. MpiAggregatorOptions is a
// value.
//
// Note [Sums across processes]
// For each parameter, allreduce() pushes, with kCommunicationPriority:
//  1. the sum of the process's own copies onto one of its devices (a host
//     device when there is one), as DeviceAggregator does;
//  2. a copy of that sum to host memory when it is on a GPU;
//  3. the host sum is added to the current bucket. A bucket full (about
//     `bucket_bytes`) is one MpiCommunicator::allreduce: a single message
//     for many small gradients, which would each pay the latency of a
//     collective otherwise. Last layer first, as Trainer calls it, the
//     first buckets hold the gradients backward finishes first, and travel
//     while it computes the others (Note [Aggregating as gradients become
//     ready] in gradient_aggregator.h);
//  4. the result back to the device of the sum, then to the other copies.
// flush() sends the bucket still open. Each step's buckets are the same in
// every process because the calls are (same program, same parameters).
//
// Note [Checking the processes agree]
// Processes that aggregate different parameters (another model, a parameter
// frozen in one process only) would issue collectives of different sizes,
// which MPI does not detect: a hang, or garbage. So the aggregator hashes
// what each bucket holds (kind, key, dtype, size) as it goes; a bucket whose
// running hash has not been seen before is held back until flush(), which
// compares the hashes of all processes once (a blocking gather) and throws
// CommunicationError if they differ. The first step is checked this way;
// later steps, the same sequence, send each bucket as soon as it is full. So
// what is caught is processes that differ from the start; a process that
// changes what it aggregates later on (freezes a parameter mid-training)
// while the others do not is not: the collectives then mismatch until the
// timeout. Any failure midway through a call (a check, an allocation) leaves
// the processes out of step: the aggregator refuses every later call, and
// the program should end the job (MpiCommunicator::abort).

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "nn/dist/gradient_aggregator.h"
#include "nn/dist/mpi_communicator.h"

namespace tagflow::dist {

struct MpiAggregatorOptions {
  /// Gradients are packed into messages of at least this many bytes (a
  /// larger gradient travels alone), at most kMaxMessageBytes. Smaller
  /// buckets start communicating earlier during backward; larger ones pay
  /// the latency fewer times.
  std::int64_t bucket_bytes = 1 << 20;
};

/// The largest message MpiAggregator sends (MPI counts are int): a bucket
/// closes before it would grow beyond, and a larger parameter is refused.
inline constexpr std::int64_t kMaxMessageBytes = std::int64_t{1} << 30;

class MpiAggregator final : public GradientAggregator {
 public:
  /// Throws tagflow::Error for a null communicator or a bucket size outside
  /// [1, kMaxMessageBytes].
  explicit MpiAggregator(std::shared_ptr<MpiCommunicator> processes,
                         MpiAggregatorOptions options = {});

  /// Every copy, in every process, ends holding the sum of all copies of
  /// all processes (Note [Sums across processes]). Returns at once; may hold
  /// the sum back until the bucket is full or flush() is called. float32,
  /// int32 or int64.
  void allreduce(std::span<const NDArray> copies, int key) override;
  /// Every copy, in every process, ends holding process 0's values: those of
  /// its first copy in host memory, or else of copies[key % copies.size()].
  void broadcast(std::span<const NDArray> copies, int key) override;
  /// Sends the open bucket, and those held back for checking (Note
  /// [Checking the processes agree]); throws CommunicationError when the
  /// processes disagree.
  void flush() override;
  /// `local_copies` in each of the communicator's processes (every process
  /// holds its parameters on as many devices).
  std::size_t copies_summed(std::size_t local_copies) const override;
  std::string name() const override { return "mpi"; }

  /// The processes it sums over.
  MpiCommunicator& communicator() const { return *processes_; }
  /// The options it was made with.
  const MpiAggregatorOptions& options() const { return options_; }

 private:
  enum class Kind : std::uint8_t { kSum, kBroadcast };
  /// One parameter in a bucket: its copies, the one holding the process's
  /// result (`root`), and the host array that travels.
  struct Entry {
    std::vector<NDArray> copies;
    std::size_t root = 0;
    NDArray host;
  };
  struct Bucket {
    Kind kind = Kind::kSum;
    DType dtype = DType::kFloat32;
    std::uint64_t bytes = 0;
    std::vector<Entry> entries;
  };

  /// The host array that carries `sum` (itself when it is in host memory).
  NDArray host_array(const NDArray& sum, int key);
  void add(Kind kind, Entry entry, int key);
  /// Throws once a call has failed midway (Note [Checking the processes agree]).
  void check_in_step(const char* who) const;
  void close_bucket();
  /// flush() without the guard.
  void send_held();
  void send(Bucket& bucket);

  std::shared_ptr<MpiCommunicator> processes_;
  MpiAggregatorOptions options_;
  Bucket open_;
  /// Closed buckets waiting for the check of Note [Checking the processes agree].
  std::vector<Bucket> held_;
  /// Hash of what this step's buckets held so far, and its value at the
  /// end of each bucket closed in this step.
  std::uint64_t running_hash_;
  std::vector<std::uint64_t> step_hashes_;
  std::set<std::uint64_t> checked_hashes_;
  /// Host memory for the sums of parameters whose copies are all on GPUs.
  std::map<int, NDArray> staging_;
  /// What failed midway through a call, leaving the processes out of step.
  std::string failure_;
};

}  // namespace tagflow::dist

// MpiAggregator, run by mpirun in 2 and 3 processes: sums over the devices
// of every process (CPU devices, simulated GPUs, one or several per
// process) against a double sum, with buckets of every size; broadcasts;
// processes that disagree on what they aggregate; and the training check:
// N steps on each process's shard of the data give the parameters one
// process gets from the whole global batches.

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/dist.h"
#include "tagflow/tagflow.h"
#include "tests/nn/dist/mpi_world.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::error_of;
using testing::mpi_world;

std::shared_ptr<dist::MpiCommunicator> world_pointer() {
  return dist::MpiCommunicator::world();  // the test main's, shared
}

/// A hash of the bits of `values`, the same in every process only if they
/// are bit-identical.
std::int64_t bits_hash(const std::vector<float>& values) {
  std::uint64_t hash = 14695981039346656037ull;
  for (float v : values) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    hash = (hash ^ bits) * 1099511628211ull;
  }
  return static_cast<std::int64_t>(hash);
}

void expect_same_in_every_process(const std::vector<float>& values, const std::string& what) {
  const std::vector<std::int64_t> hashes = mpi_world().gather(bits_hash(values));
  for (std::size_t r = 1; r < hashes.size(); ++r) {
    EXPECT_EQ(hashes[r], hashes[0]) << what << ": rank " << r << " differs from rank 0";
  }
}

std::uint32_t seed_of(int rank, std::size_t device, std::size_t parameter) {
  return static_cast<std::uint32_t>(7919 * rank + 101 * device + parameter + 1);
}

TEST(MpiAggregatorTest, EveryCopyInEveryProcessHoldsTheSumOfAll) {
  dist::MpiCommunicator& world = mpi_world();
  const std::vector<std::vector<Context>> device_sets = {
      {cpu(0)}, {cpu(0), cpu(1)}, {gpu(0)}, {gpu(1), cpu(1), gpu(0)}};
  // Parameters of awkward sizes, one larger than the small buckets.
  const std::vector<std::int64_t> sizes = {3, 1, 250, 4097, 17, 0};
  for (const std::vector<Context>& devices : device_sets) {
    for (const std::int64_t bucket_bytes : {std::int64_t{64}, std::int64_t{1} << 20}) {
      dist::MpiAggregator aggregator(world_pointer(), {.bucket_bytes = bucket_bytes});
      std::vector<std::vector<NDArray>> copies(sizes.size());
      for (std::size_t p = 0; p < sizes.size(); ++p) {
        for (std::size_t d = 0; d < devices.size(); ++d) {
          copies[p].push_back(array(testing::random_floats(static_cast<std::size_t>(sizes[p]), -1.f,
                                                           1.f, seed_of(world.rank(), d, p)),
                                    Shape{sizes[p]}, devices[d]));
        }
      }
      // Last parameter first, as Trainer does.
      for (std::size_t p = sizes.size(); p-- > 0;) {
        aggregator.allreduce(copies[p], static_cast<int>(p));
      }
      aggregator.flush();
      for (std::size_t p = 0; p < sizes.size(); ++p) {
        const auto n = static_cast<std::size_t>(sizes[p]);
        std::vector<double> expected(n, 0.0);
        for (int r = 0; r < world.size(); ++r) {
          for (std::size_t d = 0; d < devices.size(); ++d) {
            const std::vector<float> theirs =
                testing::random_floats(n, -1.f, 1.f, seed_of(r, d, p));
            for (std::size_t i = 0; i < n; ++i) expected[i] += theirs[i];
          }
        }
        const std::string what =
            fmt::format("{} devices from {}, buckets of {} bytes, parameter {}", devices.size(),
                        devices[0].str(), bucket_bytes, p);
        const std::vector<float> first = copies[p][0].to_vector<float>();
        testing::expect_close(first, expected, 1e-6, 1e-5, what);
        for (std::size_t d = 1; d < devices.size(); ++d) {
          EXPECT_EQ(copies[p][d].to_vector<float>(), first) << what << ": copy " << d;
        }
        expect_same_in_every_process(first, what);
      }
    }
  }
}

TEST(MpiAggregatorTest, BroadcastGivesEveryCopyProcessZerosValues) {
  dist::MpiCommunicator& world = mpi_world();
  dist::MpiAggregator aggregator(world_pointer(), {.bucket_bytes = 100});
  const std::vector<Context> devices = {gpu(1), cpu(0)};
  std::vector<std::vector<NDArray>> copies(3);
  for (std::size_t p = 0; p < copies.size(); ++p) {
    for (std::size_t d = 0; d < devices.size(); ++d) {
      copies[p].push_back(array(testing::random_floats(40, -1.f, 1.f, seed_of(world.rank(), d, p)),
                                Shape{8, 5}, devices[d]));
    }
    aggregator.broadcast(copies[p], static_cast<int>(p));
  }
  aggregator.flush();
  for (std::size_t p = 0; p < copies.size(); ++p) {
    // Process 0's copy in host memory (cpu(0), device 1) is the source.
    const std::vector<float> expected = testing::random_floats(40, -1.f, 1.f, seed_of(0, 1, p));
    for (std::size_t d = 0; d < devices.size(); ++d) {
      EXPECT_EQ(copies[p][d].to_vector<float>(), expected) << "parameter " << p << " copy " << d;
    }
  }
}

TEST(NcclAggregatorAcrossProcessesTest, RefusesSimulatedGpusBeforeCommunicating) {
  // This binary's GPUs are simulated: NCCL across processes must refuse
  // them in every process with a typed error, and before any collective, so
  // that the processes stay in step even when only some of them try.
  dist::MpiCommunicator& world = mpi_world();
  auto refusal = [](const std::vector<Context>& gpus) -> std::string {
    try {
      dist::NcclAggregator nccl(gpus, world_pointer());
    } catch (const DeviceError& e) {
      return e.what();
    } catch (const Error& e) {
      return std::string("not a DeviceError: ") + e.what();
    }
    return "(no DeviceError)";
  };
  const std::string one = refusal({gpu(0)});
  EXPECT_NE(one.find("NCCL needs real GPUs, got gpu(0) (simulated)"), std::string::npos) << one;
  const std::string two = refusal({gpu(1), gpu(0)});
  EXPECT_NE(two.find("NCCL needs real GPUs, got gpu(1) (simulated)"), std::string::npos) << two;
  const std::string host = refusal({cpu(0)});
  EXPECT_NE(host.find("NCCL needs real GPUs, got cpu(0)"), std::string::npos) << host;
  if (world.rank() == 0) {
    const std::string alone = refusal({gpu(0), gpu(1)});
    EXPECT_NE(alone.find("NCCL needs real GPUs"), std::string::npos) << alone;
  }
  // Had a refusal sent anything, this gather would pair with it.
  const std::vector<std::int64_t> ranks = world.gather(world.rank());
  ASSERT_EQ(ranks.size(), static_cast<std::size_t>(world.size()));
  for (std::size_t r = 0; r < ranks.size(); ++r) EXPECT_EQ(ranks[r], static_cast<std::int64_t>(r));
}

TEST(MpiAggregatorTest, ProcessesThatAggregateDifferentArraysAreStoppedBeforeSending) {
  dist::MpiCommunicator& world = mpi_world();
  dist::MpiAggregator aggregator(world_pointer(), {.bucket_bytes = 1 << 20});
  // The last process has one more element in its second parameter.
  const bool odd_one = world.rank() == world.size() - 1 && world.size() > 1;
  const NDArray a = full({10}, 1.0, DType::kFloat32, cpu(0));
  const NDArray b = full({odd_one ? 6 : 5}, 1.0, DType::kFloat32, cpu(0));
  aggregator.allreduce(std::span(&a, 1), 0);
  aggregator.allreduce(std::span(&b, 1), 1);
  const std::string error = error_of([&] { aggregator.flush(); });
  if (world.size() > 1) {
    EXPECT_NE(error.find("the processes do not aggregate the same arrays"), std::string::npos)
        << error;
    EXPECT_NE(error.find(fmt::format("rank {}", world.size() - 1)), std::string::npos) << error;
  }
  // The aggregator refuses to go on (its processes are out of step)...
  if (world.size() > 1) {
    EXPECT_NE(error_of([&] { aggregator.allreduce(std::span(&a, 1), 0); }).find("out of step"),
              std::string::npos);
  }
  // ... but nothing was sent: the communicator still pairs collectives up.
  EXPECT_FALSE(world.broken());
  const std::vector<double> ones = world.sum(std::vector<double>{1.0});
  EXPECT_EQ(ones[0], world.size());
  EXPECT_NE(error_of([&] { dist::MpiAggregator(nullptr); }).find("expected a communicator"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              dist::MpiAggregator(world_pointer(), {.bucket_bytes = 0});
            }).find("expected bucket_bytes in [1, 1073741824], got 0"),
            std::string::npos);
}

TEST(MpiAggregatorTest, BroadcastParametersReachesFrozenParametersToo) {
  dist::MpiCommunicator& world = mpi_world();
  auto net = std::make_shared<nn::Sequential>();
  net->add(nn::Dense(4), nn::BatchNorm());  // BatchNorm's running statistics have no gradient
  net->initialize(init::Xavier(), {cpu(0), gpu(1)});
  (*net)(zeros({2, 3}));  // the shapes
  const double mine = 1.0 + world.rank();
  for (const nn::ParameterPtr& p : net->collect_params()) {
    p->set_data(full(p->shape(), mine, DType::kFloat32, cpu(0)));
  }
  nn::Trainer trainer(net->collect_params(), "sgd", {},
                      std::make_shared<dist::MpiAggregator>(world_pointer()));
  trainer.broadcast_parameters();
  int frozen = 0;
  for (const nn::ParameterPtr& p : net->collect_params()) {
    frozen += p->grad_req() == GradReq::kNull ? 1 : 0;
    for (Context c : {cpu(0), gpu(1)}) {
      const std::vector<float> values = p->data(c).to_vector<float>();
      EXPECT_EQ(values, std::vector<float>(values.size(), 1.f)) << p->name() << " on " << c.str();
    }
  }
  EXPECT_EQ(frozen, 2);
}

// --- training across processes ---------------------------------------------------

constexpr std::int64_t kSamples = 96;
constexpr std::int64_t kShardBatch = 4;  // per process
constexpr int kSteps = 5;

/// kSamples images (1, 8, 8) with labels in 0..9, the same in every process.
data::ArrayDataset synthetic_images() {
  return data::ArrayDataset(
      array(testing::random_floats(kSamples * 64, -1.f, 1.f, 3), {kSamples, 1, 8, 8}),
      array(testing::random_ints<std::int32_t>(kSamples, 0, 9, 4), {kSamples}));
}

std::shared_ptr<nn::Sequential> small_lenet() {
  auto net = std::make_shared<nn::Sequential>();
  net->add(nn::Conv2D(3, 3, "relu"), nn::MaxPool2D(2, 2), nn::Dense(12, "relu"), nn::Dense(10));
  return net;
}

/// kSteps steps on `devices`, over batches of `batch` samples of shard
/// `shard` of `shards`, each step dividing by the global batch. Returns
/// every parameter's values on the first device.
std::vector<std::vector<float>> train(const std::vector<Context>& devices,
                                      std::shared_ptr<dist::GradientAggregator> aggregator,
                                      int shards, int shard, std::int64_t global_batch,
                                      std::uint64_t init_seed) {
  data::DataLoader loader(
      synthetic_images(), global_batch / shards,
      {.shuffle = true, .seed = 11, .num_shards = shards, .shard_index = shard});
  random::seed(init_seed);
  auto net = small_lenet();
  net->initialize(init::Xavier(), devices);
  nn::SoftmaxCrossEntropyLoss loss_function;
  const auto [first_data, first_label] = *loader.begin();
  (*net)(first_data.slice(0, 1).copyto(devices[0]));  // the shapes, before broadcasting
  nn::Trainer trainer(net->collect_params(), "sgd", {.learning_rate = 0.3, .momentum = 0.9},
                      std::move(aggregator));
  trainer.broadcast_parameters();
  int step = 0;
  for (int epoch = 0; step < kSteps; ++epoch) {
    for (const data::Batch& batch : loader) {
      if (step++ == kSteps) break;
      const std::vector<NDArray> xs = nn::split_and_load(batch.data, devices);
      const std::vector<NDArray> ys = nn::split_and_load(batch.label, devices);
      std::vector<NDArray> losses;
      {
        auto recording = autograd::record();
        for (std::size_t d = 0; d < devices.size(); ++d) {
          losses.push_back(loss_function((*net)(xs[d]), ys[d]));
        }
      }
      for (NDArray& l : losses) l.backward();
      trainer.step(global_batch);
    }
  }
  std::vector<std::vector<float>> parameters;
  for (const nn::ParameterPtr& p : net->collect_params()) {
    parameters.push_back(p->data(devices[0]).to_vector<float>());
  }
  return parameters;
}

TEST(MpiAggregatorTest, ShardsTrainedInEveryProcessGiveOneProcessesParameters) {
  dist::MpiCommunicator& world = mpi_world();
  const std::int64_t global_batch = kShardBatch * world.size();
  // The reference: this process alone, on the whole global batches.
  const std::vector<std::vector<float>> one =
      train({cpu(0)}, nullptr, 1, 0, global_batch, /*init_seed=*/21);
  const std::vector<std::vector<Context>> device_sets = {
      {cpu(0)}, {cpu(1), cpu(0)}, {gpu(0), gpu(1)}};
  for (const std::vector<Context>& devices : device_sets) {
    for (const std::int64_t bucket_bytes : {std::int64_t{256}, std::int64_t{1} << 20}) {
      // Each process initialises from its own seed: the broadcast must make
      // them start from rank 0's weights, which are the reference's.
      const std::vector<std::vector<float>> many = train(
          devices,
          std::make_shared<dist::MpiAggregator>(world_pointer(),
                                                dist::MpiAggregatorOptions{bucket_bytes}),
          world.size(), world.rank(), global_batch, 21 + static_cast<std::uint64_t>(world.rank()));
      ASSERT_EQ(many.size(), one.size());
      for (std::size_t p = 0; p < one.size(); ++p) {
        const std::string what =
            fmt::format("{} devices from {}, buckets of {} bytes, parameter {}", devices.size(),
                        devices[0].str(), bucket_bytes, p);
        testing::expect_close(many[p], std::vector<double>(one[p].begin(), one[p].end()), 1e-4,
                              1e-5, what);
        expect_same_in_every_process(many[p], what);
      }
    }
  }
}

}  // namespace
}  // namespace tagflow

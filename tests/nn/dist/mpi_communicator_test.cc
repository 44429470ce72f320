// MpiCommunicator, run by mpirun in 2 and 3 processes: sums of random
// buffers of every dtype against the sum each process computes itself in
// double (every process can draw every other's buffers from their seeds),
// broadcasts from every root, the blocking helpers, collectives whose inputs
// become ready in a different order in each process, inputs carrying errors,
// and calls refused before anything is pushed.

#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
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

std::uint32_t seed_of(int test, int rank, int array) {
  return static_cast<std::uint32_t>(1000 * test + 10 * rank + array);
}

/// Process `rank`'s buffer `array` of collective `test`: `n` values of T.
template <typename T>
std::vector<T> buffer_of(int test, int rank, int array, std::size_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return testing::random_floats(n, -4.f, 4.f, seed_of(test, rank, array));
  } else {
    return testing::random_ints<T>(n, -1'000'000, 1'000'000, seed_of(test, rank, array));
  }
}

/// Empties the engine's record of errors raised so far (tests that plant
/// errors leave them there).
void drain_errors() {
  try {
    Engine::get().wait_for_all();
  } catch (const Error&) {
  }
}

/// Makes `a` carry an error, as if the operation producing it had failed.
void plant_error(const NDArray& a, const char* text) {
  Engine::get().push({.name = "planted_failure",
                      .ctx = cpu(0),
                      .writes = {a.var()},
                      .fn = [text](const RunContext&) { throw std::runtime_error(text); }});
}

template <typename T>
void check_sums(DType dtype, int test) {
  dist::MpiCommunicator& world = mpi_world();
  const int size = world.size();
  // Several collectives in flight at once: single arrays of awkward sizes,
  // then one message of three arrays of different shapes and devices.
  const std::vector<std::vector<std::int64_t>> messages = {{1},       {7}, {1000},
                                                           {300'001}, {0}, {5, 0, 64}};
  std::vector<std::vector<NDArray>> arrays(messages.size());
  for (std::size_t m = 0; m < messages.size(); ++m) {
    for (std::size_t k = 0; k < messages[m].size(); ++k) {
      const auto n = static_cast<std::size_t>(messages[m][k]);
      const int index = static_cast<int>(10 * m + k);
      const Context device = k % 2 == 0 ? cpu(0) : cpu(1);
      arrays[m].push_back(array(buffer_of<T>(test, world.rank(), index, n),
                                Shape{static_cast<std::int64_t>(n)}, device));
    }
    world.allreduce(arrays[m]);
  }
  for (std::size_t m = 0; m < messages.size(); ++m) {
    for (std::size_t k = 0; k < messages[m].size(); ++k) {
      const auto n = static_cast<std::size_t>(messages[m][k]);
      const int index = static_cast<int>(10 * m + k);
      const std::string what =
          fmt::format("{} message {} array {} ({} values)", dtype_name(dtype), m, k, n);
      std::vector<double> expected(n, 0.0);
      for (int r = 0; r < size; ++r) {
        const std::vector<T> theirs = buffer_of<T>(test, r, index, n);
        for (std::size_t i = 0; i < n; ++i) expected[i] += static_cast<double>(theirs[i]);
      }
      const std::vector<T> got = arrays[m][k].to_vector<T>();
      ASSERT_EQ(got.size(), n) << what;
      int reported = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const double want = expected[i];
        const double tolerance = std::is_same_v<T, float> ? 4e-7 * size * 4.0 * size : 0.0;
        if (std::abs(static_cast<double>(got[i]) - want) > tolerance && reported++ < 5) {
          ADD_FAILURE() << what << ": element " << i << " is " << +got[i] << ", expected " << want;
        }
      }
    }
  }
}

TEST(MpiCommunicatorTest, RanksAreNumberedFromZeroAndKnowTheJobsSize) {
  dist::MpiCommunicator& world = mpi_world();
  ASSERT_GE(world.size(), 1);
  const char* launched = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (launched != nullptr) {
    EXPECT_EQ(world.size(), std::stoi(launched));
  }
  const std::vector<std::int64_t> ranks = world.gather(world.rank());
  ASSERT_EQ(ranks.size(), static_cast<std::size_t>(world.size()));
  for (int r = 0; r < world.size(); ++r) EXPECT_EQ(ranks[static_cast<std::size_t>(r)], r);
  EXPECT_FALSE(world.host().empty());
  // mpirun starts every process of the tests on this machine.
  EXPECT_EQ(world.local_size(), world.size());
  EXPECT_FALSE(world.broken());
}

TEST(MpiCommunicatorTest, AllreduceOfRandomBuffersMatchesTheSumComputedLocally) {
  check_sums<float>(DType::kFloat32, 1);
  check_sums<std::int32_t>(DType::kInt32, 2);
  check_sums<std::int64_t>(DType::kInt64, 3);
  const NDArray bytes = zeros({3}, DType::kUInt8, cpu(0));
  EXPECT_NE(error_of([&] { mpi_world().allreduce(bytes); }).find("got uint8"), std::string::npos);
}

TEST(MpiCommunicatorTest, BroadcastCopiesTheRootsArraysEverywhere) {
  dist::MpiCommunicator& world = mpi_world();
  for (int root = 0; root < world.size(); ++root) {
    const std::vector<float> mine = buffer_of<float>(20 + root, world.rank(), 0, 513);
    const std::vector<std::int64_t> mine_ints =
        buffer_of<std::int64_t>(20 + root, world.rank(), 1, 9);
    NDArray a = array(mine, Shape{27, 19}, cpu(1));
    NDArray b = array(mine_ints, Shape{9}, cpu(0));
    world.broadcast(a, root);
    world.broadcast(b, root);
    EXPECT_EQ(a.to_vector<float>(), (buffer_of<float>(20 + root, root, 0, 513))) << "root " << root;
    EXPECT_EQ(b.to_vector<std::int64_t>(), (buffer_of<std::int64_t>(20 + root, root, 1, 9)))
        << "root " << root;
  }
}

TEST(MpiCommunicatorTest, BlockingHelpersGiveSumsGathersAndBroadcasts) {
  dist::MpiCommunicator& world = mpi_world();
  const int size = world.size();
  const double rank = world.rank();
  const std::vector<double> sums = world.sum(std::vector<double>{rank, 0.5, -rank * rank});
  double squares = 0;
  for (int r = 0; r < size; ++r) squares += static_cast<double>(r) * r;
  EXPECT_EQ(sums, (std::vector<double>{size * (size - 1) / 2.0, 0.5 * size, -squares}));
  EXPECT_TRUE(world.sum(std::vector<double>{}).empty());

  const std::vector<std::int64_t> gathered = world.gather(100 * world.rank() + 7);
  for (int r = 0; r < size; ++r) EXPECT_EQ(gathered[static_cast<std::size_t>(r)], 100 * r + 7);

  std::string text = world.rank() == size - 1 ? "from the last rank" : "..................";
  world.broadcast_bytes(std::as_writable_bytes(std::span(text.data(), text.size())), size - 1);
  EXPECT_EQ(text, "from the last rank");
  world.barrier();
}

TEST(MpiCommunicatorTest, CollectivesRunInCallOrderWhateverOrderTheirInputsBecomeReady) {
  // In each process a different collective's input is the slow one, so the
  // engine hands them to the communication thread in a different order
  // everywhere; sizes differ, so any mismatch in MPI would show.
  dist::MpiCommunicator& world = mpi_world();
  constexpr int kCollectives = 6;
  std::vector<NDArray> arrays;
  for (int i = 0; i < kCollectives; ++i) {
    const auto n = static_cast<std::size_t>(10 + 17 * i);
    arrays.push_back(array(std::vector<float>(n, static_cast<float>(world.rank() + i)),
                           Shape{static_cast<std::int64_t>(n)}, i % 2 == 0 ? cpu(0) : cpu(1)));
  }
  const int slow = world.rank() % kCollectives;
  const NDArray& held = arrays[static_cast<std::size_t>(slow)];
  Engine::get().push({.name = "slow_producer",
                      .ctx = held.context(),
                      .writes = {held.var()},
                      .fn = [](const RunContext&) {
                        std::this_thread::sleep_for(std::chrono::milliseconds(200));
                      }});
  for (const NDArray& a : arrays) world.allreduce(a);
  const int size = world.size();
  for (int i = 0; i < kCollectives; ++i) {
    double expected = 0;
    for (int r = 0; r < size; ++r) expected += r + i;
    const std::vector<float> got = arrays[static_cast<std::size_t>(i)].to_vector<float>();
    EXPECT_EQ(got, std::vector<float>(got.size(), static_cast<float>(expected)))
        << "collective " << i;
  }
}

TEST(MpiCommunicatorTest, AnInputCarryingAnErrorFailsTheSumInEveryProcess) {
  dist::MpiCommunicator& world = mpi_world();
  const int size = world.size();
  const int failing = size - 1;
  NDArray a = full({100}, 1.0, DType::kFloat32, cpu(0));
  NDArray b = full({3}, 2.0, DType::kFloat32, cpu(1));
  if (world.rank() == failing) plant_error(b, "planted failure of the input");
  world.allreduce(std::vector<NDArray>{a, b});
  std::string message;
  try {
    a.wait_to_read();
  } catch (const OperationError& e) {
    message = e.what();
    if (world.rank() == failing) {
      EXPECT_NE(message.find("planted failure of the input"), std::string::npos) << message;
    } else {
      EXPECT_NE(message.find(fmt::format("the inputs of 1 of the {} processes", size)),
                std::string::npos)
          << message;
      EXPECT_NE(message.find("mpi_allreduce"), std::string::npos) << message;
      try {
        std::rethrow_exception(e.cause());
      } catch (const dist::CommunicationError&) {
      } catch (...) {
        ADD_FAILURE() << "expected a dist::CommunicationError inside: " << message;
      }
    }
  }
  if (size > 1 || world.rank() == failing) {
    EXPECT_FALSE(message.empty()) << "no error reached a";
  }
  drain_errors();

  // The communicator is not broken by an input error: the next sum works.
  NDArray c = full({4}, 1.5, DType::kFloat32, cpu(0));
  world.allreduce(c);
  EXPECT_EQ(c.to_vector<float>(), std::vector<float>(4, 1.5f * static_cast<float>(size)));
  EXPECT_FALSE(world.broken());

  // A broadcast whose root's input failed writes nothing anywhere.
  NDArray d = full({5}, static_cast<double>(world.rank()), DType::kFloat32, cpu(0));
  if (world.rank() == failing) plant_error(d, "planted failure of the root");
  world.broadcast(d, failing);
  const std::string broadcast_error = error_of([&] { d.wait_to_read(); });
  if (world.rank() == failing) {
    EXPECT_NE(broadcast_error.find("planted failure of the root"), std::string::npos)
        << broadcast_error;
  } else {
    EXPECT_NE(broadcast_error.find(fmt::format("the input of rank {} carried an error", failing)),
              std::string::npos)
        << broadcast_error;
  }
  drain_errors();
}

TEST(MpiCommunicatorTest, BadCallsAreRefusedBeforeAnythingIsPushed) {
  dist::MpiCommunicator& world = mpi_world();
  const NDArray f = zeros({3}, DType::kFloat32, cpu(0));
  const NDArray i = zeros({3}, DType::kInt32, cpu(0));
  EXPECT_NE(error_of([&] {
              world.allreduce(std::span<const NDArray>{});
            }).find("expected at least one array"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              world.allreduce(std::vector<NDArray>{f, NDArray()});
            }).find("array 1 of 2 is undefined"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              world.allreduce(std::vector<NDArray>{f, i});
            }).find("expected arrays of one dtype, got float32 at 0 and int32 at 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              world.allreduce(std::vector<NDArray>{f, f.slice(1, 2)});
            }).find("arrays 0 and 1 share memory"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              world.broadcast(f, world.size());
            }).find(fmt::format("expected a root in [0, {}), got {}", world.size(), world.size())),
            std::string::npos);
  EXPECT_NE(error_of([&] { world.broadcast_bytes({}, -1); }).find("got -1"), std::string::npos);
  // A blocking helper inside an operation would deadlock: refused there.
  std::string inside;
  Engine::get().push(
      {.name = "sum_inside", .ctx = cpu(0), .writes = {f.var()}, .fn = [&](const RunContext&) {
         inside = error_of([&] { world.sum(std::vector<double>{1.0}); });
       }});
  f.wait_to_read();
  EXPECT_NE(inside.find("called from inside an engine operation"), std::string::npos) << inside;
  // None of these took a ticket: the next collective still pairs up.
  NDArray ok = full({2}, 3.0, DType::kFloat32, cpu(0));
  world.allreduce(ok);
  EXPECT_EQ(ok.to_vector<float>(), std::vector<float>(2, 3.f * static_cast<float>(world.size())));
}

}  // namespace
}  // namespace tagflow

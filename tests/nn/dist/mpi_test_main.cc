// The main of nn_mpi_tests: gives every process two simulated GPUs, starts
// MPI (with the timeout TAGFLOW_TEST_MPI_TIMEOUT gives, in seconds, default
// 60), runs the tests in every process, and prints the full report from
// rank 0 and only the failures, with their rank, from the others.

#include <cstdlib>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/nn/dist/mpi_world.h"

namespace tagflow::testing {

namespace {

std::shared_ptr<dist::MpiCommunicator> world;

/// Reports a failed assertion of a rank other than 0, with its rank.
class FailurePrinter final : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}

  void OnTestStart(const ::testing::TestInfo& test) override {
    test_ = fmt::format("{}.{}", test.test_suite_name(), test.name());
  }

  // Not UnitTest::current_test_info(): it takes the lock held while this runs.
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    fmt::print(stderr, "[rank {}] {}: {}:{}: failure\n{}\n", rank_, test_,
               result.file_name() != nullptr ? result.file_name() : "?", result.line_number(),
               result.message());
  }

 private:
  int rank_;
  std::string test_;
};

}  // namespace

dist::MpiCommunicator& mpi_world() { return *world; }

}  // namespace tagflow::testing

int main(int argc, char** argv) {
  using tagflow::testing::world;
  // Two simulated GPUs in every process, as the other test binaries have.
  setenv("TAGFLOW_SIM_GPUS", "2", /*overwrite=*/0);
  ::testing::InitGoogleTest(&argc, argv);
  const char* timeout = std::getenv("TAGFLOW_TEST_MPI_TIMEOUT");
  world = tagflow::dist::MpiCommunicator::world(
      {.timeout_seconds = timeout != nullptr ? std::stod(timeout) : 60.0});
  if (world->rank() != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new tagflow::testing::FailurePrinter(world->rank()));
  }
  const int failed = RUN_ALL_TESTS();
  world.reset();  // finalises MPI, after the collectives of every test have ended
  return failed;
}

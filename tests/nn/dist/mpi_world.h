#pragma once
// The communicator of nn_mpi_tests, a test binary started by mpirun with
// several processes (tests/nn/CMakeLists.txt). Every test runs in every
// process at once, so each one makes the same collective calls in the same
// order whatever its assertions find: EXPECT_*, not ASSERT_*, before a
// collective.

#include "nn/dist/mpi_communicator.h"

namespace tagflow::testing {

/// The job's communicator, made by the test main before any test runs.
dist::MpiCommunicator& mpi_world();

}  // namespace tagflow::testing

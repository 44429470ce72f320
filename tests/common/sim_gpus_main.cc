// The main of the test binaries above the engine: they run on the
// process-wide engine, given two simulated GPUs unless the environment
// already says otherwise, so every multi-device path runs without a GPU.
// A test binary may ask for another count with TAGFLOW_TEST_SIM_GPUS.

#include <cstdlib>

#include <gtest/gtest.h>

#ifndef TAGFLOW_TEST_SIM_GPUS
#define TAGFLOW_TEST_SIM_GPUS "2"
#endif

int main(int argc, char** argv) {
  setenv("TAGFLOW_SIM_GPUS", TAGFLOW_TEST_SIM_GPUS, /*overwrite=*/0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

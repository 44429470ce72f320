// The main of the test binaries above the engine: they run on the
// process-wide engine, given two simulated GPUs unless the environment
// already says otherwise, so every multi-device path runs without a GPU.

#include <cstdlib>

#include <gtest/gtest.h>

int main(int argc, char** argv) {
  setenv("TAGFLOW_SIM_GPUS", "2", /*overwrite=*/0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

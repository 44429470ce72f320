#pragma once
// `tagflow bench ops`: the cost of operators through the whole stack.
//  - small-add: `c = a + b` on 4-element arrays, repeated: checks, output
//    allocation, push, kernel, completion and release, in µs per operation;
//  - gemm: a matrix product through tagflow in float32, bfloat16 and
//    float16, against float32 products of OpenBLAS and oneDNN called
//    directly with their own threads, in GFLOP/s;
//  - sync-log: the tutorials' exercise, 1000 products of 100x100 matrices
//    logging the Frobenius norm to the host after each one, against keeping
//    the log on the device and copying it once;
//  - scaling: the same number of products as two dependent chains, one
//    after the other on one device against one chain on each of two devices
//    at once (gpu(0) and gpu(1) when there are two GPUs, else cpu(0) and
//    cpu(1)), with the speed-up;
//  - cpu-vs-gpu: a large float32 product on cpu(0) and on every GPU present
//    (simulated GPUs are labelled: they run the CPU kernels).

#include <string>
#include <vector>

#include "engine/context.h"

namespace tagflow::tools {

struct OpsBenchOptions {
  std::vector<std::string> cases = {"small-add", "gemm", "sync-log", "scaling", "cpu-vs-gpu"};
  int runs = 5;
  long small_ops = 1'000'000;
  int gemm_size = 2048;
  int products = 1000;
  Context device = cpu(0);
};

/// The names `--case` accepts.
const std::vector<std::string>& ops_bench_cases();

/// Runs the benchmark; prints one JSON line per case, then a table.
/// Returns false when a result was wrong.
bool run_ops_bench(const OpsBenchOptions& options);

}  // namespace tagflow::tools

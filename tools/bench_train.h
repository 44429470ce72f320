#pragma once
// `tagflow bench train`: images per second of training the tutorials' LeNet
// (or ResNet-18) on Fashion-MNIST, on one device and on two, next to
// PyTorch running the same network, data and settings
// (tools/pytorch_train.py).
//
// Each configuration runs in a child process (`tagflow train --json`, or
// the PyTorch script), so that its peak resident memory is its own; the
// figures are read from the child's JSON lines. Prints one JSON line per
// configuration, then a table.

#include <string>
#include <vector>

namespace tagflow::tools {

struct TrainBenchOptions {
  /// "lenet" or "resnet18" (as `tagflow train --model`).
  std::string model = "lenet";
  /// Device lists to train on, one configuration each (`--devices` syntax).
  /// Empty: one device and two (gpu:0 and gpu:0,gpu:1 with two GPUs, else
  /// cpu:0 and cpu:0,cpu:1).
  std::vector<std::string> device_sets;
  int epochs = 1;
  long batch_size = 256;
  double learning_rate = 0.1;
  /// Train on the first `limit` training images only (0: all).
  long limit = 0;
  /// Evaluate on the first `test_limit` test images only (0: all).
  long test_limit = 0;
  std::string data_dir;
  /// tools/pytorch_train.py, run by `python` (empty: PyTorch is not run).
  std::string pytorch_script;
  std::string python = "/usr/bin/python3";
};

/// Runs every configuration; returns false when one failed.
bool run_train_bench(const TrainBenchOptions& options);

}  // namespace tagflow::tools

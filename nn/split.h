#pragma once
// Splitting a batch across devices, as Gluon's gluon.utils.split_data and
// split_and_load: the first step of data-parallel training.
//
//   std::vector<Context> devices = {gpu(0), gpu(1)};
//   std::vector<NDArray> parts = nn::split_and_load(data, devices);    // 128 rows each
//   // parts[i] lives on devices[i]; the host returns at once (the copies
//   // are engine operations on the copy workers).
//
// Threads: safe to call concurrently. Like every operator (ops/elementwise.h).

#include <vector>

#include "ops/ndarray.h"

namespace tagflow::nn {

/// `data` cut into `num_slice` parts along its first axis, as views (no
/// copy). With `even_split`, every part has the same number of rows, and a
/// batch that does not divide evenly (or has fewer rows than parts) throws
/// tagflow::Error saying so. Without it, each part has floor(rows /
/// num_slice) rows and the last one the rest; a batch of fewer rows than
/// parts gives one part per row (fewer parts than asked).
std::vector<NDArray> split_data(const NDArray& data, int num_slice, bool even_split = true);

/// split_data(data, contexts.size(), even_split), part i on contexts[i]:
/// copied there (lazily, as copyto), or the view itself when it already
/// lives there. Throws tagflow::Error for an empty list of devices and
/// DeviceError for a device that does not exist.
std::vector<NDArray> split_and_load(const NDArray& data, const std::vector<Context>& contexts,
                                    bool even_split = true);

}  // namespace tagflow::nn

#include "nn/split.h"

#include "storage/storage.h"

namespace tagflow::nn {

std::vector<NDArray> split_data(const NDArray& data, int num_slice, bool even_split) {
  TAGFLOW_CHECK(data.defined() && data.ndim() >= 1,
                "split_data: expected an array with a batch axis, got {}",
                data.defined() ? "a scalar" : "an undefined array");
  TAGFLOW_CHECK(num_slice >= 1, "split_data: expected at least 1 part, got {}", num_slice);
  const std::int64_t rows = data.shape()[0];
  if (even_split) {
    TAGFLOW_CHECK(rows >= num_slice,
                  "split_data: a batch of {} rows cannot be split into {} parts: use a batch of "
                  "at least {} rows (or even_split = false)",
                  rows, num_slice, num_slice);
    TAGFLOW_CHECK(rows % num_slice == 0,
                  "split_data: a batch of {} rows cannot be split evenly into {} parts: use a "
                  "batch size that is a multiple of {} (or even_split = false)",
                  rows, num_slice, num_slice);
  }
  const std::int64_t parts = std::min<std::int64_t>(num_slice, std::max<std::int64_t>(rows, 1));
  const std::int64_t step = rows / parts;
  std::vector<NDArray> slices;
  slices.reserve(static_cast<std::size_t>(parts));
  for (std::int64_t i = 0; i < parts; ++i) {
    const std::int64_t begin = i * step;
    const std::int64_t end = i + 1 < parts ? begin + step : rows;
    slices.push_back(data.slice(begin, end));
  }
  return slices;
}

std::vector<NDArray> split_and_load(const NDArray& data, const std::vector<Context>& contexts,
                                    bool even_split) {
  TAGFLOW_CHECK(!contexts.empty(), "split_and_load: expected at least one device, got none");
  for (Context ctx : contexts) check_device(ctx);
  std::vector<NDArray> parts = split_data(data, static_cast<int>(contexts.size()), even_split);
  for (std::size_t i = 0; i < parts.size(); ++i) parts[i] = parts[i].as_in_context(contexts[i]);
  return parts;
}

}  // namespace tagflow::nn

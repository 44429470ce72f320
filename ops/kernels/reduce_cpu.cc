// The reduction plan and the CPU reduction and softmax kernels (Note [One
// kernel, three devices] in launch.h; Note [Deterministic reductions] in
// reduce_kernels.h).

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/kernels/cpu_parallel.h"
#include "ops/kernels/reduce_kernels.h"

namespace tagflow::detail {

ReducePlan make_reduce_plan(const Shape& shape, const bool* reduced_axes) {
  ReducePlan plan;
  // Row-major strides; an axis merges into the previous one of its kind when
  // no axis of the other kind (with extent above 1) lies between them.
  std::int64_t strides[Shape::kMaxDims];
  std::int64_t stride = 1;
  for (int axis = shape.ndim() - 1; axis >= 0; --axis) {
    strides[axis] = stride;
    stride *= shape[axis];
  }
  int last_kind = -1;  // 0: kept, 1: reduced, -1: none yet
  for (int axis = 0; axis < shape.ndim(); ++axis) {
    const std::int64_t extent = shape[axis];
    const bool reduced = reduced_axes[axis];
    if (reduced) {
      plan.reduced *= extent;
    } else {
      plan.outputs *= extent;
    }
    if (extent == 1) continue;
    int& ndim = reduced ? plan.reduced_ndim : plan.kept_ndim;
    std::int64_t* dims = reduced ? plan.reduced_dims : plan.kept_dims;
    std::int64_t* axis_strides = reduced ? plan.reduced_strides : plan.kept_strides;
    if (last_kind == static_cast<int>(reduced)) {
      dims[ndim - 1] *= extent;
      axis_strides[ndim - 1] = strides[axis];
    } else {
      dims[ndim] = extent;
      axis_strides[ndim] = strides[axis];
      ++ndim;
    }
    last_kind = static_cast<int>(reduced);
  }
  return plan;
}

namespace cpu_kernels {

namespace {

/// Kept outputs processed side by side when the innermost axis is kept.
constexpr std::int64_t kLaneChunk = 1024;

/// Walks the reduced offsets of r, r + 1, ... without a division per step.
class ReducedOffsets {
 public:
  ReducedOffsets(const ReducePlan& plan, std::int64_t r) : plan_(plan) {
    for (int axis = plan.reduced_ndim - 1; axis >= 0; --axis) {
      index_[axis] = r % plan.reduced_dims[axis];
      r /= plan.reduced_dims[axis];
      offset_ += index_[axis] * plan.reduced_strides[axis];
    }
  }
  std::int64_t offset() const { return offset_; }
  void advance() { carry_from(plan_.reduced_ndim - 1); }
  /// Elements left before the innermost reduced axis wraps (reduced_ndim > 0).
  std::int64_t left_in_run() const {
    const int last = plan_.reduced_ndim - 1;
    return plan_.reduced_dims[last] - index_[last];
  }
  /// Moves `n` (<= left_in_run()) elements along the innermost reduced axis.
  void advance_in_run(std::int64_t n) {
    const int last = plan_.reduced_ndim - 1;
    if (n < left_in_run()) {
      offset_ += n * plan_.reduced_strides[last];
      index_[last] += n;
      return;
    }
    offset_ -= index_[last] * plan_.reduced_strides[last];
    index_[last] = 0;
    carry_from(last - 1);
  }

 private:
  /// One step along `axis`, carrying into the outer axes.
  void carry_from(int axis) {
    for (; axis >= 0; --axis) {
      offset_ += plan_.reduced_strides[axis];
      if (++index_[axis] < plan_.reduced_dims[axis]) return;
      offset_ -= index_[axis] * plan_.reduced_strides[axis];
      index_[axis] = 0;
    }
  }

  const ReducePlan& plan_;
  std::int64_t index_[Shape::kMaxDims] = {};
  std::int64_t offset_ = 0;
};

/// Note [Deterministic reductions]: tasks are (group of outputs, chunk of
/// lanes, block of the reduced range); each accumulates its block into its
/// own slots of `partial` ([block][output]); the blocks of each output are
/// then combined in order.
template <typename R, typename T>
void reduce_with(const ReducePlan& plan, const T* in, typename R::Out* out) {
  using Acc = typename R::Acc;
  const std::int64_t outputs = plan.outputs;
  if (outputs == 0) return;
  const std::int64_t reduced = plan.reduced;
  const std::int64_t lanes = plan.innermost_kept() ? plan.kept_dims[plan.kept_ndim - 1] : 1;
  const std::int64_t groups = outputs / lanes;
  const std::int64_t chunks = (lanes + kLaneChunk - 1) / kLaneChunk;
  const std::int64_t blocks =
      std::max<std::int64_t>(1, (reduced + kReduceBlock - 1) / kReduceBlock);
  std::vector<Acc> partial(static_cast<std::size_t>(blocks * outputs));

  const std::int64_t tasks = groups * chunks * blocks;
  const std::int64_t task_work = std::min(lanes, kLaneChunk) * std::min(reduced, kReduceBlock);
  const std::int64_t grain =
      std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(task_work, 1));
  parallel_for_range(tasks, grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t block = task % blocks;
      const std::int64_t chunk = (task / blocks) % chunks;
      const std::int64_t group = task / blocks / chunks;
      const std::int64_t lane_begin = chunk * kLaneChunk;
      const std::int64_t lane_count = std::min(lanes - lane_begin, kLaneChunk);
      const std::int64_t first_output = group * lanes + lane_begin;
      const T* base = in + plan.output_offset(first_output);
      Acc* acc = partial.data() + block * outputs + first_output;
      std::fill(acc, acc + lane_count, R::init());
      const std::int64_t r_begin = block * kReduceBlock;
      const std::int64_t r_end = std::min(reduced, r_begin + kReduceBlock);
      if (r_begin == r_end) continue;  // nothing to reduce: the sum of no elements
      ReducedOffsets offsets(plan, r_begin);
      if (lane_count == 1 && plan.reduced_ndim > 0 &&
          plan.reduced_strides[plan.reduced_ndim - 1] == 1) {
        // One output whose innermost reduced axis is contiguous (a sum over
        // the batch and the pixels, as a convolution's bias gradient): whole
        // runs of it at a time, in the same order as element by element.
        Acc a = acc[0];
        for (std::int64_t r = r_begin; r < r_end;) {
          const std::int64_t run = std::min(r_end - r, offsets.left_in_run());
          const T* src = base + offsets.offset();
          for (std::int64_t i = 0; i < run; ++i) a = R::step(a, src[i], r + i);
          offsets.advance_in_run(run);
          r += run;
        }
        acc[0] = a;
        continue;
      }
      for (std::int64_t r = r_begin; r < r_end; ++r, offsets.advance()) {
        const T* src = base + offsets.offset();
        for (std::int64_t lane = 0; lane < lane_count; ++lane) {
          acc[lane] = R::step(acc[lane], src[lane], r);
        }
      }
    }
  });
  parallel_for_range(outputs, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t o = begin; o < end; ++o) {
      Acc acc = partial[static_cast<std::size_t>(o)];
      for (std::int64_t block = 1; block < blocks; ++block) {
        acc = R::combine(acc, partial[static_cast<std::size_t>(block * outputs + o)]);
      }
      out[o] = R::finish(acc, reduced);
    }
  });
}

/// Softmax of `lanes` rows that start at consecutive elements, their
/// elements `inner` apart: row by row when inner is 1, else side by side
/// (each row still accumulates in the order of its own elements).
template <typename T>
void softmax_lanes(bool log_output, const T* in, T* out, std::int64_t extent, std::int64_t inner,
                   std::int64_t lanes, float* row_max, double* row_sum) {
  const auto value = [](T x) { return static_cast<float>(x); };
  for (std::int64_t lane = 0; lane < lanes; ++lane) {
    row_max[lane] = -INFINITY;
    row_sum[lane] = 0.0;
  }
  for (std::int64_t j = 0; j < extent; ++j) {
    const T* x = in + j * inner;
    for (std::int64_t lane = 0; lane < lanes; ++lane) {
      row_max[lane] = ExtremeReducer<float, true>::step(row_max[lane], value(x[lane]), j);
    }
  }
  for (std::int64_t j = 0; j < extent; ++j) {
    const T* x = in + j * inner;
    for (std::int64_t lane = 0; lane < lanes; ++lane) {
      row_sum[lane] += static_cast<double>(std::exp(value(x[lane]) - row_max[lane]));
    }
  }
  if (log_output) {
    for (std::int64_t lane = 0; lane < lanes; ++lane) row_sum[lane] = std::log(row_sum[lane]);
  }
  for (std::int64_t j = 0; j < extent; ++j) {
    const T* x = in + j * inner;
    T* y = out + j * inner;
    for (std::int64_t lane = 0; lane < lanes; ++lane) {
      const float v = value(x[lane]);
      // x - max - log(sum), in double so large magnitudes keep their digits;
      // rounded once to T.
      y[lane] = convert_element<T>(
          log_output ? static_cast<double>(v) - static_cast<double>(row_max[lane]) - row_sum[lane]
                     : static_cast<double>(std::exp(v - row_max[lane])) / row_sum[lane]);
    }
  }
}

template <typename T>
void softmax_typed(bool log_output, const T* in, T* out, SoftmaxShape shape) {
  if (shape.outer == 0 || shape.extent == 0 || shape.inner == 0) return;
  const std::int64_t lanes = std::min(shape.inner, kLaneChunk);
  const std::int64_t chunks = (shape.inner + lanes - 1) / lanes;
  const std::int64_t tasks = shape.outer * chunks;
  const std::int64_t grain =
      std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(lanes * shape.extent, 1));
  parallel_for_range(tasks, grain, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> row_max(static_cast<std::size_t>(lanes));
    std::vector<double> row_sum(static_cast<std::size_t>(lanes));
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t lane_begin = (task % chunks) * lanes;
      const std::int64_t offset = (task / chunks) * shape.extent * shape.inner + lane_begin;
      softmax_lanes(log_output, in + offset, out + offset, shape.extent, shape.inner,
                    std::min(lanes, shape.inner - lane_begin), row_max.data(), row_sum.data());
    }
  });
}

}  // namespace

void reduce(ReduceOp op, DType dtype, const void* in, void* out, const ReducePlan& plan) {
  TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
    with_reducer<T>(op, [&](auto reducer) {
      using R = decltype(reducer);
      reduce_with<R>(plan, static_cast<const T*>(in), static_cast<typename R::Out*>(out));
    });
  });
}

void softmax(bool log_output, DType dtype, const void* in, void* out, SoftmaxShape shape) {
  TAGFLOW_FLOAT_DTYPE_SWITCH(dtype, T, {
    softmax_typed(log_output, static_cast<const T*>(in), static_cast<T*>(out), shape);
  });
}

}  // namespace cpu_kernels

}  // namespace tagflow::detail

// concat and stack against plain index loops: every axis (negative ones
// too), 1 to 4 dimensions, every dtype, views and repeated inputs, empty
// pieces, on every device; the order against later writes; the errors.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::all_devices;
using testing::expect_error;

constexpr DType kDTypes[] = {DType::kFloat32, DType::kInt32, DType::kInt64, DType::kUInt8};

/// Integers in [0, 250]: exact in every dtype, so the copies compare exactly.
std::vector<double> random_values(std::int64_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(0, 250);
  std::vector<double> values(static_cast<std::size_t>(n));
  for (double& v : values) v = dist(rng);
  return values;
}

NDArray make_array(const std::vector<double>& values, const Shape& shape, DType dtype,
                   Context ctx) {
  NDArray result;
  TAGFLOW_DTYPE_SWITCH(dtype, T, {
    const std::vector<T> typed(values.begin(), values.end());
    result = array(typed, shape, ctx);
  });
  return result;
}

/// The row-major coordinates of `flat` in `shape`.
std::vector<std::int64_t> unravel(std::int64_t flat, const Shape& shape) {
  std::vector<std::int64_t> index(static_cast<std::size_t>(shape.ndim()));
  for (int d = shape.ndim() - 1; d >= 0; --d) {
    index[static_cast<std::size_t>(d)] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

std::int64_t ravel(const std::vector<std::int64_t>& index, const Shape& shape) {
  std::int64_t flat = 0;
  for (int d = 0; d < shape.ndim(); ++d)
    flat = flat * shape[d] + index[static_cast<std::size_t>(d)];
  return flat;
}

struct Piece {
  std::vector<double> values;
  Shape shape;
};

/// Element by element: which input an output position comes from.
std::vector<double> concat_reference(const std::vector<Piece>& pieces, int axis,
                                     const Shape& out_shape) {
  std::vector<double> out(static_cast<std::size_t>(out_shape.size()));
  for (std::int64_t flat = 0; flat < out_shape.size(); ++flat) {
    std::vector<std::int64_t> index = unravel(flat, out_shape);
    std::size_t k = 0;
    auto& along = index[static_cast<std::size_t>(axis)];
    while (along >= pieces[k].shape[axis]) along -= pieces[k++].shape[axis];
    out[static_cast<std::size_t>(flat)] =
        pieces[k].values[static_cast<std::size_t>(ravel(index, pieces[k].shape))];
  }
  return out;
}

std::vector<double> stack_reference(const std::vector<Piece>& pieces, int axis,
                                    const Shape& out_shape) {
  std::vector<double> out(static_cast<std::size_t>(out_shape.size()));
  for (std::int64_t flat = 0; flat < out_shape.size(); ++flat) {
    std::vector<std::int64_t> index = unravel(flat, out_shape);
    const auto k = static_cast<std::size_t>(index[static_cast<std::size_t>(axis)]);
    index.erase(index.begin() + axis);
    out[static_cast<std::size_t>(flat)] =
        pieces[k].values[static_cast<std::size_t>(ravel(index, pieces[k].shape))];
  }
  return out;
}

std::vector<NDArray> to_arrays(const std::vector<Piece>& pieces, DType dtype, Context ctx) {
  std::vector<NDArray> arrays;
  for (const Piece& p : pieces) arrays.push_back(make_array(p.values, p.shape, dtype, ctx));
  return arrays;
}

TEST(JoinTest, ConcatMatchesAnIndexLoopOnEveryAxisDtypeAndDevice) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::int64_t> extent(1, 3);
  std::uniform_int_distribution<std::int64_t> along(0, 3);  // 0: an empty piece
  for (int ndim = 1; ndim <= 4; ++ndim) {
    for (int axis = -ndim; axis < ndim; ++axis) {
      const int a = axis < 0 ? axis + ndim : axis;
      Shape base;
      for (int d = 0; d < ndim; ++d) base.push_back(extent(rng));
      std::vector<Piece> pieces;
      Shape out_shape = base;
      out_shape[a] = 0;
      for (int k = 0; k < 3; ++k) {
        Shape shape = base;
        shape[a] = along(rng);
        out_shape[a] += shape[a];
        pieces.push_back({random_values(shape.size(), rng), shape});
      }
      const std::vector<double> expected = concat_reference(pieces, a, out_shape);
      for (DType dtype : kDTypes) {
        for (Context ctx : all_devices()) {
          const NDArray out = concat(to_arrays(pieces, dtype, ctx), axis);
          const std::string what = "ndim " + std::to_string(ndim) + " axis " +
                                   std::to_string(axis) + " " + std::string(dtype_name(dtype)) +
                                   " on " + ctx.str();
          ASSERT_EQ(out.shape(), out_shape) << what;
          EXPECT_EQ(out.dtype(), dtype) << what;
          EXPECT_EQ(out.context(), ctx) << what;
          EXPECT_EQ(out.to_vector<double>(), expected) << what;
        }
      }
    }
  }
}

TEST(JoinTest, StackMatchesAnIndexLoopOnEveryAxisDtypeAndDevice) {
  std::mt19937 rng(8);
  std::uniform_int_distribution<std::int64_t> extent(1, 3);
  for (int ndim = 0; ndim <= 3; ++ndim) {  // results of 1 to 4 dimensions
    for (int axis = -(ndim + 1); axis <= ndim; ++axis) {
      const int a = axis < 0 ? axis + ndim + 1 : axis;
      Shape shape;
      for (int d = 0; d < ndim; ++d) shape.push_back(extent(rng));
      std::vector<Piece> pieces;
      for (int k = 0; k < 3; ++k) pieces.push_back({random_values(shape.size(), rng), shape});
      Shape out_shape;
      for (int d = 0; d <= ndim; ++d) {
        if (d == a) out_shape.push_back(3);
        if (d < ndim) out_shape.push_back(shape[d]);
      }
      const std::vector<double> expected = stack_reference(pieces, a, out_shape);
      for (DType dtype : kDTypes) {
        for (Context ctx : all_devices()) {
          const NDArray out = stack(to_arrays(pieces, dtype, ctx), axis);
          const std::string what = "ndim " + std::to_string(ndim) + " axis " +
                                   std::to_string(axis) + " " + std::string(dtype_name(dtype)) +
                                   " on " + ctx.str();
          ASSERT_EQ(out.shape(), out_shape) << what;
          EXPECT_EQ(out.dtype(), dtype) << what;
          EXPECT_EQ(out.to_vector<double>(), expected) << what;
        }
      }
    }
  }
}

TEST(JoinTest, LargeInputsTakeTheParallelPathWithTheSameResult) {
  std::mt19937 rng(9);
  // 300 rows of 257 + 129 floats: several row blocks on the CPU; odd widths.
  const std::vector<Piece> pieces = {{random_values(300 * 257, rng), Shape{300, 257}},
                                     {random_values(300 * 129, rng), Shape{300, 129}}};
  const std::vector<double> expected = concat_reference(pieces, 1, Shape{300, 386});
  const std::vector<Piece> same = {pieces[0], pieces[0], pieces[0]};
  const std::vector<double> stacked = stack_reference(same, 2, Shape{300, 257, 3});
  for (DType dtype : {DType::kFloat32, DType::kUInt8}) {
    for (Context ctx : all_devices()) {
      EXPECT_EQ(concat(to_arrays(pieces, dtype, ctx), -1).to_vector<double>(), expected) << ctx;
      EXPECT_EQ(stack(to_arrays(same, dtype, ctx), 2).to_vector<double>(), stacked) << ctx;
    }
  }
}

TEST(JoinTest, ViewsAndRepeatedInputsAreRead) {
  std::mt19937 rng(10);
  const std::vector<double> x_values = random_values(5 * 3 * 4, rng);
  auto rows = [&](std::int64_t begin, std::int64_t end) {
    return std::vector<double>(x_values.begin() + begin * 12, x_values.begin() + end * 12);
  };
  // slice(1, 3), x[4] as 1x3x4, x itself, slice(1, 3) again.
  const std::vector<Piece> pieces = {
      {rows(1, 3), Shape{2, 3, 4}},
      {rows(4, 5), Shape{1, 3, 4}},
      {x_values, Shape{5, 3, 4}},
      {rows(1, 3), Shape{2, 3, 4}},
  };
  const std::vector<double> expected = concat_reference(pieces, 0, Shape{10, 3, 4});
  const std::vector<Piece> rows_of_x = {{rows(3, 4), Shape{3, 4}}, {rows(0, 1), Shape{3, 4}}};
  const std::vector<double> stacked = stack_reference(rows_of_x, 1, Shape{3, 2, 4});
  for (DType dtype : kDTypes) {
    for (Context ctx : all_devices()) {
      const NDArray x = make_array(x_values, Shape{5, 3, 4}, dtype, ctx);
      const NDArray s = x.slice(1, 3);
      EXPECT_EQ(concat({s, x[4].expand_dims(0), x, s}).to_vector<double>(), expected) << ctx;
      EXPECT_EQ(stack({x[3], x[0]}, 1).to_vector<double>(), stacked) << ctx;
      // uint8 views at odd byte offsets: the GPU kernel falls back to bytes.
      const NDArray flat = x.reshape({60});
      const NDArray odd = concat({flat.slice(1, 4), flat.slice(7, 12)});
      const std::vector<double> odd_expected = {x_values[1],  x_values[2], x_values[3],
                                                x_values[7],  x_values[8], x_values[9],
                                                x_values[10], x_values[11]};
      EXPECT_EQ(odd.to_vector<double>(), odd_expected) << ctx;
    }
  }
}

TEST(JoinTest, EdgeCases) {
  for (Context ctx : all_devices()) {
    const NDArray x = array(std::vector<float>{1, 2, 3, 4, 5, 6}, Shape{2, 3}, ctx);
    // One input: a copy in new memory.
    const NDArray copy = concat({x}, 1);
    EXPECT_NE(copy.raw_data(), x.raw_data());
    EXPECT_EQ(copy.to_vector<float>(), x.to_vector<float>());
    // Extent-1 axes and empty pieces.
    const NDArray column = array(std::vector<float>{7, 8}, Shape{2, 1}, ctx);
    const NDArray empty_piece = zeros({2, 0}, DType::kFloat32, ctx);
    EXPECT_EQ(concat({empty_piece, column, x, empty_piece}, 1).to_vector<float>(),
              (std::vector<float>{7, 1, 2, 3, 8, 4, 5, 6}));
    const NDArray nothing = concat({empty_piece, empty_piece}, 1);
    EXPECT_EQ(nothing.shape(), (Shape{2, 0}));
    EXPECT_EQ(stack({zeros({0, 3}, DType::kFloat32, ctx)}, 1).shape(), (Shape{0, 1, 3}));
    // Stacking scalars gives a vector.
    const NDArray a = array({5}, ctx).reshape(std::vector<std::int64_t>{});
    const NDArray b = array({6}, ctx).reshape(std::vector<std::int64_t>{});
    EXPECT_EQ(stack({a, b, a}).to_vector<float>(), (std::vector<float>{5, 6, 5}));
  }
}

TEST(JoinTest, AJoinReadsItsInputsBeforeLaterWrites) {
  for (Context ctx : all_devices()) {
    NDArray x = array({1, 2, 3}, ctx);
    const NDArray joined = concat({x, x});
    const NDArray stacked = stack({x, x}, -1);
    x += 10.f;  // pushed after the joins: they see the old values
    EXPECT_EQ(joined.to_vector<float>(), (std::vector<float>{1, 2, 3, 1, 2, 3}));
    EXPECT_EQ(stacked.to_vector<float>(), (std::vector<float>{1, 1, 2, 2, 3, 3}));
    EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{11, 12, 13}));
  }
}

TEST(JoinTest, BadInputsAreErrorsNamingPositionsAndShapes) {
  const NDArray a = zeros({2, 3});
  const NDArray b = zeros({2, 4});
  const NDArray on_gpu = zeros({2, 3}, DType::kFloat32, gpu(1));
  const NDArray ints = zeros({2, 3}, DType::kInt32);
  expect_error([] { (void)concat(std::span<const NDArray>{}); },
               "concat: expected at least one array, got none");
  expect_error([] { (void)stack(std::vector<NDArray>{}); },
               "stack: expected at least one array, got none");
  expect_error(
      [&] {
        (void)concat({a, NDArray()});
      },
      "concat: the 2nd argument is an empty array (default-constructed)");
  expect_error(
      [&] {
        (void)concat({a, a, on_gpu});
      },
      "concat: all inputs must live on the same context, but the first argument is on "
      "cpu(0) while the 3rd argument is on gpu(1). Nothing is copied implicitly: move "
      "one with copyto() or as_in_context()");
  expect_error(
      [&] {
        (void)stack({a, a, a, ints});
      },
      "stack: all inputs must have the same dtype, but the first argument is float32 "
      "while the 4th argument is int32. Convert one with astype()");
  expect_error(
      [&] {
        (void)concat({a, a, b}, 0);
      },
      "concat: expected every input to have the shape of the first except along axis 0, "
      "but the first argument has shape (2x3) while the 3rd argument has shape (2x4)");
  expect_error(
      [&] {
        (void)concat({a, a.reshape({2, 3, 1})}, 1);
      },
      "concat: expected every input to have the shape of the first except along axis 1, "
      "but the first argument has shape (2x3) while the 2nd argument has shape (2x3x1)");
  expect_error(
      [&] {
        (void)concat({a, b}, 2);
      },
      "concat: axis 2 is out of range for an array of shape (2x3), which has 2 "
      "dimension(s)");
  expect_error(
      [&] {
        (void)concat({a, b}, -3);
      },
      "concat: axis -3 is out of range for an array of shape (2x3), which has 2 "
      "dimension(s)");
  expect_error(
      [&] {
        (void)stack({a, b});
      },
      "stack: expected inputs of one shape, but the first argument has shape (2x3) "
      "while the 2nd argument has shape (2x4)");
  expect_error(
      [&] {
        (void)stack({a, a}, 3);
      },
      "stack: axis 3 is out of range for inputs of shape (2x3): expected an axis in "
      "[-3, 2]");
  expect_error(
      [&] {
        (void)stack({a, a}, -4);
      },
      "stack: axis -4 is out of range for inputs of shape (2x3): expected an axis in "
      "[-3, 2]");
  const NDArray eight = zeros({1, 1, 1, 1, 1, 1, 1, 1});
  expect_error([&] { (void)stack({eight}); },
               "stack: the result would have 9 dimensions, but arrays have at most 8");
  // The engine still works.
  EXPECT_EQ(concat({a, b}, 1).shape(), (Shape{2, 7}));
}

}  // namespace
}  // namespace tagflow

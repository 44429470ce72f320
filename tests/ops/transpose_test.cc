// transpose against an index-by-index reference, for every permutation of
// up to four axes, several dtypes and every device; and its errors.

#include <algorithm>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::all_devices;

/// out[i0, ..., in] = x[i_axes^-1...]: walks the output's indices and reads
/// the input at the permuted index.
std::vector<float> transpose_reference(const std::vector<float>& x, const Shape& shape,
                                       const std::vector<int>& axes) {
  const int nd = shape.ndim();
  std::vector<std::int64_t> out_dims(static_cast<std::size_t>(nd));
  for (int i = 0; i < nd; ++i)
    out_dims[static_cast<std::size_t>(i)] = shape[axes[static_cast<std::size_t>(i)]];
  std::vector<float> out(x.size());
  std::vector<std::int64_t> index(static_cast<std::size_t>(nd), 0);
  for (std::size_t flat = 0; flat < out.size(); ++flat) {
    std::int64_t rest = static_cast<std::int64_t>(flat);
    for (int i = nd - 1; i >= 0; --i) {
      index[static_cast<std::size_t>(i)] = rest % out_dims[static_cast<std::size_t>(i)];
      rest /= out_dims[static_cast<std::size_t>(i)];
    }
    std::int64_t source = 0;
    std::vector<std::int64_t> in_index(static_cast<std::size_t>(nd));
    for (int i = 0; i < nd; ++i)
      in_index[static_cast<std::size_t>(axes[static_cast<std::size_t>(i)])] =
          index[static_cast<std::size_t>(i)];
    for (int d = 0; d < nd; ++d) source = source * shape[d] + in_index[static_cast<std::size_t>(d)];
    out[flat] = x[static_cast<std::size_t>(source)];
  }
  return out;
}

TEST(TransposeTest, EveryPermutationOnEveryDevice) {
  const Shape shapes[] = {{7}, {3, 5}, {2, 3, 4}, {2, 1, 3, 5}, {40, 1000}};
  for (const Shape& shape : shapes) {
    const auto x = testing::random_floats(static_cast<std::size_t>(shape.size()), -1, 1);
    std::vector<int> axes(static_cast<std::size_t>(shape.ndim()));
    std::iota(axes.begin(), axes.end(), 0);
    do {
      const auto expected = transpose_reference(x, shape, axes);
      for (Context ctx : all_devices()) {
        NDArray t = transpose(array(x, shape, ctx), axes);
        EXPECT_EQ(t.to_vector<float>(), expected) << shape << " on " << ctx;
      }
    } while (std::next_permutation(axes.begin(), axes.end()));
  }
}

TEST(TransposeTest, DefaultReversesAxesAndIntegerDtypesWork) {
  for (Context ctx : all_devices()) {
    NDArray m = arange(0, 6, 1, DType::kInt64, ctx).reshape({2, 3});
    NDArray t = transpose(m);
    EXPECT_EQ(t.shape(), (Shape{3, 2}));
    EXPECT_EQ(t.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 3, 1, 4, 2, 5}));
    NDArray u = transpose(arange(0, 6, 1, DType::kUInt8, ctx).reshape({1, 2, 3}), {-1, 0, 1});
    EXPECT_EQ(u.shape(), (Shape{3, 1, 2}));
    EXPECT_EQ(u.to_vector<int>(), (std::vector<int>{0, 3, 1, 4, 2, 5}));
  }
}

TEST(TransposeTest, BadPermutationsAreRejected) {
  NDArray x = zeros({2, 3, 4});
  EXPECT_THROW((void)transpose(x, {0, 1}), Error);
  EXPECT_THROW((void)transpose(x, {0, 1, 1}), Error);
  EXPECT_THROW((void)transpose(x, {0, 1, 3}), Error);
  try {
    (void)transpose(x, {0, 2, -1});
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "transpose: axis 2 appears twice in the permutation");
  }
}

}  // namespace
}  // namespace tagflow

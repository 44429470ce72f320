// split_data and split_and_load: parts along the first axis against the
// rows read back directly, on every device, even and uneven, and the errors.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nn/split.h"
#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::error_of;

/// Rows [begin, end) of a (rows, 3) array holding 0, 1, 2, ... row-major.
std::vector<float> rows_of(std::int64_t begin, std::int64_t end) {
  std::vector<float> v;
  for (std::int64_t i = begin * 3; i < end * 3; ++i) v.push_back(static_cast<float>(i));
  return v;
}

NDArray numbered(std::int64_t rows, Context ctx = cpu(0)) {
  return array(rows_of(0, rows), {rows, 3}, ctx);
}

TEST(SplitTest, EvenPartsLandOnTheirDevicesInOrder) {
  const std::vector<Context> devices = {cpu(1), gpu(0), gpu(1), cpu(0)};
  const NDArray batch = numbered(8);
  const std::vector<NDArray> parts = nn::split_and_load(batch, devices);
  ASSERT_EQ(parts.size(), 4u);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    EXPECT_EQ(parts[i].context(), devices[i]);
    EXPECT_EQ(parts[i].shape(), (Shape{2, 3}));
    const auto first = static_cast<std::int64_t>(2 * i);
    EXPECT_EQ(parts[i].to_vector<float>(), rows_of(first, first + 2)) << devices[i];
  }
  // The part already on the batch's device is a view of it (the same
  // variable), the others copies.
  EXPECT_EQ(parts[3].var(), batch.var());
  EXPECT_NE(parts[0].var(), batch.var());
  const std::vector<NDArray> views = nn::split_data(batch, 2);
  EXPECT_EQ(views[1].to_vector<float>(), rows_of(4, 8));
  EXPECT_EQ(nn::split_and_load(batch, {cpu(0)})[0].to_vector<float>(), rows_of(0, 8));
}

TEST(SplitTest, UnevenPartsGiveTheRestToTheLast) {
  const NDArray batch = numbered(7, gpu(1));
  const std::vector<NDArray> parts = nn::split_and_load(batch, {gpu(0), cpu(0), cpu(1)}, false);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].to_vector<float>(), rows_of(0, 2));
  EXPECT_EQ(parts[1].to_vector<float>(), rows_of(2, 4));
  EXPECT_EQ(parts[2].to_vector<float>(), rows_of(4, 7));
  // Fewer rows than devices: one row per part, the devices after them unused.
  const std::vector<NDArray> few = nn::split_and_load(numbered(2), {cpu(0), cpu(1), gpu(0)}, false);
  ASSERT_EQ(few.size(), 2u);
  EXPECT_EQ(few[1].context(), cpu(1));
  EXPECT_EQ(few[1].to_vector<float>(), rows_of(1, 2));
}

TEST(SplitTest, BatchesThatDoNotSplitAreClearErrors) {
  EXPECT_NE(error_of([] {
              (void)nn::split_and_load(numbered(7), {cpu(0), cpu(1)});
            }).find("a batch of 7 rows cannot be split evenly into 2 parts"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              (void)nn::split_and_load(numbered(1), {cpu(0), cpu(1)});
            }).find("use a batch of at least 2 rows"),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)nn::split_and_load(numbered(4), {}); }).find("at least one device"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              (void)nn::split_and_load(numbered(4), {cpu(0), gpu(9)});
            }).find("gpu(9) does not exist"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              (void)nn::split_data(array({1.f}).reshape(Shape{}), 1);
            }).find("expected an array with a batch axis"),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)nn::split_data(numbered(4), 0); }).find("at least 1 part"),
            std::string::npos);
}

}  // namespace
}  // namespace tagflow

// ToTensor, Normalize and Compose against plain loops over the pixels, their
// errors, and a user's own transform.

#include "nn/data/transforms.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow::data {
namespace {

namespace T = transforms;

/// An ulp of values in [0.5, 1]: what ToTensor may differ from pixel / 255 by.
constexpr float kUlpOfOne = 1.2e-7f;
/// Normalised values here are below 20 in magnitude: a few ulps of them.
constexpr float kTolerance = 1e-5f;

/// An image of `shape` with random uint8 pixels.
HostArray random_pixels(Shape shape, std::uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(0, 255);
  HostArray image(shape, DType::kUInt8);
  for (std::uint8_t& p : image.values<std::uint8_t>()) p = static_cast<std::uint8_t>(dist(rng));
  return image;
}

/// An image of `shape` with random float32 values in [-2, 2).
HostArray random_floats(Shape shape, std::uint32_t seed = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  HostArray image(shape, DType::kFloat32);
  for (float& v : image.values<float>()) v = dist(rng);
  return image;
}

std::vector<float> values_of(const HostArray& a) {
  auto v = a.values<float>();
  return {v.begin(), v.end()};
}

using tagflow::testing::error_of;

TEST(ToTensorTest, MatchesAPlainLoopForEveryChannelCount) {
  for (std::int64_t channels : {1, 3, 4}) {
    const std::int64_t height = 5, width = 7;
    const HostArray image = random_pixels({height, width, channels});
    const HostArray out = T::ToTensor()(image);
    ASSERT_EQ(out.dtype(), DType::kFloat32);
    ASSERT_EQ(out.shape(), (Shape{channels, height, width}));
    const auto in = image.values<std::uint8_t>();
    const auto got = out.values<float>();
    for (std::int64_t c = 0; c < channels; ++c) {
      for (std::int64_t h = 0; h < height; ++h) {
        for (std::int64_t w = 0; w < width; ++w) {
          const float expected = in[(h * width + w) * channels + c] / 255.0f;
          ASSERT_NEAR(got[(c * height + h) * width + w], expected, kUlpOfOne)
              << "channels " << channels << " at c " << c << " h " << h << " w " << w;
        }
      }
    }
  }
}

TEST(ToTensorTest, ABatchIsEachImageInTurnAndValuesSpanZeroToOne) {
  const HostArray batch = random_pixels({3, 4, 5, 2});
  const HostArray out = T::ToTensor()(batch);
  ASSERT_EQ(out.shape(), (Shape{3, 2, 4, 5}));
  const std::int64_t image_size = 4 * 5 * 2;
  for (std::int64_t n = 0; n < 3; ++n) {
    HostArray one({4, 5, 2}, DType::kUInt8);
    std::copy_n(batch.values<std::uint8_t>().begin() + n * image_size, image_size,
                one.values<std::uint8_t>().begin());
    const std::vector<float> expected = values_of(T::ToTensor()(one));
    const std::vector<float> all = values_of(out);
    EXPECT_EQ(std::vector<float>(all.begin() + n * image_size, all.begin() + (n + 1) * image_size),
              expected)
        << "image " << n;
  }
  const std::vector<std::uint8_t> extremes = {0, 255, 128};
  const HostArray edge = T::ToTensor()(HostArray::from<std::uint8_t>(extremes, {1, 3, 1}));
  EXPECT_EQ(values_of(edge)[0], 0.f);
  EXPECT_EQ(values_of(edge)[1], 1.f);
  EXPECT_NEAR(values_of(edge)[2], 128 / 255.f, kUlpOfOne);

  // Every pixel value, within an ulp of pixel / 255 (Note [Multiply by the
  // reciprocal] in transforms.cc).
  std::vector<std::uint8_t> all(256);
  for (int v = 0; v < 256; ++v) all[static_cast<std::size_t>(v)] = static_cast<std::uint8_t>(v);
  const std::vector<float> scaled =
      values_of(T::ToTensor()(HostArray::from<std::uint8_t>(all, {16, 16, 1})));
  for (int v = 0; v < 256; ++v) {
    const float quotient = static_cast<float>(v) / 255.0f;
    EXPECT_LE(std::abs(scaled[static_cast<std::size_t>(v)] - quotient),
              std::nextafter(quotient, 2.f) - quotient)
        << "pixel " << v;
  }
}

TEST(ToTensorTest, RejectsOtherDtypesAndRanks) {
  EXPECT_EQ(error_of([] {
              T::ToTensor()(random_floats({28, 28, 1}));
            }),
            "ToTensor: expected a uint8 image (H, W, C) or batch of them (N, H, W, C), got "
            "float32 of shape (28x28x1)");
  EXPECT_EQ(error_of([] {
              T::ToTensor()(random_pixels({28, 28}));
            }),
            "ToTensor: expected a uint8 image (H, W, C) or batch of them (N, H, W, C), got "
            "uint8 of shape (28x28)");
}

TEST(NormalizeTest, MatchesAPlainLoopPerChannelAndForOneValue) {
  const std::vector<float> mean = {0.485f, 0.456f, 0.406f};
  const std::vector<float> stddev = {0.229f, 0.224f, 0.225f};
  const HostArray image = random_floats({3, 4, 5});
  const std::vector<float> in = values_of(image);

  const std::vector<float> per_channel = values_of(T::Normalize(mean, stddev)(image));
  const std::vector<float> shared = values_of(T::Normalize(0.13f, 0.31f)(image));
  ASSERT_EQ(per_channel.size(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::size_t c = i / 20;
    EXPECT_NEAR(per_channel[i], (in[i] - mean[c]) / stddev[c], kTolerance) << "element " << i;
    EXPECT_NEAR(shared[i], (in[i] - 0.13f) / 0.31f, kTolerance) << "element " << i;
  }

  // A batch (N, C, H, W): each image normalised alike.
  const HostArray batch = random_floats({2, 3, 4, 5}, 9);
  const std::vector<float> batch_in = values_of(batch);
  const std::vector<float> batch_out = values_of(T::Normalize(mean, stddev)(batch));
  for (std::size_t i = 0; i < batch_in.size(); ++i) {
    const std::size_t c = (i / 20) % 3;
    EXPECT_NEAR(batch_out[i], (batch_in[i] - mean[c]) / stddev[c], kTolerance) << "element " << i;
  }
}

TEST(NormalizeTest, RejectsBadListsAndImagesTheyDoNotFit) {
  EXPECT_EQ(error_of([] {
              T::Normalize({0.5f, 0.5f}, {0.2f, 0.2f})(random_floats({3, 4, 4}));
            }),
            "Normalize: expected 1 or 3 values of mean and stddev for images of 3 channels "
            "(shape (3x4x4)), got 2");
  EXPECT_EQ(error_of([] {
              T::Normalize(0.1f, 0.3f)(random_pixels({1, 4, 4}));
            }),
            "Normalize: expected a float32 image (C, H, W) or batch of them (N, C, H, W), got "
            "uint8 of shape (1x4x4); ToTensor makes one from uint8 pixels");
  EXPECT_EQ(error_of([] {
              T::Normalize({0.5f, 0.5f}, {0.2f});
            }),
            "Normalize: expected as many means as standard deviations, at least one, got mean "
            "[0.5, 0.5] and stddev [0.2]");
  EXPECT_EQ(error_of([] { T::Normalize(std::vector<float>{}, std::vector<float>{}); }),
            "Normalize: expected as many means as standard deviations, at least one, got mean "
            "[] and stddev []");
  EXPECT_EQ(error_of([] {
              T::Normalize({0.5f, 0.5f}, {0.2f, 0.f});
            }),
            "Normalize: expected finite, non-zero standard deviations, got [0.2, 0]");
}

TEST(ComposeTest, AppliesTheTransformsInOrder) {
  const Transform add_one = [](HostArray x) {
    for (float& v : x.values<float>()) v += 1;
    return x;
  };
  const Transform twice = [](HostArray x) {
    for (float& v : x.values<float>()) v *= 2;
    return x;
  };
  const HostArray x = HostArray::from<float>(std::vector<float>{1, 2}, {2});
  EXPECT_EQ(values_of(T::Compose({add_one, twice})(x)), (std::vector<float>{4, 6}));
  EXPECT_EQ(values_of(T::Compose({twice, add_one})(x)), (std::vector<float>{3, 5}));
  EXPECT_EQ(values_of(T::Compose({})(x)), (std::vector<float>{1, 2}));

  // The tutorial's transformer is Normalize after ToTensor.
  const HostArray image = random_pixels({6, 6, 1});
  EXPECT_EQ(values_of(T::Compose({T::ToTensor(), T::Normalize(0.13f, 0.31f)})(image)),
            values_of(T::Normalize(0.13f, 0.31f)(T::ToTensor()(image))));

  EXPECT_EQ(error_of([&] {
              T::Compose({add_one, Transform{}});
            }),
            "Compose: expected a transform at position 1, got an empty one");
}

TEST(ComposeTest, ToTensorAndNormalizeOfABatchTakeMicroseconds) {
  // 256 Fashion-MNIST-sized images, one sample at a time as the loader does.
  std::vector<HostArray> images;
  for (std::uint32_t i = 0; i < 256; ++i) images.push_back(random_pixels({28, 28, 1}, i));
  const T::Compose transformer({T::ToTensor(), T::Normalize(0.13f, 0.31f)});
  double best_us = 1e30;
  for (int round = 0; round < 5; ++round) {
    const auto start = std::chrono::steady_clock::now();
    float checksum = 0;
    for (const HostArray& image : images) checksum += transformer(image).values<float>()[400];
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    best_us = std::min(best_us, took.count());
    EXPECT_TRUE(std::isfinite(checksum));
  }
  RecordProperty("to_tensor_normalize_256_images_us", std::to_string(best_us));
  // Generous even under the sanitizers: a per-pixel allocation or an engine
  // operation per sample would exceed it.
  EXPECT_LT(best_us, 50'000) << "ToTensor + Normalize of 256 28x28 images";
}

}  // namespace
}  // namespace tagflow::data

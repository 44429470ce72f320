// The image layers (Conv2D, Conv1D, MaxPool2D, AvgPool2D, the global poolings) against plain double
// loops, the tutorial's LeNet on every device, and parameter files on
// blocks: structural names, loading into a fresh network on another device,
// and files that do not fit the network.

#include <algorithm>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::all_devices;
using testing::error_of;
using testing::expect_close;
using testing::random_floats;

/// The tutorial's LeNet, built as the tutorial builds it.
std::shared_ptr<nn::Sequential> lenet() {
  auto net = std::make_shared<nn::Sequential>();
  net->add(nn::Conv2D(6, 5, "relu"), nn::MaxPool2D(2, 2), nn::Conv2D(16, 3, "relu"),
           nn::MaxPool2D(2, 2), nn::Dense(120, "relu"), nn::Dense(84, "relu"), nn::Dense(10));
  return net;
}

class TempDir {
 public:
  TempDir() : path_(std::filesystem::temp_directory_path() / ("tagflow-conv-layers-" + unique())) {
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  static std::string unique() {
    return std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  std::filesystem::path path_;
};

std::vector<double> as_doubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

/// conv2d of (N, C, H, W) with (O, C / groups, kh, kw), then relu, in double.
std::vector<double> conv_relu_reference(const std::vector<float>& x, int n, int c, int h, int w,
                                        const std::vector<float>& weight, int o, int kh, int kw,
                                        const std::vector<float>& bias, Conv2DOptions opt) {
  const int oh = (h + 2 * opt.padding[0] - opt.dilation[0] * (kh - 1) - 1) / opt.stride[0] + 1;
  const int ow = (w + 2 * opt.padding[1] - opt.dilation[1] * (kw - 1) - 1) / opt.stride[1] + 1;
  const int cg = c / opt.groups;
  const int og = o / opt.groups;
  std::vector<double> y(static_cast<std::size_t>(n) * o * oh * ow);
  std::size_t out = 0;
  for (int b = 0; b < n; ++b) {
    for (int oc = 0; oc < o; ++oc) {
      const int g = oc / og;
      for (int i = 0; i < oh; ++i) {
        for (int j = 0; j < ow; ++j) {
          double total = bias[static_cast<std::size_t>(oc)];
          for (int ic = 0; ic < cg; ++ic) {
            for (int u = 0; u < kh; ++u) {
              for (int v = 0; v < kw; ++v) {
                const int row = i * opt.stride[0] - opt.padding[0] + u * opt.dilation[0];
                const int col = j * opt.stride[1] - opt.padding[1] + v * opt.dilation[1];
                if (row < 0 || row >= h || col < 0 || col >= w) continue;
                const int channel = g * cg + ic;
                total +=
                    double{x[static_cast<std::size_t>(((b * c + channel) * h + row) * w + col)]} *
                    weight[static_cast<std::size_t>(((oc * cg + ic) * kh + u) * kw + v)];
              }
            }
          }
          y[out++] = std::max(0.0, total);
        }
      }
    }
  }
  return y;
}

TEST(ConvLayersTest, Conv2DInfersItsChannelsAndMatchesAPlainLoopOnEveryDevice) {
  const Conv2DOptions opt{.stride = {2, 1}, .padding = {1, 2}, .dilation = {1, 2}, .groups = 2};
  const std::vector<float> x = random_floats(2 * 4 * 7 * 6, -1, 1);
  for (Context ctx : all_devices()) {
    random::seed(3);
    nn::Conv2D conv(6, {3, 2}, "relu", opt, 0, true, nullptr, init::Normal(0.5));
    conv.initialize(init::Normal(0.5), {ctx});
    EXPECT_FALSE(conv.weight()->initialized()) << "deferred until the channels are known";
    NDArray y = conv(array(x, {2, 4, 7, 6}, ctx));
    ASSERT_EQ(conv.weight()->shape(), (Shape{6, 2, 3, 2}));
    ASSERT_EQ(y.shape(), (Shape{2, 6, 4, 8})) << ctx;
    const std::vector<double> expected =
        conv_relu_reference(x, 2, 4, 7, 6, conv.weight()->data().to_vector<float>(), 6, 3, 2,
                            conv.bias()->data().to_vector<float>(), opt);
    expect_close(y.to_vector<float>(), expected, 1e-5, 1e-5, "Conv2D on " + ctx.str());
    EXPECT_NE(error_of([&] {
                (void)conv(zeros({2, 6, 7, 6}, DType::kFloat32, ctx));
              }).find("expected 4 input channels, got 6"),
              std::string::npos);
  }
}

TEST(ConvLayersTest, Conv1DMatchesAPlainLoopAndItsGradientsReachItsOwnWeightShape) {
  const nn::Conv1DOptions opt{.stride = 2, .padding = 1, .dilation = 2, .groups = 2};
  const Conv2DOptions as_2d{.stride = {1, 2}, .padding = {0, 1}, .dilation = {1, 2}, .groups = 2};
  const std::vector<float> x = random_floats(3 * 4 * 11, -1, 1);
  for (Context ctx : all_devices()) {
    SCOPED_TRACE(ctx.str());
    random::seed(4);
    nn::Conv1D conv(6, 3, "relu", opt, 0, true, nullptr, init::Normal(0.5));
    conv.initialize(init::Normal(0.5), {ctx});
    NDArray input = array(x, {3, 4, 11}, ctx);
    input.attach_grad();
    NDArray y;
    {
      auto recording = autograd::record();
      y = conv(input);
    }
    ASSERT_EQ(conv.weight()->shape(), (Shape{6, 2, 3}));
    ASSERT_EQ(y.shape(), (Shape{3, 6, 5}));
    // A sequence is an image of height 1: the same loop, with kh = 1.
    const std::vector<float> w = conv.weight()->data(ctx).to_vector<float>();
    const std::vector<float> b = conv.bias()->data(ctx).to_vector<float>();
    expect_close(y.to_vector<float>(), conv_relu_reference(x, 3, 4, 1, 11, w, 6, 1, 3, b, as_2d),
                 1e-5, 1e-5, "Conv1D");
    y.backward();
    // The gradients against conv2d's on the same values seen as images.
    NDArray image = array(x, {3, 4, 1, 11}, ctx);
    NDArray weight_2d = array(w, {6, 2, 1, 3}, ctx);
    NDArray bias = array(b, {6}, ctx);
    for (NDArray* a : {&image, &weight_2d, &bias}) a->attach_grad();
    {
      auto recording = autograd::record();
      NDArray y2 = relu(conv2d(image, weight_2d, bias, as_2d));
      y2.backward();
    }
    expect_close(conv.weight()->grad(ctx).to_vector<float>(),
                 as_doubles(weight_2d.grad().to_vector<float>()), 1e-6, 1e-6, "dweight");
    expect_close(conv.bias()->grad(ctx).to_vector<float>(),
                 as_doubles(bias.grad().to_vector<float>()), 1e-6, 1e-6, "dbias");
    expect_close(input.grad().to_vector<float>(), as_doubles(image.grad().to_vector<float>()), 1e-6,
                 1e-6, "dx");
    EXPECT_NE(error_of([&] {
                (void)conv(zeros({3, 4, 1, 11}, DType::kFloat32, ctx));
              }).find("expected an input of shape (batch, channels, width)"),
              std::string::npos);
  }
  EXPECT_EQ(nn::Conv1D(16, 3, "", {.padding = 1}, 4).describe(),
            "Conv1D(4 -> 16, kernel_size=(3,), stride=(1,), padding=(1,))");
  EXPECT_THROW(nn::Conv1D(4, 0), Error);
  EXPECT_THROW(nn::Conv1D(4, 3, "", {.groups = 3}), Error);
}

/// Max (or mean over the whole window, padding counted as zeros) of each
/// window, in double.
std::vector<double> pool_reference(const std::vector<float>& x, int planes, int h, int w, int k,
                                   int stride, int pad, bool max) {
  const int oh = (h + 2 * pad - k) / stride + 1;
  const int ow = (w + 2 * pad - k) / stride + 1;
  std::vector<double> y;
  for (int p = 0; p < planes; ++p) {
    for (int i = 0; i < oh; ++i) {
      for (int j = 0; j < ow; ++j) {
        double best = -std::numeric_limits<double>::infinity();
        double total = 0;
        for (int u = 0; u < k; ++u) {
          for (int v = 0; v < k; ++v) {
            const int row = i * stride - pad + u;
            const int col = j * stride - pad + v;
            if (row < 0 || row >= h || col < 0 || col >= w) continue;
            const double value = x[static_cast<std::size_t>((p * h + row) * w + col)];
            best = std::max(best, value);
            total += value;
          }
        }
        y.push_back(max ? best : total / (k * k));
      }
    }
  }
  return y;
}

TEST(ConvLayersTest, PoolingLayersStepByTheirWindowUnlessToldAndMatchPlainLoops) {
  const std::vector<float> x = random_floats(2 * 3 * 9 * 8, -2, 2);
  for (Context ctx : all_devices()) {
    const NDArray input = array(x, {2, 3, 9, 8}, ctx);
    nn::MaxPool2D max_pool(3);  // strides default to the window: 3
    NDArray m = max_pool(input);
    ASSERT_EQ(m.shape(), (Shape{2, 3, 3, 2})) << ctx;
    expect_close(m.to_vector<float>(), pool_reference(x, 6, 9, 8, 3, 3, 0, true), 0, 0,
                 "MaxPool2D(3) on " + ctx.str());
    nn::AvgPool2D avg_pool(3, 2, 1);
    NDArray a = avg_pool(input);
    ASSERT_EQ(a.shape(), (Shape{2, 3, 5, 4})) << ctx;
    expect_close(a.to_vector<float>(), pool_reference(x, 6, 9, 8, 3, 2, 1, false), 1e-6, 1e-6,
                 "AvgPool2D(3, 2, 1) on " + ctx.str());
  }
}

TEST(ConvLayersTest, GlobalPoolingTakesEachChannelsMeanOrMaximumAndItsGradientOnEveryDevice) {
  const int n = 2, c = 3, h = 5, w = 7;
  const std::vector<float> x = random_floats(n * c * h * w, -2, 2, 11);
  const std::vector<float> r = random_floats(n * c, -1, 1, 12);  // d loss / d output
  // Plain loops in double: each channel's mean and first maximum; the
  // gradient of sum(y * r) spreads r / (h w) over the channel, or gives r to
  // the maximum.
  std::vector<double> mean(n * c), max(n * c), mean_grad(x.size()), max_grad(x.size());
  for (int plane = 0; plane < n * c; ++plane) {
    double total = 0;
    int best = plane * h * w;
    for (int i = plane * h * w; i < (plane + 1) * h * w; ++i) {
      total += x[static_cast<std::size_t>(i)];
      if (x[static_cast<std::size_t>(i)] > x[static_cast<std::size_t>(best)]) best = i;
    }
    mean[static_cast<std::size_t>(plane)] = total / (h * w);
    max[static_cast<std::size_t>(plane)] = x[static_cast<std::size_t>(best)];
    for (int i = plane * h * w; i < (plane + 1) * h * w; ++i) {
      mean_grad[static_cast<std::size_t>(i)] = double{r[static_cast<std::size_t>(plane)]} / (h * w);
    }
    max_grad[static_cast<std::size_t>(best)] = r[static_cast<std::size_t>(plane)];
  }
  for (Context ctx : all_devices()) {
    SCOPED_TRACE(ctx.str());
    for (const bool average : {true, false}) {
      NDArray input = array(x, {n, c, h, w}, ctx);
      input.attach_grad();
      nn::GlobalAvgPool2D avg_pool;
      nn::GlobalMaxPool2D max_pool;
      NDArray y;
      {
        auto recording = autograd::record();
        y = average ? avg_pool(input) : max_pool(input);
        sum(y * array(r, {n, c, 1, 1}, ctx)).backward();
      }
      ASSERT_EQ(y.shape(), (Shape{n, c, 1, 1}));
      expect_close(y.to_vector<float>(), average ? mean : max, 1e-6, 1e-6,
                   average ? "GlobalAvgPool2D" : "GlobalMaxPool2D");
      expect_close(input.grad().to_vector<float>(), average ? mean_grad : max_grad, 1e-6, 1e-6,
                   average ? "GlobalAvgPool2D's gradient" : "GlobalMaxPool2D's gradient");
    }
  }
  nn::GlobalAvgPool2D pool;
  EXPECT_NE(error_of([&] {
              (void)pool(ones({2, 3}));
            }).find("(batch, channels, height, width)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)pool(ones({1, 2, 0, 3}));
            }).find("at least one pixel"),
            std::string::npos);
  EXPECT_EQ(pool.describe(), "GlobalAvgPool2D(output_size=(1, 1))");
}

TEST(ConvLayersTest, TheTutorialsLeNetInfersItsShapesAndAgreesAcrossDevices) {
  random::seed(7);
  auto net = lenet();
  net->initialize(init::Xavier(), all_devices());
  const std::vector<float> x = random_floats(3 * 28 * 28, 0, 1);
  std::vector<float> first;
  for (Context ctx : all_devices()) {
    NDArray y = (*net)(array(x, {3, 1, 28, 28}, ctx));
    ASSERT_EQ(y.shape(), (Shape{3, 10})) << ctx;
    const std::vector<float> got = y.to_vector<float>();
    if (first.empty()) {
      first = got;
    } else {
      expect_close(got, std::vector<double>(first.begin(), first.end()), 1e-5, 1e-6,
                   "LeNet on " + ctx.str() + " against cpu(0)");
    }
  }
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (const auto& [name, p] : net->structural_params()) {
    names.push_back(name);
    shapes.push_back(p->shape());
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias", "4.weight",
                                      "4.bias", "5.weight", "5.bias", "6.weight", "6.bias"}));
  EXPECT_EQ(shapes[0], (Shape{6, 1, 5, 5}));
  EXPECT_EQ(shapes[2], (Shape{16, 6, 3, 3}));
  EXPECT_EQ(shapes[4], (Shape{120, 400}));  // 16 channels of 5x5 after the second pooling
  EXPECT_EQ(shapes[8], (Shape{10, 84}));
}

TEST(ConvLayersTest, SavedParametersLoadIntoAFreshNetworkOnAnotherDevice) {
  TempDir dir;
  random::seed(11);
  auto net = lenet();
  net->initialize(init::Xavier(), {cpu(0)});
  const std::vector<float> x = random_floats(2 * 28 * 28, 0, 1);
  const std::vector<float> expected = (*net)(array(x, {2, 1, 28, 28})).to_vector<float>();
  net->save_parameters(dir / "lenet.safetensors");

  for (Context ctx : {gpu(1), cpu(1)}) {
    auto fresh = lenet();  // other block names, shapes not yet known
    fresh->load_parameters(dir / "lenet.safetensors", ctx);
    EXPECT_EQ(fresh->structural_params()[4].second->shape(), (Shape{120, 400}))
        << "inferred from the file";
    const std::vector<float> got = (*fresh)(array(x, {2, 1, 28, 28}, ctx)).to_vector<float>();
    expect_close(got, std::vector<double>(expected.begin(), expected.end()), 1e-5, 1e-6,
                 "reloaded LeNet on " + ctx.str());
    for (const auto& [name, p] : fresh->structural_params()) {
      EXPECT_EQ(p->list_ctx(), std::vector<Context>{ctx}) << name;
    }
  }
}

TEST(ConvLayersTest, HalfPrecisionParameterFilesLoadWidenedToFloat32) {
  TempDir dir;
  random::seed(12);
  auto net = lenet();
  net->initialize(init::Xavier(), {cpu(0)});
  (void)(*net)(zeros({1, 1, 28, 28}));
  for (const DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    // As PyTorch's model.half() (or .bfloat16()) would save it.
    std::vector<std::pair<std::string, NDArray>> halves;
    for (const auto& [name, p] : net->structural_params()) {
      halves.emplace_back(name, p->data().astype(dtype));
    }
    io::save_safetensors(dir / "half.safetensors", halves);
    auto fresh = lenet();
    fresh->load_parameters(dir / "half.safetensors", gpu(0));
    const auto loaded = fresh->structural_params();
    for (std::size_t i = 0; i < loaded.size(); ++i) {
      const std::vector<float> got = loaded[i].second->data(gpu(0)).to_vector<float>();
      const std::vector<float> original =
          net->structural_params()[i].second->data().to_vector<float>();
      ASSERT_EQ(got.size(), original.size());
      for (std::size_t j = 0; j < got.size(); ++j) {
        const float expected = dtype == DType::kFloat16 ? static_cast<float>(Half(original[j]))
                                                        : static_cast<float>(BFloat16(original[j]));
        ASSERT_EQ(got[j], expected) << loaded[i].first << " element " << j;
      }
    }
  }
}

TEST(ConvLayersTest, AFileThatDoesNotFitTheNetworkNamesTheParameterAndChangesNothing) {
  TempDir dir;
  random::seed(13);
  auto net = lenet();
  net->initialize(init::Xavier(), {cpu(0)});
  (void)(*net)(zeros({1, 1, 28, 28}));
  net->save_parameters(dir / "lenet.safetensors");

  // A network whose fifth layer is narrower: the shapes differ.
  nn::Sequential wider;
  wider.add(nn::Conv2D(6, 5, "relu"), nn::MaxPool2D(2, 2), nn::Conv2D(16, 3, "relu"),
            nn::MaxPool2D(2, 2), nn::Dense(100, "relu"), nn::Dense(84, "relu"), nn::Dense(10));
  wider.initialize(init::One(), {cpu(0)});
  (void)wider(zeros({1, 1, 28, 28}));
  const std::string shape_error =
      error_of([&] { wider.load_parameters(dir / "lenet.safetensors"); });
  EXPECT_NE(shape_error.find("parameter '4.weight'"), std::string::npos) << shape_error;
  EXPECT_NE(shape_error.find("expected shape (100x400), the file has (120x400)"), std::string::npos)
      << shape_error;
  EXPECT_THROW(wider.load_parameters(dir / "lenet.safetensors"), io::FileError);
  // Nothing was loaded, not even the parameters that fitted.
  for (float v : wider.structural_params()[0].second->data().to_vector<float>()) {
    ASSERT_EQ(v, 1.f);
  }

  // A smaller network: the file has tensors it lacks.
  nn::Sequential smaller;
  smaller.add(nn::Conv2D(6, 5, "relu"));
  const std::string extra_error =
      error_of([&] { smaller.load_parameters(dir / "lenet.safetensors"); });
  EXPECT_NE(extra_error.find("the file holds 10 tensors and the network has 2 parameters"),
            std::string::npos)
      << extra_error;
  EXPECT_NE(extra_error.find("in the file but not in the network: '2.bias', '2.weight', "
                             "'4.bias', '4.weight' and 4 more (pass ignore_extra to skip them)"),
            std::string::npos)
      << extra_error;
  smaller.load_parameters(dir / "lenet.safetensors", {cpu(0)}, false, /*ignore_extra=*/true);
  EXPECT_EQ(smaller.structural_params()[0].second->shape(), (Shape{6, 1, 5, 5}));

  // A bigger network: the file lacks some of its parameters.
  auto bigger = lenet();
  bigger->add(nn::Dense(5));
  const std::string missing_error =
      error_of([&] { bigger->load_parameters(dir / "lenet.safetensors"); });
  EXPECT_NE(missing_error.find("the file holds 10 tensors and the network has 12 parameters"),
            std::string::npos)
      << missing_error;
  EXPECT_NE(missing_error.find("not in the file: '7.weight', '7.bias' (pass allow_missing"),
            std::string::npos)
      << missing_error;

  // Another architecture, shapes not inferred yet: its names and counts, not
  // a shape with zeros in it.
  nn::Sequential mlp;
  mlp.add(nn::Dense(256, "relu"), nn::Dense(10));
  mlp.initialize(init::One(), {cpu(0)});
  const std::string other_error = error_of([&] { mlp.load_parameters(dir / "lenet.safetensors"); });
  EXPECT_EQ(other_error.find("0x"), std::string::npos) << other_error;
  EXPECT_NE(other_error.find("the file holds 10 tensors and the network has 4 parameters, which "
                             "do not match by name; not in the file: '1.weight', '1.bias'"),
            std::string::npos)
      << other_error;
  EXPECT_NE(other_error.find("is the file of another network?"), std::string::npos) << other_error;
  // Matching names, but a shape the declared one refuses: its unknown extents as '?'.
  nn::Sequential two_convs;
  two_convs.add(nn::Conv2D(8, 5, "relu"));
  io::save_safetensors(dir / "conv.safetensors",
                       {{"0.weight", zeros({6, 1, 5, 5})}, {"0.bias", zeros({6})}});
  const std::string declared_error =
      error_of([&] { two_convs.load_parameters(dir / "conv.safetensors"); });
  EXPECT_NE(declared_error.find("expected shape (8x?x5x5), the file has (6x1x5x5)"),
            std::string::npos)
      << declared_error;

  // A tensor of the right name and shape but not float32.
  io::save_safetensors(dir / "ints.safetensors", {{"0.weight", zeros({6, 1, 5, 5}, DType::kInt32)},
                                                  {"0.bias", zeros({6}, DType::kFloat32)}});
  nn::Sequential one_conv;
  one_conv.add(nn::Conv2D(6, 5));
  const std::string dtype_error =
      error_of([&] { one_conv.load_parameters(dir / "ints.safetensors"); });
  EXPECT_NE(dtype_error.find("'0.weight'"), std::string::npos) << dtype_error;
  EXPECT_NE(dtype_error.find("expected float32, float16 or bfloat16, the file has int32"),
            std::string::npos)
      << dtype_error;

  EXPECT_THROW(net->load_parameters(dir / "no-such-file.safetensors"), io::FileError);
  // The network still works after every failure.
  EXPECT_EQ((*net)(zeros({1, 1, 28, 28})).shape(), (Shape{1, 10}));
}

TEST(ConvLayersTest, SavingAnUninitializedNetworkAndBadArgumentsAreClearErrors) {
  TempDir dir;
  auto net = lenet();
  net->initialize(init::Xavier(), {cpu(0)});  // deferred: no shapes yet
  EXPECT_NE(error_of([&] {
              net->save_parameters(dir / "early.safetensors");
            }).find("parameter '0.weight'"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "early.safetensors"));

  EXPECT_NE(error_of([] { nn::Conv2D(0, 5); }).find("expected channels > 0"), std::string::npos);
  EXPECT_NE(error_of([] { nn::Conv2D(6, 5, "relux"); }).find("unknown activation \"relux\""),
            std::string::npos);
  EXPECT_NE(error_of([] { nn::Conv2D(6, 5, "", {.groups = 4}); }).find("groups"),
            std::string::npos);
  EXPECT_NE(error_of([] { nn::MaxPool2D(0); }).find("MaxPool2D: expected pool_size"),
            std::string::npos);
  EXPECT_NE(error_of([] { nn::AvgPool2D(2, 2, -1); }).find("padding >= 0"), std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)(*net)(zeros({1, 28, 28}));
            }).find("expected an input of shape (batch, channels, height, width), got (1x28x28)"),
            std::string::npos);
}

}  // namespace
}  // namespace tagflow

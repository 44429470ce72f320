#include "nn/initializer.h"

#include <cmath>

#include <fmt/format.h>

#include "ops/creation.h"
#include "ops/random.h"

namespace tagflow::init {

namespace {

class XavierInit final : public Initializer {
 public:
  explicit XavierInit(double magnitude) : magnitude_(magnitude) {}
  void fill(const NDArray& data) const override {
    const Shape& s = data.shape();
    double receptive = 1;
    for (int axis = 2; axis < s.ndim(); ++axis) receptive *= static_cast<double>(s[axis]);
    const double fan_out = static_cast<double>(s[0]) * receptive;
    const double fan_in = s.ndim() > 1 ? static_cast<double>(s[1]) * receptive : fan_out;
    const double scale = std::sqrt(magnitude_ / ((fan_in + fan_out) / 2));
    random::uniform(-scale, scale, s, data.context()).copyto(data);
  }
  std::string describe() const override { return fmt::format("xavier({})", magnitude_); }

 private:
  double magnitude_;
};

class UniformInit final : public Initializer {
 public:
  explicit UniformInit(double scale) : scale_(scale) {}
  void fill(const NDArray& data) const override {
    random::uniform(-scale_, scale_, data.shape(), data.context()).copyto(data);
  }
  std::string describe() const override { return fmt::format("uniform(±{})", scale_); }

 private:
  double scale_;
};

class NormalInit final : public Initializer {
 public:
  explicit NormalInit(double sigma) : sigma_(sigma) {}
  void fill(const NDArray& data) const override {
    random::normal(0, sigma_, data.shape(), data.context()).copyto(data);
  }
  std::string describe() const override { return fmt::format("normal(0, {})", sigma_); }

 private:
  double sigma_;
};

class ConstantInit final : public Initializer {
 public:
  explicit ConstantInit(double value) : value_(value) {}
  void fill(const NDArray& data) const override { tagflow::fill(data, value_); }
  std::string describe() const override { return fmt::format("constant({})", value_); }

 private:
  double value_;
};

}  // namespace

InitializerPtr Xavier(double magnitude) { return std::make_shared<XavierInit>(magnitude); }
InitializerPtr Uniform(double scale) { return std::make_shared<UniformInit>(scale); }
InitializerPtr Normal(double sigma) { return std::make_shared<NormalInit>(sigma); }
InitializerPtr Zero() { return std::make_shared<ConstantInit>(0); }
InitializerPtr One() { return std::make_shared<ConstantInit>(1); }

}  // namespace tagflow::init

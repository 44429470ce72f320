#pragma once
// Initializers: how a parameter's first values are drawn. Generated on the
// parameter's device by the random operators (ops/random.h), so the same
// random::seed gives the same parameters on every device.
//
//   net.initialize(init::Xavier(), {gpu(0), gpu(1)});
//
// Threads: safe to call concurrently. An Initializer is immutable once made;
// fill() draws from the global generator, so the values depend on the order
// of the threads' random calls (ops/random.h).

#include <memory>
#include <string>

#include "ops/ndarray.h"

namespace tagflow::init {

class Initializer {
 public:
  virtual ~Initializer() = default;
  /// Fills `data` (its shape and device are the parameter's).
  virtual void fill(const NDArray& data) const = 0;
  /// "xavier", "uniform(-0.07, 0.07)", ...: for messages and logs.
  virtual std::string describe() const = 0;
};

using InitializerPtr = std::shared_ptr<const Initializer>;

/// Glorot & Bengio: uniform in ±sqrt(3 * magnitude / fan), fan the average
/// of fan-in and fan-out (a weight (out, in, k...) has fan-in in*k..., fan-out out*k...).
InitializerPtr Xavier(double magnitude = 3);
/// Uniform in [-scale, scale).
InitializerPtr Uniform(double scale = 0.07);
/// Normal with mean 0 and standard deviation `sigma`.
InitializerPtr Normal(double sigma = 0.01);
InitializerPtr Zero();
InitializerPtr One();

}  // namespace tagflow::init

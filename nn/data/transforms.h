#pragma once
// Transforms of a sample's data, as Gluon's gluon.data.vision.transforms:
// plain callables from HostArray to HostArray, so any function or lambda of
// that type is a transform too, and Compose chains them.
//
//   namespace T = data::transforms;
//   data::Transform transformer = T::Compose({T::ToTensor(), T::Normalize(0.13f, 0.31f)});
//   data::Dataset train = data::FashionMNIST().transform_first(transformer);
//
// They work on one host sample (or a batch of them) at a time, without the
// engine: Note [Samples live on the host] in data_loader.h.
//
// Threads: safe to call concurrently. ToTensor, Normalize and Compose keep
// no state beyond what they are made with, and draw no random numbers, so
// the DataLoader's workers may share them; Compose is as safe as the
// transforms it holds.

#include <vector>

#include "nn/data/dataset.h"
#include "nn/data/host_array.h"

namespace tagflow::data::transforms {

/// An image of uint8 pixels, (H, W, C), to float32 (C, H, W) with values
/// pixel / 255 in [0, 1] (computed as pixel * (1 / 255), within an ulp of
/// the quotient; 0 and 255 give 0 and 1 exactly); a batch (N, H, W, C) to
/// (N, C, H, W). Throws tagflow::Error for another dtype or rank.
///
///   HostArray x = ToTensor()(image);   // (28, 28, 1) uint8 -> (1, 28, 28) float32
class ToTensor {
 public:
  HostArray operator()(const HostArray& image) const;
};

/// (x - mean[c]) / stddev[c] (computed as (x - mean[c]) * (1 / stddev[c]), as
/// fast as it gets) for every value x of channel c of a float32 image
/// (C, H, W) or batch (N, C, H, W). `mean` and `stddev` hold one value for every
/// channel, or one for all. Throws tagflow::Error, at construction, for
/// empty or differently sized lists or a stddev that is 0 or not finite, and,
/// when applied, for an image that is not float32 of rank 3 or 4 or whose
/// channel count the lists do not fit.
///
///   Normalize(0.13f, 0.31f)                                  // every channel
///   Normalize({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f})   // RGB
class Normalize {
 public:
  Normalize(float mean, float stddev);
  Normalize(std::vector<float> mean, std::vector<float> stddev);

  /// Normalises in place (the input is consumed).
  HostArray operator()(HostArray image) const;

 private:
  std::vector<float> mean_;
  std::vector<float> stddev_;
};

/// The transforms applied in order, the first to the input:
/// `Compose({a, b})(x)` is `b(a(x))`.
class Compose {
 public:
  /// Throws tagflow::Error when one of them is empty.
  explicit Compose(std::vector<Transform> transforms);

  HostArray operator()(HostArray image) const;

 private:
  std::vector<Transform> transforms_;
};

}  // namespace tagflow::data::transforms

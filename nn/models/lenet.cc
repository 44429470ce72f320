#include "nn/models/lenet.h"

#include "engine/error.h"
#include "nn/conv_layers.h"

namespace tagflow::models {

nn::Sequential lenet(int classes) {
  TAGFLOW_CHECK(classes >= 1, "models::lenet: expected classes >= 1, got {}", classes);
  nn::Sequential net;
  net.add(nn::Conv2D(6, 5, "relu"), nn::MaxPool2D(2, 2), nn::Conv2D(16, 3, "relu"),
          nn::MaxPool2D(2, 2), nn::Dense(120, "relu"), nn::Dense(84, "relu"), nn::Dense(classes));
  return net;
}

}  // namespace tagflow::models

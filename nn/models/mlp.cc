#include "nn/models/mlp.h"

#include "engine/error.h"

namespace tagflow::models {

nn::Sequential mlp(int classes) {
  TAGFLOW_CHECK(classes >= 1, "models::mlp: expected classes >= 1, got {}", classes);
  nn::Sequential net;
  net.add(nn::Dense(256, "relu"), nn::Dense(128, "relu"), nn::Dense(classes));
  return net;
}

}  // namespace tagflow::models

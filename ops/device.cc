#include "tagflow/ops/device.h"

#include "tagflow/engine/engine.h"

namespace tagflow {

Context try_gpu(int i) { return i >= 0 && i < num_gpus() ? gpu(i) : cpu(0); }

std::vector<Context> try_all_gpus() {
  std::vector<Context> devices;
  for (int i = 0; i < num_gpus(); ++i) devices.push_back(gpu(i));
  if (devices.empty()) devices.push_back(cpu(0));
  return devices;
}

}  // namespace tagflow

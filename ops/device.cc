#include "ops/device.h"

#include "engine/engine.h"

namespace tagflow {

Context try_gpu(int i) { return i >= 0 && i < num_gpus() ? gpu(i) : cpu(0); }

std::vector<Context> try_all_gpus() {
  std::vector<Context> devices;
  for (int i = 0; i < num_gpus(); ++i) devices.push_back(gpu(i));
  if (devices.empty()) devices.push_back(cpu(0));
  return devices;
}

bool is_real_gpu(Context ctx) {
  if (!ctx.is_gpu() || ctx.index < 0 || ctx.index >= num_gpus()) return false;
  return !Engine::get().gpus()[static_cast<std::size_t>(ctx.index)].simulated;
}

}  // namespace tagflow

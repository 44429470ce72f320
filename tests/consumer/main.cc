// Embeds tagflow through its installed package: the engine directly, then
// arrays (which pull in the storage, the kernels and the BLAS).
#include <tagflow/tagflow.h>

#include <cstdio>

int main() {
  using namespace tagflow;
  Engine& engine = Engine::get();
  VarHandle x = engine.new_var();
  long value = 0;
  for (int i = 1; i <= 100; ++i) {
    engine.push({.name = "add", .ctx = cpu(0), .writes = {x}, .fn = [&value, i](const RunContext&) {
                   value += i;
                 }});
  }
  engine.wait_to_read(x);
  engine.delete_var(x);
  std::printf("consumer: sum 1..100 = %ld on %s\n", value, cpu(0).str().c_str());

  NDArray a = arange(0, 6).reshape({2, 3});
  NDArray product = dot(a, a, false, true);  // [[5, 14], [14, 50]]
  const float total = sum(exp(product * 0) + product).asscalar<float>();
  std::printf("consumer: sum(1 + a·aT) = %g\n", total);
  return value == 5050 && total == 87.f ? 0 : 1;
}

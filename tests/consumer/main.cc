// Embeds tagflow through its installed package: push, wait, check.
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
  return value == 5050 ? 0 : 1;
}

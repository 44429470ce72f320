// Embeds tagflow through its installed package: the version, the engine
// directly, the tutorials' array steps on every device present, and a few
// training steps of a LeNet. Exits 0 when every result is the expected one.
#include <tagflow/tagflow.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("consumer: %s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  if (!ok) ++failures;
}

}  // namespace

int main() {
  using namespace tagflow;
  expect(std::strcmp(version_string(), TAGFLOW_VERSION_STRING) == 0,
         std::string("library ") + version_string() + ", headers " + TAGFLOW_VERSION_STRING);

  // The engine, directly.
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
  expect(value == 5050, "sum of 1..100 pushed as 100 operations = " + std::to_string(value));

  // The tutorials' steps, on a GPU when there is one (real or simulated).
  const Context ctx = try_gpu();
  NDArray a = array({1, 2, 3});
  NDArray y = a.copyto(ctx);
  NDArray z = a.as_in_context(ctx);
  expect(y.as_in_context(ctx).same_as(y),
         "as_in_context(" + ctx.str() + ") of an array there is it");
  std::vector<float> got = (exp(z + 2) * y).to_vector<float>();
  bool close = got.size() == 3;
  for (std::size_t i = 0; close && i < 3; ++i) {
    const double expected = std::exp(double(i + 1) + 2) * double(i + 1);
    close = std::fabs(got[i] - expected) <= 1e-5 * expected;
  }
  expect(close, "exp(z + 2) * y on " + ctx.str());
  if (ctx != cpu(0)) {
    bool refused = false;
    try {
      a + y;
    } catch (const Error& e) {
      refused = std::strstr(e.what(), "same context") != nullptr;
    }
    expect(refused, "an operator across devices throws tagflow::Error");
  }
  NDArray product = dot(arange(0, 6).reshape({2, 3}), arange(0, 6).reshape({2, 3}), false, true);
  expect(sum(product).asscalar<float>() == 83.f, "sum of a·aT = 83");

  // A few training steps: the loss on a fixed batch goes down.
  random::seed(7);
  nn::Sequential net = models::lenet();
  net.initialize(init::Xavier(), {ctx});
  nn::SoftmaxCrossEntropyLoss loss_fn;
  nn::Trainer trainer(net.collect_params(), "sgd", {.learning_rate = 0.1});
  NDArray data = random::uniform(0, 1, {32, 1, 28, 28}, ctx);
  std::vector<float> classes(32);
  for (std::size_t i = 0; i < classes.size(); ++i) classes[i] = float(i % 10);
  NDArray label = array(classes, {32}, ctx);
  float first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    NDArray loss;
    {
      auto recording = autograd::record();
      loss = loss_fn(net(data), label);
    }
    loss.backward();
    trainer.step(32);
    const float mean_loss = mean(loss).asscalar<float>();
    if (step == 0) first = mean_loss;
    last = mean_loss;
  }
  expect(std::isfinite(last) && last < first,
         "20 SGD steps of LeNet: loss " + std::to_string(first) + " -> " + std::to_string(last));
  return failures == 0 ? 0 : 1;
}

// What a service does with networks from several threads, held to the
// contracts in nn/block.h, nn/parameter.h and nn/trainer.h (and run under
// ThreadSanitizer in CI): several threads making a network's first call
// together, concurrent inference on CPU devices and simulated GPUs, one
// thread training while another evaluates snapshots, and threads each
// training their own network. Every result is compared with the same work
// done by one thread; the kernels are deterministic, so the bits agree.

#include <barrier>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using Values = std::vector<float>;

/// A batch of `n` random 28x28 images on `ctx`, made from `seed` alone.
NDArray images(std::int64_t n, std::uint32_t seed, Context ctx = cpu(0)) {
  return array(testing::random_floats(static_cast<std::size_t>(n * 784), -1.f, 1.f, seed),
               {n, 1, 28, 28}, ctx);
}

std::shared_ptr<nn::Sequential> fresh_lenet(const std::vector<Context>& devices) {
  random::seed(11);
  auto net = std::make_shared<nn::Sequential>(models::lenet());
  net->initialize(init::Xavier(), devices);
  return net;
}

/// Every parameter's values on `ctx`, in registration order.
std::vector<Values> parameters_of(const nn::Block& net, Context ctx) {
  std::vector<Values> values;
  for (const nn::ParameterPtr& p : net.collect_params()) {
    values.push_back(p->data(ctx).to_vector<float>());
  }
  return values;
}

/// Runs `body(t)` on `threads` threads that start together.
template <typename Body>
void on_threads(int threads, Body body) {
  std::barrier start(threads);
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      start.arrive_and_wait();
      body(t);
    });
  }
  for (std::thread& thread : running) thread.join();
}

TEST(ThreadContract, ThreadsMakingTheFirstCallTogetherInitializeOnce) {
  // The shapes of LeNet's parameters are all inferred on the first call, so
  // before the contract held, threads raced in Parameter::infer_shape: a
  // crash, or "not initialized yet" from the thread that lost.
  constexpr int kThreads = 4;
  constexpr int kNetworks = 50;
  const std::vector<std::vector<Context>> placements = {{cpu(0)}, {cpu(0), cpu(1)}};
  for (const std::vector<Context>& devices : placements) {
    std::vector<NDArray> inputs;
    for (int t = 0; t < kThreads; ++t) {
      inputs.push_back(images(2, static_cast<std::uint32_t>(t + 1), devices[t % devices.size()]));
    }
    // The reference: one thread makes every call, in order.
    std::vector<Values> expected;
    auto reference = fresh_lenet(devices);
    for (const NDArray& x : inputs) expected.push_back((*reference)(x).to_vector<float>());
    const std::vector<Values> expected_parameters = parameters_of(*reference, devices[0]);

    for (int round = 0; round < kNetworks; ++round) {
      auto net = fresh_lenet(devices);
      std::vector<Values> outputs(kThreads);
      std::vector<std::string> errors(kThreads);
      on_threads(kThreads, [&](int t) {
        try {
          outputs[t] = (*net)(inputs[t]).to_vector<float>();
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
      });
      for (int t = 0; t < kThreads; ++t) {
        ASSERT_EQ(errors[t], "") << "network " << round << ", thread " << t;
        ASSERT_EQ(outputs[t], expected[t]) << "network " << round << ", thread " << t;
      }
      ASSERT_EQ(parameters_of(*net, devices[0]), expected_parameters) << "network " << round;
      for (const nn::ParameterPtr& p : net->collect_params()) {
        ASSERT_EQ(p->list_ctx(), devices) << p->name() << " of network " << round;
      }
    }
  }
}

TEST(ThreadContract, DenseLayersWithoutInputSizeInferItOnceFromManyThreads) {
  constexpr int kThreads = 8;
  for (int round = 0; round < 20; ++round) {
    random::seed(3);
    nn::Sequential net;
    net.add(nn::Dense(16, "relu"), nn::Dense(4));
    net.initialize(init::Normal(0.5), {cpu(0), cpu(1)});
    std::vector<NDArray> inputs;
    for (int t = 0; t < kThreads; ++t) {
      inputs.push_back(array(testing::random_floats(3 * 5, -1.f, 1.f, 40 + t), {3, 5},
                             t % 2 == 0 ? cpu(0) : cpu(1)));
    }
    std::vector<Values> outputs(kThreads);
    on_threads(kThreads, [&](int t) { outputs[t] = net(inputs[t]).to_vector<float>(); });
    // The same calls again, from this thread, through the now warm network.
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_EQ(outputs[t], net(inputs[t]).to_vector<float>()) << "round " << round << ", " << t;
    }
    EXPECT_EQ(net.at<nn::Dense>(0).weight()->shape(), (Shape{16, 5}));
    EXPECT_EQ(parameters_of(net, cpu(0)), parameters_of(net, cpu(1))) << "round " << round;
  }
}

TEST(ThreadContract, ConcurrentInferenceOnCpuDevicesAndSimulatedGpus) {
  const std::vector<Context> devices = {cpu(0), cpu(1), gpu(0), gpu(1)};
  auto net = fresh_lenet(devices);
  constexpr int kThreads = 4;
  constexpr int kCalls = 12;
  // The reference, from this thread: also the first call on every device.
  std::vector<std::vector<Values>> expected(kThreads);
  std::vector<std::vector<NDArray>> inputs(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    for (int c = 0; c < kCalls; ++c) {
      inputs[t].push_back(images(3, static_cast<std::uint32_t>(100 * t + c), devices[t]));
      expected[t].push_back((*net)(inputs[t].back()).to_vector<float>());
    }
  }
  std::vector<std::vector<Values>> outputs(kThreads, std::vector<Values>(kCalls));
  on_threads(kThreads, [&](int t) {
    std::vector<NDArray> pending;  // pushed ahead, read after: calls overlap
    for (int c = 0; c < kCalls; ++c) pending.push_back((*net)(inputs[t][c]));
    for (int c = 0; c < kCalls; ++c) outputs[t][c] = pending[c].to_vector<float>();
  });
  EXPECT_EQ(outputs, expected);
}

/// `steps` steps of SGD on `net` (on one device) with batches from `seed`;
/// each step's loss summed, read at the end.
std::vector<float> train(nn::Sequential& net, Context ctx, std::uint32_t seed, int steps) {
  nn::Trainer trainer(net.collect_params(), "sgd", {.learning_rate = 0.1, .momentum = 0.9});
  nn::SoftmaxCrossEntropyLoss loss_function;
  std::vector<NDArray> losses;
  for (int step = 0; step < steps; ++step) {
    const NDArray x = images(4, seed + static_cast<std::uint32_t>(step), ctx);
    const NDArray y = array(testing::random_ints<std::int32_t>(4, 0, 9, seed + step), {4}, ctx);
    NDArray loss;
    {
      auto recording = autograd::record();
      loss = loss_function(net(x), y);
    }
    loss.backward();
    trainer.step(4);
    losses.push_back(sum(loss));
  }
  std::vector<float> values;
  for (const NDArray& l : losses) values.push_back(l.asscalar<float>());
  return values;
}

TEST(ThreadContract, TwoTrainersOnSeparateDevicesEqualEachAlone) {
  const std::vector<Context> devices = {cpu(1), gpu(2)};
  std::vector<std::shared_ptr<nn::Sequential>> alone, together;
  std::vector<std::vector<float>> alone_losses, together_losses(devices.size());
  for (std::size_t i = 0; i < devices.size(); ++i) {
    alone.push_back(fresh_lenet({devices[i]}));
    (*alone.back())(images(1, 9, devices[i]));  // shapes inferred before training
    alone_losses.push_back(train(*alone.back(), devices[i], 20 + 10 * i, 6));
  }
  for (Context ctx : devices) {
    together.push_back(fresh_lenet({ctx}));
    (*together.back())(images(1, 9, ctx));
  }
  on_threads(2,
             [&](int t) { together_losses[t] = train(*together[t], devices[t], 20 + 10 * t, 6); });
  for (std::size_t i = 0; i < devices.size(); ++i) {
    EXPECT_EQ(together_losses[i], alone_losses[i]) << devices[i];
    EXPECT_EQ(parameters_of(*together[i], devices[i]), parameters_of(*alone[i], devices[i]))
        << devices[i];
  }
}

/// A new LeNet holding copies of `net`'s parameters on `ctx` (the copies are
/// engine operations, ordered after every update pushed on `net` so far).
std::shared_ptr<nn::Sequential> snapshot(const nn::Sequential& net, Context ctx) {
  auto copy = std::make_shared<nn::Sequential>(models::lenet());
  const auto from = net.structural_params();
  const auto to = copy->structural_params();
  for (std::size_t i = 0; i < from.size(); ++i)
    to[i].second->load(from[i].second->data(ctx), {ctx});
  return copy;
}

TEST(ThreadContract, OneThreadTrainsWhileAnotherEvaluatesSnapshots) {
  const Context ctx = cpu(0);
  constexpr int kSnapshots = 5;
  const NDArray eval = images(8, 77, ctx);
  // Serially: train a step, snapshot, evaluate the snapshot.
  std::vector<Values> expected;
  {
    auto net = fresh_lenet({ctx});
    (*net)(eval);
    for (int s = 0; s < kSnapshots; ++s) {
      train(*net, ctx, 300 + 7 * s, 2);
      expected.push_back((*snapshot(*net, ctx))(eval).to_vector<float>());
    }
  }
  // Concurrently: the trainer hands each snapshot to an evaluating thread,
  // which evaluates it while the trainer goes on.
  auto net = fresh_lenet({ctx});
  (*net)(eval);
  std::vector<std::shared_ptr<nn::Sequential>> handed(kSnapshots);
  std::vector<std::atomic<bool>> ready(kSnapshots);
  std::vector<Values> evaluated(kSnapshots);
  on_threads(2, [&](int t) {
    if (t == 0) {
      for (int s = 0; s < kSnapshots; ++s) {
        train(*net, ctx, 300 + 7 * s, 2);
        handed[s] = snapshot(*net, ctx);
        ready[s].store(true, std::memory_order_release);
      }
    } else {
      for (int s = 0; s < kSnapshots; ++s) {
        while (!ready[s].load(std::memory_order_acquire)) std::this_thread::yield();
        evaluated[s] = (*handed[s])(eval).to_vector<float>();
      }
    }
  });
  EXPECT_EQ(evaluated, expected);
}

}  // namespace
}  // namespace tagflow

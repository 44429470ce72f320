// Custom operators and array operations (ops/custom_op.h), tested as a
// user's program uses them: swish against a double-precision loop and its
// gradient against central finite differences on every device; several
// inputs and outputs; the built-in operators' checks and wording; GPUs
// without a CUDA function, refused or run on host copies; asynchronous
// kernels completing from another thread; errors reaching exactly the
// waits that depend on them.

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/custom_swish.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::error_of;
using testing::random_floats;
using testing::swish;

double swish_reference(double x) { return x / (1 + std::exp(-x)); }

TEST(CustomOpTest, SwishMatchesDoubleLoopOnEveryDevice) {
  for (Context ctx : testing::all_devices()) {
    const std::vector<float> x = random_floats(1000, -6, 6, 3);
    const NDArray y = swish()(array(x, {10, 100}, ctx));
    EXPECT_EQ(y.context(), ctx);
    EXPECT_EQ(y.shape(), Shape({10, 100}));
    std::vector<double> expected;
    for (float v : x) expected.push_back(swish_reference(v));
    testing::expect_close(y.to_vector<float>(), expected, 1e-6, 1e-7, "swish on " + ctx.str());
  }
}

TEST(CustomOpTest, SwishGradientMatchesFiniteDifferences) {
  for (Context ctx : {cpu(0), cpu(1), gpu(0), gpu(1)}) {
    const std::vector<float> host = random_floats(24, -3, 3, 11);
    NDArray x = array(host, {4, 6}, ctx);
    x.attach_grad();
    const std::vector<float> r = random_floats(24, -1, 1, 12);
    {
      auto recording = autograd::record();
      NDArray loss = sum(swish()(x) * array(r, {4, 6}, ctx));
      loss.backward();
    }
    std::vector<std::vector<double>> xs{{host.begin(), host.end()}};
    testing::expect_gradients_match_finite_differences(
        xs, {x},
        [&] {
          std::vector<double> y;
          for (double v : xs[0]) y.push_back(swish_reference(v));
          return testing::weighted_sum(y, r);
        },
        "swish on " + ctx.str());
  }
}

/// Two inputs, two outputs: (a + b, a * b), and its gradient.
const CustomOp& sum_and_product() {
  static const CustomOp op({
      .name = "sum_and_product",
      .num_inputs = 2,
      .host_fallback = true,
      .outputs =
          [](const std::vector<NDArray>& in) {
            return std::vector<OutputSpec>{{in[0].shape(), in[0].dtype()},
                                           {in[0].shape(), in[0].dtype()}};
          },
      .cpu =
          [](const KernelArgs& k) {
            const float* a = k.inputs[0].data<float>();
            const float* b = k.inputs[1].data<float>();
            float* s = k.outputs[0].data<float>();
            float* p = k.outputs[1].data<float>();
            for (std::int64_t i = 0; i < k.inputs[0].size(); ++i) {
              s[i] = a[i] + b[i];
              p[i] = a[i] * b[i];
            }
          },
      .backward =
          [](const GradientArgs& g) {
            const NDArray& ds = g.output_grads[0];
            const NDArray& dp = g.output_grads[1];
            return std::vector<NDArray>{ds + dp * g.inputs[1], ds + dp * g.inputs[0]};
          },
  });
  return op;
}

TEST(CustomOpTest, SeveralInputsAndOutputsWithTheirGradients) {
  for (Context ctx : {cpu(1), gpu(0)}) {  // gpu(0): through the host fallback
    const std::vector<float> ha = random_floats(6, -2, 2, 21);
    const std::vector<float> hb = random_floats(6, -2, 2, 22);
    NDArray a = array(ha, {2, 3}, ctx);
    NDArray b = array(hb, {2, 3}, ctx);
    a.attach_grad();
    b.attach_grad();
    const std::vector<float> r1 = random_floats(6, -1, 1, 23);
    const std::vector<float> r2 = random_floats(6, -1, 1, 24);
    std::vector<NDArray> out;
    {
      auto recording = autograd::record();
      out = sum_and_product()({a, b});
      NDArray loss = sum(out[0] * array(r1, {2, 3}, ctx)) + sum(out[1] * array(r2, {2, 3}, ctx));
      loss.backward();
    }
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[1].context(), ctx);
    std::vector<double> sums, products;
    for (std::size_t i = 0; i < ha.size(); ++i) {
      sums.push_back(double(ha[i]) + hb[i]);
      products.push_back(double(ha[i]) * hb[i]);
    }
    testing::expect_close(out[0].to_vector<float>(), sums, 1e-6, 1e-7, "sums");
    testing::expect_close(out[1].to_vector<float>(), products, 1e-6, 1e-7, "products");
    std::vector<std::vector<double>> xs{{ha.begin(), ha.end()}, {hb.begin(), hb.end()}};
    testing::expect_gradients_match_finite_differences(
        xs, {a, b},
        [&] {
          std::vector<double> s, p;
          for (std::size_t i = 0; i < xs[0].size(); ++i) {
            s.push_back(xs[0][i] + xs[1][i]);
            p.push_back(xs[0][i] * xs[1][i]);
          }
          return testing::weighted_sum(s, r1) + testing::weighted_sum(p, r2);
        },
        "sum_and_product on " + ctx.str());
  }
}

TEST(CustomOpTest, OutputsOfAnotherShapeAndDtype) {
  // Row sums of an int32 or float32 matrix, as int64 or float32.
  const CustomOp row_sums({
      .name = "row_sums",
      .dtypes = {DType::kInt32, DType::kFloat32},
      .outputs =
          [](const std::vector<NDArray>& in) {
            const DType out = in[0].dtype() == DType::kInt32 ? DType::kInt64 : DType::kFloat32;
            return std::vector<OutputSpec>{{Shape{in[0].shape()[0]}, out}};
          },
      .cpu =
          [](const KernelArgs& k) {
            const std::int64_t rows = k.inputs[0].shape()[0];
            const std::int64_t cols = k.inputs[0].shape()[1];
            for (std::int64_t r = 0; r < rows; ++r) {
              if (k.inputs[0].dtype() == DType::kInt32) {
                std::int64_t total = 0;
                for (std::int64_t c = 0; c < cols; ++c)
                  total += k.inputs[0].data<std::int32_t>()[r * cols + c];
                k.outputs[0].data<std::int64_t>()[r] = total;
              } else {
                float total = 0;
                for (std::int64_t c = 0; c < cols; ++c)
                  total += k.inputs[0].data<float>()[r * cols + c];
                k.outputs[0].data<float>()[r] = total;
              }
            }
          },
  });
  const NDArray ints = array(std::vector<std::int32_t>{1, 2, 3, -4, 5, 2000000000}, {2, 3});
  const NDArray sums = row_sums(ints);
  EXPECT_EQ(sums.dtype(), DType::kInt64);
  EXPECT_EQ(sums.to_vector<std::int64_t>(), (std::vector<std::int64_t>{6, 2000000001}));
  EXPECT_EQ(row_sums(array({1.5f, 2.5f}).reshape({1, 2})).to_vector<float>(),
            std::vector<float>{4.f});
}

TEST(CustomOpTest, InputsAreCheckedAsBuiltInOperatorsCheckThem) {
  const NDArray x = array({1.f, 2.f});
  EXPECT_EQ(error_of([&] {
              swish()(std::vector<NDArray>{x, x});
            }),
            "swish: expected 1 input array, got 2");
  EXPECT_EQ(error_of([&] { swish()(NDArray()); }),
            "swish: the first argument is an empty array (default-constructed)");
  EXPECT_EQ(error_of([&] { swish()(x.astype(DType::kInt32)); }),
            "swish: expected a float32 array as the first argument, got int32");
  EXPECT_EQ(error_of([&] {
              sum_and_product()(x, array({1.f, 2.f}, cpu(1)));
            }),
            "sum_and_product: all inputs must live on the same context, but the first argument "
            "is on cpu(0) while the 2nd argument is on cpu(1). Nothing is copied implicitly: "
            "move one with copyto() or as_in_context()");
  // The same wording as a built-in operator's.
  EXPECT_EQ(error_of([&] {
              x + array({1.f, 2.f}, cpu(1));
            }),
            "broadcast_add: all inputs must live on the same context, but the first argument "
            "is on cpu(0) while the 2nd argument is on cpu(1). Nothing is copied implicitly: "
            "move one with copyto() or as_in_context()");
  EXPECT_EQ(error_of([&] { sum_and_product()(x); }),
            "sum_and_product: expected 2 input arrays, got 1");
  EXPECT_EQ(error_of([&] {
              sum_and_product()(std::vector<NDArray>{x, x.astype(DType::kInt32)});
            }),
            "sum_and_product: expected a float32 array as the 2nd argument, got int32");
}

TEST(CustomOpTest, DefinitionsThatCannotRunAreRefused) {
  const auto noop = [](const KernelArgs&) {};
  EXPECT_EQ(error_of([&] { CustomOp({.name = "", .cpu = noop}); }),
            "CustomOp: expected a name, got an empty one");
  EXPECT_EQ(error_of([&] { CustomOp({.name = "f", .num_inputs = 0, .cpu = noop}); }),
            "CustomOp 'f': expected at least one input, got num_inputs = 0");
  EXPECT_EQ(error_of([&] { CustomOp({.name = "f", .dtypes = {}, .cpu = noop}); }),
            "CustomOp 'f': expected at least one accepted dtype, got none");
  EXPECT_EQ(error_of([&] { CustomOp({.name = "f"}); }),
            "CustomOp 'f': expected a `cpu` function (it runs on CPU devices, simulated GPUs and "
            "the host fallback), got none");
}

TEST(CustomOpTest, HostOnlyOperatorsRunOnSimulatedGpusAndNeedAFallbackOnRealOnes) {
  const auto twice = [](const KernelArgs& k) {
    for (std::int64_t i = 0; i < k.inputs[0].size(); ++i) {
      k.outputs[0].data<float>()[i] = 2 * k.inputs[0].data<float>()[i];
    }
  };
  const CustomOp host_only({.name = "twice", .cpu = twice});
  EXPECT_EQ(host_only(array({1.f, 3.f}, cpu(1))).to_vector<float>(), (std::vector<float>{2, 6}));
  // A simulated GPU runs the `cpu` function as its kernel, in stream order,
  // as it runs the built-in operators' CPU kernels.
  for (int i = 0; i < num_gpus(); ++i) {
    if (!Engine::get().gpus()[static_cast<std::size_t>(i)].simulated) {
      EXPECT_EQ(error_of([&] { host_only(array({1.f}, gpu(i))); }),
                fmt::format("twice: the inputs are on gpu({}), but this custom operator has no "
                            "`cuda` function; give it a `cuda` function, or set `host_fallback` "
                            "to run its `cpu` function on copies in host memory",
                            i));
      continue;
    }
    const NDArray y = host_only(array({1.f, 3.f}, gpu(i)));
    EXPECT_EQ(y.context(), gpu(i));
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 6}));
  }
  const CustomOp fallback({.name = "twice", .host_fallback = true, .cpu = twice});
  const NDArray y = fallback(array({1.f, 3.f}, gpu(1)));
  EXPECT_EQ(y.context(), gpu(1));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 6}));
  // An asynchronous `cpu` function cannot be a simulated GPU's kernel.
  const CustomOp asynchronous(
      {.name = "later", .cpu = [](KernelArgs, Completion done) { done.done(); }});
  EXPECT_EQ(error_of([&] { asynchronous(array({1.f}, gpu(1))); }),
            "later: the inputs are on gpu(1), but this custom operator has an asynchronous "
            "`cpu` function, which cannot run as a simulated GPU's kernel; give it a `cuda` "
            "function, or set `host_fallback` to run its `cpu` function on copies in host "
            "memory");
}

/// Walks its first input and reads the second at the same index: it relies
/// on the shape check (Note [Custom operator shapes]).
void add_elementwise(const KernelArgs& k) {
  const float* a = k.inputs[0].data<float>();
  const float* b = k.inputs[1].data<float>();
  float* y = k.outputs[0].data<float>();
  for (std::int64_t i = 0; i < k.inputs[0].size(); ++i) y[i] = a[i] + b[i];
}

TEST(CustomOpTest, InputsOfDifferentShapesAreRefusedBeforeTheKernelRuns) {
  const CustomOp add({.name = "add", .num_inputs = 2, .cpu = add_elementwise});
  for (Context ctx : {cpu(0), gpu(0)}) {
    // Before the check, the kernel read a million floats from a buffer of three.
    const NDArray big = zeros({1000000}, ctx);
    const NDArray small = zeros({3}, ctx);
    EXPECT_EQ(error_of([&] { add(big, small); }),
              "add: all inputs must have the same shape, but the first argument has shape "
              "(1000000) while the 2nd argument has shape (3); a custom operator whose inputs "
              "differ in shape says so with `input_shapes`")
        << ctx;
    EXPECT_EQ(add(array({1.f, 2.f}, ctx), array({3.f, 5.f}, ctx)).to_vector<float>(),
              (std::vector<float>{4, 7}));
  }
  EXPECT_EQ(error_of([&] {
              sum_and_product()(std::vector<NDArray>{zeros({2, 3}), zeros({3, 2})});
            }),
            "sum_and_product: all inputs must have the same shape, but the first argument has "
            "shape (2x3) while the 2nd argument has shape (3x2); a custom operator whose inputs "
            "differ in shape says so with `input_shapes`");
}

TEST(CustomOpTest, BroadcastingOperatorsGetTheBroadcastShape) {
  // a (rows, cols) plus b (cols): the kernel reads b by its own shape.
  const CustomOp add_row({.name = "add_row",
                          .num_inputs = 2,
                          .input_shapes = InputShapes::kBroadcast,
                          .cpu = [](const KernelArgs& k) {
                            const std::int64_t cols = k.inputs[1].size();
                            const float* a = k.inputs[0].data<float>();
                            const float* b = k.inputs[1].data<float>();
                            float* y = k.outputs[0].data<float>();
                            for (std::int64_t i = 0; i < k.outputs[0].size(); ++i) {
                              y[i] = a[i] + b[i % cols];
                            }
                          }});
  const NDArray y =
      add_row(array(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}), array({10.f, 20.f, 30.f}));
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(error_of([&] {
              add_row(zeros({2, 3}), zeros({2}));
            }),
            "add_row: shapes (2x3) and (2) do not broadcast: axis 1 has 3 against 2");
}

TEST(CustomOpTest, CheckedShapesAreTheOutputsFunctionsToRefuse) {
  // (n) and (m) give (n + m): any two vectors, nothing else.
  const CustomOp join(
      {.name = "join",
       .num_inputs = 2,
       .input_shapes = InputShapes::kChecked,
       .outputs =
           [](const std::vector<NDArray>& in) {
             TAGFLOW_CHECK(in[0].ndim() == 1 && in[1].ndim() == 1,
                           "join: expected two vectors, got ({}) and ({})", in[0].shape().str(),
                           in[1].shape().str());
             return std::vector<OutputSpec>{{Shape{in[0].size() + in[1].size()}, in[0].dtype()}};
           },
       .cpu =
           [](const KernelArgs& k) {
             float* y = k.outputs[0].data<float>();
             std::int64_t at = 0;
             for (const TensorView& in : k.inputs) {
               for (std::int64_t i = 0; i < in.size(); ++i) y[at++] = in.data<float>()[i];
             }
           }});
  EXPECT_EQ(join(array({1.f, 2.f, 3.f}), array({4.f})).to_vector<float>(),
            (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(error_of([&] {
              join(zeros({2, 2}), zeros({3}));
            }),
            "join: expected two vectors, got (2x2) and (3)");
  EXPECT_EQ(
      error_of([&] {
        CustomOp({.name = "f", .input_shapes = InputShapes::kChecked, .cpu = add_elementwise});
      }),
      "CustomOp 'f': InputShapes::kChecked leaves the shape check to an `outputs` function, "
      "but none was given");
}

TEST(CustomOpTest, BackwardWithoutGradientOrWithWrongShapesSaysSo) {
  const auto copy = [](const KernelArgs& k) {
    for (std::int64_t i = 0; i < k.inputs[0].size(); ++i) {
      k.outputs[0].data<float>()[i] = k.inputs[0].data<float>()[i];
    }
  };
  const CustomOp no_backward({.name = "identity", .cpu = copy});
  const CustomOp bad_backward(
      {.name = "identity", .cpu = copy, .backward = [](const GradientArgs& g) {
         return std::vector<NDArray>{sum(g.output_grads[0])};
       }});
  const CustomOp too_many({.name = "identity", .cpu = copy, .backward = [](const GradientArgs& g) {
                             return std::vector<NDArray>{g.output_grads[0], g.output_grads[0]};
                           }});
  NDArray x = array({1.f, 2.f});
  x.attach_grad();
  const auto backward_of = [&](const CustomOp& op) {
    auto recording = autograd::record();
    NDArray loss = sum(op(x));
    loss.backward();
  };
  EXPECT_EQ(error_of([&] { backward_of(no_backward); }),
            "identity: a gradient reached this custom operator, but it has no `backward`; give "
            "CustomOpDef::backward, or compute its input outside autograd::record()");
  EXPECT_EQ(error_of([&] { backward_of(bad_backward); }),
            "identity: its backward gave the gradient of the first input as (1) float32 on "
            "cpu(0), expected the input's (2) float32 on cpu(0)");
  EXPECT_EQ(error_of([&] { backward_of(too_many); }),
            "identity: its backward gave 2 gradients, expected one per input (1); give an empty "
            "NDArray for an input without one");
  // Outside recording the missing backward does not matter.
  EXPECT_EQ(no_backward(x).to_vector<float>(), (std::vector<float>{1, 2}));
}

TEST(CustomOpTest, AsynchronousKernelCompletesFromAnotherThreadInOrder) {
  std::mutex helpers_mutex;
  std::vector<std::thread> helpers;
  const CustomOp slow_double({
      .name = "slow_double",
      .cpu =
          [&](KernelArgs k, Completion done) {
            const std::lock_guard lock(helpers_mutex);
            helpers.emplace_back([k = std::move(k), done = std::move(done)]() mutable {
              std::this_thread::sleep_for(std::chrono::milliseconds(20));
              for (std::int64_t i = 0; i < k.inputs[0].size(); ++i) {
                k.outputs[0].data<float>()[i] = 2 * k.inputs[0].data<float>()[i];
              }
              done.done();
            });
          },
  });
  for (Context ctx : {cpu(0), cpu(1)}) {
    NDArray x = array({1.f, 2.f, 3.f}, ctx);
    NDArray y = slow_double(x);
    NDArray z = y + 1.f;  // must wait for the helper thread's completion
    x += 100.f;           // a write after the kernel's read: must not be seen by it
    EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{3, 5, 7}));
    EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{101, 102, 103}));
  }
  Engine::get().wait_for_all();
  for (std::thread& t : helpers) t.join();
}

TEST(CustomOpTest, ErrorsReachExactlyTheWaitsThatDependOnThem) {
  const CustomOp failing({.name = "failing", .cpu = [](const KernelArgs&) {
                            throw std::runtime_error("the custom kernel failed");
                          }});
  const CustomOp failing_later(
      {.name = "failing_later", .cpu = [](KernelArgs, Completion done) {
         std::thread([done = std::move(done)]() mutable {
           done.fail(std::make_exception_ptr(std::runtime_error("failed on another thread")));
         }).detach();
       }});
  for (Context ctx : {cpu(0), cpu(1)}) {
    NDArray x = array({1.f, 2.f}, ctx);
    NDArray unrelated = array({5.f}, ctx);
    NDArray y = failing(x);
    NDArray downstream = exp(y) + 1.f;
    NDArray async_out = failing_later(x);
    unrelated += 1.f;
    const std::string message = error_of([&] { y.wait_to_read(); });
    EXPECT_NE(message.find("failing"), std::string::npos) << message;
    EXPECT_NE(message.find("the custom kernel failed"), std::string::npos) << message;
    EXPECT_NE(error_of([&] { downstream.wait_to_read(); }).find("the custom kernel failed"),
              std::string::npos);
    EXPECT_NE(error_of([&] { async_out.wait_to_read(); }).find("failed on another thread"),
              std::string::npos);
    // The input, and what does not depend on the failure, are untouched.
    EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2}));
    EXPECT_EQ(unrelated.to_vector<float>(), (std::vector<float>{6}));
  }
  // The engine keeps running, and wait_for_all does not report again what
  // the waits above rethrew (Note [Errors seen by wait_for_all]).
  EXPECT_EQ(error_of([] { Engine::get().wait_for_all(); }), "(no error)");
  EXPECT_EQ(swish()(array({0.f})).to_vector<float>(), (std::vector<float>{0}));
}

TEST(PushArraysTest, ClosureRunsInOrderWithTheArraysItReadsAndWrites) {
  for (Context ctx : {cpu(0), cpu(1), gpu(0)}) {
    NDArray a = array({1.f, 2.f, 3.f}, ctx);
    NDArray out = zeros({3}, DType::kFloat32, ctx);
    const float* pa = a.data<float>();
    float* po = out.data<float>();
    OperationHandle handle = push_arrays(
        {.name = "sum into out",
         .reads = {a},
         .writes = {out},
         .fn = [pa, po](const RunContext& rc) {
           const auto body = [pa, po] {
             for (int i = 0; i < 3; ++i) po[i] = pa[i] * 10;
           };
           if (rc.stream != nullptr) {
             rc.stream->enqueue_host(body);  // a simulated GPU's work goes on its stream
           } else {
             body();
           }
         }});
    a += 1.f;  // after the closure's read
    handle.wait();
    EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{10, 20, 30})) << ctx.str();
    EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{2, 3, 4})) << ctx.str();
  }
}

TEST(PushArraysTest, AsynchronousClosureAndErrors) {
  NDArray out = zeros({2}, DType::kFloat32, cpu(1));
  float* po = out.data<float>();
  std::thread helper;
  push_arrays({.name = "completes later",
               .writes = {out},
               .fn = [po, &helper](const RunContext&, Completion done) {
                 helper = std::thread([po, done = std::move(done)]() mutable {
                   std::this_thread::sleep_for(std::chrono::milliseconds(10));
                   po[0] = 7;
                   po[1] = 8;
                   done.done();
                 });
               }});
  EXPECT_EQ((out * 2.f).to_vector<float>(), (std::vector<float>{14, 16}));
  helper.join();

  NDArray broken = zeros({1});
  OperationHandle failed =
      push_arrays({.name = "throws", .writes = {broken}, .fn = [](const RunContext&) {
                     throw std::runtime_error("bad closure");
                   }});
  EXPECT_NE(error_of([&] { failed.wait(); }).find("bad closure"), std::string::npos);
  EXPECT_NE(error_of([&] { broken.wait_to_read(); }).find("bad closure"), std::string::npos);
  // Both waits reported it: wait_for_all does not again.
  EXPECT_EQ(error_of([] { Engine::get().wait_for_all(); }), "(no error)");

  EXPECT_EQ(error_of([] { push_arrays({.name = "nothing", .fn = [](const RunContext&) {}}); }),
            "nothing: expected at least one array to read or write (they fix the device), got "
            "none");
  EXPECT_EQ(error_of([] {
              push_arrays({.name = "mixed",
                           .reads = {array({1.f}, cpu(0))},
                           .writes = {array({1.f}, gpu(0))},
                           .fn = [](const RunContext&) {}});
            }),
            "mixed: all inputs must live on the same context, but the first argument is on "
            "cpu(0) while the 2nd argument is on gpu(0). Nothing is copied implicitly: move one "
            "with copyto() or as_in_context()");
}

}  // namespace
}  // namespace tagflow

#include "ops/custom_op.h"

#include <span>

#include "engine/engine.h"
#include "ops/autograd.h"
#include "ops/creation.h"
#include "ops/detail/operator_checks.h"
#include "ops/kernels/kernel_work.h"
#include "ops/kernels/launch.h"
#include "ops/priority.h"

namespace tagflow {

struct detail::CustomOpImpl {
  CustomOpDef def;
  /// `def.name` for the engine: operation names outlive operations.
  const char* engine_name = nullptr;
};

[[noreturn]] void detail::throw_view_dtype_mismatch(DType wanted, DType held) {
  throw Error(fmt::format("TensorView::data<{}>: the array holds {}", dtype_name(wanted),
                          dtype_name(held)));
}

namespace {

using Impl = detail::CustomOpImpl;

Shape broadcast_of(const char* name, const std::vector<NDArray>& inputs);

std::string dtype_list(const std::vector<DType>& dtypes) {
  std::string text;
  for (std::size_t i = 0; i < dtypes.size(); ++i) {
    if (i > 0) text += i + 1 == dtypes.size() ? " or " : ", ";
    text += dtype_name(dtypes[i]);
  }
  return text;
}

void check_inputs(const Impl& impl, const std::vector<NDArray>& inputs) {
  const CustomOpDef& def = impl.def;
  const char* name = impl.engine_name;
  TAGFLOW_CHECK(inputs.size() == static_cast<std::size_t>(def.num_inputs),
                "{}: expected {} input array{}, got {}", name, def.num_inputs,
                def.num_inputs == 1 ? "" : "s", inputs.size());
  detail::check_same_context(name, std::span<const NDArray>(inputs));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const DType dtype = inputs[i].dtype();
    bool accepted = false;
    for (DType d : def.dtypes) accepted = accepted || d == dtype;
    TAGFLOW_CHECK(accepted, "{}: expected a {} array as the {} argument, got {}", name,
                  dtype_list(def.dtypes), detail::ordinal(static_cast<int>(i) + 1),
                  dtype_name(dtype));
    TAGFLOW_CHECK(dtype == inputs[0].dtype(),
                  "{}: all inputs must have the same dtype, but the first argument is {} while "
                  "the {} argument is {}. Convert one with astype()",
                  name, dtype_name(inputs[0].dtype()), detail::ordinal(static_cast<int>(i) + 1),
                  dtype_name(dtype));
  }
  // Note [Custom operator shapes].
  if (def.input_shapes == InputShapes::kSame) {
    for (std::size_t i = 1; i < inputs.size(); ++i) {
      TAGFLOW_CHECK(inputs[i].shape() == inputs[0].shape(),
                    "{}: all inputs must have the same shape, but the first argument has shape "
                    "({}) while the {} argument has shape ({}); a custom operator whose inputs "
                    "differ in shape says so with `input_shapes`",
                    name, inputs[0].shape().str(), detail::ordinal(static_cast<int>(i) + 1),
                    inputs[i].shape().str());
    }
  } else if (def.input_shapes == InputShapes::kBroadcast) {
    broadcast_of(name, inputs);
  }
}

/// The shape all of `inputs` broadcast to; throws naming `name` when they do not.
Shape broadcast_of(const char* name, const std::vector<NDArray>& inputs) {
  Shape shape = inputs[0].shape();
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    shape = broadcast_shapes(shape, inputs[i].shape(), name);
  }
  return shape;
}

std::vector<OutputSpec> output_specs(const Impl& impl, const std::vector<NDArray>& inputs) {
  if (!impl.def.outputs) {
    const Shape shape = impl.def.input_shapes == InputShapes::kBroadcast
                            ? broadcast_of(impl.engine_name, inputs)
                            : inputs[0].shape();
    return {{shape, inputs[0].dtype()}};
  }
  std::vector<OutputSpec> specs = impl.def.outputs(inputs);
  TAGFLOW_CHECK(!specs.empty(), "{}: its `outputs` function gave no output; expected at least one",
                impl.engine_name);
  return specs;
}

TensorView view_of(const NDArray& array) {
  return TensorView(array.raw_data(), array.shape(), array.dtype());
}

/// Pushes the kernel of `impl` reading `inputs` and writing `outputs`.
void push_kernel(const std::shared_ptr<const Impl>& impl, const std::vector<NDArray>& inputs,
                 const std::vector<NDArray>& outputs) {
  const Context ctx = inputs[0].context();
  auto args = std::make_shared<KernelArgs>();
  args->ctx = ctx;
  for (const NDArray& in : inputs) args->inputs.push_back(view_of(in));
  for (const NDArray& out : outputs) args->outputs.push_back(view_of(out));
  VarList reads;
  for (const NDArray& in : inputs) reads.push_back(in.var());
  VarList writes;
  for (const NDArray& out : outputs) writes.push_back(out.var());
  std::shared_ptr<const KernelArgs> frozen = std::move(args);
  // What a simulated GPU with a device model times: every array crosses
  // memory once, one flop per output element (Note [Operator work]).
  double bytes = 0;
  double output_elements = 0;
  for (const NDArray& in : inputs) bytes += detail::bytes_of(in.size(), in.dtype());
  for (const NDArray& out : outputs) {
    bytes += detail::bytes_of(out.size(), out.dtype());
    output_elements += static_cast<double>(out.size());
  }
  const KernelWork work = detail::kernel_work(output_elements, bytes, inputs[0].dtype());

  if (impl->def.cpu.is_async() && ctx.is_host()) {
    detail::push_operation(impl->engine_name, ctx, std::move(reads), std::move(writes),
                           [impl, frozen](const RunContext&, Completion done) {
                             impl->def.cpu.async()(*frozen, std::move(done));
                           });
    return;
  }
  detail::push_operation(impl->engine_name, ctx, std::move(reads), std::move(writes),
                         [impl, frozen, work](const RunContext& rc) {
                           detail::run_kernel(
                               rc, work, [impl, frozen] { impl->def.cpu.sync()(*frozen); },
                               [impl, frozen](void* stream) {
                                 KernelArgs on_stream = *frozen;
                                 on_stream.cuda_stream = stream;
                                 impl->def.cuda(on_stream);
                               });
                         });
}

/// The gradients of the inputs reaching output `index`'s node: the user's
/// backward with zeros for every other output (the gradient is linear in
/// the output gradients, so the nodes of several outputs sum to the whole).
std::vector<NDArray> backward_through(const Impl& impl, const std::vector<NDArray>& inputs,
                                      const std::vector<NDArray>& outputs, std::size_t index,
                                      const NDArray& out_grad) {
  const char* name = impl.engine_name;
  TAGFLOW_CHECK(static_cast<bool>(impl.def.backward),
                "{}: a gradient reached this custom operator, but it has no `backward`; give "
                "CustomOpDef::backward, or compute its input outside autograd::record()",
                name);
  GradientArgs args{.inputs = inputs, .outputs = outputs, .output_grads = {}};
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    args.output_grads.push_back(i == index ? out_grad : zeros_like(outputs[i]));
  }
  std::vector<NDArray> grads = impl.def.backward(args);
  detail::check_user_gradients(name, inputs, grads);
  return grads;
}

void record_gradients(const std::shared_ptr<const Impl>& impl, const std::vector<NDArray>& inputs,
                      std::vector<NDArray>& outputs) {
  if (!detail::recording()) return;
  bool needs_grad = false;
  for (const NDArray& in : inputs) needs_grad = needs_grad || in.grad_node() != nullptr;
  if (!needs_grad) return;
  // Without history: a node keeping its own output would keep itself alive.
  std::vector<NDArray> kept_inputs;
  for (const NDArray& in : inputs) kept_inputs.push_back(in.detach());
  std::vector<NDArray> kept_outputs;
  for (const NDArray& out : outputs) kept_outputs.push_back(out.detach());
  for (std::size_t index = 0; index < outputs.size(); ++index) {
    std::vector<std::shared_ptr<detail::GradNode>> producers;
    for (const NDArray& in : inputs) producers.push_back(in.grad_node());
    detail::record_node(impl->engine_name, outputs[index], std::move(producers),
                        [impl, kept_inputs, kept_outputs, index](const NDArray& out_grad) {
                          return backward_through(*impl, kept_inputs, kept_outputs, index,
                                                  out_grad);
                        });
  }
}

}  // namespace

CustomOp::CustomOp(CustomOpDef def) {
  TAGFLOW_CHECK(!def.name.empty(), "CustomOp: expected a name, got an empty one");
  TAGFLOW_CHECK(def.num_inputs >= 1,
                "CustomOp '{}': expected at least one input, got num_inputs = {}", def.name,
                def.num_inputs);
  TAGFLOW_CHECK(!def.dtypes.empty(),
                "CustomOp '{}': expected at least one accepted dtype, got none", def.name);
  for (const DType d : def.dtypes) {
    TAGFLOW_CHECK(!is_half(d),
                  "CustomOp '{}': expected accepted dtypes among float32, int32, int64 and "
                  "uint8, got {} (operators do not take half arrays yet)",
                  def.name, dtype_name(d));
  }
  TAGFLOW_CHECK(static_cast<bool>(def.cpu),
                "CustomOp '{}': expected a `cpu` function (it runs on CPU devices, simulated GPUs "
                "and the host fallback), got none",
                def.name);
  TAGFLOW_CHECK(def.input_shapes != InputShapes::kChecked || static_cast<bool>(def.outputs),
                "CustomOp '{}': InputShapes::kChecked leaves the shape check to an `outputs` "
                "function, but none was given",
                def.name);
  auto impl = std::make_shared<Impl>();
  impl->engine_name = intern_name(def.name);
  impl->def = std::move(def);
  impl_ = std::move(impl);
}

const std::string& CustomOp::name() const { return impl_->def.name; }

std::vector<NDArray> CustomOp::operator()(const std::vector<NDArray>& inputs) const {
  const Impl& impl = *impl_;
  check_inputs(impl, inputs);
  const Context ctx = inputs[0].context();
  if (ctx.is_gpu()) {
    // Note [Where a custom kernel runs]: a simulated GPU's kernels are host code.
    const bool simulated = Engine::get().gpus().at(static_cast<std::size_t>(ctx.index)).simulated;
    if (simulated ? impl.def.cpu.is_async() : !impl.def.cuda) {
      TAGFLOW_CHECK(impl.def.host_fallback,
                    "{}: the inputs are on {}, but this custom operator {}; give it a `cuda` "
                    "function, or set `host_fallback` to run its `cpu` function on copies in host "
                    "memory",
                    impl.engine_name, ctx.str(),
                    simulated ? "has an asynchronous `cpu` function, which cannot run as a "
                                "simulated GPU's kernel"
                              : "has no `cuda` function");
      std::vector<NDArray> on_host;
      for (const NDArray& in : inputs) on_host.push_back(in.copyto(cpu(0)));
      std::vector<NDArray> outputs = (*this)(on_host);
      for (NDArray& out : outputs) out = out.copyto(ctx);
      return outputs;
    }
  }
  const std::vector<OutputSpec> specs = output_specs(impl, inputs);
  std::vector<NDArray> outputs;
  outputs.reserve(specs.size());
  for (const OutputSpec& spec : specs) outputs.emplace_back(spec.shape, spec.dtype, ctx);
  push_kernel(impl_, inputs, outputs);
  record_gradients(impl_, inputs, outputs);
  return outputs;
}

NDArray CustomOp::operator()(const NDArray& x) const { return only_output({x}); }

NDArray CustomOp::operator()(const NDArray& a, const NDArray& b) const {
  return only_output({a, b});
}

NDArray CustomOp::only_output(const std::vector<NDArray>& inputs) const {
  std::vector<NDArray> outputs = (*this)(inputs);
  TAGFLOW_CHECK(
      outputs.size() == 1,
      "{}: called for one output, but it gives {}; call it with a vector of inputs to get "
      "them all",
      impl_->engine_name, outputs.size());
  return outputs[0];
}

OperationHandle push_arrays(ArrayOperation op) {
  const char* name = intern_name(op.name);
  TAGFLOW_CHECK(!op.reads.empty() || !op.writes.empty(),
                "{}: expected at least one array to read or write (they fix the device), got none",
                name);
  TAGFLOW_CHECK(static_cast<bool>(op.fn), "{}: expected a closure in `fn`, got none", name);
  std::vector<NDArray> all = op.reads;
  all.insert(all.end(), op.writes.begin(), op.writes.end());
  detail::check_same_context(name, std::span<const NDArray>(all));
  VarList reads;
  for (const NDArray& a : op.reads) reads.push_back(a.var());
  VarList writes;
  for (const NDArray& a : op.writes) writes.push_back(a.var());
  return Engine::get().push_tracked({.name = name,
                                     .ctx = all[0].context(),
                                     .reads = std::move(reads),
                                     .writes = std::move(writes),
                                     .priority = op.priority.value_or(current_priority()),
                                     .queue = op.queue,
                                     .fn = std::move(op.fn)});
}

}  // namespace tagflow

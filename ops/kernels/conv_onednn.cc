// The CPU convolutions through oneDNN (Note [Convolution on the CPU] in
// conv_cpu.cc says when and why).

#include "ops/kernels/conv_onednn.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "engine/error.h"
#include "ops/kernels/cpu_parallel.h"
#include "ops/kernels/cpu_scratch.h"

namespace tagflow::detail::onednn {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr memory::data_type kF32 = memory::data_type::f32;

/// The forward and input-gradient kernels cut the batch into about kCalls
/// calls, each of at least kCallFlops floating-point operations.
constexpr std::int64_t kCalls = 16;
constexpr std::int64_t kCallFlops = std::int64_t{1} << 24;
/// The weight gradient sums over the batch in at most this many chunks,
/// whose partial sums take at most kPartialBytes.
constexpr std::int64_t kWeightChunks = 16;
constexpr std::int64_t kPartialBytes = std::int64_t{64} << 20;
/// Plans kept; beyond this the cache starts over.
constexpr std::size_t kMaxPlans = 512;
/// Alignment of each piece of a thread's working memory.
constexpr std::size_t kAlign = 64;

enum class Pass : std::uint8_t { kForward, kBackwardData, kBackwardWeight };

std::size_t aligned(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

const dnnl::engine& cpu_engine() {
  // Never destroyed: a device's workers may still convolve while the
  // process's static objects are destroyed.
  static const auto* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

/// Makes oneDNN's kernels called from this thread run on it alone. Debian
/// builds oneDNN on OpenMP, whose thread count is a per-thread setting of
/// its runtime (the one oneDNN itself loads, looked up here so that nothing
/// else links it).
void use_this_thread_only() {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  using SetThreads = void (*)(int);
  static const SetThreads set_threads = [] {
    void* symbol = ::dlsym(RTLD_DEFAULT, "omp_set_num_threads");
    if (symbol == nullptr) {
      void* gomp = ::dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
      if (gomp != nullptr) symbol = ::dlsym(gomp, "omp_set_num_threads");
    }
    return reinterpret_cast<SetThreads>(symbol);
  }();
  if (set_threads != nullptr) set_threads(1);
#endif
}

dnnl::primitive_attr user_scratchpad() {
  // The caller hands every primitive its scratchpad, so that one primitive
  // runs on several threads at once.
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

/// A primitive and the scratchpad it needs.
struct Step {
  dnnl::primitive primitive;
  memory::desc scratchpad;
};

/// An operand of a convolution: the plain layout of tagflow's array, the
/// layout the kernel wants, and the reorder between them (plain to wanted
/// for an input, back for the output), none when they are the same.
struct Operand {
  int arg = 0;
  memory::desc plain, wanted;
  std::optional<Step> reorder;

  std::size_t copy_bytes() const { return reorder ? aligned(wanted.get_size()) : 0; }
};

Operand make_operand(int arg, const memory::desc& plain, const memory::desc& wanted, bool input) {
  Operand op{.arg = arg, .plain = plain, .wanted = wanted, .reorder = std::nullopt};
  if (plain != wanted) {
    const memory::desc& from = input ? plain : wanted;
    const memory::desc& to = input ? wanted : plain;
    const dnnl::reorder::primitive_desc pd(cpu_engine(), from, cpu_engine(), to, user_scratchpad());
    op.reorder = Step{dnnl::reorder(pd), pd.scratchpad_desc()};
  }
  return op;
}

/// One pass of the convolution over a number of images.
struct Plan {
  Step conv;
  /// Forward: source, weights, bias; input gradient: output gradient,
  /// weights; weight gradient: source, output gradient.
  std::vector<Operand> inputs;
  /// Forward: destination; input gradient: its gradient; weight gradient:
  /// the weights', then the bias's when asked for.
  std::vector<Operand> outputs;

  std::size_t scratchpad_bytes() const {
    std::size_t bytes = conv.scratchpad.get_size();
    for (const Operand* op : operands()) {
      if (op->reorder) bytes = std::max(bytes, op->reorder->scratchpad.get_size());
    }
    return aligned(bytes);
  }
  std::vector<const Operand*> operands() const {
    std::vector<const Operand*> all;
    for (const Operand& op : inputs) all.push_back(&op);
    for (const Operand& op : outputs) all.push_back(&op);
    return all;
  }
};

/// The layouts of a convolution over `images` images: tagflow's (NCHW,
/// weights OIHW or GOIHW) or whatever the kernel prefers (`any`).
struct Layouts {
  memory::desc src, weights, bias, dst;
};

Layouts layouts(const ConvGeometry& g, std::int64_t images, bool any) {
  const memory::dims weights =
      g.groups == 1 ? memory::dims{g.out_channels, g.in_channels, g.kernel_h, g.kernel_w}
                    : memory::dims{g.groups, g.group_out_channels(), g.group_in_channels(),
                                   g.kernel_h, g.kernel_w};
  return {
      .src =
          memory::desc({images, g.in_channels, g.in_h, g.in_w}, kF32, any ? Tag::any : Tag::nchw),
      .weights =
          memory::desc(weights, kF32, any ? Tag::any : (g.groups == 1 ? Tag::oihw : Tag::goihw)),
      .bias = memory::desc({g.out_channels}, kF32, Tag::x),
      .dst = memory::desc({images, g.out_channels, g.out_h, g.out_w}, kF32,
                          any ? Tag::any : Tag::nchw),
  };
}

/// True for oneDNN's reference kernels, which are plain loops: lowering is
/// faster where oneDNN has nothing better.
bool is_reference(const dnnl::primitive_desc_base& pd) {
  return std::string_view(pd.impl_info_str()).starts_with("ref");
}

/// Builds the plan of `pass` over `images` images; null when oneDNN has no
/// kernel but its reference one for it.
std::shared_ptr<const Plan> build_plan(Pass pass, const ConvGeometry& g, std::int64_t images,
                                       bool bias, bool winograd) {
  const memory::dims strides{g.stride_h, g.stride_w};
  const memory::dims dilates{g.dilation_h - 1, g.dilation_w - 1};
  const memory::dims pad_l{g.pad_h, g.pad_w};
  // oneDNN's output extent, (in + pad_l + pad_r - span) / stride + 1 rounded
  // down, is tagflow's with the padding on both sides.
  const memory::dims pad_r = pad_l;
  const Layouts plain = layouts(g, images, false);
  const Layouts any = layouts(g, images, true);
  const dnnl::primitive_attr attr = user_scratchpad();
  const auto algorithm =
      winograd ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct;
  const auto training = dnnl::prop_kind::forward_training;
  try {
    const dnnl::convolution_forward::desc forward_desc =
        bias ? dnnl::convolution_forward::desc(training, algorithm, any.src, any.weights,
                                               plain.bias, any.dst, strides, dilates, pad_l, pad_r)
             : dnnl::convolution_forward::desc(training, algorithm, any.src, any.weights, any.dst,
                                               strides, dilates, pad_l, pad_r);
    const dnnl::convolution_forward::primitive_desc forward(forward_desc, attr, cpu_engine());
    Plan plan;
    switch (pass) {
      case Pass::kForward: {
        if (is_reference(forward)) return nullptr;
        plan.conv = {dnnl::convolution_forward(forward), forward.scratchpad_desc()};
        plan.inputs.push_back(make_operand(DNNL_ARG_SRC, plain.src, forward.src_desc(), true));
        plan.inputs.push_back(
            make_operand(DNNL_ARG_WEIGHTS, plain.weights, forward.weights_desc(), true));
        if (bias) {
          plan.inputs.push_back(make_operand(DNNL_ARG_BIAS, plain.bias, forward.bias_desc(), true));
        }
        plan.outputs.push_back(make_operand(DNNL_ARG_DST, plain.dst, forward.dst_desc(), false));
        break;
      }
      case Pass::kBackwardData: {
        const dnnl::convolution_backward_data::desc desc(algorithm, any.src, any.weights, any.dst,
                                                         strides, dilates, pad_l, pad_r);
        const dnnl::convolution_backward_data::primitive_desc pd(desc, attr, cpu_engine(), forward);
        if (is_reference(pd)) return nullptr;
        plan.conv = {dnnl::convolution_backward_data(pd), pd.scratchpad_desc()};
        plan.inputs.push_back(make_operand(DNNL_ARG_DIFF_DST, plain.dst, pd.diff_dst_desc(), true));
        plan.inputs.push_back(
            make_operand(DNNL_ARG_WEIGHTS, plain.weights, pd.weights_desc(), true));
        plan.outputs.push_back(
            make_operand(DNNL_ARG_DIFF_SRC, plain.src, pd.diff_src_desc(), false));
        break;
      }
      case Pass::kBackwardWeight: {
        const dnnl::convolution_backward_weights::desc desc =
            bias ? dnnl::convolution_backward_weights::desc(algorithm, any.src, any.weights,
                                                            plain.bias, any.dst, strides, dilates,
                                                            pad_l, pad_r)
                 : dnnl::convolution_backward_weights::desc(
                       algorithm, any.src, any.weights, any.dst, strides, dilates, pad_l, pad_r);
        const dnnl::convolution_backward_weights::primitive_desc pd(desc, attr, cpu_engine(),
                                                                    forward);
        if (is_reference(pd)) return nullptr;
        plan.conv = {dnnl::convolution_backward_weights(pd), pd.scratchpad_desc()};
        plan.inputs.push_back(make_operand(DNNL_ARG_SRC, plain.src, pd.src_desc(), true));
        plan.inputs.push_back(make_operand(DNNL_ARG_DIFF_DST, plain.dst, pd.diff_dst_desc(), true));
        plan.outputs.push_back(
            make_operand(DNNL_ARG_DIFF_WEIGHTS, plain.weights, pd.diff_weights_desc(), false));
        if (bias) {
          plan.outputs.push_back(
              make_operand(DNNL_ARG_DIFF_BIAS, plain.bias, pd.diff_bias_desc(), false));
        }
        break;
      }
    }
    return std::make_shared<const Plan>(std::move(plan));
  } catch (const dnnl::error&) {
    return nullptr;  // no kernel for this geometry: the caller lowers
  }
}

using PlanKey = std::array<std::int64_t, 19>;

struct PlanKeyHash {
  std::size_t operator()(const PlanKey& key) const {
    std::size_t h = 0;
    for (const std::int64_t v : key) h = h * 1000003u ^ std::hash<std::int64_t>{}(v);
    return h;
  }
};

/// The plan of `pass` over `images` images of geometry `g`, built once and
/// shared by every thread and device; null when oneDNN has no kernel.
std::shared_ptr<const Plan> plan_for(Pass pass, const ConvGeometry& g, std::int64_t images,
                                     bool bias, bool winograd) {
  const PlanKey key{static_cast<std::int64_t>(pass),
                    winograd ? 1 : 0,
                    bias ? 1 : 0,
                    images,
                    g.in_channels,
                    g.in_h,
                    g.in_w,
                    g.out_channels,
                    g.out_h,
                    g.out_w,
                    g.kernel_h,
                    g.kernel_w,
                    g.stride_h,
                    g.stride_w,
                    g.pad_h,
                    g.pad_w,
                    g.dilation_h,
                    g.dilation_w,
                    g.groups};
  static std::mutex mutex;
  // Never destroyed, as the engine above.
  static auto* plans = new std::unordered_map<PlanKey, std::shared_ptr<const Plan>, PlanKeyHash>();
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = plans->find(key); it != plans->end()) return it->second;
  if (plans->size() >= kMaxPlans) plans->clear();  // plans in use stay alive with their users
  use_this_thread_only();  // oneDNN sizes its kernels for the threads it will have
  std::shared_ptr<const Plan> plan = build_plan(pass, g, images, bias, winograd);
  plans->emplace(key, plan);
  return plan;
}

/// True where Winograd's algorithm (F(4x4, 3x3)) beats the direct one:
/// measured on the reference machine, 2 times its speed on 28x28 outputs of
/// 64 channels, 1.2-1.35 on 14x14 of 128, slower on 7x7 and below.
bool suits_winograd(const ConvGeometry& g) {
  return g.kernel_h == 3 && g.kernel_w == 3 && g.stride_h == 1 && g.stride_w == 1 &&
         g.dilation_h == 1 && g.dilation_w == 1 && g.groups == 1 && g.in_channels >= 16 &&
         g.out_channels >= 16 && g.out_h * g.out_w >= 14 * 14;
}

/// The plan of `pass`: Winograd's where `winograd` allows it, it suits the
/// geometry and oneDNN has it on this processor, else the direct one.
std::shared_ptr<const Plan> choose_plan(Pass pass, const ConvGeometry& g, std::int64_t images,
                                        bool bias, bool winograd) {
  if (winograd && suits_winograd(g)) {
    if (std::shared_ptr<const Plan> plan = plan_for(pass, g, images, bias, true)) return plan;
  }
  return plan_for(pass, g, images, bias, false);
}

dnnl::memory memory_at(const memory::desc& desc, const void* data) {
  // oneDNN reads an input through the same handle type it writes outputs.
  return {desc, cpu_engine(),
          const_cast<void*>(data)};  // NOLINT(cppcoreguidelines-pro-type-const-cast)
}

/// Runs `step` on `args`, with its scratchpad at `scratchpad`.
void execute(const Step& step, std::unordered_map<int, dnnl::memory> args, void* scratchpad,
             dnnl::stream& stream) {
  if (step.scratchpad.get_size() != 0) {
    args.emplace(DNNL_ARG_SCRATCHPAD, memory_at(step.scratchpad, scratchpad));
  }
  step.primitive.execute(stream, args);
}

/// An input shared by every call of a kernel (the weights, the bias),
/// reordered once into the layout the calls' plan wants.
class SharedInput {
 public:
  SharedInput(const Operand& op, const void* data, Context ctx, dnnl::stream& stream)
      : data_(data) {
    if (!op.reorder) return;
    copy_.emplace(ctx, op.copy_bytes());
    std::optional<CpuScratch> scratchpad;
    if (op.reorder->scratchpad.get_size() != 0) {
      scratchpad.emplace(ctx, op.reorder->scratchpad.get_size());
    }
    execute(*op.reorder,
            {{DNNL_ARG_FROM, memory_at(op.plain, data)},
             {DNNL_ARG_TO, memory_at(op.wanted, copy_->data())}},
            scratchpad ? scratchpad->data() : nullptr, stream);
    stream.wait();
    data_ = copy_->data();
  }

  /// The input in the wanted layout.
  const void* data() const { return data_; }

 private:
  std::optional<CpuScratch> copy_;
  const void* data_;
};

/// The bytes a thread needs to run `plan`: copies of the inputs not shared
/// and of the outputs, where their layouts differ, and a scratchpad.
std::size_t working_bytes(const Plan& plan, std::size_t shared_inputs) {
  std::size_t bytes = plan.scratchpad_bytes();
  for (const Operand& op : plan.outputs) bytes += op.copy_bytes();
  for (std::size_t i = 0; i < plan.inputs.size(); ++i) {
    if (i >= plan.inputs.size() - shared_inputs) continue;
    bytes += plan.inputs[i].copy_bytes();
  }
  return bytes;
}

/// Runs `plan` once on this thread. `inputs[i]` is plan.inputs[i]: plain
/// data, or for the last `shared` inputs data already in the wanted layout;
/// `outputs[i]`, plain, is plan.outputs[i]. `work` has
/// working_bytes(plan, shared) bytes.
void run(const Plan& plan, const std::vector<const void*>& inputs, std::size_t shared,
         const std::vector<void*>& outputs, std::byte* work, dnnl::stream& stream) {
  std::byte* scratchpad = work;
  std::byte* next = work + plan.scratchpad_bytes();
  std::unordered_map<int, dnnl::memory> args;
  for (std::size_t i = 0; i < plan.inputs.size(); ++i) {
    const Operand& op = plan.inputs[i];
    if (i >= plan.inputs.size() - shared || !op.reorder) {
      args.emplace(op.arg, memory_at(op.wanted, inputs[i]));
      continue;
    }
    execute(*op.reorder,
            {{DNNL_ARG_FROM, memory_at(op.plain, inputs[i])},
             {DNNL_ARG_TO, memory_at(op.wanted, next)}},
            scratchpad, stream);
    args.emplace(op.arg, memory_at(op.wanted, next));
    next += op.copy_bytes();
  }
  std::vector<void*> written(outputs.size());
  for (std::size_t i = 0; i < plan.outputs.size(); ++i) {
    const Operand& op = plan.outputs[i];
    written[i] = op.reorder ? static_cast<void*>(next) : outputs[i];
    if (op.reorder) next += op.copy_bytes();
    args.emplace(op.arg, memory_at(op.wanted, written[i]));
  }
  execute(plan.conv, std::move(args), scratchpad, stream);
  for (std::size_t i = 0; i < plan.outputs.size(); ++i) {
    const Operand& op = plan.outputs[i];
    if (!op.reorder) continue;
    execute(*op.reorder,
            {{DNNL_ARG_FROM, memory_at(op.wanted, written[i])},
             {DNNL_ARG_TO, memory_at(op.plain, outputs[i])}},
            scratchpad, stream);
  }
  stream.wait();
}

/// The batch cut into calls of `per` images, the last one `last` images.
struct Calls {
  std::int64_t count, per, last;
};

Calls calls_of(const ConvGeometry& g) {
  const std::int64_t image_flops =
      std::max<std::int64_t>(1, 2 * g.out_channels * g.col_cols() * g.col_rows());
  const std::int64_t per = std::clamp<std::int64_t>(
      std::max((kCallFlops + image_flops - 1) / image_flops, (g.batch + kCalls - 1) / kCalls), 1,
      g.batch);
  const std::int64_t count = (g.batch + per - 1) / per;
  return {count, per, g.batch - (count - 1) * per};
}

/// Runs the forward or input-gradient pass: each call on `per_call` images
/// (`chunk_in` and `chunk_out` floats per image) with the shared inputs.
bool run_over_batch(Pass pass, const ConvGeometry& g, bool bias, bool winograd,
                    const float* chunked, std::int64_t chunk_in,
                    std::vector<const void*> shared_data, float* out, std::int64_t chunk_out,
                    Context ctx) {
  const Calls calls = calls_of(g);
  const std::shared_ptr<const Plan> full = choose_plan(pass, g, calls.per, bias, winograd);
  const std::shared_ptr<const Plan> last =
      calls.last == calls.per ? full : choose_plan(pass, g, calls.last, bias, winograd);
  if (full == nullptr || last == nullptr) return false;
  const std::size_t shared = shared_data.size();
  use_this_thread_only();
  dnnl::stream stream(cpu_engine());
  // The shared inputs in the layouts each plan wants (usually one copy).
  std::vector<std::unique_ptr<SharedInput>> prepared;
  std::vector<const void*> full_shared, last_shared;
  for (std::size_t i = 0; i < shared; ++i) {
    const std::size_t at = full->inputs.size() - shared + i;
    prepared.push_back(
        std::make_unique<SharedInput>(full->inputs[at], shared_data[i], ctx, stream));
    full_shared.push_back(prepared.back()->data());
    if (last->inputs[at].wanted == full->inputs[at].wanted) {
      last_shared.push_back(full_shared.back());
    } else {
      prepared.push_back(
          std::make_unique<SharedInput>(last->inputs[at], shared_data[i], ctx, stream));
      last_shared.push_back(prepared.back()->data());
    }
  }
  const std::size_t work = std::max(working_bytes(*full, shared), working_bytes(*last, shared));
  parallel_for_range(calls.count, 1, [&](std::int64_t begin, std::int64_t end) {
    use_this_thread_only();
    dnnl::stream thread_stream(cpu_engine());
    const CpuScratch scratch(ctx, work);
    for (std::int64_t call = begin; call < end; ++call) {
      const std::int64_t first = call * calls.per;
      const bool is_last = call == calls.count - 1;
      std::vector<const void*> inputs{chunked + first * chunk_in};
      const std::vector<const void*>& with = is_last ? last_shared : full_shared;
      inputs.insert(inputs.end(), with.begin(), with.end());
      run(is_last ? *last : *full, inputs, shared, {out + first * chunk_out},
          static_cast<std::byte*>(scratch.data()), thread_stream);
    }
  });
  return true;
}

/// Turns a oneDNN failure while running into tagflow's error.
template <typename Body>
bool reporting(const char* pass, const Body& body) {
  try {
    return body();
  } catch (const dnnl::error& e) {
    throw_error("conv2d {}: oneDNN failed: {}", pass, e.what());
  }
}

bool run_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y,
                 Context ctx, bool winograd) {
  if (g.batch == 0) return false;
  return reporting("forward", [&] {
    std::vector<const void*> shared{w};
    if (bias != nullptr) shared.push_back(bias);
    return run_over_batch(Pass::kForward, g, bias != nullptr, winograd, x, g.in_image(), shared, y,
                          g.out_image(), ctx);
  });
}

bool run_backward_data(const ConvGeometry& g, const float* w, const float* dy, float* dx,
                       Context ctx, bool winograd) {
  if (g.batch == 0) return false;
  return reporting("input gradient", [&] {
    return run_over_batch(Pass::kBackwardData, g, false, winograd, dy, g.out_image(), {w}, dx,
                          g.in_image(), ctx);
  });
}

bool run_backward_weight(const ConvGeometry& g, const float* x, const float* dy, float* dw,
                         float* db, Context ctx, bool winograd) {
  if (g.batch == 0) return false;
  return reporting("weight gradient", [&] {
    const bool bias = db != nullptr;
    const std::int64_t weights = g.weight_size();
    // Each chunk's partial sums: the weights', then the bias's.
    const std::int64_t sums = weights + (bias ? g.out_channels : 0);
    const std::int64_t sum_bytes = sums * static_cast<std::int64_t>(sizeof(float));
    // A function of the geometry only, so that the sums' order is too.
    const std::int64_t chunks =
        std::min({g.batch, kWeightChunks, std::max<std::int64_t>(1, kPartialBytes / sum_bytes)});
    const std::int64_t small = g.batch / chunks;
    const std::shared_ptr<const Plan> smaller =
        choose_plan(Pass::kBackwardWeight, g, small, bias, winograd);
    const std::shared_ptr<const Plan> larger =
        g.batch % chunks == 0 ? smaller
                              : choose_plan(Pass::kBackwardWeight, g, small + 1, bias, winograd);
    if (smaller == nullptr || larger == nullptr) return false;
    std::optional<CpuScratch> partial;
    if (chunks > 1) partial.emplace(ctx, static_cast<std::uint64_t>((chunks - 1) * sum_bytes));
    const auto partial_sums = [&](std::int64_t chunk) {
      return partial->floats() + (chunk - 1) * sums;
    };
    const std::size_t work = std::max(working_bytes(*smaller, 0), working_bytes(*larger, 0));
    parallel_for_range(chunks, 1, [&](std::int64_t begin, std::int64_t end) {
      use_this_thread_only();
      dnnl::stream stream(cpu_engine());
      const CpuScratch scratch(ctx, work);
      for (std::int64_t chunk = begin; chunk < end; ++chunk) {
        const std::int64_t first = chunk * g.batch / chunks;
        const std::int64_t images = (chunk + 1) * g.batch / chunks - first;
        float* to_dw = chunk == 0 ? dw : partial_sums(chunk);
        std::vector<void*> outputs{to_dw};
        if (bias) outputs.push_back(chunk == 0 ? db : to_dw + weights);
        run(images == small ? *smaller : *larger,
            {x + first * g.in_image(), dy + first * g.out_image()}, 0, outputs,
            static_cast<std::byte*>(scratch.data()), stream);
      }
    });
    if (chunks == 1) return true;
    // Added in chunk order: element i of the partial sums is dw[i], or
    // db[i - weights] beyond the weights.
    parallel_for_range(sums, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t chunk = 1; chunk < chunks; ++chunk) {
        const float* from = partial_sums(chunk);
        for (std::int64_t i = begin; i < end; ++i)
          (i < weights ? dw[i] : db[i - weights]) += from[i];
      }
    });
    return true;
  });
}

// Note [oneDNN at exit]
// Operations pending when main() returns run during exit, from the engine's
// exit hook on (Note [Engine lifetime] in engine/engine.h). Exit handlers
// and the destructors of statics run in reverse order of registration, so
// oneDNN's function statics (its primitive cache among them) must be made
// before the engine: made later, they are destroyed before the hook, and a
// convolution then uses destroyed objects (seen: a convolution first run
// during exit crashed inside oneDNN's primitive cache). So when the library
// loads, a static initializer here makes them, by creating the primitives
// of each pass for a few small geometries (created only: nothing runs, no
// device memory is used, no thread count is set), and then registers an
// exit handler that waits for the calls in flight and closes oneDNN to the
// rest (convolutions from then on are lowered). With the shared library
// this all happens before any program static can start the engine; with
// the static library the order among static initializers is not defined,
// and if the engine started first the handler still runs before oneDNN's
// statics are destroyed, and closes it. In a child forked after loading the
// handler closes without waiting: the threads of the calls in flight at the
// fork do not exist there.

/// Calls of oneDNN in flight (shared) and the closing at exit (exclusive).
struct Gate {
  std::shared_mutex mutex;
  std::atomic<bool> closed{false};
  pid_t process = 0;  ///< the process that registered the exit handler
};

Gate& gate() {
  static auto* g = new Gate();  // never destroyed: used until the process ends
  return *g;
}

void close_at_exit() {
  Gate& g = gate();
  if (::getpid() != g.process) {
    // A child forked after the first use: the thread of a call in flight at
    // the fork may have held the lock, and does not exist here.
    g.closed = true;
    return;
  }
  const std::unique_lock<std::shared_mutex> lock(g.mutex);
  g.closed = true;
}

/// Creates (and drops) every pass's primitives for a few small geometries,
/// so that oneDNN makes the statics its convolutions use.
void make_statics() {
  // (input channels, output channels, kernel, size): a first layer, a layer
  // Winograd's algorithm suits, a 1x1 one.
  for (const auto [in, out, kernel, size] :
       {std::array{1, 16, 3, 4}, std::array{16, 16, 3, 14}, std::array{16, 16, 1, 4}}) {
    ConvGeometry g;
    g.batch = 1;
    g.in_channels = in;
    g.out_channels = out;
    g.in_h = g.in_w = g.out_h = g.out_w = size;
    g.kernel_h = g.kernel_w = kernel;
    g.pad_h = g.pad_w = kernel / 2;
    for (const Pass pass : {Pass::kForward, Pass::kBackwardData, Pass::kBackwardWeight}) {
      for (const bool winograd : {false, true}) {
        (void)build_plan(pass, g, 1, pass != Pass::kBackwardData, winograd);
      }
    }
  }
}

/// Made when the library loads (Note [oneDNN at exit]).
[[maybe_unused]] const bool kOneDnnReady = [] {
  try {
    make_statics();
  } catch (...) {  // NOLINT(bugprone-empty-catch)
    // Without oneDNN's kernels here, the first convolution finds out again.
  }
  gate().process = ::getpid();
  std::atexit(close_at_exit);
  return true;
}();

/// Runs `body` (true: it ran) unless oneDNN is closed; false then.
template <typename Body>
bool through_gate(const Body& body) {
  Gate& g = gate();
  const std::shared_lock<std::shared_mutex> lock(g.mutex);
  return !g.closed && body();
}

}  // namespace

bool conv2d_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                    float* y, Context ctx, bool winograd) {
  return through_gate([&] { return run_forward(g, x, w, bias, y, ctx, winograd); });
}

bool conv2d_backward_data(const ConvGeometry& g, const float* w, const float* dy, float* dx,
                          Context ctx, bool winograd) {
  return through_gate([&] { return run_backward_data(g, w, dy, dx, ctx, winograd); });
}

bool conv2d_backward_weight(const ConvGeometry& g, const float* x, const float* dy, float* dw,
                            float* db, Context ctx, bool winograd) {
  return through_gate([&] { return run_backward_weight(g, x, dy, dw, db, ctx, winograd); });
}

}  // namespace tagflow::detail::onednn

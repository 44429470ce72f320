// The CPU convolutions through oneDNN (Note [Convolution on the CPU] in
// conv_cpu.cc says when and why).

#include "ops/kernels/conv_onednn.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "engine/error.h"
#include "ops/kernels/conv_onednn_plan.h"
#include "ops/kernels/cpu_parallel.h"
#include "ops/kernels/cpu_scratch.h"

namespace tagflow::detail::onednn {

std::int64_t weight_gradient_channels_per_call(const ConvGeometry& g) {
  if (g.groups != 1 || g.out_h * g.out_w > 64 || g.out_channels < 128) return 0;
  if (g.kernel_h * g.kernel_w > 1) return 64;
  return (g.out_channels / 2 + 15) / 16 * 16;
}

namespace {

using dnnl::memory;

/// The forward and input-gradient kernels cut the batch into about kCalls
/// calls, each of at least kCallFlops floating-point operations.
constexpr std::int64_t kCalls = 16;
constexpr std::int64_t kCallFlops = std::int64_t{1} << 24;
/// The weight gradient sums over the batch in at most this many chunks,
/// whose partial sums take at most kPartialBytes.
constexpr std::int64_t kWeightChunks = 16;
constexpr std::int64_t kPartialBytes = std::int64_t{64} << 20;

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

/// Input i of a plan, as a bit of a set of inputs.
constexpr std::uint32_t input_bit(std::size_t i) { return std::uint32_t{1} << i; }

/// The last `count` of a plan's `inputs` inputs, as a set.
constexpr std::uint32_t last_inputs(std::size_t inputs, std::size_t count) {
  std::uint32_t set = 0;
  for (std::size_t i = inputs - count; i < inputs; ++i) set |= input_bit(i);
  return set;
}

/// The bytes a thread needs to run `plan`: copies of the inputs not in
/// `prepared` (a set of input_bit) and of the outputs, where their layouts
/// differ, and a scratchpad.
std::size_t working_bytes(const Plan& plan, std::uint32_t prepared) {
  std::size_t bytes = plan.scratchpad_bytes();
  for (const Operand& op : plan.outputs) bytes += op.copy_bytes();
  for (std::size_t i = 0; i < plan.inputs.size(); ++i) {
    if ((prepared & input_bit(i)) == 0) bytes += plan.inputs[i].copy_bytes();
  }
  return bytes;
}

/// Runs `plan` once on this thread. `inputs[i]` is plan.inputs[i]: plain
/// data, or, for the inputs in `prepared`, data already in the wanted
/// layout; `outputs[i]`, plain, is plan.outputs[i]. `work` has
/// working_bytes(plan, prepared) bytes.
void run(const Plan& plan, const std::vector<const void*>& inputs, std::uint32_t prepared,
         const std::vector<void*>& outputs, std::byte* work, dnnl::stream& stream) {
  std::byte* scratchpad = work;
  std::byte* next = work + plan.scratchpad_bytes();
  std::unordered_map<int, dnnl::memory> args;
  for (std::size_t i = 0; i < plan.inputs.size(); ++i) {
    const Operand& op = plan.inputs[i];
    if ((prepared & input_bit(i)) != 0 || !op.reorder) {
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
  const std::uint32_t prepared_inputs = last_inputs(full->inputs.size(), shared);
  const std::size_t work =
      std::max(working_bytes(*full, prepared_inputs), working_bytes(*last, prepared_inputs));
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
      run(is_last ? *last : *full, inputs, prepared_inputs, {out + first * chunk_out},
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

/// The weight gradient with the output channels in slices of `per`
/// (weight_gradient_channels_per_call), each call over the whole batch: no
/// partial sums. Each call copies its slice of `dy` into dense memory; the
/// source is reordered once for all of them.
bool run_backward_weight_by_channels(const ConvGeometry& g, const float* x, const float* dy,
                                     float* dw, float* db, Context ctx, bool winograd,
                                     std::int64_t per) {
  const bool bias = db != nullptr;
  const std::int64_t count = (g.out_channels + per - 1) / per;
  const std::int64_t last_channels = g.out_channels - (count - 1) * per;
  ConvGeometry full_g = g, last_g = g;
  full_g.out_channels = per;
  last_g.out_channels = last_channels;
  const std::shared_ptr<const Plan> full =
      choose_plan(Pass::kBackwardWeight, full_g, g.batch, bias, winograd);
  const std::shared_ptr<const Plan> last =
      last_channels == per ? full
                           : choose_plan(Pass::kBackwardWeight, last_g, g.batch, bias, winograd);
  if (full == nullptr || last == nullptr) return false;
  // The source, whole in every call, in the layout each plan wants (usually one copy).
  use_this_thread_only();
  dnnl::stream here(cpu_engine());
  const SharedInput full_x(full->inputs[0], x, ctx, here);
  std::optional<SharedInput> last_x;
  if (last->inputs[0].wanted != full->inputs[0].wanted)
    last_x.emplace(last->inputs[0], x, ctx, here);
  const std::int64_t plane = g.out_h * g.out_w;
  const std::size_t slice_bytes = aligned(static_cast<std::size_t>(g.batch * per * plane) * 4);
  const std::uint32_t prepared = input_bit(0);
  const std::size_t work =
      slice_bytes + std::max(working_bytes(*full, prepared), working_bytes(*last, prepared));
  parallel_for_range(count, 1, [&](std::int64_t begin, std::int64_t end) {
    use_this_thread_only();
    dnnl::stream stream(cpu_engine());
    const CpuScratch scratch(ctx, work);
    auto* slice = static_cast<float*>(scratch.data());
    for (std::int64_t call = begin; call < end; ++call) {
      const std::int64_t first = call * per;
      const std::int64_t channels = call == count - 1 ? last_channels : per;
      for (std::int64_t n = 0; n < g.batch; ++n) {
        std::copy_n(dy + (n * g.out_channels + first) * plane, channels * plane,
                    slice + n * channels * plane);
      }
      std::vector<void*> outputs{dw + first * g.col_rows()};
      if (bias) outputs.push_back(db + first);
      const bool is_last = call == count - 1;
      run(is_last ? *last : *full, {(is_last && last_x ? *last_x : full_x).data(), slice}, prepared,
          outputs, static_cast<std::byte*>(scratch.data()) + slice_bytes, stream);
    }
  });
  return true;
}

bool run_backward_weight(const ConvGeometry& g, const float* x, const float* dy, float* dw,
                         float* db, Context ctx, bool winograd) {
  if (g.batch == 0) return false;
  if (const std::int64_t per = weight_gradient_channels_per_call(g); per > 0) {
    return reporting("weight gradient", [&] {
      return run_backward_weight_by_channels(g, x, dy, dw, db, ctx, winograd, per);
    });
  }
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

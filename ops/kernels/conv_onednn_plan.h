#pragma once
// The plans of the oneDNN convolutions (conv_onednn.cc): for one pass over
// a number of images, the primitive, the layouts it wants and the reorders
// to and from tagflow's NCHW arrays; built once per geometry and shared by
// every thread. Internal to ops/.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "ops/kernels/conv_kernels.h"
#include "ops/kernels/onednn_threads.h"

namespace tagflow::detail::onednn {

/// Alignment of each piece of a thread's working memory.
inline constexpr std::size_t kAlign = 64;

/// A convolution's passes.
enum class Pass : std::uint8_t { kForward, kBackwardData, kBackwardWeight };

/// `bytes` rounded up to kAlign.
inline std::size_t aligned(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

/// A primitive and the scratchpad it needs.
struct Step {
  dnnl::primitive primitive;
  dnnl::memory::desc scratchpad;
};

/// An operand of a convolution: the plain layout of tagflow's array, the
/// layout the kernel wants, and the reorder between them (plain to wanted
/// for an input, back for the output), none when they are the same.
struct Operand {
  int arg = 0;
  dnnl::memory::desc plain, wanted;
  std::optional<Step> reorder;

  std::size_t copy_bytes() const { return reorder ? aligned(wanted.get_size()) : 0; }
};

/// One pass of the convolution over a number of images.
struct Plan {
  Step conv;
  /// oneDNN's name of the kernel, e.g. "jit_wino_4x3:avx512_core".
  std::string implementation;
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

/// The CPU engine of every oneDNN object here.
const dnnl::engine& cpu_engine();

/// Builds the plan of `pass` over `images` images (with the bias's operand
/// when `bias`, Winograd's algorithm when `winograd`); null when oneDNN has
/// no kernel but its reference one for it. Not cached.
std::shared_ptr<const Plan> build_plan(Pass pass, const ConvGeometry& g, std::int64_t images,
                                       bool bias, bool winograd);

/// The plan of `pass`: Winograd's where `winograd` allows it, it suits the
/// geometry and oneDNN has it on this processor, else the direct one; built
/// once per geometry and shared by every thread and device; null when
/// oneDNN has no kernel for it.
std::shared_ptr<const Plan> choose_plan(Pass pass, const ConvGeometry& g, std::int64_t images,
                                        bool bias, bool winograd);

}  // namespace tagflow::detail::onednn

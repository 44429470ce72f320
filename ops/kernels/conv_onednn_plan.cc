// The plans of the oneDNN convolutions (conv_onednn_plan.h).

#include "ops/kernels/conv_onednn_plan.h"

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <string_view>

namespace tagflow::detail::onednn {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr memory::data_type kF32 = memory::data_type::f32;

/// Plans kept; beyond this the cache starts over.
constexpr std::size_t kMaxPlans = 512;

dnnl::primitive_attr user_scratchpad() {
  // The caller hands every primitive its scratchpad, so that one primitive
  // runs on several threads at once.
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

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

/// A plan's pass, algorithm, bias, and its geometry's extents.
using PlanKey = std::array<std::int64_t, 17>;

/// The plan of `pass` over `images` images of geometry `g`, built once and
/// shared by every thread and device; null when oneDNN has no kernel.
std::shared_ptr<const Plan> plan_for(Pass pass, const ConvGeometry& g, std::int64_t images,
                                     bool bias, bool winograd) {
  PlanKey key{static_cast<std::int64_t>(pass), winograd ? 1 : 0, bias ? 1 : 0};
  const auto extents = g.extents();
  std::copy(extents.begin(), extents.end(), key.begin() + 3);
  key[3] = images;  // extents()[0] is the batch
  static std::mutex mutex;
  // Never destroyed: convolutions run until the process ends.
  static auto* plans = new std::map<PlanKey, std::shared_ptr<const Plan>>();
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

}  // namespace

const dnnl::engine& cpu_engine() {
  // Never destroyed: a device's workers may still convolve while the
  // process's static objects are destroyed.
  static const auto* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
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
        plan.implementation = forward.impl_info_str();
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
        plan.implementation = pd.impl_info_str();
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
        plan.implementation = pd.impl_info_str();
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

/// The plan of `pass`: Winograd's where `winograd` allows it, it suits the
/// geometry and oneDNN has it on this processor, else the direct one.
std::shared_ptr<const Plan> choose_plan(Pass pass, const ConvGeometry& g, std::int64_t images,
                                        bool bias, bool winograd) {
  if (winograd && suits_winograd(g)) {
    if (std::shared_ptr<const Plan> plan = plan_for(pass, g, images, bias, true)) return plan;
  }
  return plan_for(pass, g, images, bias, false);
}

}  // namespace tagflow::detail::onednn

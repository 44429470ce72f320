#pragma once
// Which of cuDNN's algorithms runs a convolution pass on a real GPU, and what
// happens when no float32 one fits: the rule of Note [Choosing cuDNN's
// algorithms], written as host code over plain values so that it is tested
// without a GPU. conv.cu turns cuDNN's candidates into ConvAlgorithm values
// and runs the one chosen. Internal to ops/.
//
// Note [Choosing cuDNN's algorithms]
// Each pass (forward, backward data, backward filter) of each geometry on
// each GPU gets its algorithm once, from cuDNN's heuristics (cudnnGet*_v7: no
// trial runs, no memory of its own), kept for the life of the process. The
// descriptors ask for FMA math, so that float32 stays float32, as in the
// cuBLAS products. Among cuDNN's candidates, in its order of preference:
//  1. the first deterministic one with FMA math and a workspace within the
//     limit (kMaxWorkspace in conv.cu, 1 GiB);
//  2. else the first with FMA math within the limit.
// Any other math (tensor-op or default math) lets cuDNN round float32 inputs
// to TF32 on Ampere and later GPUs: a 10-bit mantissa, unit roundoff 2^-11
// against float32's 2^-24. So when no float32 algorithm fits,
// TAGFLOW_CONV_TF32 (EngineConfig::conv_tf32) decides:
//  - allow (the default): 3. the first supported candidate within the limit,
//    whatever its math, else 4. the first supported one at all, whatever its
//    workspace (run with the math cuDNN reports for it); and a warning naming
//    the pass, the GPU, the shapes, the limit and what runs instead, once per
//    pass, GPU and geometry;
//  - forbid: DeviceError saying that no float32 algorithm fits, what the
//    smallest float32 one would need, and the two ways out (allow TF32, or
//    raise the limit).
// Why allow by default: the fallback is rare (cuDNN has float32 algorithms
// with little or no workspace for ordinary shapes), a training run that stops
// is worse than one convolution at TF32 precision with float32 accumulation,
// and PyTorch allows TF32 for cuDNN convolutions by default too
// (torch.backends.cudnn.allow_tf32). The warning makes the fallback visible;
// forbid is there for whoever needs float32 throughout.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/config.h"
#include "ops/kernels/conv_kernels.h"

namespace tagflow::detail {

/// The three passes of a convolution, each with its own algorithms.
enum class ConvPass : int { kForward, kBackwardData, kBackwardFilter };

/// "forward", "backward-data" or "backward-filter".
const char* to_string(ConvPass pass);

/// What identifies one convolution pass on one GPU: the pass, the device and
/// every field of the geometry the output shape is not derived from. Keys
/// the algorithm cache (conv.cu) and the once-per-shape TF32 warning.
using ConvKey = std::array<std::int64_t, 16>;
ConvKey conv_key(ConvPass pass, int device, const ConvGeometry& g);

/// One of cuDNN's candidates for a pass, as far as the choice needs it.
struct ConvAlgorithm {
  /// The algorithm (cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t as an int).
  int algo = 0;
  /// True for CUDNN_FMA_MATH: float32 throughout, never TF32.
  bool fma_math = false;
  /// cuDNN can run it for this geometry (its status is CUDNN_STATUS_SUCCESS).
  bool supported = false;
  /// Gives the same bits on every run (CUDNN_DETERMINISTIC).
  bool deterministic = false;
  /// Bytes of workspace it needs.
  std::uint64_t workspace = 0;
};

/// The index in `candidates` (cuDNN's, in its order of preference) of the one
/// to run `pass` of `g` on gpu(device) with, by Note [Choosing cuDNN's
/// algorithms]; logs the warning the note describes when the fallback runs.
/// Throws DeviceError when `policy` forbids the fallback that would be
/// needed, or when cuDNN supports no candidate.
///
///   const std::size_t i = choose_conv_algorithm(candidates, ConvPass::kForward, 0, g,
///                                               std::uint64_t{1} << 30, conv_tf32_policy());
std::size_t choose_conv_algorithm(std::span<const ConvAlgorithm> candidates, ConvPass pass,
                                  int device, const ConvGeometry& g, std::uint64_t max_workspace,
                                  ConvTf32 policy);

/// The process-wide engine's TAGFLOW_CONV_TF32 (EngineConfig::conv_tf32).
ConvTf32 conv_tf32_policy();

}  // namespace tagflow::detail

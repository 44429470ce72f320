// The rule of Note [Choosing cuDNN's algorithms] (ops/kernels/conv_algorithm.h)
// on made-up candidate lists, without a GPU: float32 (FMA) algorithms within
// the workspace limit first, deterministic first; the TF32 fallback only when
// none fits, with a warning once per pass, GPU and geometry (captured from
// spdlog) under TAGFLOW_CONV_TF32=allow, and DeviceError saying what to do
// under forbid.

#include "ops/kernels/conv_algorithm.h"

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "engine/engine.h"
#include "engine/error.h"

namespace tagflow {
namespace {

using detail::choose_conv_algorithm;
using detail::ConvAlgorithm;
using detail::ConvGeometry;
using detail::ConvPass;

constexpr std::uint64_t kLimit = std::uint64_t{1} << 30;

ConvAlgorithm fma(int algo, std::uint64_t workspace, bool deterministic = true) {
  return {.algo = algo,
          .fma_math = true,
          .supported = true,
          .deterministic = deterministic,
          .workspace = workspace};
}
ConvAlgorithm tf32(int algo, std::uint64_t workspace) {
  return {.algo = algo,
          .fma_math = false,
          .supported = true,
          .deterministic = true,
          .workspace = workspace};
}
ConvAlgorithm unsupported(ConvAlgorithm a) {
  a.supported = false;
  return a;
}

/// A geometry no earlier call of this process used (the warning is once per
/// geometry, also when the tests are repeated).
ConvGeometry fresh_geometry() {
  static int next = 0;
  ConvGeometry g;
  g.batch = 1000 + next++;
  g.in_channels = 4;
  g.in_h = 9;
  g.in_w = 7;
  g.out_channels = 6;
  g.out_h = 5;
  g.out_w = 3;
  g.kernel_h = 3;
  g.kernel_w = 3;
  g.dilation_h = 2;
  g.dilation_w = 2;
  g.groups = 2;
  return g;
}

/// Routes spdlog's default logger into a string while it lives.
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_);
    auto logger = std::make_shared<spdlog::logger>("captured", sink);
    logger->set_level(spdlog::level::trace);
    logger->set_pattern("%l: %v");
    spdlog::set_default_logger(logger);
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  std::string text() const { return stream_.str(); }
  int warnings() const {
    int n = 0;
    const std::string t = text();
    for (std::size_t at = t.find("warning: "); at != std::string::npos;
         at = t.find("warning: ", at + 1)) {
      ++n;
    }
    return n;
  }

 private:
  std::ostringstream stream_;
  std::shared_ptr<spdlog::logger> previous_;
};

std::size_t choose(const std::vector<ConvAlgorithm>& candidates, ConvTf32 policy,
                   const ConvGeometry& g, ConvPass pass = ConvPass::kForward, int device = 0) {
  return choose_conv_algorithm(candidates, pass, device, g, kLimit, policy);
}

std::string error_of(const std::vector<ConvAlgorithm>& candidates, ConvTf32 policy,
                     const ConvGeometry& g) {
  try {
    (void)choose(candidates, policy, g);
  } catch (const DeviceError& e) {
    return e.what();
  }
  return "(no DeviceError)";
}

TEST(ConvAlgorithmTest, Float32WithinTheLimitComesFirstDeterministicFirst) {
  CapturedLog log;
  const ConvGeometry g = fresh_geometry();
  for (ConvTf32 policy : {ConvTf32::kAllow, ConvTf32::kForbid}) {
    // cuDNN's order puts TF32 and a non-deterministic float32 one first.
    EXPECT_EQ(choose({tf32(7, 0), fma(1, 0, false), fma(2, 100)}, policy, g), 2u);
    // No deterministic one: the first float32 one within the limit.
    EXPECT_EQ(choose({tf32(7, 0), fma(1, 0, false), fma(2, 100, false)}, policy, g), 1u);
    // Over the limit or unsupported: skipped.
    EXPECT_EQ(choose({fma(1, kLimit + 1), unsupported(fma(2, 0)), fma(3, kLimit)}, policy, g), 2u);
  }
  EXPECT_EQ(log.warnings(), 0) << log.text();
}

TEST(ConvAlgorithmTest, AllowFallsBackToTf32WithAWarningOncePerShape) {
  CapturedLog log;
  const ConvGeometry g = fresh_geometry();
  const std::vector<ConvAlgorithm> candidates = {fma(1, kLimit + 1), unsupported(fma(2, 0)),
                                                 tf32(5, kLimit * 2), tf32(6, 4096)};
  EXPECT_EQ(choose(candidates, ConvTf32::kAllow, g), 3u);  // the TF32 one within the limit
  ASSERT_EQ(log.warnings(), 1) << log.text();
  const std::string text = log.text();
  for (const char* part :
       {"conv2d forward on gpu(0)", "input 1", "weight 6x2x3x3", "dilation 2x2", "2 group(s)",
        "no float32 (FMA-math) cuDNN algorithm fits the workspace limit of 1073741824 bytes",
        "algorithm 6 with tensor-op math", "TF32", "a workspace of 4096 bytes",
        "TAGFLOW_CONV_TF32=forbid"}) {
    EXPECT_NE(text.find(part), std::string::npos) << part << " in: " << text;
  }
  // The same shape again: chosen again, not logged again.
  EXPECT_EQ(choose(candidates, ConvTf32::kAllow, g), 3u);
  EXPECT_EQ(log.warnings(), 1) << log.text();
  // Another pass, GPU or geometry is another shape.
  EXPECT_EQ(choose(candidates, ConvTf32::kAllow, g, ConvPass::kBackwardData), 3u);
  EXPECT_EQ(choose(candidates, ConvTf32::kAllow, g, ConvPass::kForward, 1), 3u);
  EXPECT_EQ(choose(candidates, ConvTf32::kAllow, fresh_geometry()), 3u);
  EXPECT_EQ(log.warnings(), 4) << log.text();
  EXPECT_NE(log.text().find("conv2d backward-data on gpu(0)"), std::string::npos) << log.text();
  EXPECT_NE(log.text().find("conv2d forward on gpu(1)"), std::string::npos) << log.text();
}

TEST(ConvAlgorithmTest, AllowRunsTheFirstSupportedWhenNothingFits) {
  CapturedLog log;
  const ConvGeometry g = fresh_geometry();
  EXPECT_EQ(choose({unsupported(tf32(1, 0)), fma(2, kLimit * 4), tf32(3, kLimit * 2)},
                   ConvTf32::kAllow, g),
            1u);
  ASSERT_EQ(log.warnings(), 1) << log.text();
  EXPECT_NE(log.text().find("algorithm 2 with FMA (float32) math and a workspace of 4294967296"),
            std::string::npos)
      << log.text();
}

TEST(ConvAlgorithmTest, ForbidThrowsDeviceErrorSayingWhatToDo) {
  CapturedLog log;
  const ConvGeometry g = fresh_geometry();
  const std::string message =
      error_of({fma(1, kLimit * 3), tf32(2, 0), fma(4, kLimit + 5)}, ConvTf32::kForbid, g);
  for (const char* part :
       {"conv2d forward on gpu(0) (input 1", "weight 6x2x3x3",
        "no float32 (FMA-math) cuDNN algorithm fits the workspace limit of 1073741824 bytes",
        "the smallest float32 one needs 1073741829 bytes", "a TF32 tensor-op one would fit",
        "TAGFLOW_CONV_TF32=forbid", "set TAGFLOW_CONV_TF32=allow", "kMaxWorkspace"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " in: " << message;
  }
  EXPECT_NE(error_of({tf32(2, kLimit * 2)}, ConvTf32::kForbid, g)
                .find("cuDNN offers no float32 one for this geometry; no TF32 one fits either"),
            std::string::npos);
  EXPECT_EQ(log.warnings(), 0) << log.text();
}

TEST(ConvAlgorithmTest, NoSupportedCandidateIsADeviceError) {
  const ConvGeometry g = fresh_geometry();
  for (ConvTf32 policy : {ConvTf32::kAllow, ConvTf32::kForbid}) {
    EXPECT_NE(error_of({unsupported(fma(1, 0)), unsupported(tf32(2, 0))}, policy, g)
                  .find("conv2d forward on gpu(0)"),
              std::string::npos);
    EXPECT_NE(error_of({}, policy, g), "(no DeviceError)");
  }
}

TEST(ConvAlgorithmTest, ThePolicyIsTheProcessEnginesConfiguration) {
  EXPECT_EQ(detail::conv_tf32_policy(), Engine::get().config().conv_tf32);
}

}  // namespace
}  // namespace tagflow

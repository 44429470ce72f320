// EngineConfig (engine/config.h): TAGFLOW_CONV_TF32 is read, listed by
// describe(), and a bad value names the variable, what it accepts and what
// came.

#include "engine/config.h"

#include <cstdlib>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "engine/error.h"

namespace tagflow::testing {
namespace {

/// Sets an environment variable for one test and puts the old value back.
class ScopedEnv {
 public:
  explicit ScopedEnv(const char* name) : name_(name) {
    if (const char* value = std::getenv(name)) saved_ = value;
  }
  ~ScopedEnv() {
    if (saved_) {
      setenv(name_, saved_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  void set(const char* value) const { setenv(name_, value, 1); }
  void unset() const { unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

std::string described(const EngineConfig& config, const std::string& name) {
  for (const auto& [key, value] : config.describe()) {
    if (key == name) return value;
  }
  return "(not listed)";
}

TEST(EngineConfigTest, ConvTf32DefaultsToAllow) {
  ScopedEnv env("TAGFLOW_CONV_TF32");
  env.unset();
  EXPECT_EQ(EngineConfig::defaults().conv_tf32, ConvTf32::kAllow);
  EXPECT_EQ(EngineConfig::from_env().conv_tf32, ConvTf32::kAllow);
  EXPECT_EQ(described(EngineConfig::from_env(), "TAGFLOW_CONV_TF32"), "allow");
  env.set("");  // empty: as if unset, like every other variable
  EXPECT_EQ(EngineConfig::from_env().conv_tf32, ConvTf32::kAllow);
}

TEST(EngineConfigTest, ConvTf32IsReadAndListed) {
  ScopedEnv env("TAGFLOW_CONV_TF32");
  env.set("forbid");
  const EngineConfig forbid = EngineConfig::from_env();
  EXPECT_EQ(forbid.conv_tf32, ConvTf32::kForbid);
  EXPECT_EQ(described(forbid, "TAGFLOW_CONV_TF32"), "forbid");
  env.set("allow");
  const EngineConfig allow = EngineConfig::from_env();
  EXPECT_EQ(allow.conv_tf32, ConvTf32::kAllow);
  EXPECT_EQ(described(allow, "TAGFLOW_CONV_TF32"), "allow");
}

TEST(EngineConfigTest, CpuConvIsReadListedAndCheckedDefaultingToAuto) {
  ScopedEnv env("TAGFLOW_CPU_CONV");
  env.unset();
  EXPECT_EQ(EngineConfig::defaults().cpu_conv, CpuConv::kAuto);
  EXPECT_EQ(described(EngineConfig::from_env(), "TAGFLOW_CPU_CONV"), "auto");
  env.set("im2col");
  EXPECT_EQ(EngineConfig::from_env().cpu_conv, CpuConv::kIm2col);
  EXPECT_EQ(described(EngineConfig::from_env(), "TAGFLOW_CPU_CONV"), "im2col");
  env.set("direct");
  EXPECT_EQ(EngineConfig::from_env().cpu_conv, CpuConv::kDirect);
  EXPECT_EQ(described(EngineConfig::from_env(), "TAGFLOW_CPU_CONV"), "direct");
  env.set("auto");
  EXPECT_EQ(EngineConfig::from_env().cpu_conv, CpuConv::kAuto);
  env.set("onednn");
  try {
    (void)EngineConfig::from_env();
    ADD_FAILURE() << "TAGFLOW_CPU_CONV=onednn was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  R"(TAGFLOW_CPU_CONV: expected "auto", "direct" or "im2col", got "onednn")"),
              std::string::npos)
        << e.what();
  }
}

TEST(EngineConfigTest, CpuGemmIsReadListedAndCheckedDefaultingToAuto) {
  ScopedEnv env("TAGFLOW_CPU_GEMM");
  env.unset();
  EXPECT_EQ(EngineConfig::defaults().cpu_gemm, CpuGemm::kAuto);
  EXPECT_EQ(described(EngineConfig::from_env(), "TAGFLOW_CPU_GEMM"), "auto");
  env.set("openblas");
  EXPECT_EQ(EngineConfig::from_env().cpu_gemm, CpuGemm::kOpenBlas);
  EXPECT_EQ(described(EngineConfig::from_env(), "TAGFLOW_CPU_GEMM"), "openblas");
  env.set("onednn");
  EXPECT_EQ(EngineConfig::from_env().cpu_gemm, CpuGemm::kOneDnn);
  EXPECT_EQ(described(EngineConfig::from_env(), "TAGFLOW_CPU_GEMM"), "onednn");
  env.set("mkl");
  try {
    (void)EngineConfig::from_env();
    ADD_FAILURE() << "TAGFLOW_CPU_GEMM=mkl was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  R"(TAGFLOW_CPU_GEMM: expected "auto", "onednn" or "openblas", got "mkl")"),
              std::string::npos)
        << e.what();
  }
}

TEST(EngineConfigTest, BadConvTf32SaysWhatItAcceptsAndWhatCame) {
  ScopedEnv env("TAGFLOW_CONV_TF32");
  for (const char* bad : {"yes", "Allow", "tf32", "0"}) {
    env.set(bad);
    try {
      (void)EngineConfig::from_env();
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(
          std::string(e.what()),
          std::string("TAGFLOW_CONV_TF32: expected \"allow\" or \"forbid\", got \"") + bad + "\"");
    }
  }
}

}  // namespace
}  // namespace tagflow::testing

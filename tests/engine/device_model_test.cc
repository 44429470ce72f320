// Tests of engine/device_model.h: the built-in profiles against the
// datasheet figures they claim, the kernel and link times on hand-worked
// numbers, the JSON format (round trip, every malformed value refused with
// the key named), and TAGFLOW_SIM_GPUS's N:MODEL[:timing] syntax.

#include "engine/device_model.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/config.h"
#include "engine/error.h"

namespace tagflow {
namespace {

/// Round figures whose times are worked by hand below.
constexpr const char* kTestCard = R"({
  "name": "test-card",
  "description": "round numbers",
  "peak_tflops": {"float32": 1, "tf32": 2, "float16": 4, "bfloat16": 4},
  "memory_gb_per_s": 100,
  "launch_latency_us": 1,
  "memory_gib": 1,
  "host_link": {"kind": "test host", "pinned_gb_per_s": 10, "pageable_gb_per_s": 5,
                "latency_us": 2},
  "peer_link": {"kind": "test peer", "gb_per_s": 50, "latency_us": 1},
  "links": [{"from": 0, "to": 3, "kind": "slow", "gb_per_s": 5, "latency_us": 10}]
})";

std::string message_of(const std::string& json) {
  try {
    DeviceModel::from_json(json, "card.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(DeviceModelTest, BuiltInProfilesCarryTheirDatasheetFigures) {
  const DeviceModel h100 = DeviceModel::builtin("h100-sxm");
  EXPECT_DOUBLE_EQ(h100.peak_flops[0], 66.9e12);
  EXPECT_DOUBLE_EQ(h100.peak_flops[static_cast<int>(MathPrecision::kBFloat16)], 989.4e12);
  EXPECT_DOUBLE_EQ(h100.memory_bandwidth, 3.35e12);
  EXPECT_DOUBLE_EQ(h100.peer.bandwidth, 450e9);  // 900 GB/s both ways
  EXPECT_EQ(h100.memory_bytes, 80ull << 30);
  const DeviceModel a100 = DeviceModel::builtin("a100-sxm");
  EXPECT_DOUBLE_EQ(a100.peak_flops[static_cast<int>(MathPrecision::kFloat16)], 312e12);
  EXPECT_DOUBLE_EQ(a100.memory_bandwidth, 2.039e12);
  const DeviceModel l4 = DeviceModel::builtin("l4");
  EXPECT_DOUBLE_EQ(l4.memory_bandwidth, 300e9);
  EXPECT_EQ(l4.memory_bytes, 24ull << 30);
  for (const std::string& name : DeviceModel::builtin_names()) {
    const DeviceModel m = DeviceModel::builtin(name);
    EXPECT_EQ(m.name, name);
    // Every figure positive; tensor cores never slower than CUDA cores.
    for (double peak : m.peak_flops) EXPECT_GT(peak, 0) << name;
    EXPECT_GE(m.peak_flops[1], m.peak_flops[0]) << name;
    EXPECT_GT(m.host_pinned.bandwidth, m.host_pageable.bandwidth) << name;
  }
}

TEST(DeviceModelTest, UnknownProfileNamesTheKnownOnes) {
  try {
    DeviceModel::builtin("h200");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("h100-sxm, a100-sxm, l4"), std::string::npos) << what;
    EXPECT_NE(what.find("\"h200\""), std::string::npos) << what;
  }
  EXPECT_THROW(DeviceModel::resolve("/no/such/card.json"), Error);
}

TEST(DeviceModelTest, KernelTimeIsTheSlowerOfComputeAndMemoryPlusLaunch) {
  const DeviceModel m = DeviceModel::from_json(kTestCard);
  // 1e9 flops at 1 TFLOP/s: 1 ms; 1e6 bytes at 100 GB/s: 10 us; + 1 us.
  EXPECT_NEAR(m.kernel_seconds({.flops = 1e9, .bytes = 1e6}), 1.001e-3, 1e-12);
  // Memory-bound: 1e9 bytes at 100 GB/s = 10 ms.
  EXPECT_NEAR(m.kernel_seconds({.flops = 1e6, .bytes = 1e9}), 10.001e-3, 1e-12);
  // float16 runs at its own peak (4 TFLOP/s).
  EXPECT_NEAR(m.kernel_seconds({.flops = 4e9, .bytes = 0, .precision = MathPrecision::kFloat16}),
              1.001e-3, 1e-12);
  // An empty kernel still costs its launch.
  EXPECT_NEAR(m.kernel_seconds({}), 1e-6, 1e-15);
}

TEST(DeviceModelTest, TheReadmesComparisonFigures) {
  const DeviceModel h100 = DeviceModel::builtin("h100-sxm");
  // A 4096^3 bfloat16 product: compute-bound, 139 us at 989.4 TFLOP/s.
  const double n = 4096;
  const double gemm = h100.kernel_seconds(
      {.flops = 2 * n * n * n, .bytes = 3 * n * n * 2, .precision = MathPrecision::kBFloat16});
  EXPECT_NEAR(gemm - h100.launch_latency, 2 * n * n * n / 989.4e12, 1e-12);
  EXPECT_NEAR(gemm * 1e6, 141.9, 0.1);
  // NCCL's bus bandwidth of a 1 GiB all-reduce over 8 GPUs: 445 GB/s.
  const std::vector<int> eight = {0, 1, 2, 3, 4, 5, 6, 7};
  const double bytes = 1 << 30;
  const double busbw = bytes / h100.allreduce_seconds(eight, bytes) * 2 * 7 / 8;
  EXPECT_NEAR(busbw / 1e9, 445.2, 0.5);
  // The ring's time by hand: launch + 2(n-1) (latency + bytes / (n bw)).
  EXPECT_NEAR(h100.allreduce_seconds(eight, bytes), 3e-6 + 14 * (3e-6 + bytes / (8 * 450e9)),
              1e-12);
  EXPECT_NEAR(h100.broadcast_seconds(eight, bytes), 3e-6 + 7 * 3e-6 + bytes / 450e9, 1e-12);
  EXPECT_DOUBLE_EQ(h100.allreduce_seconds(std::vector<int>{3}, bytes), h100.launch_latency);
}

TEST(DeviceModelTest, PeerLinksFollowTheTopology) {
  const DeviceModel m = DeviceModel::from_json(kTestCard);
  EXPECT_EQ(m.peer_link(0, 1).kind, "test peer");
  EXPECT_EQ(m.peer_link(0, 3).kind, "slow");
  EXPECT_EQ(m.peer_link(3, 0).kind, "test peer");  // one direction only
  EXPECT_NEAR(m.peer_link(0, 3).seconds(5e6), 10e-6 + 1e-3, 1e-12);
}

TEST(DeviceModelTest, JsonRoundTripsAndFilesLoad) {
  const DeviceModel m = DeviceModel::from_json(kTestCard);
  const DeviceModel again = DeviceModel::from_json(m.to_json());
  EXPECT_EQ(again.name, m.name);
  EXPECT_EQ(again.peak_flops, m.peak_flops);
  EXPECT_DOUBLE_EQ(again.memory_bandwidth, m.memory_bandwidth);
  EXPECT_EQ(again.memory_bytes, m.memory_bytes);
  EXPECT_DOUBLE_EQ(again.host_pageable.bandwidth, 5e9);
  ASSERT_EQ(again.links.size(), 1u);
  EXPECT_EQ(again.links[0].to, 3);
  for (const std::string& name : DeviceModel::builtin_names()) {
    const DeviceModel b = DeviceModel::builtin(name);
    EXPECT_EQ(DeviceModel::from_json(b.to_json()).peak_flops, b.peak_flops) << name;
  }
  const auto path = std::filesystem::temp_directory_path() / "tagflow_test_card.json";
  std::ofstream(path) << kTestCard;
  EXPECT_EQ(DeviceModel::resolve(path.string()).name, "test-card");
  std::filesystem::remove(path);
}

TEST(DeviceModelTest, MalformedFilesNameTheKey) {
  EXPECT_NE(message_of("{").find("card.json: not valid JSON"), std::string::npos);
  EXPECT_NE(message_of("[1]").find("expected an object"), std::string::npos);
  std::string text = kTestCard;
  auto with = [&](const std::string& from, const std::string& to) {
    std::string changed = text;
    changed.replace(changed.find(from), from.size(), to);
    return message_of(changed);
  };
  EXPECT_NE(with("\"memory_gb_per_s\": 100", "\"memory_gb_per_s\": 0").find("memory_gb_per_s"),
            std::string::npos);
  EXPECT_NE(with("\"float16\": 4,", "").find("peak_tflops.float16"), std::string::npos);
  EXPECT_NE(with("\"latency_us\": 2", "\"latency_us\": -2").find("host_link.latency_us"),
            std::string::npos);
  EXPECT_NE(with("\"gb_per_s\": 50", "\"gb_per_s\": \"fast\"").find("peer_link.gb_per_s"),
            std::string::npos);
  EXPECT_NE(with("\"to\": 3", "\"to\": 0").find("to itself"), std::string::npos);
  EXPECT_NE(with("\"from\": 0", "\"from\": -1").find("links[0].from"), std::string::npos);
  EXPECT_NE(with("\"name\": \"test-card\"", "\"name\": \"\"").find("name"), std::string::npos);
}

TEST(DeviceModelTest, SimGpusSyntax) {
  EngineConfig c = EngineConfig::defaults();
  c.set_sim_gpus("4");
  EXPECT_EQ(c.sim_gpus, 4);
  EXPECT_FALSE(c.sim_model.has_value());
  EXPECT_EQ(c.sim_gpus_text(), "4");
  c.set_sim_gpus("8:h100-sxm");
  EXPECT_EQ(c.sim_gpus, 8);
  ASSERT_TRUE(c.sim_model.has_value());
  EXPECT_EQ(c.sim_model->name, "h100-sxm");
  EXPECT_FALSE(c.sim_timing_only);
  c.set_sim_gpus("64:a100-sxm:timing");
  EXPECT_EQ(c.sim_model->name, "a100-sxm");
  EXPECT_TRUE(c.sim_timing_only);
  EXPECT_EQ(c.sim_gpus_text(), "64:a100-sxm:timing");
  c.set_sim_gpus("2:l4:compute");
  EXPECT_FALSE(c.sim_timing_only);
  for (const char* bad : {"", "x", "65", "-1", "2:", "0:h100-sxm", "2:h200", "2::timing",
                          "2:timing", "8:h100-sxm:fast"}) {
    EngineConfig before = c;
    try {
      c.set_sim_gpus(bad);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("TAGFLOW_SIM_GPUS"), std::string::npos) << e.what();
    }
    // A refused value changes nothing.
    EXPECT_EQ(c.sim_gpus_text(), before.sim_gpus_text()) << bad;
  }
  // An unknown mode is named as one, not looked for as a file "h100-sxm:foo".
  try {
    c.set_sim_gpus("2:h100-sxm:foo");
    ADD_FAILURE() << "accepted an unknown mode";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown mode \"foo\""), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("cannot open"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tagflow

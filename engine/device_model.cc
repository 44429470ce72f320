#include "engine/device_model.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/error.h"

namespace tagflow {

namespace {

constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;
constexpr double kMicro = 1e-6;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

/// Figures from NVIDIA's datasheets (dense, without sparsity); the launch
/// and link latencies and pageable bandwidths are this profile's assumptions
/// (docs/gpus.md, "Modelled GPUs").
DeviceModel h100_sxm() {
  DeviceModel m;
  m.name = "h100-sxm";
  m.description = "NVIDIA H100 SXM5 80GB (HBM3), NVLink 4 through NVSwitch, PCIe 5.0 x16 host";
  m.peak_flops = {66.9 * kTera, 494.7 * kTera, 989.4 * kTera, 989.4 * kTera};
  m.memory_bandwidth = 3350 * kGiga;
  m.launch_latency = 3 * kMicro;
  m.memory_bytes = 80 * kGiB;
  m.host_pinned = {"PCIe 5.0 x16", 64 * kGiga, 8 * kMicro};
  m.host_pageable = {"PCIe 5.0 x16, pageable (staged)", 32 * kGiga, 12 * kMicro};
  m.peer = {"NVLink 4 (18 links, NVSwitch)", 450 * kGiga, 3 * kMicro};
  return m;
}

DeviceModel a100_sxm() {
  DeviceModel m;
  m.name = "a100-sxm";
  m.description = "NVIDIA A100 SXM4 80GB (HBM2e), NVLink 3 through NVSwitch, PCIe 4.0 x16 host";
  m.peak_flops = {19.5 * kTera, 156 * kTera, 312 * kTera, 312 * kTera};
  m.memory_bandwidth = 2039 * kGiga;
  m.launch_latency = 3 * kMicro;
  m.memory_bytes = 80 * kGiB;
  m.host_pinned = {"PCIe 4.0 x16", 32 * kGiga, 8 * kMicro};
  m.host_pageable = {"PCIe 4.0 x16, pageable (staged)", 16 * kGiga, 12 * kMicro};
  m.peer = {"NVLink 3 (12 links, NVSwitch)", 300 * kGiga, 3 * kMicro};
  return m;
}

DeviceModel l4() {
  DeviceModel m;
  m.name = "l4";
  m.description = "NVIDIA L4 24GB (GDDR6), PCIe 4.0 x16 card, peers over PCIe";
  m.peak_flops = {30.3 * kTera, 60 * kTera, 121 * kTera, 121 * kTera};
  m.memory_bandwidth = 300 * kGiga;
  m.launch_latency = 3 * kMicro;
  m.memory_bytes = 24 * kGiB;
  m.host_pinned = {"PCIe 4.0 x16", 32 * kGiga, 8 * kMicro};
  m.host_pageable = {"PCIe 4.0 x16, pageable (staged)", 16 * kGiga, 12 * kMicro};
  m.peer = {"PCIe 4.0 x16 (peer to peer)", 32 * kGiga, 10 * kMicro};
  return m;
}

using Json = nlohmann::json;

class Reader {
 public:
  explicit Reader(std::string_view where) : where_(where) {}

  const Json& field(const Json& object, const std::string& key, const std::string& path) const {
    TAGFLOW_CHECK(object.is_object(), "{}: expected an object at \"{}\", got {}", where_, path,
                  object.type_name());
    auto it = object.find(key);
    TAGFLOW_CHECK(it != object.end(), "{}: missing \"{}\"", where_, join(path, key));
    return *it;
  }
  /// A number in (0, max], or [0, max] when `zero_allowed`.
  double number(const Json& object, const std::string& key, const std::string& path, double max,
                bool zero_allowed = false) const {
    const Json& value = field(object, key, path);
    TAGFLOW_CHECK(value.is_number(), "{}: expected a number for \"{}\", got {}", where_,
                  join(path, key), value.dump());
    const double x = value.get<double>();
    TAGFLOW_CHECK(std::isfinite(x) && (x > 0 || (zero_allowed && x == 0)) && x <= max,
                  "{}: expected \"{}\" in {}0, {}], got {}", where_, join(path, key),
                  zero_allowed ? "[" : "(", max, value.dump());
    return x;
  }
  std::string text(const Json& object, const std::string& key, const std::string& path) const {
    const Json& value = field(object, key, path);
    TAGFLOW_CHECK(value.is_string(), "{}: expected a string for \"{}\", got {}", where_,
                  join(path, key), value.dump());
    return value.get<std::string>();
  }
  int index(const Json& object, const std::string& key, const std::string& path) const {
    const Json& value = field(object, key, path);
    TAGFLOW_CHECK(value.is_number_integer() && value.get<std::int64_t>() >= 0 &&
                      value.get<std::int64_t>() < 4096,
                  "{}: expected a GPU index in [0, 4096) for \"{}\", got {}", where_,
                  join(path, key), value.dump());
    return value.get<int>();
  }
  LinkModel link(const Json& object, const std::string& path, const char* bandwidth_key) const {
    return {text(object, "kind", path), number(object, bandwidth_key, path, 1e6) * kGiga,
            number(object, "latency_us", path, 1e6, true) * kMicro};
  }
  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

 private:
  std::string_view where_;
};

}  // namespace

const char* to_string(MathPrecision precision) {
  switch (precision) {
    case MathPrecision::kFloat32:
      return "float32";
    case MathPrecision::kTensorFloat32:
      return "tf32";
    case MathPrecision::kFloat16:
      return "float16";
    case MathPrecision::kBFloat16:
      return "bfloat16";
  }
  return "?";
}

double DeviceModel::kernel_seconds(const KernelWork& work) const {
  const double peak = peak_flops[static_cast<std::size_t>(work.precision)];
  const double compute = work.flops > 0 ? work.flops / peak : 0;
  const double memory = work.bytes > 0 ? work.bytes / memory_bandwidth : 0;
  return std::max(compute, memory) + launch_latency;
}

const LinkModel& DeviceModel::peer_link(int from, int to) const {
  for (const PeerLink& l : links) {
    if (l.from == from && l.to == to) return l.link;
  }
  return peer;
}

namespace {

/// The slowest link of the ring gpus[0] -> gpus[1] -> ... -> gpus[0].
LinkModel slowest_link(const DeviceModel& m, std::span<const int> gpus) {
  LinkModel slowest = m.peer_link(gpus[0], gpus[1 % gpus.size()]);
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const LinkModel& l = m.peer_link(gpus[i], gpus[(i + 1) % gpus.size()]);
    slowest.bandwidth = std::min(slowest.bandwidth, l.bandwidth);
    slowest.latency = std::max(slowest.latency, l.latency);
  }
  return slowest;
}

}  // namespace

double DeviceModel::allreduce_seconds(std::span<const int> gpus, double bytes) const {
  const auto n = static_cast<double>(gpus.size());
  if (gpus.size() < 2) return launch_latency;
  const LinkModel link = slowest_link(*this, gpus);
  return launch_latency + 2 * (n - 1) * (link.latency + bytes / (n * link.bandwidth));
}

double DeviceModel::broadcast_seconds(std::span<const int> gpus, double bytes) const {
  const auto n = static_cast<double>(gpus.size());
  if (gpus.size() < 2) return launch_latency;
  const LinkModel link = slowest_link(*this, gpus);
  return launch_latency + (n - 1) * link.latency + bytes / link.bandwidth;
}

std::vector<std::string> DeviceModel::builtin_names() { return {"h100-sxm", "a100-sxm", "l4"}; }

DeviceModel DeviceModel::builtin(std::string_view name) {
  if (name == "h100-sxm") return h100_sxm();
  if (name == "a100-sxm") return a100_sxm();
  if (name == "l4") return l4();
  detail::throw_error("device model: expected one of {} or a JSON file, got \"{}\"",
                      fmt::join(builtin_names(), ", "), name);
}

DeviceModel DeviceModel::resolve(std::string_view name_or_path) {
  const std::vector<std::string> names = builtin_names();
  if (std::find(names.begin(), names.end(), name_or_path) != names.end()) {
    return builtin(name_or_path);
  }
  return from_file(std::filesystem::path(name_or_path));
}

DeviceModel DeviceModel::from_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  TAGFLOW_CHECK(in.good(),
                "device model \"{}\": cannot open the file (expected one of {} or a "
                "readable JSON file)",
                path.string(), fmt::join(builtin_names(), ", "));
  std::ostringstream text;
  text << in.rdbuf();
  TAGFLOW_CHECK(!in.bad(), "device model \"{}\": cannot read the file", path.string());
  return from_json(text.str(), fmt::format("device model \"{}\"", path.string()));
}

DeviceModel DeviceModel::from_json(std::string_view text, std::string_view where) {
  const Json root = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  TAGFLOW_CHECK(!root.is_discarded(), "{}: not valid JSON", where);
  const Reader r(where);
  DeviceModel m;
  m.name = r.text(root, "name", "");
  TAGFLOW_CHECK(!m.name.empty() && m.name.size() <= 64, "{}: expected a name of 1 to 64 characters",
                where);
  if (root.is_object() && root.contains("description")) {
    m.description = r.text(root, "description", "");
  }
  const Json& peak = r.field(root, "peak_tflops", "");
  for (int p = 0; p < kNumMathPrecisions; ++p) {
    m.peak_flops[static_cast<std::size_t>(p)] =
        r.number(peak, to_string(static_cast<MathPrecision>(p)), "peak_tflops", 1e6) * kTera;
  }
  m.memory_bandwidth = r.number(root, "memory_gb_per_s", "", 1e6) * kGiga;
  m.launch_latency = r.number(root, "launch_latency_us", "", 1e6, true) * kMicro;
  m.memory_bytes =
      static_cast<std::uint64_t>(r.number(root, "memory_gib", "", 1 << 20) * double(kGiB));
  const Json& host = r.field(root, "host_link", "");
  m.host_pinned = r.link(host, "host_link", "pinned_gb_per_s");
  m.host_pageable = m.host_pinned;
  m.host_pageable.kind += ", pageable (staged)";
  m.host_pageable.bandwidth = r.number(host, "pageable_gb_per_s", "host_link", 1e6) * kGiga;
  m.peer = r.link(r.field(root, "peer_link", ""), "peer_link", "gb_per_s");
  if (root.contains("links")) {
    const Json& links = root["links"];
    TAGFLOW_CHECK(links.is_array(), "{}: expected an array for \"links\", got {}", where,
                  links.type_name());
    for (std::size_t i = 0; i < links.size(); ++i) {
      const std::string path = fmt::format("links[{}]", i);
      PeerLink l{r.index(links[i], "from", path), r.index(links[i], "to", path),
                 r.link(links[i], path, "gb_per_s")};
      TAGFLOW_CHECK(l.from != l.to, "{}: \"{}\" links gpu({}) to itself", where, path, l.from);
      m.links.push_back(std::move(l));
    }
  }
  return m;
}

std::string DeviceModel::to_json() const {
  auto link_json = [](const LinkModel& l, const char* bandwidth_key) {
    return Json{
        {"kind", l.kind}, {bandwidth_key, l.bandwidth / kGiga}, {"latency_us", l.latency / kMicro}};
  };
  Json peak = Json::object();
  for (int p = 0; p < kNumMathPrecisions; ++p) {
    peak[to_string(static_cast<MathPrecision>(p))] =
        peak_flops[static_cast<std::size_t>(p)] / kTera;
  }
  Json host = link_json(host_pinned, "pinned_gb_per_s");
  host["pageable_gb_per_s"] = host_pageable.bandwidth / kGiga;
  Json root{{"name", name},
            {"description", description},
            {"peak_tflops", peak},
            {"memory_gb_per_s", memory_bandwidth / kGiga},
            {"launch_latency_us", launch_latency / kMicro},
            {"memory_gib", static_cast<double>(memory_bytes) / double(kGiB)},
            {"host_link", host},
            {"peer_link", link_json(peer, "gb_per_s")}};
  Json list = Json::array();
  for (const PeerLink& l : links) {
    Json entry = link_json(l.link, "gb_per_s");
    entry["from"] = l.from;
    entry["to"] = l.to;
    list.push_back(entry);
  }
  if (!list.empty()) root["links"] = list;
  return root.dump(2);
}

}  // namespace tagflow

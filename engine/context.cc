#include "engine/context.h"

#include <charconv>
#include <ostream>

#include "engine/error.h"

namespace tagflow {

std::string Context::str() const {
  switch (type) {
    case DeviceType::kCPU:
      return fmt::format("cpu({})", index);
    case DeviceType::kGPU:
      return fmt::format("gpu({})", index);
    case DeviceType::kCPUPinned:
      return fmt::format("cpu_pinned({})", index);
  }
  return fmt::format("device{}({})", static_cast<int>(type), index);
}

Context Context::parse(std::string_view text) {
  const std::string_view original = text;
  auto fail = [&]() -> Context {
    detail::throw_error(
        "Context::parse: expected \"cpu\", \"gpu\" or \"cpu_pinned\" with an optional "
        "\":index\" or \"(index)\" (e.g. \"gpu:1\"), got \"{}\"",
        original);
  };
  Context ctx;
  std::string_view rest;
  // Longest name first: "cpu_pinned" starts with "cpu".
  if (text.starts_with("cpu_pinned")) {
    ctx.type = DeviceType::kCPUPinned;
    rest = text.substr(10);
  } else if (text.starts_with("cpu")) {
    ctx.type = DeviceType::kCPU;
    rest = text.substr(3);
  } else if (text.starts_with("gpu")) {
    ctx.type = DeviceType::kGPU;
    rest = text.substr(3);
  } else {
    return fail();
  }
  if (rest.empty()) return ctx;
  std::string_view digits;
  if (rest.front() == ':') {
    digits = rest.substr(1);
  } else if (rest.front() == '(' && rest.back() == ')' && rest.size() >= 2) {
    digits = rest.substr(1, rest.size() - 2);
  } else {
    return fail();
  }
  if (digits.empty()) return fail();
  const char* end = digits.data() + digits.size();
  auto [ptr, ec] = std::from_chars(digits.data(), end, ctx.index);
  if (ec != std::errc{} || ptr != end || ctx.index < 0) return fail();
  return ctx;
}

std::ostream& operator<<(std::ostream& os, const Context& ctx) { return os << ctx.str(); }

}  // namespace tagflow

#include "engine/detail/launch_group.h"

#include "engine/error.h"

namespace tagflow::detail {

void check_launch_group(const LaunchGroup& group) {
  for (std::size_t i = 0; i < group.parts.size(); ++i) {
    const Operation& part = group.parts[i];
    TAGFLOW_CHECK(static_cast<bool>(part.fn), "push_group: part {} ('{}') has no closure", i,
                  part.name);
    TAGFLOW_CHECK(!part.fn.is_async(),
                  "push_group: part {} ('{}') is asynchronous; expected a closure that launches "
                  "its device work and returns",
                  i, part.name);
    for (VarHandle v : part.reads) {
      TAGFLOW_CHECK(v != nullptr, "push_group: part {} ('{}') lists a null variable in reads", i,
                    part.name);
    }
    for (VarHandle v : part.writes) {
      TAGFLOW_CHECK(v != nullptr, "push_group: part {} ('{}') lists a null variable in writes", i,
                    part.name);
    }
    for (std::size_t j = 0; j < i; ++j) {
      TAGFLOW_CHECK(group.parts[j].ctx != part.ctx,
                    "push_group: parts {} and {} are both on {}; expected one part per device", j,
                    i, part.ctx.str());
    }
  }
}

}  // namespace tagflow::detail

#pragma once
// What every engine checks of a LaunchGroup before it pushes any part (Note
// [Launch groups] in engine/engine.h). Internal to engine/.

#include "engine/operation.h"

namespace tagflow::detail {

/// Throws tagflow::Error unless every part has a synchronous closure, lists
/// no null variable, and is the group's only part on its device. Whether the
/// devices exist is the engine's to check.
void check_launch_group(const LaunchGroup& group);

}  // namespace tagflow::detail

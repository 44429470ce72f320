#pragma once
// `tagflow info`: devices, configuration and build, in one place.

namespace tagflow::tools {

/// Prints what `tagflow info` shows; returns the process exit code.
int run_info();

}  // namespace tagflow::tools

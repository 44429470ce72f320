#pragma once
// What `tagflow info` shows, as text: devices, configuration (environment)
// and build. Public API only, so that the Python module prints the same
// (tagflow.info()); `tagflow info` adds the MPI library, which lives in
// libtagflow_dist.

#include <string>

namespace tagflow::tools {

/// The sections "Devices", "Configuration" and "Build" (its
/// last line NCCL's availability).
std::string info_text();

}  // namespace tagflow::tools

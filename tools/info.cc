#include "tools/info.h"

#include <fmt/format.h>

#include "tagflow/dist.h"
#include "tools/info_text.h"

namespace tagflow::tools {

int run_info() {
  fmt::print("{}", info_text());
  fmt::print("  {:<20} {}\n", "MPI", dist::mpi_library_version());
  return 0;
}

}  // namespace tagflow::tools

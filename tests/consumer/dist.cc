// The dist component, linked through find_package(tagflow COMPONENTS dist):
// whether this build has MPI, and which library it is.
#include <tagflow/dist.h>

#include <cstdio>

int main() {
  using namespace tagflow;
  std::printf("dist: MPI %s (%s), NCCL %s\n", dist::mpi_available() ? "available" : "not built",
              dist::mpi_available() ? dist::mpi_library_version().c_str() : "-",
              dist::nccl_available() ? "available" : "not available");
  return 0;
}

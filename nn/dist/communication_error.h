#pragma once
// CommunicationError: communication between devices or processes failed. MPI
// or NCCL reported an error, a collective timed out (a process is gone or
// stuck), or another process's input carried an error (Note [Failures and
// timeouts] in nn/dist/mpi_communicator.h, Note [NCCL failures and timeouts]
// in nn/dist/nccl_aggregator.h).
//
// Threads: safe to call concurrently. A CommunicationError is immutable once
// thrown.

#include "engine/error.h"

namespace tagflow::dist {

class CommunicationError : public Error {
 public:
  using Error::Error;
};

}  // namespace tagflow::dist

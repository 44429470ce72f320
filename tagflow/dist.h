#pragma once
// tagflow across processes and with NCCL, opt in: MPI communicators, the MPI
// gradient aggregator and NCCL cliques. Programs that include it link
// tagflow::dist (`find_package(tagflow COMPONENTS dist)`), which brings MPI.
//
//   auto world = dist::MpiCommunicator::world();
//   nn::Trainer trainer(net.collect_params(), "sgd", {.learning_rate = 0.1},
//                       std::make_shared<dist::MpiAggregator>(world));

#include "tagflow/tagflow.h"

#include "nn/dist/mpi_aggregator.h"
#include "nn/dist/mpi_communicator.h"
#include "nn/dist/nccl_aggregator.h"

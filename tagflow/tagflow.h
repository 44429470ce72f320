#pragma once
// tagflow: the one header an embedding program includes. It brings every
// public header of the library, layer by layer; what is under a detail/
// folder or ops/kernels/ is internal and not installed. Training across
// processes (MPI) and NCCL between GPUs come through <tagflow/dist.h>.

#include "tagflow/version.h"

// engine: devices, variables, operations, profiling
#include "engine/config.h"
#include "engine/context.h"
#include "engine/dependency_state.h"
#include "engine/device_model.h"
#include "engine/dump_signal.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "engine/gpu_info.h"
#include "engine/inline_function.h"
#include "engine/operation.h"
#include "engine/operation_handle.h"
#include "engine/profiler.h"
#include "engine/schedule.h"
#include "engine/small_vector.h"
#include "engine/splitmix.h"
#include "engine/stream.h"
#include "engine/watchdog.h"

// storage: memory per device
#include "storage/allocator.h"
#include "storage/memory_stats.h"
#include "storage/storage.h"

// ops: arrays, operators, autograd
#include "ops/autograd.h"
#include "ops/autograd_function.h"
#include "ops/batch_norm.h"
#include "ops/conv.h"
#include "ops/creation.h"
#include "ops/custom_op.h"
#include "ops/device.h"
#include "ops/dropout.h"
#include "ops/dtype.h"
#include "ops/elementwise.h"
#include "ops/half.h"
#include "ops/join.h"
#include "ops/kernel_args.h"
#include "ops/linalg.h"
#include "ops/ndarray.h"
#include "ops/one_hot.h"
#include "ops/optimizer_update.h"
#include "ops/pool.h"
#include "ops/priority.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/softmax.h"
#include "ops/softmax_cross_entropy.h"
#include "ops/transpose.h"

// nn/io: parameter and data files
#include "nn/io/file_error.h"
#include "nn/io/idx.h"
#include "nn/io/safetensors.h"

// nn/data: data sets and loading
#include "nn/data/data_loader.h"
#include "nn/data/dataset.h"
#include "nn/data/fashion_mnist.h"
#include "nn/data/host_array.h"
#include "nn/data/transforms.h"

// nn/dist: sums over devices
#include "nn/dist/communication_error.h"
#include "nn/dist/gradient_aggregator.h"
#include "nn/dist/process_group.h"
#include "nn/dist/ring_aggregator.h"

// nn: blocks, losses, optimisation
#include "nn/amp.h"
#include "nn/basic_layers.h"
#include "nn/block.h"
#include "nn/conv_layers.h"
#include "nn/initializer.h"
#include "nn/loss.h"
#include "nn/lr_schedule.h"
#include "nn/optimizer.h"
#include "nn/parameter.h"
#include "nn/split.h"
#include "nn/trainer.h"

// nn/models: networks written with the above
#include "nn/models/lenet.h"
#include "nn/models/mlp.h"
#include "nn/models/resnet.h"

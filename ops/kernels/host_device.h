#pragma once
// TAGFLOW_HOST_DEVICE marks functions compiled for both the host and CUDA
// devices: a kernel body written once serves the CPU and the GPU kernels.

#if defined(__CUDACC__)
#ifndef TAGFLOW_HOST_DEVICE  // ops/half.h may have defined it, the same way
#define TAGFLOW_HOST_DEVICE __host__ __device__
#endif
#define TAGFLOW_INLINE __forceinline__
#else
#ifndef TAGFLOW_HOST_DEVICE
#define TAGFLOW_HOST_DEVICE
#endif
#define TAGFLOW_INLINE inline
#endif

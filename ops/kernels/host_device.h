#pragma once
// TAGFLOW_HOST_DEVICE marks functions compiled for both the host and CUDA
// devices: a kernel body written once serves the CPU and the GPU kernels.

#if defined(__CUDACC__)
#define TAGFLOW_HOST_DEVICE __host__ __device__
#define TAGFLOW_INLINE __forceinline__
#else
#define TAGFLOW_HOST_DEVICE
#define TAGFLOW_INLINE inline
#endif

// Lets g++ build a CUDA kernel source for the CPU, so CI (no GPU) runs the kernel's real logic.
// Include this, then the .cu file, then call SHIM_LAUNCH(kernel, grid, block, args...): it runs every
// (block, thread) of the grid in turn. Kernels that use shared memory or __syncthreads are out of scope.
#pragma once
#include <algorithm>
#include <cmath>

#define __global__
#define __device__
#define __forceinline__ inline

struct dim3 { unsigned int x = 1, y = 1, z = 1; };
struct alignas(16) float4 { float x, y, z, w; };
static thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

using std::min;
using std::max;

#define SHIM_LAUNCH(kernel, grid, block, ...)                                     \
    do {                                                                          \
        gridDim.x = (grid); blockDim.x = (block);                                 \
        for (blockIdx.x = 0; blockIdx.x < gridDim.x; ++blockIdx.x)                \
            for (threadIdx.x = 0; threadIdx.x < blockDim.x; ++threadIdx.x)        \
                kernel(__VA_ARGS__);                                              \
    } while (0)

// Host emulation of the CUDA built-ins the generated kernels use, so that the very kernel source
// revdiff sends to NVRTC also compiles as C++ and runs on the CPU, one "thread" after another.
#pragma once
#define RD_HOST
#include <cmath>
#include <cstdlib>
using namespace std;
#define __device__
#define __global__
#define __forceinline__
#define __noinline__
struct rd_dim3 { unsigned x, y, z; };
static rd_dim3 threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0}, blockDim = {1, 1, 1};
static inline long long llrint_host(double x) { return std::llrint(x); }

/* polypy's stand-in for c10/cuda/CUDAException.h in translated PyTorch extensions: a launch
 * that polypy's runtime refused (a bad configuration) is reported as PyTorch reports it, by a
 * c10::Error naming the CUDA error. */
#pragma once
#pragma GCC system_header /* PyTorch's side, not the extension's: never walked for kernels */
#include <cuda_runtime.h>
#include <c10/util/Exception.h>

#define C10_CUDA_CHECK(EXPR)                                                              \
  do {                                                                                    \
    const cudaError_t polypy_err_ = (EXPR);                                               \
    TORCH_CHECK(polypy_err_ == cudaSuccess, "CUDA error: ", cudaGetErrorString(polypy_err_)); \
  } while (0)
#define C10_CUDA_CHECK_WARN(EXPR) ((void)(EXPR))
#define C10_CUDA_KERNEL_LAUNCH_CHECK() C10_CUDA_CHECK(cudaGetLastError())

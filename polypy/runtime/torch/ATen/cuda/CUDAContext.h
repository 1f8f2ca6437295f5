/* polypy's stand-in for ATen/cuda/CUDAContext.h in translated PyTorch extensions: the current
 * stream is polypy's runtime stream (every launch on it completes before it returns). */
#pragma once
#pragma GCC system_header /* PyTorch's side, not the extension's: never walked for kernels */
#include <cuda_runtime.h>
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

namespace at {
namespace cuda {
using c10::cuda::CUDAStream;
using c10::cuda::getCurrentCUDAStream;
using c10::cuda::getDefaultCUDAStream;
using c10::cuda::getStreamFromPool;
using c10::cuda::setCurrentCUDAStream;
inline int64_t getNumGPUs() { return 1; }
inline bool is_available() { return true; }
inline DeviceIndex current_device() { return 0; }
}  // namespace cuda
}  // namespace at

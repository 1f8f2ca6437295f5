/* polypy's stand-in for c10/cuda/CUDAStream.h in translated PyTorch extensions (see
 * docs/torch_extensions.md). The CPU is the CUDA device: a stream is polypy's runtime stream,
 * whose every operation completes before it returns, so work on any stream runs in program
 * order (one valid CUDA ordering). */
#pragma once
#pragma GCC system_header /* PyTorch's side, not the extension's: never walked for kernels */
#include <cuda_runtime.h>
#include <c10/core/Device.h>

namespace c10 {
namespace cuda {

class CUDAStream {
 public:
  CUDAStream() = default;
  explicit CUDAStream(cudaStream_t stream) : stream_(stream) {}
  cudaStream_t stream() const { return stream_; }
  operator cudaStream_t() const { return stream_; }
  DeviceIndex device_index() const { return 0; }
  Device device() const { return Device(DeviceType::CPU); }
  bool query() const { return true; }
  void synchronize() const { cudaStreamSynchronize(stream_); }
  bool operator==(const CUDAStream& other) const { return stream_ == other.stream_; }
  bool operator!=(const CUDAStream& other) const { return stream_ != other.stream_; }

 private:
  cudaStream_t stream_ = 0;
};

inline CUDAStream getCurrentCUDAStream(DeviceIndex = -1) { return CUDAStream(); }
inline CUDAStream getDefaultCUDAStream(DeviceIndex = -1) { return CUDAStream(); }
inline CUDAStream getStreamFromPool(bool = false, DeviceIndex = -1) { return CUDAStream(); }
inline void setCurrentCUDAStream(CUDAStream) {}

}  // namespace cuda
}  // namespace c10

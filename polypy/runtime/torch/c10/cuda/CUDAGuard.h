/* polypy's stand-in for c10/cuda/CUDAGuard.h in translated PyTorch extensions: the CPU is the
 * one CUDA device, so selecting a device (or a stream) changes nothing. */
#pragma once
#pragma GCC system_header /* PyTorch's side, not the extension's: never walked for kernels */
#include <optional>
#include <c10/core/Device.h>
#include <c10/cuda/CUDAStream.h>

namespace c10 {
namespace cuda {

struct CUDAGuard {
  explicit CUDAGuard(DeviceIndex) {}
  explicit CUDAGuard(Device) {}
  CUDAGuard(const CUDAGuard&) = delete;
  CUDAGuard& operator=(const CUDAGuard&) = delete;
  void set_device(Device) {}
  void reset_device(Device) {}
  void set_index(DeviceIndex) {}
  Device original_device() const { return Device(DeviceType::CPU); }
  Device current_device() const { return Device(DeviceType::CPU); }
};

struct OptionalCUDAGuard {
  OptionalCUDAGuard() = default;
  explicit OptionalCUDAGuard(std::optional<Device>) {}
  explicit OptionalCUDAGuard(std::optional<DeviceIndex>) {}
  explicit OptionalCUDAGuard(Device) {}
  explicit OptionalCUDAGuard(DeviceIndex) {}
  OptionalCUDAGuard(const OptionalCUDAGuard&) = delete;
  OptionalCUDAGuard& operator=(const OptionalCUDAGuard&) = delete;
  void set_device(Device) {}
  void reset_device(Device) {}
  void set_index(DeviceIndex) {}
  void reset() {}
};

struct CUDAStreamGuard {
  explicit CUDAStreamGuard(CUDAStream) {}
  CUDAStreamGuard(const CUDAStreamGuard&) = delete;
  CUDAStreamGuard& operator=(const CUDAStreamGuard&) = delete;
};

}  // namespace cuda
}  // namespace c10

namespace at {
namespace cuda {
using c10::cuda::CUDAGuard;
using c10::cuda::CUDAStreamGuard;
using c10::cuda::OptionalCUDAGuard;
}  // namespace cuda
}  // namespace at

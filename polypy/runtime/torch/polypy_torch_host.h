/* PyTorch's headers as the host compiler reads them, for the frontend's parse of a PyTorch
 * extension's .cu file (frontend/include/polypy_device.h includes this first when
 * POLYPY_TORCH_EXTENSION is defined). The translated extension is compiled by the host C++
 * compiler, without __CUDACC__: the frontend must read PyTorch's headers the same way (under
 * __CUDACC__ they would take their CUDA branches: thrust, cuda_fp16, device attributes). Their
 * include guards then make the extension's own #include lines of them no-ops. */
#ifndef POLYPY_TORCH_HOST_H
#define POLYPY_TORCH_HOST_H
#pragma GCC system_header
#pragma push_macro("__CUDACC__")
#pragma push_macro("__NVCC__")
#pragma push_macro("__CUDACC_VER_MAJOR__")
#pragma push_macro("__CUDACC_VER_MINOR__")
#pragma push_macro("__CUDACC_VER_BUILD__")
#pragma push_macro("__CUDA__")
#pragma push_macro("__CUDA_ARCH__")
#undef __CUDACC__
#undef __NVCC__
#undef __CUDACC_VER_MAJOR__
#undef __CUDACC_VER_MINOR__
#undef __CUDACC_VER_BUILD__
#undef __CUDA__
#undef __CUDA_ARCH__
#include <torch/extension.h>
#include <torch/library.h>
/* RestrictPtrTraits exists under __CUDACC__ only; the frontend declares it so that a kernel taking
 * a packed_accessor32<scalar_t, N, RestrictPtrTraits> reaches polypy's refusal of accessors in
 * device code (frontend/lower/builder.py), which says what to do instead. */
namespace torch {
namespace headeronly {
template <typename T>
struct RestrictPtrTraits {
  typedef T* __restrict__ PtrType;
};
}  // namespace headeronly
}  // namespace torch
namespace at {
using torch::headeronly::RestrictPtrTraits;
}  // namespace at
#pragma pop_macro("__CUDACC__")
#pragma pop_macro("__NVCC__")
#pragma pop_macro("__CUDACC_VER_MAJOR__")
#pragma pop_macro("__CUDACC_VER_MINOR__")
#pragma pop_macro("__CUDACC_VER_BUILD__")
#pragma pop_macro("__CUDA__")
#pragma pop_macro("__CUDA_ARCH__")
#endif

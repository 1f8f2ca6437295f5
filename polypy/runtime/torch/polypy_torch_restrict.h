/* torch::RestrictPtrTraits (and at::RestrictPtrTraits), which PyTorch's headers declare under
 * __CUDACC__ only, for the host compiler's reading of an extension's code (the frontend's parse,
 * polypy_torch_host.h, and the build of the translated extension, polypy_torch_cuda.h): a
 * kernel's `torch::PackedTensorAccessor32<scalar_t, N, torch::RestrictPtrTraits>` parameter and
 * the host code's `x.packed_accessor32<scalar_t, N, torch::RestrictPtrTraits>()` mean there what
 * they mean under nvcc (a data pointer declared __restrict__). */
#ifndef POLYPY_TORCH_RESTRICT_H
#define POLYPY_TORCH_RESTRICT_H
#if !defined(__CUDACC__) && !defined(__HIPCC__)
#include <torch/headeronly/core/TensorAccessor.h>
#include <ATen/core/TensorAccessor.h>
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
#endif
#endif

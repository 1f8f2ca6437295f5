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
/* PyTorch's tensor accessors (torch/headeronly/core/TensorAccessor.h, ATen/core/TensorAccessor.h)
 * are used in device code: their members are C10_HOST_DEVICE / C10_DEVICE, which the host
 * compiler's reading makes host functions. They are read here first, as __host__ __device__
 * (clang's force_cuda_host_device), after everything they include (read as usual), so that only
 * the accessors' own declarations change. polypy's frontend never inlines their bodies: it
 * recognizes the accessor classes by their declarations and lowers an accessor to a pointer plus
 * sizes and strides (frontend/lower/accessors.py). */
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>
#include <torch/headeronly/macros/Macros.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/HeaderOnlyArrayRef.h>
#include <c10/macros/Macros.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Deprecated.h>
#include <c10/util/Exception.h>
#include <c10/util/irange.h>
/* c10::Half (torch/headeronly/util/Half.h) and c10::BFloat16 (torch/headeronly/util/BFloat16.h)
 * are read the same way, after what they include: their operators are then device code, inlined
 * as PyTorch writes them, except their two conversions, which the frontend lowers as polypy's
 * exact binary16 and bfloat16 rounding (polypy_c10_lowp.h). */
#include <cmath>
#include <cstring>
#include <iosfwd>
#include <ostream>
#include <torch/headeronly/util/bit_cast.h>
#include <torch/headeronly/util/floating_point_utils.h>
#pragma clang force_cuda_host_device begin
#include <torch/headeronly/util/Half.h>
#include <torch/headeronly/util/BFloat16.h>
#pragma clang force_cuda_host_device end
#pragma clang force_cuda_host_device begin
#include <torch/headeronly/core/TensorAccessor.h>
#include <ATen/core/TensorAccessor.h>
#pragma clang force_cuda_host_device end
#include <polypy_torch_restrict.h>
#include <torch/extension.h>
#include <torch/library.h>
#pragma pop_macro("__CUDACC__")
#pragma pop_macro("__NVCC__")
#pragma pop_macro("__CUDACC_VER_MAJOR__")
#pragma pop_macro("__CUDACC_VER_MINOR__")
#pragma pop_macro("__CUDACC_VER_BUILD__")
#pragma pop_macro("__CUDA__")
#pragma pop_macro("__CUDA_ARCH__")
#endif

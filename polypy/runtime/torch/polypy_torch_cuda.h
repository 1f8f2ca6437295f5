/* polypy's policy for PyTorch extensions run on the CPU (polypy.torch.load; see
 * docs/torch_extensions.md): CPU tensors stand in for CUDA tensors, and the CPU is the CUDA device.
 *
 * polypy.torch force-includes this header (-include) into every source of an extension, the
 * translated .cu files and the extension's own .cpp files alike. PyTorch's headers come first,
 * whole, so that the names below change the extension's code only, never PyTorch's:
 *
 *   x.is_cuda(), x.device().is_cuda()      true for a CPU tensor / the CPU device (is_cpu)
 *   at::kCUDA, at::DeviceType::CUDA         the CPU device type (tensors made "on the CUDA device"
 *                                           are CPU tensors; device-type checks pass for CPU ones)
 *   TORCH_LIBRARY_IMPL(ns, CUDA, m)         registers the CUDA kernels for the CPU dispatch key,
 *                                           so torch.ops.ns.op runs them on CPU tensors (they
 *                                           replace a CPU kernel of the same op the extension has)
 *   AutogradCUDA                            AutogradCPU
 *   x.cuda()                                x.cpu()
 *
 * Each is a macro, so a use that the stand-in cannot mean (x.type().is_cuda(): the deprecated
 * type object has no is_cpu) is a compile error naming is_cpu, never a check with another meaning.
 */
#pragma once
#include <torch/extension.h>
#include <torch/library.h>
/* Read before the macros below: they name c10::DeviceType::CUDA (acc_type<T, true> of a kernel's
 * accumulator), which `#define CUDA CPU` would turn into duplicate CPU specializations. */
#include <ATen/AccumulateType.h>
#include <ATen/OpMathType.h>
#include <polypy_torch_restrict.h>
#define is_cuda is_cpu
#define kCUDA kCPU
#define CUDA CPU
#define AutogradCUDA AutogradCPU
#define cuda() cpu()

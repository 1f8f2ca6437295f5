/* polypy's stand-in for ATen/cuda/Atomic.cuh in translated PyTorch extensions.
 *
 * For the frontend's parse (POLYPY_TORCH_EXTENSION), the atomics that kernels call:
 * gpuAtomicAdd and gpuAtomicAddNoReturn of float, double and int32_t memory are CUDA's atomicAdd
 * (which polypy translates). On c10::Half and c10::BFloat16 memory, PyTorch's
 * atomics round every addition to 16 bits inside a compare-and-swap loop on the enclosing 32-bit
 * word; polypy does not model that, so gpuAtomicAdd, gpuAtomicAddNoReturn, gpuAtomicMul,
 * gpuAtomicMax, gpuAtomicMin and atomicAdd of those types (PyTorch's header adds
 * atomicAdd overloads for them) are declared unavailable: a kernel using
 * one is refused with clang's located error at the call, never run with another meaning. The
 * other functions of PyTorch's header are not declared (clang's "no matching function" or
 * "undeclared identifier" at the call).
 *
 * For the host compiler's build of the translation, nothing: the kernels are already translated. */
#pragma once
#pragma GCC system_header /* PyTorch's side, not the extension's: never walked for kernels */
#include <cstdint>
#include <c10/util/Half.h>
#include <c10/util/BFloat16.h>

#ifdef POLYPY_TORCH_EXTENSION
inline __device__ float gpuAtomicAdd(float* address, float val) { return atomicAdd(address, val); }
inline __device__ double gpuAtomicAdd(double* address, double val) { return atomicAdd(address, val); }
inline __device__ int32_t gpuAtomicAdd(int32_t* address, int32_t val) { return atomicAdd(address, val); }
inline __device__ void gpuAtomicAddNoReturn(float* address, float val) { atomicAdd(address, val); }
inline __device__ void gpuAtomicAddNoReturn(double* address, double val) { atomicAdd(address, val); }
inline __device__ void gpuAtomicAddNoReturn(int32_t* address, int32_t val) { atomicAdd(address, val); }

#define POLYPY_C10_ATOMIC(R, T, name)                                                                  \
  __device__ __attribute__((unavailable("polypy: atomics on c10::Half and c10::BFloat16 memory are "   \
                                        "not supported (each update is rounded to 16 bits in an order "  \
                                        "the GPU chooses); accumulate in float")))                     \
  R name(T* address, T val);
#define POLYPY_C10_ATOMICS(T)                                                                          \
  POLYPY_C10_ATOMIC(T, T, gpuAtomicAdd) POLYPY_C10_ATOMIC(void, T, gpuAtomicAddNoReturn)                \
  POLYPY_C10_ATOMIC(T, T, gpuAtomicMul) POLYPY_C10_ATOMIC(T, T, gpuAtomicMax)                           \
  POLYPY_C10_ATOMIC(T, T, gpuAtomicMin) POLYPY_C10_ATOMIC(T, T, atomicAdd)
POLYPY_C10_ATOMICS(c10::Half)
POLYPY_C10_ATOMICS(c10::BFloat16)
#undef POLYPY_C10_ATOMICS
#undef POLYPY_C10_ATOMIC
#endif

/* c10::Half (at::Half) in the device code of a PyTorch extension, for the frontend's parse only
 * (frontend/include/polypy_device.h includes this last when POLYPY_TORCH_EXTENSION is defined).
 *
 * PyTorch's c10::Half (torch/headeronly/util/Half.h) is a 16-bit IEEE binary16 storage type whose
 * every operation goes through two primitives: the constructor Half(float), which rounds to
 * nearest even (on the device: __float2half), and operator float(), which is exact (__half2float).
 * The arithmetic operators are written on them (Half + Half: float sum rounded to a Half; Half +
 * float: float; Half + double: double; Half + int: the int made a Half, then Half + Half), and
 * comparisons use the conversion to float. polypy_torch_host.h reads that header as
 * __host__ __device__, so the frontend inlines those operators as PyTorch writes them; the two
 * primitives (and the unary minus, which the device computes with __hneg, a flip of the sign
 * bit) are never inlined from PyTorch's host code (bit-level float tricks, F16C intrinsics): the
 * frontend lowers them (frontend/lower/calls.py, C10_HALF_LOWERED) as the functions below, on
 * polypy's exact binary16 rounding of cuda_fp16.h (docs/half.md), the same code as __half's. */
#ifndef POLYPY_C10_HALF_H
#define POLYPY_C10_HALF_H
#include "../cuda_fp16.h"

namespace polypy_c10 {
__host__ __device__ inline c10::Half half_from_float(const float f) {
  c10::Half h;
  h.x = polypy_lp_f2h_f(f, POLYPY_RN);
  return h;
}
__host__ __device__ inline float half_to_float(const c10::Half h) { return polypy_lp_h2f(h.x); }
__host__ __device__ inline c10::Half half_neg(const c10::Half& a) {
  c10::Half h;
  h.x = (unsigned short)(a.x ^ 0x8000u);
  return h;
}
}  // namespace polypy_c10
#endif

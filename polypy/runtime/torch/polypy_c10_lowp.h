/* c10::Half (at::Half) and c10::BFloat16 (at::BFloat16) in the device code of a PyTorch extension,
 * for the frontend's parse only (frontend/include/polypy_device.h includes this last when
 * POLYPY_TORCH_EXTENSION is defined).
 *
 * PyTorch's c10::Half (torch/headeronly/util/Half.h, IEEE binary16) and c10::BFloat16
 * (torch/headeronly/util/BFloat16.h, the upper half of a float) are 16-bit storage types whose
 * every operation goes through two primitives: the constructor T(float), which rounds to nearest
 * even, and operator float(), which is exact. The arithmetic operators are written on them
 * (T + T: float sum rounded to a T; T + float: float; T + double: double; T + int: the int made a
 * T, then T + T), and comparisons use the conversion to float. polypy_torch_host.h reads those
 * headers as __host__ __device__, so the frontend inlines those operators as PyTorch writes them;
 * the two primitives (and Half's unary minus, which the device computes with __hneg, a flip of
 * the sign bit) are never inlined from PyTorch's host code (bit-level float tricks, memcpy, F16C
 * intrinsics): the frontend lowers them (frontend/lower/c10_lowp.py) as the functions below, on
 * polypy's exact rounding of cuda_fp16.h (docs/half.md), the same code as __half's and
 * __nv_bfloat16's.
 *
 * Half(float) is __float2half. BFloat16(float) is c10::detail::round_to_nearest_even: round to
 * nearest even, and every NaN becomes 0x7FC0 (PyTorch's CPU code and CUDA devices before sm_80;
 * sm_80 and later use __float2bfloat16, whose NaN is 0x7FFF: the same numbers, another NaN).
 *
 * __ldg: PyTorch declares `__ldg(const Half*)` and `__ldg(const BFloat16*)` in namespace c10 under
 * __CUDACC__ only (a plain load: the read-only cache changes no value); they are declared here with
 * that meaning for the host compiler's reading. */
#ifndef POLYPY_C10_LOWP_H
#define POLYPY_C10_LOWP_H
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
__host__ __device__ inline c10::BFloat16 bf16_from_float(const float f) {
  c10::BFloat16 b;
  const unsigned int u = polypy_lp_fbits(f);
  b.x = (u & 0x7fffffffu) > 0x7f800000u ? (unsigned short)0x7FC0u : polypy_lp_f2bf_rn(f);
  return b;
}
__host__ __device__ inline float bf16_to_float(const c10::BFloat16 b) {
  return polypy_lp_ffrom((unsigned int)b.x << 16);
}
}  // namespace polypy_c10

namespace c10 {
__device__ inline Half __ldg(const Half* p) { return *p; }
__device__ inline BFloat16 __ldg(const BFloat16* p) { return *p; }
}  // namespace c10
#endif

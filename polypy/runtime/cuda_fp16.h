/* polypy's <cuda_fp16.h>: CUDA's half-precision type __half (IEEE binary16), the pair __half2 and
 * their intrinsics, for device code (lowered by polypy's frontend like any inline function) and
 * host code (compiled as written by the host C++ compiler). polypy's <cuda_bf16.h> adds bfloat16
 * on the same rounding core. A header of this name that the user's -I directories hold comes first.
 *
 * A __half is its 16 bits (an unsigned short): memory of __half is memory of unsigned short, and
 * kernels see `__half*` parameters as u16 buffers (the Python API takes np.float16 arrays).
 * Every operation converts its operands to float or double exactly, computes there and rounds the
 * result once to the 16-bit format with the rounding mode its name says (round-to-nearest-even
 * unless named _rz/_rd/_ru). This is exactly IEEE binary16 (and bfloat16) arithmetic:
 *
 *  - + - * / and sqrt: computed in float (p = 24 bits), then rounded to p' = 11 (8 for bfloat16)
 *    bits. Rounding twice is innocuous when p >= 2p' + 2 (Figueroa, "When is double rounding
 *    innocuous?", 1995): 24 >= 24 for half, 24 >= 18 for bfloat16.
 *  - conversions from float, double and 32-bit integers round once from the exact value (a float
 *    and an int are exact in double); 64-bit integers go through double, which is exact for half:
 *    every integer a double rounds is >= 2^53, far beyond 65520, where half rounds to infinity.
 *  - fma (__hfma, __hfma2) rounds once: the product of two 16-bit values has at most 22 bits, so
 *    a * b is exact in double; s = a * b + c in double is then corrected to round-to-odd with the
 *    exact error of that sum (TwoSum: s + e = a * b + c exactly, e != 0 makes s's last bit odd, away
 *    from zero or towards it as e says), and a round-to-odd result with p >= p' + 2 bits rounds
 *    to p' bits as the exact value would (Boldo & Melquiond, "Emulation of FMA and correctly
 *    rounded sums: proved algorithms using rounding to odd", 2008).
 *
 * Functions CUDA does not document as correctly rounded (hexp, hlog, hsin, hrsqrt, ...) are
 * declared unavailable: clang's error names them. NaN results are CUDA's canonical NaN (0x7fff).
 */
#ifndef POLYPY_CUDA_FP16_H
#define POLYPY_CUDA_FP16_H

#ifndef __host__
#define __host__
#endif
#ifndef __device__
#define __device__
#endif
#ifndef __align__
#define __align__(n) __attribute__((aligned(n)))
#endif

#include <math.h>

#define POLYPY_LP static __host__ __device__ inline
#define POLYPY_UNAVAILABLE(why) static __host__ __device__ __attribute__((unavailable(why)))

/* ---- the rounding core (shared with <cuda_bf16.h>) ---- */

#if defined(__clang__) && defined(__CUDA__)
/* polypy's frontend reads a pointer pun of a local as one bit cast. */
POLYPY_LP unsigned long long polypy_lp_dbits(double d) { return *(const unsigned long long*)&d; }
POLYPY_LP double polypy_lp_dfrom(unsigned long long u) { return *(const double*)&u; }
POLYPY_LP float polypy_lp_ffrom(unsigned int u) { return *(const float*)&u; }
POLYPY_LP unsigned int polypy_lp_fbits(float f) { return *(const unsigned int*)&f; }
#else
POLYPY_LP unsigned long long polypy_lp_dbits(double d) { unsigned long long u; __builtin_memcpy(&u, &d, 8); return u; }
POLYPY_LP double polypy_lp_dfrom(unsigned long long u) { double d; __builtin_memcpy(&d, &u, 8); return d; }
POLYPY_LP float polypy_lp_ffrom(unsigned int u) { float f; __builtin_memcpy(&f, &u, 4); return f; }
POLYPY_LP unsigned int polypy_lp_fbits(float f) { unsigned int u; __builtin_memcpy(&u, &f, 4); return u; }
#endif

#define POLYPY_RN 0
#define POLYPY_RZ 1
#define POLYPY_RD 2
#define POLYPY_RU 3
#define POLYPY_CANONICAL_NAN 0x7fffu

/* The bits of x rounded to the binary format of `mbits` fraction and `ebits` exponent bits (half:
 * 10, 5; bfloat16: 7, 8) in `mode`: the truncated magnitude q in the format's units and what was
 * cut off (above, at or below half a unit, or nothing), then q + 1 where the mode rounds away.
 * The carry of q + 1 makes the largest subnormal the smallest normal, and the largest finite
 * value infinity. */
POLYPY_LP unsigned short polypy_lp_round(double x, int mbits, int ebits, int mode) {
  unsigned long long u = polypy_lp_dbits(x);
  unsigned int sign = (unsigned int)(u >> 63);
  unsigned long long a = u & 0x7fffffffffffffffULL;
  unsigned int sbit = sign << (mbits + ebits);
  unsigned int inf = ((1u << ebits) - 1u) << mbits;
  if (a > 0x7ff0000000000000ULL) return (unsigned short)POLYPY_CANONICAL_NAN;
  if (a == 0x7ff0000000000000ULL) return (unsigned short)(sbit | inf);
  int bias = (1 << (ebits - 1)) - 1;
  int e = (int)(a >> 52);
  unsigned long long mant = (a & 0xfffffffffffffULL) | (e != 0 ? 0x10000000000000ULL : 0ULL);
  int te = (e != 0 ? e : 1) - 1023 + bias; /* the biased exponent in the format, where >= 1 */
  unsigned long long q = 0;
  bool cut = false, above = false, tie = false;
  if (te >= (1 << ebits) - 1) {
    q = inf - 1u; /* beyond the largest finite value: as if just above it */
    cut = true;
    above = true;
  } else {
    int shift = te >= 1 ? 52 - mbits : 53 - mbits - te;
    if (shift >= 54) {
      cut = mant != 0ULL; /* less than half the smallest subnormal */
    } else {
      unsigned long long rem = mant & ((1ULL << shift) - 1ULL);
      unsigned long long halfway = 1ULL << (shift - 1);
      q = mant >> shift;
      if (te >= 1) q += (unsigned long long)(te - 1) << mbits;
      cut = rem != 0ULL;
      above = rem > halfway;
      tie = rem == halfway;
    }
  }
  bool up = false;
  if (mode == POLYPY_RN) up = above || (tie && (q & 1ULL) != 0ULL);
  else if (mode == POLYPY_RU) up = cut && sign == 0u;
  else if (mode == POLYPY_RD) up = cut && sign != 0u;
  return (unsigned short)(sbit | (unsigned int)(q + (up ? 1ULL : 0ULL)));
}

/* The same for a float x, in 32-bit integers and without branches (selects only: this runs for
 * every arithmetic operation, and straight-line code stays small once inlined). A shift of 25 or
 * more leaves q = 0 and everything cut below half a unit (the significand has 24 bits). */
POLYPY_LP unsigned short polypy_lp_round_f(float x, int mbits, int ebits, int mode) {
  unsigned int u = polypy_lp_fbits(x);
  unsigned int sign = u >> 31;
  unsigned int a = u & 0x7fffffffu;
  unsigned int sbit = sign << (mbits + ebits);
  unsigned int inf = ((1u << ebits) - 1u) << mbits;
  int e = (int)(a >> 23);
  unsigned int mant = (a & 0x7fffffu) | (e != 0 ? 0x800000u : 0u);
  int te = (e != 0 ? e : 1) - 127 + (1 << (ebits - 1)) - 1;
  int wide = te >= 1 ? 23 - mbits : 24 - mbits - te;
  int shift = wide < 25 ? wide : 25;
  unsigned int rem = mant & ((1u << shift) - 1u);
  unsigned int halfway = 1u << (shift - 1);
  unsigned int q = (mant >> shift) + (te >= 1 ? (unsigned int)(te - 1) << mbits : 0u);
  bool up = mode == POLYPY_RN ? (rem > halfway || (rem == halfway && (q & 1u) != 0u))
          : mode == POLYPY_RU ? (rem != 0u && sign == 0u)
          : mode == POLYPY_RD ? (rem != 0u && sign != 0u) : false;
  bool away = mode == POLYPY_RN || (mode == POLYPY_RU && sign == 0u) || (mode == POLYPY_RD && sign != 0u);
  unsigned int finite = te >= (1 << ebits) - 1 ? (away ? inf : inf - 1u) : q + (up ? 1u : 0u);
  return (unsigned short)(a > 0x7f800000u ? POLYPY_CANONICAL_NAN : sbit | (a == 0x7f800000u ? inf : finite));
}

/* Round to nearest even from float, the common case (every arithmetic result), in few
 * operations. Half: normal results add 0xfff plus the lowest kept bit (a tie rounds up only to an
 * even result) and rebias, carries included (to infinity above 65504 + 16); subnormal results
 * (|x| < 2^-14) are the float sum |x| + 0.5: 0.5 has exponent -1, so the sum keeps exactly the
 * bits of x from 2^-24 up, rounded to nearest even by the float addition itself. bfloat16 is the
 * top half of the float, rounded the same way, carries included (subnormals too). */
POLYPY_LP unsigned short polypy_lp_f2h_rn(float x) {
  unsigned int u = polypy_lp_fbits(x);
  unsigned int a = u & 0x7fffffffu;
  unsigned int sign = (u >> 16) & 0x8000u;
  unsigned int normal = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
  unsigned int small = polypy_lp_fbits(polypy_lp_ffrom(a) + 0.5f) - 0x3f000000u;
  unsigned int big = a > 0x7f800000u ? POLYPY_CANONICAL_NAN : 0x7c00u;
  return (unsigned short)(a >= 0x47800000u ? (a > 0x7f800000u ? big : sign | big)
                                           : sign | (a < 0x38800000u ? small : normal));
}
POLYPY_LP unsigned short polypy_lp_f2bf_rn(float x) {
  unsigned int u = polypy_lp_fbits(x);
  return (unsigned short)((u & 0x7fffffffu) > 0x7f800000u ? POLYPY_CANONICAL_NAN
                                                           : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* a * b + c rounded to odd in double (see the top of this file): exact when a * b is. */
POLYPY_LP double polypy_lp_fma_odd(double a, double b, double c) {
  double p = a * b;
  double s = p + c;
  double bb = s - p;
  double err = (p - (s - bb)) + (c - bb);
  unsigned long long u = polypy_lp_dbits(s);
  if (err != 0.0 && (u & 1ULL) == 0ULL && s == s && s - s == 0.0) {
    bool away = (err > 0.0) == (s > 0.0);
    u = away ? u + 1ULL : u - 1ULL;
  }
  return polypy_lp_dfrom(u);
}

/* x rounded to an integer as `mode` says (x is a float of at most 24 significant bits, so every
 * step is exact); a zero result keeps x's sign, as rint, floor, ceil and trunc do. */
POLYPY_LP float polypy_lp_rint(float x, int mode) {
  float ax = x < 0.0f ? -x : x;
  if (!(ax < 8388608.0f)) return x; /* integral already (or NaN) */
  float t = (float)(int)x; /* truncated towards zero */
  float r = x - t;         /* exact: |r| < 1 */
  float out = t;
  if (mode == POLYPY_RD) {
    if (r < 0.0f) out = t - 1.0f;
  } else if (mode == POLYPY_RU) {
    if (r > 0.0f) out = t + 1.0f;
  } else if (mode == POLYPY_RN) {
    float ar = r < 0.0f ? -r : r;
    if (ar > 0.5f || (ar == 0.5f && ((int)t & 1) != 0)) out = r < 0.0f ? t - 1.0f : t + 1.0f;
  }
  return out == 0.0f ? polypy_lp_ffrom(polypy_lp_fbits(x) & 0x80000000u) : out;
}

/* float to a 32-bit integer as CUDA's __half2int/__bfloat162int do: NaN is 0, the rest saturates. */
POLYPY_LP int polypy_lp_to_int(float x, int mode) {
  if (x != x) return 0;
  float r = polypy_lp_rint(x, mode);
  if (r >= 2147483648.0f) return 2147483647;
  if (r < -2147483648.0f) return (-2147483647 - 1);
  return (int)r;
}
POLYPY_LP unsigned int polypy_lp_to_uint(float x, int mode) {
  if (x != x) return 0u;
  float r = polypy_lp_rint(x, mode);
  if (r >= 4294967296.0f) return 4294967295u;
  if (r <= 0.0f) return 0u;
  return (unsigned int)r;
}
POLYPY_LP short polypy_lp_to_short(float x, int mode) {
  int i = polypy_lp_to_int(x, mode);
  return (short)(i > 32767 ? 32767 : i < -32768 ? -32768 : i);
}
POLYPY_LP unsigned short polypy_lp_to_ushort(float x, int mode) {
  unsigned int i = polypy_lp_to_uint(x, mode);
  return (unsigned short)(i > 65535u ? 65535u : i);
}

/* ---- __half ---- */

POLYPY_LP unsigned short polypy_lp_f2h(double x, int mode) { return polypy_lp_round(x, 10, 5, mode); }
POLYPY_LP unsigned short polypy_lp_f2h_f(float x, int mode) {
  return mode == POLYPY_RN ? polypy_lp_f2h_rn(x) : polypy_lp_round_f(x, 10, 5, mode);
}

POLYPY_LP float polypy_lp_h2f(unsigned short h) {
  unsigned int s = (unsigned int)(h & 0x8000u) << 16;
  unsigned int e = ((unsigned int)h >> 10) & 0x1fu;
  unsigned int m = (unsigned int)h & 0x3ffu;
  float sub = (float)m * 5.9604644775390625e-08f; /* m * 2^-24: exact */
  float other = polypy_lp_ffrom(s | (e == 0x1fu ? 0x7f800000u : (e + 112u) << 23) | (m << 13));
  return e == 0u ? (s != 0u ? -sub : sub) : other;
}

typedef struct __half_raw { unsigned short x; } __half_raw;
typedef struct __half2_raw { unsigned short x, y; } __half2_raw;

/* The constructors and conversions of __half and __half2 name (polypy_lower_as) the free
 * function below that polypy's frontend inlines for them in device code; both mean the same. */
#if defined(__clang__) && defined(__CUDA__)
#define POLYPY_AS(fn) __attribute__((annotate("polypy_lower_as:" #fn))) __host__ __device__
#else
#define POLYPY_AS(fn) __host__ __device__
#endif
struct __align__(2) __half {
  unsigned short __x;
  __half() = default;
  POLYPY_AS(polypy_lp_half_raw) __half(const __half_raw& r) : __x(r.x) {}
  POLYPY_AS(polypy_lp_half_f) __half(float f) : __x(polypy_lp_f2h_f(f, POLYPY_RN)) {}
  POLYPY_AS(polypy_lp_half_d) __half(double f) : __x(polypy_lp_f2h(f, POLYPY_RN)) {}
  POLYPY_AS(polypy_lp_half_i) __half(int i) : __x(polypy_lp_f2h((double)i, POLYPY_RN)) {}
  POLYPY_AS(polypy_lp_half_u) __half(unsigned int i) : __x(polypy_lp_f2h((double)i, POLYPY_RN)) {}
  POLYPY_AS(polypy_lp_half_s) __half(short i) : __x(polypy_lp_f2h((double)i, POLYPY_RN)) {}
  POLYPY_AS(polypy_lp_half_us) __half(unsigned short i) : __x(polypy_lp_f2h((double)i, POLYPY_RN)) {}
  POLYPY_AS(polypy_lp_half_ll) __half(long long i) : __x(polypy_lp_f2h((double)i, POLYPY_RN)) {}
  POLYPY_AS(polypy_lp_half_ull) __half(unsigned long long i) : __x(polypy_lp_f2h((double)i, POLYPY_RN)) {}
  POLYPY_AS(polypy_lp_half_to_f) operator float() const { return polypy_lp_h2f(__x); }
  POLYPY_AS(polypy_lp_half_to_raw) operator __half_raw() const { __half_raw r; r.x = __x; return r; }
};
typedef __half half;

struct __align__(4) __half2 {
  __half x, y;
  __half2() = default;
  POLYPY_AS(polypy_lp_half2_of) __half2(const __half& a, const __half& b) : x(a), y(b) {}
  POLYPY_AS(polypy_lp_half2_raw) __half2(const __half2_raw& r) { x.__x = r.x; y.__x = r.y; }
  POLYPY_AS(polypy_lp_half2_to_raw) operator __half2_raw() const { __half2_raw r; r.x = x.__x; r.y = y.__x; return r; }
};
typedef __half2 half2;

POLYPY_LP __half polypy_lp_half(unsigned short bits) { __half h; h.__x = bits; return h; }
POLYPY_LP __half polypy_lp_half_raw(const __half_raw r) { return polypy_lp_half(r.x); }
#define POLYPY_HALF_OF(T, suffix) \
  POLYPY_LP __half polypy_lp_half_##suffix(const T v) { return polypy_lp_half(polypy_lp_f2h((double)v, POLYPY_RN)); }
POLYPY_LP __half polypy_lp_half_f(const float v) { return polypy_lp_half(polypy_lp_f2h_f(v, POLYPY_RN)); }
POLYPY_HALF_OF(double, d) POLYPY_HALF_OF(int, i) POLYPY_HALF_OF(unsigned int, u)
POLYPY_HALF_OF(short, s) POLYPY_HALF_OF(unsigned short, us) POLYPY_HALF_OF(long long, ll)
POLYPY_HALF_OF(unsigned long long, ull)
POLYPY_LP float polypy_lp_half_to_f(const __half h) { return polypy_lp_h2f(h.__x); }
POLYPY_LP __half_raw polypy_lp_half_to_raw(const __half h) { __half_raw r; r.x = h.__x; return r; }
POLYPY_LP __half2 polypy_lp_half2_of(const __half a, const __half b) { __half2 r; r.x = a; r.y = b; return r; }
POLYPY_LP __half2 polypy_lp_half2_raw(const __half2_raw r) { return polypy_lp_half2_of(polypy_lp_half(r.x), polypy_lp_half(r.y)); }
POLYPY_LP __half2_raw polypy_lp_half2_to_raw(const __half2 h) { __half2_raw r; r.x = h.x.__x; r.y = h.y.__x; return r; }

/* Conversions. */
POLYPY_LP float __half2float(const __half a) { return polypy_lp_h2f(a.__x); }
POLYPY_LP __half __float2half(const float a) { return polypy_lp_half(polypy_lp_f2h_f(a, POLYPY_RN)); }
POLYPY_LP __half __double2half(const double a) { return polypy_lp_half(polypy_lp_f2h(a, POLYPY_RN)); }
#define POLYPY_HALF_FROM(name, T, mode) \
  POLYPY_LP __half name(const T a) { return polypy_lp_half(polypy_lp_f2h((double)a, mode)); }
#define POLYPY_HALF_TO(name, T, conv, mode) \
  POLYPY_LP T name(const __half h) { return conv(polypy_lp_h2f(h.__x), mode); }
#define POLYPY_HALF_MODES(from, to, T, conv) \
  POLYPY_HALF_FROM(from##_rn, T, POLYPY_RN) POLYPY_HALF_FROM(from##_rz, T, POLYPY_RZ) \
  POLYPY_HALF_FROM(from##_rd, T, POLYPY_RD) POLYPY_HALF_FROM(from##_ru, T, POLYPY_RU) \
  POLYPY_HALF_TO(to##_rn, T, conv, POLYPY_RN) POLYPY_HALF_TO(to##_rz, T, conv, POLYPY_RZ) \
  POLYPY_HALF_TO(to##_rd, T, conv, POLYPY_RD) POLYPY_HALF_TO(to##_ru, T, conv, POLYPY_RU)
#define POLYPY_HALF_FROM_F(name, mode) \
  POLYPY_LP __half name(const float a) { return polypy_lp_half(polypy_lp_f2h_f(a, mode)); }
POLYPY_HALF_FROM_F(__float2half_rn, POLYPY_RN)
POLYPY_HALF_FROM_F(__float2half_rz, POLYPY_RZ)
POLYPY_HALF_FROM_F(__float2half_rd, POLYPY_RD)
POLYPY_HALF_FROM_F(__float2half_ru, POLYPY_RU)
POLYPY_HALF_MODES(__int2half, __half2int, int, polypy_lp_to_int)
POLYPY_HALF_MODES(__uint2half, __half2uint, unsigned int, polypy_lp_to_uint)
POLYPY_HALF_MODES(__short2half, __half2short, short, polypy_lp_to_short)
POLYPY_HALF_MODES(__ushort2half, __half2ushort, unsigned short, polypy_lp_to_ushort)
POLYPY_HALF_FROM(__ll2half_rn, long long, POLYPY_RN)
POLYPY_HALF_FROM(__ull2half_rn, unsigned long long, POLYPY_RN)
POLYPY_LP short __half_as_short(const __half h) { return (short)h.__x; }
POLYPY_LP unsigned short __half_as_ushort(const __half h) { return h.__x; }
POLYPY_LP __half __short_as_half(const short i) { return polypy_lp_half((unsigned short)i); }
POLYPY_LP __half __ushort_as_half(const unsigned short i) { return polypy_lp_half(i); }

/* Arithmetic: in float (double for fma), rounded once to half. */
#define POLYPY_H(x) polypy_lp_h2f((x).__x)
POLYPY_LP __half __hadd(const __half a, const __half b) { return __float2half(POLYPY_H(a) + POLYPY_H(b)); }
POLYPY_LP __half __hsub(const __half a, const __half b) { return __float2half(POLYPY_H(a) - POLYPY_H(b)); }
POLYPY_LP __half __hmul(const __half a, const __half b) { return __float2half(POLYPY_H(a) * POLYPY_H(b)); }
POLYPY_LP __half __hdiv(const __half a, const __half b) { return __float2half(POLYPY_H(a) / POLYPY_H(b)); }
POLYPY_LP __half __hadd_rn(const __half a, const __half b) { return __hadd(a, b); }
POLYPY_LP __half __hsub_rn(const __half a, const __half b) { return __hsub(a, b); }
POLYPY_LP __half __hmul_rn(const __half a, const __half b) { return __hmul(a, b); }
POLYPY_LP __half __hfma(const __half a, const __half b, const __half c) {
  return polypy_lp_half(polypy_lp_f2h(polypy_lp_fma_odd(POLYPY_H(a), POLYPY_H(b), POLYPY_H(c)), POLYPY_RN));
}
POLYPY_LP __half __hneg(const __half a) { return polypy_lp_half((unsigned short)(a.__x ^ 0x8000u)); }
POLYPY_LP __half __habs(const __half a) { return polypy_lp_half((unsigned short)(a.__x & 0x7fffu)); }
/* _sat: the result clamped to [+0.0, 1.0], NaN to +0.0 (CUDA's documented saturation). */
POLYPY_LP __half polypy_lp_hsat(const __half a) {
  float f = POLYPY_H(a);
  return polypy_lp_half(!(f > 0.0f) ? (unsigned short)0u : f > 1.0f ? (unsigned short)0x3c00u : a.__x);
}
POLYPY_LP __half __hadd_sat(const __half a, const __half b) { return polypy_lp_hsat(__hadd(a, b)); }
POLYPY_LP __half __hsub_sat(const __half a, const __half b) { return polypy_lp_hsat(__hsub(a, b)); }
POLYPY_LP __half __hmul_sat(const __half a, const __half b) { return polypy_lp_hsat(__hmul(a, b)); }
POLYPY_LP __half __hfma_sat(const __half a, const __half b, const __half c) { return polypy_lp_hsat(__hfma(a, b, c)); }
POLYPY_LP __half hsqrt(const __half a) { return __float2half(sqrtf(POLYPY_H(a))); }
POLYPY_LP __half hrcp(const __half a) { return __float2half(1.0f / POLYPY_H(a)); }
POLYPY_LP __half hrint(const __half a) { return __float2half(polypy_lp_rint(POLYPY_H(a), POLYPY_RN)); }
POLYPY_LP __half htrunc(const __half a) { return __float2half(polypy_lp_rint(POLYPY_H(a), POLYPY_RZ)); }
POLYPY_LP __half hfloor(const __half a) { return __float2half(polypy_lp_rint(POLYPY_H(a), POLYPY_RD)); }
POLYPY_LP __half hceil(const __half a) { return __float2half(polypy_lp_rint(POLYPY_H(a), POLYPY_RU)); }

/* Comparisons: as float compares (ordered; the _u forms are also true where an operand is NaN). */
#define POLYPY_HCMP(name, op) \
  POLYPY_LP bool name(const __half a, const __half b) { return POLYPY_H(a) op POLYPY_H(b); } \
  POLYPY_LP bool name##u(const __half a, const __half b) { return !(POLYPY_H(a) op POLYPY_H(b)) ? \
      (POLYPY_H(a) != POLYPY_H(a) || POLYPY_H(b) != POLYPY_H(b)) : true; }
POLYPY_HCMP(__heq, ==) POLYPY_HCMP(__hlt, <) POLYPY_HCMP(__hle, <=) POLYPY_HCMP(__hgt, >) POLYPY_HCMP(__hge, >=)
POLYPY_LP bool __hne(const __half a, const __half b) { return POLYPY_H(a) < POLYPY_H(b) || POLYPY_H(a) > POLYPY_H(b); }
POLYPY_LP bool __hneu(const __half a, const __half b) { return POLYPY_H(a) != POLYPY_H(b); }
POLYPY_LP bool __hisnan(const __half a) { return (a.__x & 0x7fffu) > 0x7c00u; }
POLYPY_LP int __hisinf(const __half a) { return a.__x == 0x7c00u ? 1 : a.__x == 0xfc00u ? -1 : 0; }
/* __hmax/__hmin: a NaN operand gives the other (both NaN: the canonical NaN); -0 < +0. The _nan
 * forms give the canonical NaN where either is NaN. */
POLYPY_LP __half polypy_lp_hpick(const __half a, const __half b, bool max, bool nan) {
  bool an = __hisnan(a), bn = __hisnan(b);
  if (an || bn) {
    if (nan || (an && bn)) return polypy_lp_half((unsigned short)POLYPY_CANONICAL_NAN);
    return an ? b : a;
  }
  float fa = POLYPY_H(a), fb = POLYPY_H(b);
  if (fa == fb) { /* equal, or +0 and -0 */
    bool a_neg = (a.__x & 0x8000u) != 0u;
    return (max ? !a_neg : a_neg) ? a : b;
  }
  return (max ? fa > fb : fa < fb) ? a : b;
}
POLYPY_LP __half __hmax(const __half a, const __half b) { return polypy_lp_hpick(a, b, true, false); }
POLYPY_LP __half __hmin(const __half a, const __half b) { return polypy_lp_hpick(a, b, false, false); }
POLYPY_LP __half __hmax_nan(const __half a, const __half b) { return polypy_lp_hpick(a, b, true, true); }
POLYPY_LP __half __hmin_nan(const __half a, const __half b) { return polypy_lp_hpick(a, b, false, true); }

/* Operators (CUDA defines them for __half in device and host code). */
POLYPY_LP __half operator+(const __half a, const __half b) { return __hadd(a, b); }
POLYPY_LP __half operator-(const __half a, const __half b) { return __hsub(a, b); }
POLYPY_LP __half operator*(const __half a, const __half b) { return __hmul(a, b); }
POLYPY_LP __half operator/(const __half a, const __half b) { return __hdiv(a, b); }
POLYPY_LP __half operator-(const __half a) { return __hneg(a); }
POLYPY_LP __half operator+(const __half a) { return a; }
POLYPY_LP void operator+=(__half& a, const __half b) { a = __hadd(a, b); }
POLYPY_LP void operator-=(__half& a, const __half b) { a = __hsub(a, b); }
POLYPY_LP void operator*=(__half& a, const __half b) { a = __hmul(a, b); }
POLYPY_LP void operator/=(__half& a, const __half b) { a = __hdiv(a, b); }
/* ++ and -- add or subtract one, rounded; like the compound assignments they return nothing here. */
POLYPY_LP void operator++(__half& a) { a = __hadd(a, polypy_lp_half(0x3c00u)); }
POLYPY_LP void operator++(__half& a, int) { a = __hadd(a, polypy_lp_half(0x3c00u)); }
POLYPY_LP void operator--(__half& a) { a = __hsub(a, polypy_lp_half(0x3c00u)); }
POLYPY_LP void operator--(__half& a, int) { a = __hsub(a, polypy_lp_half(0x3c00u)); }
POLYPY_LP bool operator==(const __half a, const __half b) { return __heq(a, b); }
POLYPY_LP bool operator!=(const __half a, const __half b) { return __hneu(a, b); }
POLYPY_LP bool operator<(const __half a, const __half b) { return __hlt(a, b); }
POLYPY_LP bool operator<=(const __half a, const __half b) { return __hle(a, b); }
POLYPY_LP bool operator>(const __half a, const __half b) { return __hgt(a, b); }
POLYPY_LP bool operator>=(const __half a, const __half b) { return __hge(a, b); }

/* __half2: two halves, each operation lane by lane. */
POLYPY_LP __half2 __halves2half2(const __half a, const __half b) { __half2 r; r.x = a; r.y = b; return r; }
POLYPY_LP __half2 make_half2(const __half a, const __half b) { return __halves2half2(a, b); }
POLYPY_LP __half2 __half2half2(const __half a) { return __halves2half2(a, a); }
POLYPY_LP __half2 __float2half2_rn(const float a) { return __half2half2(__float2half(a)); }
POLYPY_LP __half2 __floats2half2_rn(const float a, const float b) { return __halves2half2(__float2half(a), __float2half(b)); }
POLYPY_LP float2 __half22float2(const __half2 a) { float2 r; r.x = POLYPY_H(a.x); r.y = POLYPY_H(a.y); return r; }
POLYPY_LP __half2 __float22half2_rn(const float2 a) { return __floats2half2_rn(a.x, a.y); }
POLYPY_LP __half __low2half(const __half2 a) { return a.x; }
POLYPY_LP __half __high2half(const __half2 a) { return a.y; }
POLYPY_LP float __low2float(const __half2 a) { return POLYPY_H(a.x); }
POLYPY_LP float __high2float(const __half2 a) { return POLYPY_H(a.y); }
POLYPY_LP __half2 __lows2half2(const __half2 a, const __half2 b) { return __halves2half2(a.x, b.x); }
POLYPY_LP __half2 __highs2half2(const __half2 a, const __half2 b) { return __halves2half2(a.y, b.y); }
POLYPY_LP __half2 __low2half2(const __half2 a) { return __halves2half2(a.x, a.x); }
POLYPY_LP __half2 __high2half2(const __half2 a) { return __halves2half2(a.y, a.y); }
POLYPY_LP __half2 __lowhigh2highlow(const __half2 a) { return __halves2half2(a.y, a.x); }
#define POLYPY_H2_BIN(name, fn) \
  POLYPY_LP __half2 name(const __half2 a, const __half2 b) { return __halves2half2(fn(a.x, b.x), fn(a.y, b.y)); }
POLYPY_H2_BIN(__hadd2, __hadd) POLYPY_H2_BIN(__hsub2, __hsub) POLYPY_H2_BIN(__hmul2, __hmul)
POLYPY_H2_BIN(__h2div, __hdiv) POLYPY_H2_BIN(__hadd2_sat, __hadd_sat) POLYPY_H2_BIN(__hsub2_sat, __hsub_sat)
POLYPY_H2_BIN(__hmul2_sat, __hmul_sat) POLYPY_H2_BIN(__hmax2, __hmax) POLYPY_H2_BIN(__hmin2, __hmin)
POLYPY_H2_BIN(__hmax2_nan, __hmax_nan) POLYPY_H2_BIN(__hmin2_nan, __hmin_nan)
POLYPY_LP __half2 __hfma2(const __half2 a, const __half2 b, const __half2 c) {
  return __halves2half2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
POLYPY_LP __half2 __hfma2_sat(const __half2 a, const __half2 b, const __half2 c) {
  return __halves2half2(__hfma_sat(a.x, b.x, c.x), __hfma_sat(a.y, b.y, c.y));
}
POLYPY_LP __half2 __hneg2(const __half2 a) { return __halves2half2(__hneg(a.x), __hneg(a.y)); }
POLYPY_LP __half2 __habs2(const __half2 a) { return __halves2half2(__habs(a.x), __habs(a.y)); }
POLYPY_LP __half2 h2sqrt(const __half2 a) { return __halves2half2(hsqrt(a.x), hsqrt(a.y)); }
/* Lane compares: 1.0 or 0.0 per lane; the __hb forms: both lanes true. */
#define POLYPY_H2_CMP(stem) \
  POLYPY_LP __half2 __h##stem##2(const __half2 a, const __half2 b) { \
    return __halves2half2(polypy_lp_half(__h##stem(a.x, b.x) ? 0x3c00u : 0u), \
                          polypy_lp_half(__h##stem(a.y, b.y) ? 0x3c00u : 0u)); } \
  POLYPY_LP bool __hb##stem##2(const __half2 a, const __half2 b) { return __h##stem(a.x, b.x) && __h##stem(a.y, b.y); }
POLYPY_H2_CMP(eq) POLYPY_H2_CMP(ne) POLYPY_H2_CMP(lt) POLYPY_H2_CMP(le) POLYPY_H2_CMP(gt) POLYPY_H2_CMP(ge)
POLYPY_H2_CMP(equ) POLYPY_H2_CMP(neu) POLYPY_H2_CMP(ltu) POLYPY_H2_CMP(leu) POLYPY_H2_CMP(gtu) POLYPY_H2_CMP(geu)
POLYPY_LP __half2 operator+(const __half2 a, const __half2 b) { return __hadd2(a, b); }
POLYPY_LP __half2 operator-(const __half2 a, const __half2 b) { return __hsub2(a, b); }
POLYPY_LP __half2 operator*(const __half2 a, const __half2 b) { return __hmul2(a, b); }
POLYPY_LP __half2 operator/(const __half2 a, const __half2 b) { return __h2div(a, b); }
POLYPY_LP __half2 operator-(const __half2 a) { return __hneg2(a); }
POLYPY_LP void operator+=(__half2& a, const __half2 b) { a = __hadd2(a, b); }
POLYPY_LP void operator-=(__half2& a, const __half2 b) { a = __hsub2(a, b); }
POLYPY_LP void operator*=(__half2& a, const __half2 b) { a = __hmul2(a, b); }
POLYPY_LP void operator/=(__half2& a, const __half2 b) { a = __h2div(a, b); }

/* Warp shuffles and read-only loads of halves (device code only, so only where polypy's frontend
 * parses: a host compiler has no shuffles): the 16 bits moved as an int (a pair as its 32 bits),
 * by the prelude's int shuffles. */
#if defined(__clang__) && defined(__CUDA__)
#define POLYPY_SHFL_16(T, make) \
  static __device__ inline T __shfl_sync(unsigned int mask, T var, int srcLane, int width = 32) { \
    return make((unsigned short)__shfl_sync(mask, (int)var.__x, srcLane, width)); } \
  static __device__ inline T __shfl_up_sync(unsigned int mask, T var, unsigned int delta, int width = 32) { \
    return make((unsigned short)__shfl_up_sync(mask, (int)var.__x, delta, width)); } \
  static __device__ inline T __shfl_down_sync(unsigned int mask, T var, unsigned int delta, int width = 32) { \
    return make((unsigned short)__shfl_down_sync(mask, (int)var.__x, delta, width)); } \
  static __device__ inline T __shfl_xor_sync(unsigned int mask, T var, int laneMask, int width = 32) { \
    return make((unsigned short)__shfl_xor_sync(mask, (int)var.__x, laneMask, width)); } \
  static __device__ inline T __ldg(const T* p) { return *p; }
#define POLYPY_SHFL_32(T2, T, make) \
  static __device__ inline unsigned int polypy_lp_pack(T2 v) { return (unsigned int)v.x.__x | ((unsigned int)v.y.__x << 16); } \
  static __device__ inline T2 polypy_lp_unpack(unsigned int u, T2 like) { \
    like.x = make((unsigned short)(u & 0xffffu)); like.y = make((unsigned short)(u >> 16)); return like; } \
  static __device__ inline T2 __shfl_sync(unsigned int mask, T2 var, int srcLane, int width = 32) { \
    return polypy_lp_unpack(__shfl_sync(mask, polypy_lp_pack(var), srcLane, width), var); } \
  static __device__ inline T2 __shfl_up_sync(unsigned int mask, T2 var, unsigned int delta, int width = 32) { \
    return polypy_lp_unpack(__shfl_up_sync(mask, polypy_lp_pack(var), delta, width), var); } \
  static __device__ inline T2 __shfl_down_sync(unsigned int mask, T2 var, unsigned int delta, int width = 32) { \
    return polypy_lp_unpack(__shfl_down_sync(mask, polypy_lp_pack(var), delta, width), var); } \
  static __device__ inline T2 __shfl_xor_sync(unsigned int mask, T2 var, int laneMask, int width = 32) { \
    return polypy_lp_unpack(__shfl_xor_sync(mask, polypy_lp_pack(var), laneMask, width), var); } \
  static __device__ inline T2 __ldg(const T2* p) { return *p; }
POLYPY_SHFL_16(__half, polypy_lp_half)
POLYPY_SHFL_32(__half2, __half, polypy_lp_half)
#else
#define POLYPY_SHFL_16(T, make)
#define POLYPY_SHFL_32(T2, T, make)
#endif

/* Refused: CUDA documents these as approximations (not correctly rounded), so no exact meaning to
 * reproduce; and atomics on 16-bit memory, which polypy's atomics do not cover. */
#define POLYPY_HALF_APPROX "polypy: CUDA's half-precision transcendental and reciprocal-square-root functions are " \
  "approximations whose exact results polypy cannot reproduce; compute in float (__half2float, then __float2half)"
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __half hexp(const __half a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __half hexp2(const __half a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __half hexp10(const __half a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __half hlog(const __half a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __half hlog2(const __half a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __half hlog10(const __half a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __half hsin(const __half a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __half hcos(const __half a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __half htanh(const __half a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __half hrsqrt(const __half a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __half2 h2exp(const __half2 a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __half2 h2log(const __half2 a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __half2 h2sin(const __half2 a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __half2 h2cos(const __half2 a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __half2 h2rsqrt(const __half2 a);
#define POLYPY_HALF_ATOMIC "polypy: atomics on __half and __half2 memory are not supported"
POLYPY_UNAVAILABLE(POLYPY_HALF_ATOMIC) __half atomicAdd(__half* address, const __half val);
POLYPY_UNAVAILABLE(POLYPY_HALF_ATOMIC) __half2 atomicAdd(__half2* address, const __half2 val);

#undef POLYPY_H
#undef POLYPY_HCMP
#endif /* POLYPY_CUDA_FP16_H */

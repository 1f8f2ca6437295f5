/* polypy's <cuda_bf16.h>: CUDA's bfloat16 type __nv_bfloat16 (8 exponent bits, 8 significand
 * bits), the pair __nv_bfloat162 and their intrinsics, on the rounding core of polypy's
 * <cuda_fp16.h> (whose top comment says why each operation is exactly bfloat16 arithmetic, rounded
 * to nearest even at each operation). A __nv_bfloat16 is its 16 bits: the Python API takes np.uint16
 * arrays holding them (polypy.lowp.to_bfloat16 / from_bfloat16 convert). CUDA computes bfloat16
 * arithmetic with subnormals kept, as here. */
#ifndef POLYPY_CUDA_BF16_H
#define POLYPY_CUDA_BF16_H
#include "cuda_fp16.h"

POLYPY_LP unsigned short polypy_lp_f2bf(double x, int mode) { return polypy_lp_round(x, 7, 8, mode); }
POLYPY_LP unsigned short polypy_lp_f2bf_f(float x, int mode) {
  return mode == POLYPY_RN ? polypy_lp_f2bf_rn(x) : polypy_lp_round_f(x, 7, 8, mode);
}
POLYPY_LP float polypy_lp_bf2f(unsigned short b) { return polypy_lp_ffrom((unsigned int)b << 16); }

typedef struct __nv_bfloat16_raw { unsigned short x; } __nv_bfloat16_raw;
typedef struct __nv_bfloat162_raw { unsigned short x, y; } __nv_bfloat162_raw;

struct __align__(2) __nv_bfloat16 {
  unsigned short __x;
  __nv_bfloat16() = default;
  POLYPY_AS(polypy_lp_bf_raw) __nv_bfloat16(const __nv_bfloat16_raw& r) : __x(r.x) {}
  POLYPY_AS(polypy_lp_bf_f) __nv_bfloat16(float f) : __x(polypy_lp_f2bf_f(f, POLYPY_RN)) {}
  POLYPY_AS(polypy_lp_bf_d) __nv_bfloat16(double f) : __x(polypy_lp_f2bf(f, POLYPY_RN)) {}
  POLYPY_AS(polypy_lp_bf_i) __nv_bfloat16(int i) : __x(polypy_lp_f2bf((double)i, POLYPY_RN)) {}
  POLYPY_AS(polypy_lp_bf_u) __nv_bfloat16(unsigned int i) : __x(polypy_lp_f2bf((double)i, POLYPY_RN)) {}
  POLYPY_AS(polypy_lp_bf_s) __nv_bfloat16(short i) : __x(polypy_lp_f2bf((double)i, POLYPY_RN)) {}
  POLYPY_AS(polypy_lp_bf_us) __nv_bfloat16(unsigned short i) : __x(polypy_lp_f2bf((double)i, POLYPY_RN)) {}
  POLYPY_AS(polypy_lp_bf_to_f) operator float() const { return polypy_lp_bf2f(__x); }
  POLYPY_AS(polypy_lp_bf_to_raw) operator __nv_bfloat16_raw() const { __nv_bfloat16_raw r; r.x = __x; return r; }
};
typedef __nv_bfloat16 nv_bfloat16;

struct __align__(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
  __nv_bfloat162() = default;
  POLYPY_AS(polypy_lp_bf2_of) __nv_bfloat162(const __nv_bfloat16& a, const __nv_bfloat16& b) : x(a), y(b) {}
  POLYPY_AS(polypy_lp_bf2_raw) __nv_bfloat162(const __nv_bfloat162_raw& r) { x.__x = r.x; y.__x = r.y; }
  POLYPY_AS(polypy_lp_bf2_to_raw) operator __nv_bfloat162_raw() const {
    __nv_bfloat162_raw r; r.x = x.__x; r.y = y.__x; return r;
  }
};
typedef __nv_bfloat162 nv_bfloat162;

POLYPY_LP __nv_bfloat16 polypy_lp_bf(unsigned short bits) { __nv_bfloat16 h; h.__x = bits; return h; }
POLYPY_LP __nv_bfloat16 polypy_lp_bf_raw(const __nv_bfloat16_raw r) { return polypy_lp_bf(r.x); }
#define POLYPY_BF_OF(T, suffix) \
  POLYPY_LP __nv_bfloat16 polypy_lp_bf_##suffix(const T v) { return polypy_lp_bf(polypy_lp_f2bf((double)v, POLYPY_RN)); }
POLYPY_LP __nv_bfloat16 polypy_lp_bf_f(const float v) { return polypy_lp_bf(polypy_lp_f2bf_f(v, POLYPY_RN)); }
POLYPY_BF_OF(double, d) POLYPY_BF_OF(int, i) POLYPY_BF_OF(unsigned int, u)
POLYPY_BF_OF(short, s) POLYPY_BF_OF(unsigned short, us)
POLYPY_LP float polypy_lp_bf_to_f(const __nv_bfloat16 h) { return polypy_lp_bf2f(h.__x); }
POLYPY_LP __nv_bfloat16_raw polypy_lp_bf_to_raw(const __nv_bfloat16 h) { __nv_bfloat16_raw r; r.x = h.__x; return r; }
POLYPY_LP __nv_bfloat162 polypy_lp_bf2_of(const __nv_bfloat16 a, const __nv_bfloat16 b) {
  __nv_bfloat162 r; r.x = a; r.y = b; return r;
}
POLYPY_LP __nv_bfloat162 polypy_lp_bf2_raw(const __nv_bfloat162_raw r) {
  return polypy_lp_bf2_of(polypy_lp_bf(r.x), polypy_lp_bf(r.y));
}
POLYPY_LP __nv_bfloat162_raw polypy_lp_bf2_to_raw(const __nv_bfloat162 h) {
  __nv_bfloat162_raw r; r.x = h.x.__x; r.y = h.y.__x; return r;
}

/* Conversions. */
#define POLYPY_B(x) polypy_lp_bf2f((x).__x)
POLYPY_LP float __bfloat162float(const __nv_bfloat16 a) { return POLYPY_B(a); }
POLYPY_LP __nv_bfloat16 __float2bfloat16(const float a) { return polypy_lp_bf(polypy_lp_f2bf_f(a, POLYPY_RN)); }
POLYPY_LP __nv_bfloat16 __double2bfloat16(const double a) { return polypy_lp_bf(polypy_lp_f2bf(a, POLYPY_RN)); }
#define POLYPY_BF_FROM(name, T, mode) \
  POLYPY_LP __nv_bfloat16 name(const T a) { return polypy_lp_bf(polypy_lp_f2bf((double)a, mode)); }
#define POLYPY_BF_TO(name, T, conv, mode) \
  POLYPY_LP T name(const __nv_bfloat16 h) { return conv(POLYPY_B(h), mode); }
#define POLYPY_BF_MODES(from, to, T, conv) \
  POLYPY_BF_FROM(from##_rn, T, POLYPY_RN) POLYPY_BF_FROM(from##_rz, T, POLYPY_RZ) \
  POLYPY_BF_FROM(from##_rd, T, POLYPY_RD) POLYPY_BF_FROM(from##_ru, T, POLYPY_RU) \
  POLYPY_BF_TO(to##_rn, T, conv, POLYPY_RN) POLYPY_BF_TO(to##_rz, T, conv, POLYPY_RZ) \
  POLYPY_BF_TO(to##_rd, T, conv, POLYPY_RD) POLYPY_BF_TO(to##_ru, T, conv, POLYPY_RU)
#define POLYPY_BF_FROM_F(name, mode) \
  POLYPY_LP __nv_bfloat16 name(const float a) { return polypy_lp_bf(polypy_lp_f2bf_f(a, mode)); }
POLYPY_BF_FROM_F(__float2bfloat16_rn, POLYPY_RN)
POLYPY_BF_FROM_F(__float2bfloat16_rz, POLYPY_RZ)
POLYPY_BF_FROM_F(__float2bfloat16_rd, POLYPY_RD)
POLYPY_BF_FROM_F(__float2bfloat16_ru, POLYPY_RU)
POLYPY_BF_MODES(__int2bfloat16, __bfloat162int, int, polypy_lp_to_int)
POLYPY_BF_MODES(__uint2bfloat16, __bfloat162uint, unsigned int, polypy_lp_to_uint)
POLYPY_BF_MODES(__short2bfloat16, __bfloat162short, short, polypy_lp_to_short)
POLYPY_BF_MODES(__ushort2bfloat16, __bfloat162ushort, unsigned short, polypy_lp_to_ushort)
POLYPY_LP short __bfloat16_as_short(const __nv_bfloat16 h) { return (short)h.__x; }
POLYPY_LP unsigned short __bfloat16_as_ushort(const __nv_bfloat16 h) { return h.__x; }
POLYPY_LP __nv_bfloat16 __short_as_bfloat16(const short i) { return polypy_lp_bf((unsigned short)i); }
POLYPY_LP __nv_bfloat16 __ushort_as_bfloat16(const unsigned short i) { return polypy_lp_bf(i); }

/* Arithmetic (CUDA overloads the half names for bfloat16). */
POLYPY_LP __nv_bfloat16 __hadd(const __nv_bfloat16 a, const __nv_bfloat16 b) { return __float2bfloat16(POLYPY_B(a) + POLYPY_B(b)); }
POLYPY_LP __nv_bfloat16 __hsub(const __nv_bfloat16 a, const __nv_bfloat16 b) { return __float2bfloat16(POLYPY_B(a) - POLYPY_B(b)); }
POLYPY_LP __nv_bfloat16 __hmul(const __nv_bfloat16 a, const __nv_bfloat16 b) { return __float2bfloat16(POLYPY_B(a) * POLYPY_B(b)); }
POLYPY_LP __nv_bfloat16 __hdiv(const __nv_bfloat16 a, const __nv_bfloat16 b) { return __float2bfloat16(POLYPY_B(a) / POLYPY_B(b)); }
POLYPY_LP __nv_bfloat16 __hadd_rn(const __nv_bfloat16 a, const __nv_bfloat16 b) { return __hadd(a, b); }
POLYPY_LP __nv_bfloat16 __hsub_rn(const __nv_bfloat16 a, const __nv_bfloat16 b) { return __hsub(a, b); }
POLYPY_LP __nv_bfloat16 __hmul_rn(const __nv_bfloat16 a, const __nv_bfloat16 b) { return __hmul(a, b); }
POLYPY_LP __nv_bfloat16 __hfma(const __nv_bfloat16 a, const __nv_bfloat16 b, const __nv_bfloat16 c) {
  return polypy_lp_bf(polypy_lp_f2bf(polypy_lp_fma_odd(POLYPY_B(a), POLYPY_B(b), POLYPY_B(c)), POLYPY_RN));
}
POLYPY_LP __nv_bfloat16 __hneg(const __nv_bfloat16 a) { return polypy_lp_bf((unsigned short)(a.__x ^ 0x8000u)); }
POLYPY_LP __nv_bfloat16 __habs(const __nv_bfloat16 a) { return polypy_lp_bf((unsigned short)(a.__x & 0x7fffu)); }
POLYPY_LP __nv_bfloat16 polypy_lp_bsat(const __nv_bfloat16 a) {
  float f = POLYPY_B(a);
  return polypy_lp_bf(!(f > 0.0f) ? (unsigned short)0u : f > 1.0f ? (unsigned short)0x3f80u : a.__x);
}
POLYPY_LP __nv_bfloat16 __hadd_sat(const __nv_bfloat16 a, const __nv_bfloat16 b) { return polypy_lp_bsat(__hadd(a, b)); }
POLYPY_LP __nv_bfloat16 __hsub_sat(const __nv_bfloat16 a, const __nv_bfloat16 b) { return polypy_lp_bsat(__hsub(a, b)); }
POLYPY_LP __nv_bfloat16 __hmul_sat(const __nv_bfloat16 a, const __nv_bfloat16 b) { return polypy_lp_bsat(__hmul(a, b)); }
POLYPY_LP __nv_bfloat16 __hfma_sat(const __nv_bfloat16 a, const __nv_bfloat16 b, const __nv_bfloat16 c) {
  return polypy_lp_bsat(__hfma(a, b, c));
}
POLYPY_LP __nv_bfloat16 hsqrt(const __nv_bfloat16 a) { return __float2bfloat16(sqrtf(POLYPY_B(a))); }
POLYPY_LP __nv_bfloat16 hrcp(const __nv_bfloat16 a) { return __float2bfloat16(1.0f / POLYPY_B(a)); }
POLYPY_LP __nv_bfloat16 hrint(const __nv_bfloat16 a) { return __float2bfloat16(polypy_lp_rint(POLYPY_B(a), POLYPY_RN)); }
POLYPY_LP __nv_bfloat16 htrunc(const __nv_bfloat16 a) { return __float2bfloat16(polypy_lp_rint(POLYPY_B(a), POLYPY_RZ)); }
POLYPY_LP __nv_bfloat16 hfloor(const __nv_bfloat16 a) { return __float2bfloat16(polypy_lp_rint(POLYPY_B(a), POLYPY_RD)); }
POLYPY_LP __nv_bfloat16 hceil(const __nv_bfloat16 a) { return __float2bfloat16(polypy_lp_rint(POLYPY_B(a), POLYPY_RU)); }

/* Comparisons. */
#define POLYPY_BCMP(name, op) \
  POLYPY_LP bool name(const __nv_bfloat16 a, const __nv_bfloat16 b) { return POLYPY_B(a) op POLYPY_B(b); } \
  POLYPY_LP bool name##u(const __nv_bfloat16 a, const __nv_bfloat16 b) { return !(POLYPY_B(a) op POLYPY_B(b)) ? \
      (POLYPY_B(a) != POLYPY_B(a) || POLYPY_B(b) != POLYPY_B(b)) : true; }
POLYPY_BCMP(__heq, ==) POLYPY_BCMP(__hlt, <) POLYPY_BCMP(__hle, <=) POLYPY_BCMP(__hgt, >) POLYPY_BCMP(__hge, >=)
POLYPY_LP bool __hne(const __nv_bfloat16 a, const __nv_bfloat16 b) { return POLYPY_B(a) < POLYPY_B(b) || POLYPY_B(a) > POLYPY_B(b); }
POLYPY_LP bool __hneu(const __nv_bfloat16 a, const __nv_bfloat16 b) { return POLYPY_B(a) != POLYPY_B(b); }
POLYPY_LP bool __hisnan(const __nv_bfloat16 a) { return (a.__x & 0x7fffu) > 0x7f80u; }
POLYPY_LP int __hisinf(const __nv_bfloat16 a) { return a.__x == 0x7f80u ? 1 : a.__x == 0xff80u ? -1 : 0; }
POLYPY_LP __nv_bfloat16 polypy_lp_bpick(const __nv_bfloat16 a, const __nv_bfloat16 b, bool max, bool nan) {
  bool an = __hisnan(a), bn = __hisnan(b);
  if (an || bn) {
    if (nan || (an && bn)) return polypy_lp_bf((unsigned short)POLYPY_CANONICAL_NAN);
    return an ? b : a;
  }
  float fa = POLYPY_B(a), fb = POLYPY_B(b);
  if (fa == fb) {
    bool a_neg = (a.__x & 0x8000u) != 0u;
    return (max ? !a_neg : a_neg) ? a : b;
  }
  return (max ? fa > fb : fa < fb) ? a : b;
}
POLYPY_LP __nv_bfloat16 __hmax(const __nv_bfloat16 a, const __nv_bfloat16 b) { return polypy_lp_bpick(a, b, true, false); }
POLYPY_LP __nv_bfloat16 __hmin(const __nv_bfloat16 a, const __nv_bfloat16 b) { return polypy_lp_bpick(a, b, false, false); }
POLYPY_LP __nv_bfloat16 __hmax_nan(const __nv_bfloat16 a, const __nv_bfloat16 b) { return polypy_lp_bpick(a, b, true, true); }
POLYPY_LP __nv_bfloat16 __hmin_nan(const __nv_bfloat16 a, const __nv_bfloat16 b) { return polypy_lp_bpick(a, b, false, true); }

/* Operators. */
POLYPY_LP __nv_bfloat16 operator+(const __nv_bfloat16 a, const __nv_bfloat16 b) { return __hadd(a, b); }
POLYPY_LP __nv_bfloat16 operator-(const __nv_bfloat16 a, const __nv_bfloat16 b) { return __hsub(a, b); }
POLYPY_LP __nv_bfloat16 operator*(const __nv_bfloat16 a, const __nv_bfloat16 b) { return __hmul(a, b); }
POLYPY_LP __nv_bfloat16 operator/(const __nv_bfloat16 a, const __nv_bfloat16 b) { return __hdiv(a, b); }
POLYPY_LP __nv_bfloat16 operator-(const __nv_bfloat16 a) { return __hneg(a); }
POLYPY_LP __nv_bfloat16 operator+(const __nv_bfloat16 a) { return a; }
POLYPY_LP void operator+=(__nv_bfloat16& a, const __nv_bfloat16 b) { a = __hadd(a, b); }
POLYPY_LP void operator-=(__nv_bfloat16& a, const __nv_bfloat16 b) { a = __hsub(a, b); }
POLYPY_LP void operator*=(__nv_bfloat16& a, const __nv_bfloat16 b) { a = __hmul(a, b); }
POLYPY_LP void operator/=(__nv_bfloat16& a, const __nv_bfloat16 b) { a = __hdiv(a, b); }
POLYPY_LP void operator++(__nv_bfloat16& a) { a = __hadd(a, polypy_lp_bf(0x3f80u)); }
POLYPY_LP void operator++(__nv_bfloat16& a, int) { a = __hadd(a, polypy_lp_bf(0x3f80u)); }
POLYPY_LP void operator--(__nv_bfloat16& a) { a = __hsub(a, polypy_lp_bf(0x3f80u)); }
POLYPY_LP void operator--(__nv_bfloat16& a, int) { a = __hsub(a, polypy_lp_bf(0x3f80u)); }
POLYPY_LP bool operator==(const __nv_bfloat16 a, const __nv_bfloat16 b) { return __heq(a, b); }
POLYPY_LP bool operator!=(const __nv_bfloat16 a, const __nv_bfloat16 b) { return __hneu(a, b); }
POLYPY_LP bool operator<(const __nv_bfloat16 a, const __nv_bfloat16 b) { return __hlt(a, b); }
POLYPY_LP bool operator<=(const __nv_bfloat16 a, const __nv_bfloat16 b) { return __hle(a, b); }
POLYPY_LP bool operator>(const __nv_bfloat16 a, const __nv_bfloat16 b) { return __hgt(a, b); }
POLYPY_LP bool operator>=(const __nv_bfloat16 a, const __nv_bfloat16 b) { return __hge(a, b); }

/* __nv_bfloat162. */
POLYPY_LP __nv_bfloat162 __halves2bfloat162(const __nv_bfloat16 a, const __nv_bfloat16 b) { return polypy_lp_bf2_of(a, b); }
POLYPY_LP __nv_bfloat162 make_bfloat162(const __nv_bfloat16 a, const __nv_bfloat16 b) { return polypy_lp_bf2_of(a, b); }
POLYPY_LP __nv_bfloat162 __bfloat162bfloat162(const __nv_bfloat16 a) { return polypy_lp_bf2_of(a, a); }
POLYPY_LP __nv_bfloat162 __float2bfloat162_rn(const float a) { return __bfloat162bfloat162(__float2bfloat16(a)); }
POLYPY_LP __nv_bfloat162 __floats2bfloat162_rn(const float a, const float b) {
  return polypy_lp_bf2_of(__float2bfloat16(a), __float2bfloat16(b));
}
POLYPY_LP float2 __bfloat1622float2(const __nv_bfloat162 a) { float2 r; r.x = POLYPY_B(a.x); r.y = POLYPY_B(a.y); return r; }
POLYPY_LP __nv_bfloat162 __float22bfloat162_rn(const float2 a) { return __floats2bfloat162_rn(a.x, a.y); }
POLYPY_LP __nv_bfloat16 __low2bfloat16(const __nv_bfloat162 a) { return a.x; }
POLYPY_LP __nv_bfloat16 __high2bfloat16(const __nv_bfloat162 a) { return a.y; }
POLYPY_LP float __low2float(const __nv_bfloat162 a) { return POLYPY_B(a.x); }
POLYPY_LP float __high2float(const __nv_bfloat162 a) { return POLYPY_B(a.y); }
POLYPY_LP __nv_bfloat162 __lows2bfloat162(const __nv_bfloat162 a, const __nv_bfloat162 b) { return polypy_lp_bf2_of(a.x, b.x); }
POLYPY_LP __nv_bfloat162 __highs2bfloat162(const __nv_bfloat162 a, const __nv_bfloat162 b) { return polypy_lp_bf2_of(a.y, b.y); }
POLYPY_LP __nv_bfloat162 __lowhigh2highlow(const __nv_bfloat162 a) { return polypy_lp_bf2_of(a.y, a.x); }
#define POLYPY_B2_BIN(name, fn) \
  POLYPY_LP __nv_bfloat162 name(const __nv_bfloat162 a, const __nv_bfloat162 b) { \
    return polypy_lp_bf2_of(fn(a.x, b.x), fn(a.y, b.y)); }
POLYPY_B2_BIN(__hadd2, __hadd) POLYPY_B2_BIN(__hsub2, __hsub) POLYPY_B2_BIN(__hmul2, __hmul)
POLYPY_B2_BIN(__h2div, __hdiv) POLYPY_B2_BIN(__hadd2_sat, __hadd_sat) POLYPY_B2_BIN(__hsub2_sat, __hsub_sat)
POLYPY_B2_BIN(__hmul2_sat, __hmul_sat) POLYPY_B2_BIN(__hmax2, __hmax) POLYPY_B2_BIN(__hmin2, __hmin)
POLYPY_B2_BIN(__hmax2_nan, __hmax_nan) POLYPY_B2_BIN(__hmin2_nan, __hmin_nan)
POLYPY_LP __nv_bfloat162 __hfma2(const __nv_bfloat162 a, const __nv_bfloat162 b, const __nv_bfloat162 c) {
  return polypy_lp_bf2_of(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
POLYPY_LP __nv_bfloat162 __hneg2(const __nv_bfloat162 a) { return polypy_lp_bf2_of(__hneg(a.x), __hneg(a.y)); }
POLYPY_LP __nv_bfloat162 __habs2(const __nv_bfloat162 a) { return polypy_lp_bf2_of(__habs(a.x), __habs(a.y)); }
POLYPY_LP __nv_bfloat162 h2sqrt(const __nv_bfloat162 a) { return polypy_lp_bf2_of(hsqrt(a.x), hsqrt(a.y)); }
POLYPY_LP __nv_bfloat162 operator+(const __nv_bfloat162 a, const __nv_bfloat162 b) { return __hadd2(a, b); }
POLYPY_LP __nv_bfloat162 operator-(const __nv_bfloat162 a, const __nv_bfloat162 b) { return __hsub2(a, b); }
POLYPY_LP __nv_bfloat162 operator*(const __nv_bfloat162 a, const __nv_bfloat162 b) { return __hmul2(a, b); }
POLYPY_LP __nv_bfloat162 operator/(const __nv_bfloat162 a, const __nv_bfloat162 b) { return __h2div(a, b); }
POLYPY_LP __nv_bfloat162 operator-(const __nv_bfloat162 a) { return __hneg2(a); }
POLYPY_LP void operator+=(__nv_bfloat162& a, const __nv_bfloat162 b) { a = __hadd2(a, b); }
POLYPY_LP void operator-=(__nv_bfloat162& a, const __nv_bfloat162 b) { a = __hsub2(a, b); }
POLYPY_LP void operator*=(__nv_bfloat162& a, const __nv_bfloat162 b) { a = __hmul2(a, b); }
POLYPY_LP void operator/=(__nv_bfloat162& a, const __nv_bfloat162 b) { a = __h2div(a, b); }

POLYPY_SHFL_16(__nv_bfloat16, polypy_lp_bf)
POLYPY_SHFL_32(__nv_bfloat162, __nv_bfloat16, polypy_lp_bf)

POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __nv_bfloat16 hexp(const __nv_bfloat16 a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __nv_bfloat16 hexp2(const __nv_bfloat16 a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __nv_bfloat16 hexp10(const __nv_bfloat16 a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __nv_bfloat16 hlog(const __nv_bfloat16 a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __nv_bfloat16 hlog2(const __nv_bfloat16 a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __nv_bfloat16 hlog10(const __nv_bfloat16 a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __nv_bfloat16 hsin(const __nv_bfloat16 a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __nv_bfloat16 hcos(const __nv_bfloat16 a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __nv_bfloat16 htanh(const __nv_bfloat16 a);
POLYPY_UNAVAILABLE(POLYPY_HALF_APPROX) __nv_bfloat16 hrsqrt(const __nv_bfloat16 a);
#define POLYPY_BF_ATOMIC "polypy: atomics on __nv_bfloat16 and __nv_bfloat162 memory are not supported"
POLYPY_UNAVAILABLE(POLYPY_BF_ATOMIC) __nv_bfloat16 atomicAdd(__nv_bfloat16* address, const __nv_bfloat16 val);
POLYPY_UNAVAILABLE(POLYPY_BF_ATOMIC) __nv_bfloat162 atomicAdd(__nv_bfloat162* address, const __nv_bfloat162 val);

#undef POLYPY_B
#endif /* POLYPY_CUDA_BF16_H */

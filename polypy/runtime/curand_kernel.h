/* polypy's <curand_kernel.h>: cuRAND's device API for the XORWOW generator (curandState, the
 * default) and Philox4x32-10, giving the numbers a GPU gives. Device code reaches these functions
 * through polypy's frontend, which inlines them like any inline device function; host code of a
 * translated program sees the same text. A header of this name that the user's -I directories
 * hold comes first.
 *
 * Exactness. The 32-bit draws (curand, curand4), the state after curand_init / skipahead /
 * skipahead_sequence, and the uniform conversions are bit for bit cuRAND's: they are integer
 * arithmetic and conversions whose rounding is fixed (x * 2^-32 + 2^-33 is one rounding of an
 * exact product). The normal and log-normal values go through log, sqrt, sin, cos and exp: the
 * uniform inputs and the Box-Muller formula are cuRAND's, with the multiply-adds nvcc contracts
 * written as fma; the transcendental functions are polypy's (correctly rounded in the emulator,
 * libm in the C++ backend), where the GPU uses CUDA's own (logf within 1 ulp, the __sincosf
 * intrinsic for floats, sincospi for doubles): those values agree to a few ulps, not to the bit.
 *
 * Algorithms (published): XORWOW is Marsaglia's xorshift of five words plus a Weyl counter
 * (J. Stat. Softw. 8(14), 2003); curand_init salts and scrambles the 64-bit seed into the state,
 * then jumps subsequence * 2^67 + offset steps with the GF(2) matrix powers of
 * curand_jump_tables.h (computed, not carried as text; one base-4 digit at a time: O(log n) work,
 * never O(n)). Philox4x32-10 is Salmon et al.'s counter-based generator (SC'11): ten rounds of
 * two 32x32->64 multiplications over a 128-bit counter with a 64-bit key bumped by the Weyl
 * constants.
 *
 * Other generators of cuRAND (MRG32k3a, MTGP32, Sobol) are declared unavailable: clang's error
 * names them.
 */
#ifndef POLYPY_CURAND_KERNEL_H
#define POLYPY_CURAND_KERNEL_H

#include <cuda_runtime.h>
#include <math.h>
#include "curand_jump_tables.h"

#define POLYPY_CR static __host__ __device__ inline
#define POLYPY_CR_UNAVAILABLE(what) \
  "cuRAND's " what " generator is not supported by polypy (XORWOW curandState and Philox4_32_10 are)"

/* ---- states (the members and their order are cuRAND's, so that sizeof agrees) ---- */

struct curandStateXORWOW {
  unsigned int d, v[5];
  int boxmuller_flag;
  int boxmuller_flag_double;
  float boxmuller_extra;
  double boxmuller_extra_double;
};
typedef struct curandStateXORWOW curandStateXORWOW_t;
typedef struct curandStateXORWOW curandState_t;
typedef struct curandStateXORWOW curandState;

struct curandStatePhilox4_32_10 {
  uint4 ctr;
  uint4 output;
  uint2 key;
  unsigned int STATE;
  int boxmuller_flag;
  int boxmuller_flag_double;
  float boxmuller_extra;
  double boxmuller_extra_double;
};
typedef struct curandStatePhilox4_32_10 curandStatePhilox4_32_10_t;

/* The typedef first (a use of the type names it), then the tag made unavailable too. */
typedef struct curandStateMRG32k3a curandStateMRG32k3a_t __attribute__((unavailable(POLYPY_CR_UNAVAILABLE("MRG32k3a"))));
struct __attribute__((unavailable(POLYPY_CR_UNAVAILABLE("MRG32k3a")))) curandStateMRG32k3a;
typedef struct curandStateMtgp32 curandStateMtgp32_t __attribute__((unavailable(POLYPY_CR_UNAVAILABLE("MTGP32"))));
struct __attribute__((unavailable(POLYPY_CR_UNAVAILABLE("MTGP32")))) curandStateMtgp32;
typedef struct curandStateSobol32 curandStateSobol32_t __attribute__((unavailable(POLYPY_CR_UNAVAILABLE("Sobol32"))));
struct __attribute__((unavailable(POLYPY_CR_UNAVAILABLE("Sobol32")))) curandStateSobol32;
typedef struct curandStateScrambledSobol32 curandStateScrambledSobol32_t __attribute__((unavailable(POLYPY_CR_UNAVAILABLE("scrambled Sobol32"))));
struct __attribute__((unavailable(POLYPY_CR_UNAVAILABLE("scrambled Sobol32")))) curandStateScrambledSobol32;
typedef struct curandStateSobol64 curandStateSobol64_t __attribute__((unavailable(POLYPY_CR_UNAVAILABLE("Sobol64"))));
struct __attribute__((unavailable(POLYPY_CR_UNAVAILABLE("Sobol64")))) curandStateSobol64;
typedef struct curandStateScrambledSobol64 curandStateScrambledSobol64_t __attribute__((unavailable(POLYPY_CR_UNAVAILABLE("scrambled Sobol64"))));
struct __attribute__((unavailable(POLYPY_CR_UNAVAILABLE("scrambled Sobol64")))) curandStateScrambledSobol64;

/* The Box-Muller flags: which kind of value the cached second one of a pair is. */
#define POLYPY_CURAND_CACHED_NORMAL 1
#define POLYPY_CURAND_CACHED_LOG_NORMAL 2

/* ---- XORWOW ---- */

POLYPY_CR unsigned int curand(curandStateXORWOW_t* state) {
  unsigned int t = state->v[0] ^ (state->v[0] >> 2);
  state->v[0] = state->v[1];
  state->v[1] = state->v[2];
  state->v[2] = state->v[3];
  state->v[3] = state->v[4];
  state->v[4] = (state->v[4] ^ (state->v[4] << 4)) ^ (t ^ (t << 1));
  state->d += 362437u;
  return state->v[4] + state->d;
}

/* The 160 xorshift bits jumped n steps (sequence = 0) or n * 2^67 steps (sequence = 1): for each
 * base-4 digit k of n, the digit's count of products with the table's matrix A^(4^k) (times
 * 2^67). A product is the xor of the matrix rows of the state's set bits (selected by masks, so
 * that threads do not branch on their bits). */
POLYPY_CR void polypy_xorwow_jump(curandStateXORWOW_t* state, unsigned long long n, int sequence) {
  unsigned int v0 = state->v[0], v1 = state->v[1], v2 = state->v[2], v3 = state->v[3], v4 = state->v[4];
  for (int k = 0; n != 0ull; k++) {
    int m = sequence ? 32 + k : k;
    unsigned int digit = (unsigned int)(n & 3ull);
    for (unsigned int t = 0; t < digit; t++) {
      unsigned int r0 = 0, r1 = 0, r2 = 0, r3 = 0, r4 = 0;
      for (int w = 0; w < 5; w++) {
        unsigned int word = w == 0 ? v0 : w == 1 ? v1 : w == 2 ? v2 : w == 3 ? v3 : v4;
        for (int b = 0; b < 32; b++) {
          unsigned int take = 0u - ((word >> b) & 1u);
          int row = 5 * (32 * w + b);
          r0 ^= take & polypy_xorwow_matrices[m][row];
          r1 ^= take & polypy_xorwow_matrices[m][row + 1];
          r2 ^= take & polypy_xorwow_matrices[m][row + 2];
          r3 ^= take & polypy_xorwow_matrices[m][row + 3];
          r4 ^= take & polypy_xorwow_matrices[m][row + 4];
        }
      }
      v0 = r0; v1 = r1; v2 = r2; v3 = r3; v4 = r4;
    }
    n >>= 2;
  }
  state->v[0] = v0; state->v[1] = v1; state->v[2] = v2; state->v[3] = v3; state->v[4] = v4;
}

POLYPY_CR void skipahead(unsigned long long n, curandStateXORWOW_t* state) {
  polypy_xorwow_jump(state, n, 0);
  state->d += 362437u * (unsigned int)n;
}

/* 2^67 * 362437 is 0 mod 2^32: the counter stays. */
POLYPY_CR void skipahead_sequence(unsigned long long n, curandStateXORWOW_t* state) {
  polypy_xorwow_jump(state, n, 1);
}

POLYPY_CR void curand_init(unsigned long long seed, unsigned long long subsequence, unsigned long long offset,
                           curandStateXORWOW_t* state) {
  unsigned int lo = (unsigned int)seed ^ 0xaad26b49u;
  unsigned int hi = (unsigned int)(seed >> 32) ^ 0xf7dcefddu;
  unsigned int a = 1099087573u * lo;
  unsigned int b = 2591861531u * hi;
  state->d = 6615241u + b + a;
  state->v[0] = 123456789u + a;
  state->v[1] = 362436069u ^ a;
  state->v[2] = 521288629u + b;
  state->v[3] = 88675123u ^ b;
  state->v[4] = 5783321u + a;
  polypy_xorwow_jump(state, subsequence, 1);
  skipahead(offset, state);
  state->boxmuller_flag = 0;
  state->boxmuller_flag_double = 0;
  state->boxmuller_extra = 0.0f;
  state->boxmuller_extra_double = 0.0;
}

/* ---- Philox4x32-10 ---- */

POLYPY_CR uint4 polypy_philox_round(uint4 c, uint2 k) {
  unsigned long long p0 = (unsigned long long)0xD2511F53u * c.x;
  unsigned long long p1 = (unsigned long long)0xCD9E8D57u * c.z;
  uint4 out;
  out.x = (unsigned int)(p1 >> 32) ^ c.y ^ k.x;
  out.y = (unsigned int)p1;
  out.z = (unsigned int)(p0 >> 32) ^ c.w ^ k.y;
  out.w = (unsigned int)p0;
  return out;
}

POLYPY_CR uint4 polypy_philox10(uint4 c, uint2 k) {
  for (int round = 0; round < 9; round++) {
    c = polypy_philox_round(c, k);
    k.x += 0x9E3779B9u;
    k.y += 0xBB67AE85u;
  }
  return polypy_philox_round(c, k);
}

/* The 128-bit counter plus one block. */
POLYPY_CR void polypy_philox_next_block(curandStatePhilox4_32_10_t* s) {
  if (++s->ctr.x != 0u) return;
  if (++s->ctr.y != 0u) return;
  if (++s->ctr.z != 0u) return;
  ++s->ctr.w;
}

/* The counter plus n blocks, carried as cuRAND carries it (through y, then z, then w). */
POLYPY_CR void polypy_philox_add_blocks(curandStatePhilox4_32_10_t* s, unsigned long long n) {
  unsigned int lo = (unsigned int)n;
  unsigned int hi = (unsigned int)(n >> 32);
  s->ctr.x += lo;
  if (s->ctr.x < lo) hi++;
  s->ctr.y += hi;
  if (hi <= s->ctr.y) return;
  if (++s->ctr.z != 0u) return;
  ++s->ctr.w;
}

/* The upper 64 bits of the counter (z, w) plus n: the subsequence. */
POLYPY_CR void polypy_philox_add_subsequences(curandStatePhilox4_32_10_t* s, unsigned long long n) {
  unsigned int lo = (unsigned int)n;
  unsigned int hi = (unsigned int)(n >> 32);
  s->ctr.z += lo;
  if (s->ctr.z < lo) hi++;
  s->ctr.w += hi;
}

/* output holds the block of the counter; STATE is the next word of it to return. */
POLYPY_CR unsigned int curand(curandStatePhilox4_32_10_t* state) {
  unsigned int i = state->STATE;
  unsigned int r = i == 1u ? state->output.y : i == 2u ? state->output.z : i == 3u ? state->output.w
                                                                                 : state->output.x;
  state->STATE = i + 1u;
  if (state->STATE == 4u) {
    polypy_philox_next_block(state);
    state->output = polypy_philox10(state->ctr, state->key);
    state->STATE = 0u;
  }
  return r;
}

/* Four words from the current position: the rest of this block, then the next block's first. */
POLYPY_CR uint4 curand4(curandStatePhilox4_32_10_t* state) {
  uint4 now = state->output;
  polypy_philox_next_block(state);
  state->output = polypy_philox10(state->ctr, state->key);
  uint4 next = state->output;
  unsigned int i = state->STATE;
  uint4 r = now;
  if (i == 1u) {
    r.x = now.y; r.y = now.z; r.z = now.w; r.w = next.x;
  } else if (i == 2u) {
    r.x = now.z; r.y = now.w; r.z = next.x; r.w = next.y;
  } else if (i == 3u) {
    r.x = now.w; r.y = next.x; r.z = next.y; r.w = next.z;
  }
  return r;
}

POLYPY_CR void skipahead(unsigned long long n, curandStatePhilox4_32_10_t* state) {
  state->STATE += (unsigned int)(n & 3ull);
  n /= 4ull;
  if (state->STATE > 3u) {
    n += 1ull;
    state->STATE -= 4u;
  }
  polypy_philox_add_blocks(state, n);
  state->output = polypy_philox10(state->ctr, state->key);
}

POLYPY_CR void skipahead_sequence(unsigned long long n, curandStatePhilox4_32_10_t* state) {
  polypy_philox_add_subsequences(state, n);
  state->output = polypy_philox10(state->ctr, state->key);
}

POLYPY_CR void curand_init(unsigned long long seed, unsigned long long subsequence, unsigned long long offset,
                           curandStatePhilox4_32_10_t* state) {
  state->ctr.x = 0u; state->ctr.y = 0u; state->ctr.z = 0u; state->ctr.w = 0u;
  state->key.x = (unsigned int)seed;
  state->key.y = (unsigned int)(seed >> 32);
  state->STATE = 0u;
  state->boxmuller_flag = 0;
  state->boxmuller_flag_double = 0;
  state->boxmuller_extra = 0.0f;
  state->boxmuller_extra_double = 0.0;
  skipahead_sequence(subsequence, state);
  skipahead(offset, state);
}

/* ---- conversions (shared by both generators) ---- */

/* (0, 1]: x * 2^-32 + 2^-33, one rounding (the product is exact). */
POLYPY_CR float polypy_curand_u01(unsigned int x) {
  return fmaf((float)x, 0x1p-32f, 0x1p-33f);
}

/* (0, 1] with 53 bits from two draws: x, then y shifted above it by 21 bits (they overlap). */
POLYPY_CR double polypy_curand_u01_double(unsigned int x, unsigned int y) {
  unsigned long long z = (unsigned long long)x ^ ((unsigned long long)y << 21);
  return (double)z * 0x1p-53 + 0x1p-54;
}

/* Box-Muller of two draws: (sin, cos) of the angle y times the radius of x. nvcc contracts the
 * angle's multiply-add; the angle constant is the float product of 2^-32 and 2 pi (0x1.921fb6p-30). */
POLYPY_CR float2 polypy_curand_box_muller(unsigned int x, unsigned int y) {
  float u = fmaf((float)x, 0x1p-32f, 0x1p-33f);
  float a = fmaf((float)y, 0x1.921fb6p-30f, 0x1.921fb6p-31f);
  float r = sqrtf(-2.0f * logf(u));
  float2 out;
  out.x = sinf(a) * r;
  out.y = cosf(a) * r;
  return out;
}

/* The double pair from four draws: 53-bit u from (x0, x1), angle pi * v with v in (0, 2). */
POLYPY_CR double2 polypy_curand_box_muller_double(unsigned int x0, unsigned int x1, unsigned int y0, unsigned int y1) {
  unsigned long long zx = (unsigned long long)x0 ^ ((unsigned long long)x1 << 21);
  unsigned long long zy = (unsigned long long)y0 ^ ((unsigned long long)y1 << 21);
  double u = (double)zx * 0x1p-53 + 0x1p-54;
  double v = (double)zy * 0x1p-52 + 0x1p-53;
  double r = sqrt(-2.0 * log(u));
  double2 out;
  out.x = sin(v * 3.1415926535897932) * r;
  out.y = cos(v * 3.1415926535897932) * r;
  return out;
}

/* ---- distributions: XORWOW ---- */

POLYPY_CR float curand_uniform(curandStateXORWOW_t* state) { return polypy_curand_u01(curand(state)); }

POLYPY_CR double curand_uniform_double(curandStateXORWOW_t* state) {
  unsigned int x = curand(state);
  unsigned int y = curand(state);
  return polypy_curand_u01_double(x, y);
}

/* Draws come in pairs: the first call returns the sine value and keeps the cosine one. */
POLYPY_CR float curand_normal(curandStateXORWOW_t* state) {
  if (state->boxmuller_flag == POLYPY_CURAND_CACHED_NORMAL) {
    state->boxmuller_flag = 0;
    return state->boxmuller_extra;
  }
  unsigned int x = curand(state);
  unsigned int y = curand(state);
  float2 p = polypy_curand_box_muller(x, y);
  state->boxmuller_extra = p.y;
  state->boxmuller_flag = POLYPY_CURAND_CACHED_NORMAL;
  return p.x;
}

POLYPY_CR float2 curand_normal2(curandStateXORWOW_t* state) {
  unsigned int x = curand(state);
  unsigned int y = curand(state);
  return polypy_curand_box_muller(x, y);
}

POLYPY_CR double curand_normal_double(curandStateXORWOW_t* state) {
  if (state->boxmuller_flag_double == POLYPY_CURAND_CACHED_NORMAL) {
    state->boxmuller_flag_double = 0;
    return state->boxmuller_extra_double;
  }
  unsigned int x0 = curand(state);
  unsigned int x1 = curand(state);
  unsigned int y0 = curand(state);
  unsigned int y1 = curand(state);
  double2 p = polypy_curand_box_muller_double(x0, x1, y0, y1);
  state->boxmuller_extra_double = p.y;
  state->boxmuller_flag_double = POLYPY_CURAND_CACHED_NORMAL;
  return p.x;
}

POLYPY_CR double2 curand_normal2_double(curandStateXORWOW_t* state) {
  unsigned int x0 = curand(state);
  unsigned int x1 = curand(state);
  unsigned int y0 = curand(state);
  unsigned int y1 = curand(state);
  return polypy_curand_box_muller_double(x0, x1, y0, y1);
}

POLYPY_CR float curand_log_normal(curandStateXORWOW_t* state, float mean, float stddev) {
  if (state->boxmuller_flag == POLYPY_CURAND_CACHED_LOG_NORMAL) {
    state->boxmuller_flag = 0;
    return state->boxmuller_extra;
  }
  unsigned int x = curand(state);
  unsigned int y = curand(state);
  float2 p = polypy_curand_box_muller(x, y);
  state->boxmuller_extra = expf(fmaf(stddev, p.y, mean));
  state->boxmuller_flag = POLYPY_CURAND_CACHED_LOG_NORMAL;
  return expf(fmaf(stddev, p.x, mean));
}

POLYPY_CR double curand_log_normal_double(curandStateXORWOW_t* state, double mean, double stddev) {
  if (state->boxmuller_flag_double == POLYPY_CURAND_CACHED_LOG_NORMAL) {
    state->boxmuller_flag_double = 0;
    return state->boxmuller_extra_double;
  }
  unsigned int x0 = curand(state);
  unsigned int x1 = curand(state);
  unsigned int y0 = curand(state);
  unsigned int y1 = curand(state);
  double2 p = polypy_curand_box_muller_double(x0, x1, y0, y1);
  state->boxmuller_extra_double = exp(fma(stddev, p.y, mean));
  state->boxmuller_flag_double = POLYPY_CURAND_CACHED_LOG_NORMAL;
  return exp(fma(stddev, p.x, mean));
}

POLYPY_CR float2 curand_log_normal2(curandStateXORWOW_t* state, float mean, float stddev) {
  float2 v = curand_normal2(state);
  v.x = expf(fmaf(stddev, v.x, mean));
  v.y = expf(fmaf(stddev, v.y, mean));
  return v;
}

POLYPY_CR double2 curand_log_normal2_double(curandStateXORWOW_t* state, double mean, double stddev) {
  double2 v = curand_normal2_double(state);
  v.x = exp(fma(stddev, v.x, mean));
  v.y = exp(fma(stddev, v.y, mean));
  return v;
}

/* ---- distributions: Philox4_32_10 ---- */

POLYPY_CR float curand_uniform(curandStatePhilox4_32_10_t* state) { return polypy_curand_u01(curand(state)); }

/* cuRAND's Philox double uniform uses one draw: x * 2^-32 + 2^-32. */
POLYPY_CR double curand_uniform_double(curandStatePhilox4_32_10_t* state) {
  return (double)curand(state) * 0x1p-32 + 0x1p-32;
}

POLYPY_CR float4 curand_uniform4(curandStatePhilox4_32_10_t* state) {
  uint4 x = curand4(state);
  float4 out;
  out.x = polypy_curand_u01(x.x);
  out.y = polypy_curand_u01(x.y);
  out.z = polypy_curand_u01(x.z);
  out.w = polypy_curand_u01(x.w);
  return out;
}

POLYPY_CR double2 curand_uniform2_double(curandStatePhilox4_32_10_t* state) {
  uint4 x = curand4(state);
  double2 out;
  out.x = polypy_curand_u01_double(x.x, x.y);
  out.y = polypy_curand_u01_double(x.z, x.w);
  return out;
}

POLYPY_CR float curand_normal(curandStatePhilox4_32_10_t* state) {
  if (state->boxmuller_flag == POLYPY_CURAND_CACHED_NORMAL) {
    state->boxmuller_flag = 0;
    return state->boxmuller_extra;
  }
  unsigned int x = curand(state);
  unsigned int y = curand(state);
  float2 p = polypy_curand_box_muller(x, y);
  state->boxmuller_extra = p.y;
  state->boxmuller_flag = POLYPY_CURAND_CACHED_NORMAL;
  return p.x;
}

POLYPY_CR float2 curand_normal2(curandStatePhilox4_32_10_t* state) {
  unsigned int x = curand(state);
  unsigned int y = curand(state);
  return polypy_curand_box_muller(x, y);
}

POLYPY_CR float4 curand_normal4(curandStatePhilox4_32_10_t* state) {
  uint4 x = curand4(state);
  float2 a = polypy_curand_box_muller(x.x, x.y);
  float2 b = polypy_curand_box_muller(x.z, x.w);
  float4 out;
  out.x = a.x; out.y = a.y; out.z = b.x; out.w = b.y;
  return out;
}

POLYPY_CR double curand_normal_double(curandStatePhilox4_32_10_t* state) {
  if (state->boxmuller_flag_double == POLYPY_CURAND_CACHED_NORMAL) {
    state->boxmuller_flag_double = 0;
    return state->boxmuller_extra_double;
  }
  uint4 x = curand4(state);
  double2 p = polypy_curand_box_muller_double(x.x, x.y, x.z, x.w);
  state->boxmuller_extra_double = p.y;
  state->boxmuller_flag_double = POLYPY_CURAND_CACHED_NORMAL;
  return p.x;
}

POLYPY_CR double2 curand_normal2_double(curandStatePhilox4_32_10_t* state) {
  uint4 x = curand4(state);
  return polypy_curand_box_muller_double(x.x, x.y, x.z, x.w);
}

POLYPY_CR float curand_log_normal(curandStatePhilox4_32_10_t* state, float mean, float stddev) {
  if (state->boxmuller_flag == POLYPY_CURAND_CACHED_LOG_NORMAL) {
    state->boxmuller_flag = 0;
    return state->boxmuller_extra;
  }
  unsigned int x = curand(state);
  unsigned int y = curand(state);
  float2 p = polypy_curand_box_muller(x, y);
  state->boxmuller_extra = expf(fmaf(stddev, p.y, mean));
  state->boxmuller_flag = POLYPY_CURAND_CACHED_LOG_NORMAL;
  return expf(fmaf(stddev, p.x, mean));
}

POLYPY_CR float4 curand_log_normal4(curandStatePhilox4_32_10_t* state, float mean, float stddev) {
  float4 v = curand_normal4(state);
  v.x = expf(fmaf(stddev, v.x, mean));
  v.y = expf(fmaf(stddev, v.y, mean));
  v.z = expf(fmaf(stddev, v.z, mean));
  v.w = expf(fmaf(stddev, v.w, mean));
  return v;
}

POLYPY_CR double4 curand_uniform4_double(curandStatePhilox4_32_10_t* state) {
  uint4 x = curand4(state);
  uint4 y = curand4(state);
  double4 out;
  out.x = polypy_curand_u01_double(x.x, x.y);
  out.y = polypy_curand_u01_double(x.z, x.w);
  out.z = polypy_curand_u01_double(y.x, y.y);
  out.w = polypy_curand_u01_double(y.z, y.w);
  return out;
}

POLYPY_CR double4 curand_normal4_double(curandStatePhilox4_32_10_t* state) {
  uint4 x = curand4(state);
  uint4 y = curand4(state);
  double2 a = polypy_curand_box_muller_double(x.x, x.y, x.z, x.w);
  double2 b = polypy_curand_box_muller_double(y.x, y.y, y.z, y.w);
  double4 out;
  out.x = a.x; out.y = a.y; out.z = b.x; out.w = b.y;
  return out;
}

POLYPY_CR float2 curand_log_normal2(curandStatePhilox4_32_10_t* state, float mean, float stddev) {
  float2 v = curand_normal2(state);
  v.x = expf(fmaf(stddev, v.x, mean));
  v.y = expf(fmaf(stddev, v.y, mean));
  return v;
}

POLYPY_CR double curand_log_normal_double(curandStatePhilox4_32_10_t* state, double mean, double stddev) {
  if (state->boxmuller_flag_double == POLYPY_CURAND_CACHED_LOG_NORMAL) {
    state->boxmuller_flag_double = 0;
    return state->boxmuller_extra_double;
  }
  uint4 x = curand4(state);
  double2 p = polypy_curand_box_muller_double(x.x, x.y, x.z, x.w);
  state->boxmuller_extra_double = exp(fma(stddev, p.y, mean));
  state->boxmuller_flag_double = POLYPY_CURAND_CACHED_LOG_NORMAL;
  return exp(fma(stddev, p.x, mean));
}

POLYPY_CR double2 curand_log_normal2_double(curandStatePhilox4_32_10_t* state, double mean, double stddev) {
  double2 v = curand_normal2_double(state);
  v.x = exp(fma(stddev, v.x, mean));
  v.y = exp(fma(stddev, v.y, mean));
  return v;
}

/* cuRAND's Poisson and discrete distributions are not provided (declared so that a use is a
 * located error naming them). */
#define POLYPY_CR_NO(what) static __host__ __device__ __attribute__((unavailable( \
  what " of cuRAND is not supported by polypy")))
POLYPY_CR_NO("curand_poisson") unsigned int curand_poisson(curandStateXORWOW_t* state, double lambda);
POLYPY_CR_NO("curand_poisson") unsigned int curand_poisson(curandStatePhilox4_32_10_t* state, double lambda);
POLYPY_CR_NO("curand_poisson4") uint4 curand_poisson4(curandStatePhilox4_32_10_t* state, double lambda);
POLYPY_CR_NO("curand_discrete") unsigned int curand_discrete(curandStateXORWOW_t* state, const void* distribution);
POLYPY_CR_NO("curand_discrete") unsigned int curand_discrete(curandStatePhilox4_32_10_t* state, const void* distribution);
POLYPY_CR_NO("curand_discrete4") uint4 curand_discrete4(curandStatePhilox4_32_10_t* state, const void* distribution);

#endif

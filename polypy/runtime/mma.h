/* polypy's <mma.h>: warp matrix operations (nvcuda::wmma) for one warp's 32 lanes.
 *
 * polypy's frontend translates the definitions below (under POLYPY_DEVICE_H, its device prelude)
 * as it translates the user's device code; a translated program's host code sees the
 * declarations only. Every operation is collective: all 32 lanes of a warp call it together, as
 * CUDA requires. What they mean (docs/warp_matrix.md):
 *
 *  - a fragment holds its tile (rows x cols: matrix_a M x K, matrix_b K x N, accumulator M x N)
 *    spread over the warp: each lane owns a block of the accumulator (__polypy_block), held in
 *    its accumulator fragments (each element in one lane); its matrix_a fragments hold the A rows
 *    of that block, its matrix_b fragments the B columns (inputs held by several lanes).
 *    CUDA leaves this mapping unspecified, so any fixed one is exact for programs that use only
 *    the documented operations (element-wise use of x[i] among them);
 *  - load_matrix_sync / store_matrix_sync first meet the warp's other lanes (a shuffle of every
 *    lane: what each lane did before is done before any lane loads or stores), then move the
 *    lane's own elements (row-major: element (r, c) at p[r * ldm + c], column-major: p[c * ldm + r]);
 *  - mma_sync computes the lane's block of D = A * B + C from its own A rows and B columns (no
 *    shuffle): acc = C[r][c]; for k = 0 .. K-1 ascending: acc += A[r][k] * B[k][c],
 *    each product of the inputs widened exactly (half, bfloat16, tf32 -> float; int8 -> int;
 *    double stays double), accumulated in float (double, int) and rounded to the accumulator's
 *    type at the end. precision::tf32 inputs are first rounded to tf32 as __float_to_tf32 does
 *    (to nearest, ties away from zero, 10 fraction bits).
 */
#ifndef POLYPY_MMA_H
#define POLYPY_MMA_H

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace nvcuda {
namespace wmma {

struct matrix_a { };
struct matrix_b { };
struct accumulator { };
struct row_major { };
struct col_major { };
enum layout_t { mem_row_major, mem_col_major };
namespace precision {
struct tf32 { };
}

template <typename Use, int M, int N, int K> struct __polypy_dims;
template <int M, int N, int K> struct __polypy_dims<matrix_a, M, N, K> { static constexpr int rows = M, cols = K; };
template <int M, int N, int K> struct __polypy_dims<matrix_b, M, N, K> { static constexpr int rows = K, cols = N; };
template <int M, int N, int K> struct __polypy_dims<accumulator, M, N, K> { static constexpr int rows = M, cols = N; };

template <typename T> struct __polypy_storage { typedef T type; };
template <> struct __polypy_storage<precision::tf32> { typedef float type; };

/* The block of an M x N accumulator each lane holds: rows x cols, the 32 blocks tiling the tile
 * (fewest inputs per lane: rows + cols smallest). Shapes without one are not supported. */
template <int M, int N> struct __polypy_block;
template <> struct __polypy_block<16, 16> { static constexpr int rows = 2, cols = 4; };
template <> struct __polypy_block<32, 8> { static constexpr int rows = 4, cols = 2; };
template <> struct __polypy_block<8, 32> { static constexpr int rows = 2, cols = 4; };
template <> struct __polypy_block<8, 8> { static constexpr int rows = 1, cols = 2; };

/* Elements per lane: an accumulator's block; matrix_a: the block's rows of A (rows x K); matrix_b:
 * the block's columns of B (K x cols). */
template <typename Use, int M, int N, int K> struct __polypy_count;
template <int M, int N, int K> struct __polypy_count<matrix_a, M, N, K> {
  static constexpr int value = __polypy_block<M, N>::rows * K;
};
template <int M, int N, int K> struct __polypy_count<matrix_b, M, N, K> {
  static constexpr int value = __polypy_block<M, N>::cols * K;
};
template <int M, int N, int K> struct __polypy_count<accumulator, M, N, K> {
  static constexpr int value = __polypy_block<M, N>::rows * __polypy_block<M, N>::cols;
};

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
class fragment {
public:
  typedef typename __polypy_storage<T>::type element_type;
  static constexpr int num_elements = __polypy_count<Use, M, N, K>::value;
  element_type x[num_elements];
};

template <typename Use, int M, int N, int K, typename T, typename Layout, typename V>
__device__ void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, const V& value);
template <typename Use, int M, int N, int K, typename T, typename Layout>
__device__ void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const typename __polypy_storage<T>::type* p,
                                 unsigned ldm);
template <int M, int N, int K, typename T>
__device__ void load_matrix_sync(fragment<accumulator, M, N, K, T, void>& f, const T* p, unsigned ldm, layout_t layout);
template <int M, int N, int K, typename T>
__device__ void store_matrix_sync(T* p, const fragment<accumulator, M, N, K, T, void>& f, unsigned ldm,
                                  layout_t layout);
template <int M, int N, int K, typename TA, typename LA, typename TB, typename LB, typename TC, typename TD>
__device__ void mma_sync(fragment<accumulator, M, N, K, TD, void>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                         const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, TC, void>& c);
__device__ float __float_to_tf32(float in);

#ifdef POLYPY_DEVICE_H
/* This thread's lane in its warp, after every lane of the warp has come here (a full-warp shuffle). */
__device__ inline unsigned __polypy_wmma_lane() {
  unsigned lane = (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u;
  return __shfl_sync(0xffffffffu, lane, (int)lane);
}

/* Inputs widened exactly: the type products are made in. */
__device__ inline float __polypy_wmma_wide(float v) { return v; }
__device__ inline double __polypy_wmma_wide(double v) { return v; }
/* half -> float exactly, as __half2float (every half is a float), in fewer operations: the 15 bits
 * below the sign moved to a float's exponent and fraction fields (h << 13) read as a float whose
 * exponent is 112 too small (a half subnormal becomes a float subnormal of the same fraction), so
 * one multiplication by 2^112 (exact: no bit is lost) gives the value; exponent 31 (infinities,
 * NaNs) becomes 255 keeping the payload; then the sign. The multiplication is not under the
 * condition (a select of bits, which compilers make branch-free). All 65536 halves give
 * __half2float's bits (tests/test_warp_matrix_exact.py), as long as subnormal floats are not
 * flushed to zero: polypy's C is compiled without -ffast-math and the LLVM JIT uses no fast-math
 * flags. */
__device__ inline float __polypy_wmma_wide(__half v) {
  unsigned int h = (unsigned int)__half_as_ushort(v);
  unsigned int bits = (h & 0x7fffu) << 13;
  unsigned int scaled = __float_as_uint(__uint_as_float(bits) * 5.192296858534828e+33f);
  return __uint_as_float(((h & 0x7c00u) == 0x7c00u ? (bits | 0x7f800000u) : scaled) | ((h & 0x8000u) << 16));
}
__device__ inline float __polypy_wmma_wide(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline int __polypy_wmma_wide(signed char v) { return (int)v; }
__device__ inline int __polypy_wmma_wide(unsigned char v) { return (int)v; }
__device__ inline int __polypy_wmma_wide(int v) { return v; }

/* The accumulator's type from the sum. */
__device__ inline void __polypy_wmma_set(float& x, float v) { x = v; }
__device__ inline void __polypy_wmma_set(double& x, double v) { x = v; }
__device__ inline void __polypy_wmma_set(__half& x, float v) { x = __float2half(v); }
__device__ inline void __polypy_wmma_set(int& x, int v) { x = v; }

/* Element e of this lane: (row r, column c) of the tile (matrix_b's elements in column-major order). */
template <typename Use> struct __polypy_order { static constexpr bool column_major = false; };
template <> struct __polypy_order<matrix_b> { static constexpr bool column_major = true; };
template <typename Layout> struct __polypy_layout { static constexpr bool column_major = false; };
template <> struct __polypy_layout<col_major> { static constexpr bool column_major = true; };

/* Where element e of lane l's fragment is in its tile (row r, column c): the lane's block is
 * (l / (N / cols), l % (N / cols)) in the grid of blocks; matrix_a holds the block's rows (element
 * e: row e / K, column e % K), matrix_b its columns (element e: column e / K, row e % K), an
 * accumulator the block itself, row-major. Element e = i * inner + j: the i-th of the fragment's
 * `outer` rows (matrix_a, accumulator) or columns (matrix_b), its j-th element along it, so that
 * loads and stores walk one row or column at a time. */
template <int M, int N> __device__ inline int __polypy_block_row(unsigned lane) {
  return (int)lane / (N / __polypy_block<M, N>::cols) * __polypy_block<M, N>::rows;
}
template <int M, int N> __device__ inline int __polypy_block_col(unsigned lane) {
  return (int)lane % (N / __polypy_block<M, N>::cols) * __polypy_block<M, N>::cols;
}
template <typename Use, int M, int N, int K> struct __polypy_place;
template <int M, int N, int K> struct __polypy_place<matrix_a, M, N, K> {
  static constexpr int outer = __polypy_block<M, N>::rows, inner = K;
  __device__ static void at(unsigned lane, int i, int j, int& r, int& c) {
    r = __polypy_block_row<M, N>(lane) + i;
    c = j;
  }
};
template <int M, int N, int K> struct __polypy_place<matrix_b, M, N, K> {
  static constexpr int outer = __polypy_block<M, N>::cols, inner = K;
  __device__ static void at(unsigned lane, int i, int j, int& r, int& c) {
    r = j;
    c = __polypy_block_col<M, N>(lane) + i;
  }
};
template <int M, int N, int K> struct __polypy_place<accumulator, M, N, K> {
  static constexpr int outer = __polypy_block<M, N>::rows, inner = __polypy_block<M, N>::cols;
  __device__ static void at(unsigned lane, int i, int j, int& r, int& c) {
    r = __polypy_block_row<M, N>(lane) + i;
    c = __polypy_block_col<M, N>(lane) + j;
  }
};

template <typename Use, int M, int N, int K, typename T, typename Layout, typename V>
__device__ void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, const V& value) {
  for (int e = 0; e < fragment<Use, M, N, K, T, Layout>::num_elements; ++e) f.x[e] = value;
}

template <typename Use, int M, int N, int K, typename T, typename Layout>
__device__ void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const typename __polypy_storage<T>::type* p,
                                 unsigned ldm) {
  typedef __polypy_place<Use, M, N, K> place;
  unsigned lane = __polypy_wmma_lane();
  for (int i = 0; i < place::outer; ++i) {
    for (int j = 0; j < place::inner; ++j) {
      int r, c;
      place::at(lane, i, j, r, c);
      f.x[i * place::inner + j] = __polypy_layout<Layout>::column_major ? p[(unsigned long long)c * ldm + (unsigned long long)r] : p[(unsigned long long)r * ldm + (unsigned long long)c];
    }
  }
}

template <int M, int N, int K, typename T>
__device__ void load_matrix_sync(fragment<accumulator, M, N, K, T, void>& f, const T* p, unsigned ldm, layout_t layout) {
  typedef __polypy_place<accumulator, M, N, K> place;
  unsigned lane = __polypy_wmma_lane();
  for (int i = 0; i < place::outer; ++i) {
    for (int j = 0; j < place::inner; ++j) {
      int r, c;
      place::at(lane, i, j, r, c);
      f.x[i * place::inner + j] = layout == mem_col_major ? p[(unsigned long long)c * ldm + (unsigned long long)r] : p[(unsigned long long)r * ldm + (unsigned long long)c];
    }
  }
}

template <int M, int N, int K, typename T>
__device__ void store_matrix_sync(T* p, const fragment<accumulator, M, N, K, T, void>& f, unsigned ldm,
                                  layout_t layout) {
  typedef __polypy_place<accumulator, M, N, K> place;
  unsigned lane = __polypy_wmma_lane();
  for (int i = 0; i < place::outer; ++i) {
    for (int j = 0; j < place::inner; ++j) {
      int r, c;
      place::at(lane, i, j, r, c);
      if (layout == mem_col_major) p[(unsigned long long)c * ldm + (unsigned long long)r] = f.x[i * place::inner + j]; else p[(unsigned long long)r * ldm + (unsigned long long)c] = f.x[i * place::inner + j];
    }
  }
}

/* tf32: 10 fraction bits, to nearest with ties away from zero (PTX cvt.rna.tf32.f32); infinities and
 * NaNs unchanged. */
__device__ inline float __float_to_tf32(float in) {
  unsigned u = __float_as_uint(in);
  if ((u & 0x7f800000u) == 0x7f800000u) return in;
  return __uint_as_float((u + 0x1000u) & 0xffffe000u);
}

template <typename T> struct __polypy_tf32 { static constexpr bool value = false; };
template <> struct __polypy_tf32<precision::tf32> { static constexpr bool value = true; };

/* One lane's block of D = A * B + C, rows x cols (R x C): the sums in scalars (registers, not
 * per-thread arrays in memory), each step k widening the lane's R inputs of A's column k and C
 * inputs of B's row k once (and rounding them to tf32 for precision::tf32) and adding the R * C
 * products, so that every element is summed in k order. A specialization per block shape. */
#define __POLYPY_WMMA_IN(name, T, v)                               \
  decltype(__polypy_wmma_wide(v)) name = __polypy_wmma_wide(v); \
  if (__polypy_tf32<T>::value) name = __float_to_tf32(name);
template <int R, int C> struct __polypy_mma;
template <> struct __polypy_mma<2, 4> {
  template <int K, typename TA, typename TB, typename FD, typename FA, typename FB, typename FC>
  __device__ static void run(FD& d, const FA& a, const FB& b, const FC& c) {
    decltype(__polypy_wmma_wide(c.x[0])) s0 = __polypy_wmma_wide(c.x[0]), s1 = __polypy_wmma_wide(c.x[1]),
        s2 = __polypy_wmma_wide(c.x[2]), s3 = __polypy_wmma_wide(c.x[3]), s4 = __polypy_wmma_wide(c.x[4]),
        s5 = __polypy_wmma_wide(c.x[5]), s6 = __polypy_wmma_wide(c.x[6]), s7 = __polypy_wmma_wide(c.x[7]);
    for (int k = 0; k < K; ++k) {
      __POLYPY_WMMA_IN(a0, TA, a.x[k]) __POLYPY_WMMA_IN(a1, TA, a.x[K + k])
      __POLYPY_WMMA_IN(b0, TB, b.x[k]) __POLYPY_WMMA_IN(b1, TB, b.x[K + k])
      __POLYPY_WMMA_IN(b2, TB, b.x[2 * K + k]) __POLYPY_WMMA_IN(b3, TB, b.x[3 * K + k])
      s0 = s0 + a0 * b0; s1 = s1 + a0 * b1; s2 = s2 + a0 * b2; s3 = s3 + a0 * b3;
      s4 = s4 + a1 * b0; s5 = s5 + a1 * b1; s6 = s6 + a1 * b2; s7 = s7 + a1 * b3;
    }
    __polypy_wmma_set(d.x[0], s0); __polypy_wmma_set(d.x[1], s1); __polypy_wmma_set(d.x[2], s2);
    __polypy_wmma_set(d.x[3], s3); __polypy_wmma_set(d.x[4], s4); __polypy_wmma_set(d.x[5], s5);
    __polypy_wmma_set(d.x[6], s6); __polypy_wmma_set(d.x[7], s7);
  }
};
template <> struct __polypy_mma<4, 2> {
  template <int K, typename TA, typename TB, typename FD, typename FA, typename FB, typename FC>
  __device__ static void run(FD& d, const FA& a, const FB& b, const FC& c) {
    decltype(__polypy_wmma_wide(c.x[0])) s0 = __polypy_wmma_wide(c.x[0]), s1 = __polypy_wmma_wide(c.x[1]),
        s2 = __polypy_wmma_wide(c.x[2]), s3 = __polypy_wmma_wide(c.x[3]), s4 = __polypy_wmma_wide(c.x[4]),
        s5 = __polypy_wmma_wide(c.x[5]), s6 = __polypy_wmma_wide(c.x[6]), s7 = __polypy_wmma_wide(c.x[7]);
    for (int k = 0; k < K; ++k) {
      __POLYPY_WMMA_IN(a0, TA, a.x[k]) __POLYPY_WMMA_IN(a1, TA, a.x[K + k])
      __POLYPY_WMMA_IN(a2, TA, a.x[2 * K + k]) __POLYPY_WMMA_IN(a3, TA, a.x[3 * K + k])
      __POLYPY_WMMA_IN(b0, TB, b.x[k]) __POLYPY_WMMA_IN(b1, TB, b.x[K + k])
      s0 = s0 + a0 * b0; s1 = s1 + a0 * b1; s2 = s2 + a1 * b0; s3 = s3 + a1 * b1;
      s4 = s4 + a2 * b0; s5 = s5 + a2 * b1; s6 = s6 + a3 * b0; s7 = s7 + a3 * b1;
    }
    __polypy_wmma_set(d.x[0], s0); __polypy_wmma_set(d.x[1], s1); __polypy_wmma_set(d.x[2], s2);
    __polypy_wmma_set(d.x[3], s3); __polypy_wmma_set(d.x[4], s4); __polypy_wmma_set(d.x[5], s5);
    __polypy_wmma_set(d.x[6], s6); __polypy_wmma_set(d.x[7], s7);
  }
};
template <> struct __polypy_mma<1, 2> {
  template <int K, typename TA, typename TB, typename FD, typename FA, typename FB, typename FC>
  __device__ static void run(FD& d, const FA& a, const FB& b, const FC& c) {
    decltype(__polypy_wmma_wide(c.x[0])) s0 = __polypy_wmma_wide(c.x[0]), s1 = __polypy_wmma_wide(c.x[1]);
    for (int k = 0; k < K; ++k) {
      __POLYPY_WMMA_IN(a0, TA, a.x[k])
      __POLYPY_WMMA_IN(b0, TB, b.x[k]) __POLYPY_WMMA_IN(b1, TB, b.x[K + k])
      s0 = s0 + a0 * b0; s1 = s1 + a0 * b1;
    }
    __polypy_wmma_set(d.x[0], s0); __polypy_wmma_set(d.x[1], s1);
  }
};
#undef __POLYPY_WMMA_IN

template <int M, int N, int K, typename TA, typename LA, typename TB, typename LB, typename TC, typename TD>
__device__ void mma_sync(fragment<accumulator, M, N, K, TD, void>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                         const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, TC, void>& c) {
  /* Lane-local: a lane's A rows and B columns are those of its block of D (no other lane's). */
  __polypy_mma<__polypy_block<M, N>::rows, __polypy_block<M, N>::cols>::template run<K, TA, TB>(d, a, b, c);
}
#endif

}  // namespace wmma
}  // namespace nvcuda

#endif

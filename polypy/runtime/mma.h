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
__device__ inline float __polypy_wmma_wide(__half v) { return __half2float(v); }
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
 * accumulator the block itself, row-major. */
template <int M, int N> __device__ inline int __polypy_block_row(unsigned lane) {
  return (int)lane / (N / __polypy_block<M, N>::cols) * __polypy_block<M, N>::rows;
}
template <int M, int N> __device__ inline int __polypy_block_col(unsigned lane) {
  return (int)lane % (N / __polypy_block<M, N>::cols) * __polypy_block<M, N>::cols;
}
template <typename Use> struct __polypy_place;
template <> struct __polypy_place<matrix_a> {
  template <int M, int N, int K> __device__ static void at(unsigned lane, int e, int& r, int& c) {
    r = __polypy_block_row<M, N>(lane) + e / K;
    c = e % K;
  }
};
template <> struct __polypy_place<matrix_b> {
  template <int M, int N, int K> __device__ static void at(unsigned lane, int e, int& r, int& c) {
    r = e % K;
    c = __polypy_block_col<M, N>(lane) + e / K;
  }
};
template <> struct __polypy_place<accumulator> {
  template <int M, int N, int K> __device__ static void at(unsigned lane, int e, int& r, int& c) {
    r = __polypy_block_row<M, N>(lane) + e / __polypy_block<M, N>::cols;
    c = __polypy_block_col<M, N>(lane) + e % __polypy_block<M, N>::cols;
  }
};
template <typename Use, int M, int N, int K>
__device__ void __polypy_wmma_place(unsigned lane, int e, int& r, int& c) {
  __polypy_place<Use>::template at<M, N, K>(lane, e, r, c);
}

template <typename Use, int M, int N, int K, typename T, typename Layout, typename V>
__device__ void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, const V& value) {
  for (int e = 0; e < fragment<Use, M, N, K, T, Layout>::num_elements; ++e) f.x[e] = value;
}

template <typename Use, int M, int N, int K, typename T, typename Layout>
__device__ void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const typename __polypy_storage<T>::type* p,
                                 unsigned ldm) {
  unsigned lane = __polypy_wmma_lane();
  for (int e = 0; e < fragment<Use, M, N, K, T, Layout>::num_elements; ++e) {
    int r, c;
    __polypy_wmma_place<Use, M, N, K>(lane, e, r, c);
    f.x[e] = __polypy_layout<Layout>::column_major ? p[c * ldm + r] : p[r * ldm + c];
  }
}

template <int M, int N, int K, typename T>
__device__ void load_matrix_sync(fragment<accumulator, M, N, K, T, void>& f, const T* p, unsigned ldm, layout_t layout) {
  unsigned lane = __polypy_wmma_lane();
  for (int e = 0; e < fragment<accumulator, M, N, K, T, void>::num_elements; ++e) {
    int r, c;
    __polypy_wmma_place<accumulator, M, N, K>(lane, e, r, c);
    f.x[e] = layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c];
  }
}

template <int M, int N, int K, typename T>
__device__ void store_matrix_sync(T* p, const fragment<accumulator, M, N, K, T, void>& f, unsigned ldm,
                                  layout_t layout) {
  unsigned lane = __polypy_wmma_lane();
  for (int e = 0; e < fragment<accumulator, M, N, K, T, void>::num_elements; ++e) {
    int r, c;
    __polypy_wmma_place<accumulator, M, N, K>(lane, e, r, c);
    if (layout == mem_col_major) p[c * ldm + r] = f.x[e]; else p[r * ldm + c] = f.x[e];
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

template <int M, int N, int K, typename TA, typename LA, typename TB, typename LB, typename TC, typename TD>
__device__ void mma_sync(fragment<accumulator, M, N, K, TD, void>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                         const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, TC, void>& c) {
  /* Lane-local: a lane's A rows and B columns are those of its block of D (no other lane's).
   * Each input is widened (and rounded to tf32) once per call, not once per product. */
  const int R = __polypy_block<M, N>::rows, C = __polypy_block<M, N>::cols;
  decltype(__polypy_wmma_wide(a.x[0])) aw[R * K];
  decltype(__polypy_wmma_wide(b.x[0])) bw[C * K];
  for (int e = 0; e < R * K; ++e) {
    aw[e] = __polypy_wmma_wide(a.x[e]);
    if (__polypy_tf32<TA>::value) aw[e] = __float_to_tf32(aw[e]);
  }
  for (int e = 0; e < C * K; ++e) {
    bw[e] = __polypy_wmma_wide(b.x[e]);
    if (__polypy_tf32<TB>::value) bw[e] = __float_to_tf32(bw[e]);
  }
  for (int i = 0; i < R; ++i) {
    for (int j = 0; j < C; ++j) {
      decltype(__polypy_wmma_wide(c.x[0])) acc = __polypy_wmma_wide(c.x[i * C + j]);
      for (int k = 0; k < K; ++k) acc += aw[i * K + k] * bw[j * K + k];
      __polypy_wmma_set(d.x[i * C + j], acc);
    }
  }
}
#endif

}  // namespace wmma
}  // namespace nvcuda

#endif

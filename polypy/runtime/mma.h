/* polypy's <mma.h>: warp matrix operations (nvcuda::wmma) for one warp's 32 lanes.
 *
 * polypy's frontend translates the definitions below (under POLYPY_DEVICE_H, its device prelude)
 * as it translates the user's device code; a translated program's host code sees the
 * declarations only. Every operation is collective: all 32 lanes of a warp call it together, as
 * CUDA requires. What they mean (docs/warp_matrix.md):
 *
 *  - a fragment holds its tile (rows x cols: matrix_a M x K, matrix_b K x N, accumulator M x N)
 *    spread over the warp: lane l holds elements l*E .. l*E+E-1 (E = num_elements = rows*cols/32)
 *    of the tile in row-major order (matrix_a, accumulator) or column-major order (matrix_b).
 *    CUDA leaves this mapping unspecified, so any fixed one is exact for programs that use only
 *    the documented operations (element-wise use of x[i] among them);
 *  - load_matrix_sync / store_matrix_sync first meet the warp's other lanes (a shuffle of every
 *    lane: what each lane did before is done before any lane loads or stores), then move the
 *    lane's own elements (row-major: element (r, c) at p[r * ldm + c], column-major: p[c * ldm + r]);
 *  - mma_sync computes every element of D = A * B + C from the other lanes' elements of A and B
 *    fetched with shuffles: acc = C[r][c]; for k = 0 .. K-1 ascending: acc += A[r][k] * B[k][c],
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

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
class fragment {
public:
  typedef typename __polypy_storage<T>::type element_type;
  static constexpr int num_elements = __polypy_dims<Use, M, N, K>::rows * __polypy_dims<Use, M, N, K>::cols / 32;
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

template <typename Use, int M, int N, int K>
__device__ void __polypy_wmma_place(unsigned lane, int e, int& r, int& c) {
  int id = (int)lane * (__polypy_dims<Use, M, N, K>::rows * __polypy_dims<Use, M, N, K>::cols / 32) + e;
  if (__polypy_order<Use>::column_major) {
    c = id / __polypy_dims<Use, M, N, K>::rows;
    r = id % __polypy_dims<Use, M, N, K>::rows;
  } else {
    r = id / __polypy_dims<Use, M, N, K>::cols;
    c = id % __polypy_dims<Use, M, N, K>::cols;
  }
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
  const int EA = M * K / 32, EB = K * N / 32, EC = M * N / 32;
  static_assert(K % EA == 0 && K % EB == 0, "polypy: this fragment shape is not supported");
  unsigned lane = __polypy_wmma_lane();
  for (int e = 0; e < EC; ++e) {
    int r, col;
    __polypy_wmma_place<accumulator, M, N, K>(lane, e, r, col);
    decltype(__polypy_wmma_wide(c.x[0])) acc = __polypy_wmma_wide(c.x[e]);
    for (int k = 0; k < K; ++k) {
      /* A[r][k] is element k % EA of lane (r*K + k) / EA; B[k][col] element k % EB of lane (col*K + k) / EB:
       * the element is the same in every lane, so one shuffle of it gives each lane the one it needs. */
      auto av = __shfl_sync(0xffffffffu, __polypy_wmma_wide(a.x[k % EA]), (r * K + k) / EA);
      auto bv = __shfl_sync(0xffffffffu, __polypy_wmma_wide(b.x[k % EB]), (col * K + k) / EB);
      if (__polypy_tf32<TA>::value) av = __float_to_tf32(av);
      if (__polypy_tf32<TB>::value) bv = __float_to_tf32(bv);
      acc += av * bv;
    }
    __polypy_wmma_set(d.x[e], acc);
  }
}
#endif

}  // namespace wmma
}  // namespace nvcuda

#endif

/* polypy's <cub/thread/thread_operators.cuh>: CUB's binary operators, with CUB's meaning
 * (cub::Max is cuda::maximum: `a < b ? b : a`; cub::Min: `a < b ? a : b`).
 * Written for polypy (docs/cub.md); translated with the kernels that use them. */
#ifndef POLYPY_CUB_THREAD_OPERATORS_CUH
#define POLYPY_CUB_THREAD_OPERATORS_CUH

namespace cub {

struct Sum {
  template <typename T>
  __host__ __device__ __forceinline__ T operator()(const T& a, const T& b) const { return a + b; }
};

struct Max {
  template <typename T>
  __host__ __device__ __forceinline__ T operator()(const T& a, const T& b) const { return a < b ? b : a; }
};

struct Min {
  template <typename T>
  __host__ __device__ __forceinline__ T operator()(const T& a, const T& b) const { return a < b ? a : b; }
};

struct Equality {
  template <typename T>
  __host__ __device__ __forceinline__ bool operator()(const T& a, const T& b) const { return a == b; }
};

struct Inequality {
  template <typename T>
  __host__ __device__ __forceinline__ bool operator()(const T& a, const T& b) const { return a != b; }
};

/* The type CUB names for "no value" (BlockRadixSort's keys-only form). */
struct NullType {};

}  // namespace cub

#endif

/* polypy's <cub/warp/warp_reduce.cuh>: cub::WarpReduce with CUB's interface and meaning.
 *
 * Every thread of a logical warp (LOGICAL_WARP_THREADS consecutive lanes of a hardware warp, a
 * power of two up to 32) calls the reduction; lane 0 of each logical warp receives the
 * aggregate, the other lanes' results are unspecified, as in CUB. `valid_items` leaves out the
 * lanes at or past it. Lanes are combined pairwise through warp shuffles (lane i with i + 1,
 * then with i + 2, ...), which polypy runs with CUDA's lockstep meaning. Written for polypy
 * (docs/cub.md). */
#ifndef POLYPY_CUB_WARP_REDUCE_CUH
#define POLYPY_CUB_WARP_REDUCE_CUH

#include <cub/util_ptx.cuh>
#include <cub/thread/thread_operators.cuh>

#ifdef POLYPY_DEVICE_H /* polypy's frontend reads the definitions; a translated program's C++ does not need them */
namespace cub {

template <typename T, int LOGICAL_WARP_THREADS = 32, int LEGACY_PTX_ARCH = 0>
class WarpReduce {
  static_assert(LOGICAL_WARP_THREADS >= 1 && LOGICAL_WARP_THREADS <= 32 &&
                (LOGICAL_WARP_THREADS & (LOGICAL_WARP_THREADS - 1)) == 0,
                "polypy: cub::WarpReduce supports logical warps of a power of two up to 32 threads");

 public:
  struct TempStorage { unsigned char __polypy_unused; };

  __device__ __forceinline__ WarpReduce(TempStorage&) {}

  template <typename ReductionOp>
  __device__ __forceinline__ T Reduce(T input, ReductionOp reduction_op, int valid_items) {
    const int rank = RowMajorTid((int)blockDim.x, (int)blockDim.y, (int)blockDim.z);
    const int lane = rank % LOGICAL_WARP_THREADS;
    T value = input;
    for (int offset = 1; offset < LOGICAL_WARP_THREADS; offset *= 2) {
      T other = __shfl_down_sync(0xffffffffu, value, offset, LOGICAL_WARP_THREADS);
      if (lane + offset < valid_items)
        value = reduction_op(value, other);
    }
    return value;
  }

  template <typename ReductionOp>
  __device__ __forceinline__ T Reduce(T input, ReductionOp reduction_op) {
    return Reduce(input, reduction_op, LOGICAL_WARP_THREADS);
  }

  __device__ __forceinline__ T Sum(T input) { return Reduce(input, cub::Sum(), LOGICAL_WARP_THREADS); }

  __device__ __forceinline__ T Sum(T input, int valid_items) { return Reduce(input, cub::Sum(), valid_items); }
};

}  // namespace cub
#endif /* POLYPY_DEVICE_H */

#endif

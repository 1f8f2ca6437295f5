/* polypy's <cub/block/block_reduce.cuh>: cub::BlockReduce with CUB's interface and meaning.
 *
 * Every thread of the block calls a reduction; the block's aggregate is returned to thread 0
 * (linear rank (z * BLOCK_DIM_Y + y) * BLOCK_DIM_X + x), the other threads' results are
 * unspecified, as in CUB. The reduction runs in the threads' rank order, item order within a
 * thread (CUB leaves the association order of a reduction unspecified; a floating-point sum
 * may differ in its last bits from a GPU's). The storage is a per-block array of the class's
 * own; `TempStorage` exists so that programs declare it as CUB asks (it holds nothing used),
 * and a barrier at the end of each call makes the array's reuse safe (CUB asks for a
 * `__syncthreads()` between reuses of a `TempStorage`; the programs' own stay as they are). Written for polypy (docs/cub.md). */
#ifndef POLYPY_CUB_BLOCK_REDUCE_CUH
#define POLYPY_CUB_BLOCK_REDUCE_CUH

#include <cub/util_ptx.cuh>
#include <cub/thread/thread_operators.cuh>

#ifdef POLYPY_DEVICE_H /* polypy's frontend reads the definitions; a translated program's C++ does not need them */
namespace cub {

enum BlockReduceAlgorithm {
  BLOCK_REDUCE_RAKING_COMMUTATIVE_ONLY,
  BLOCK_REDUCE_RAKING,
  BLOCK_REDUCE_WARP_REDUCTIONS
};

template <typename T, int BLOCK_DIM_X, BlockReduceAlgorithm ALGORITHM = BLOCK_REDUCE_WARP_REDUCTIONS,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockReduce {
 public:
  enum { BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z };
  struct TempStorage { unsigned char __polypy_unused; };

  __device__ __forceinline__ BlockReduce() {}
  __device__ __forceinline__ BlockReduce(TempStorage&) {}

  template <typename ReductionOp>
  __device__ __forceinline__ T Reduce(T input, ReductionOp reduction_op) {
    return Reduce(input, reduction_op, BLOCK_THREADS);
  }

  template <typename ReductionOp>
  __device__ __forceinline__ T Reduce(T input, ReductionOp reduction_op, int num_valid) {
    __shared__ T items[BLOCK_THREADS];
    const int rank = RowMajorTid(BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z);
    items[rank] = input;
    __syncthreads();
    T aggregate = input;
    if (rank == 0) {
      for (int i = 1; i < num_valid; ++i)
        aggregate = reduction_op(aggregate, items[i]);
    }
    __syncthreads();
    return aggregate;
  }

  template <int ITEMS_PER_THREAD, typename ReductionOp>
  __device__ __forceinline__ T Reduce(T (&inputs)[ITEMS_PER_THREAD], ReductionOp reduction_op) {
    T partial = inputs[0];
    for (int i = 1; i < ITEMS_PER_THREAD; ++i)
      partial = reduction_op(partial, inputs[i]);
    return Reduce(partial, reduction_op, BLOCK_THREADS);
  }

  __device__ __forceinline__ T Sum(T input) { return Reduce(input, cub::Sum(), BLOCK_THREADS); }

  __device__ __forceinline__ T Sum(T input, int num_valid) { return Reduce(input, cub::Sum(), num_valid); }

  template <int ITEMS_PER_THREAD>
  __device__ __forceinline__ T Sum(T (&inputs)[ITEMS_PER_THREAD]) { return Reduce(inputs, cub::Sum()); }
};

}  // namespace cub
#endif /* POLYPY_DEVICE_H */

#endif

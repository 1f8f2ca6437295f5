/* polypy's <cub/block/block_store.cuh>: cub::BlockStore and the direct store functions, with CUB's
 * interface and meaning: each thread's items written to a tile of consecutive elements from a
 * blocked arrangement (every algorithm but BLOCK_STORE_STRIPED) or a striped one
 * (BLOCK_STORE_STRIPED); with `valid_items`, elements at or past it are not written. The block's
 * iterator is a pointer. Written for polypy (docs/cub.md). */
#ifndef POLYPY_CUB_BLOCK_STORE_CUH
#define POLYPY_CUB_BLOCK_STORE_CUH

#include <cub/util_ptx.cuh>

namespace cub {

enum BlockStoreAlgorithm {
  BLOCK_STORE_DIRECT,
  BLOCK_STORE_STRIPED,
  BLOCK_STORE_VECTORIZE,
  BLOCK_STORE_TRANSPOSE,
  BLOCK_STORE_WARP_TRANSPOSE,
  BLOCK_STORE_WARP_TRANSPOSE_TIMESLICED
};

#ifdef POLYPY_DEVICE_H /* polypy's frontend reads the definitions; a translated program's C++ does not need them */

template <typename T, int ITEMS_PER_THREAD>
__device__ __forceinline__ void StoreDirectBlocked(int linear_tid, T* block_itr, T (&items)[ITEMS_PER_THREAD]) {
  for (int i = 0; i < ITEMS_PER_THREAD; ++i) block_itr[linear_tid * ITEMS_PER_THREAD + i] = items[i];
}

template <typename T, int ITEMS_PER_THREAD>
__device__ __forceinline__ void StoreDirectBlocked(int linear_tid, T* block_itr, T (&items)[ITEMS_PER_THREAD],
                                                   int valid_items) {
  for (int i = 0; i < ITEMS_PER_THREAD; ++i)
    if (linear_tid * ITEMS_PER_THREAD + i < valid_items) block_itr[linear_tid * ITEMS_PER_THREAD + i] = items[i];
}

template <int BLOCK_THREADS, typename T, int ITEMS_PER_THREAD>
__device__ __forceinline__ void StoreDirectStriped(int linear_tid, T* block_itr, T (&items)[ITEMS_PER_THREAD]) {
  for (int i = 0; i < ITEMS_PER_THREAD; ++i) block_itr[i * BLOCK_THREADS + linear_tid] = items[i];
}

template <int BLOCK_THREADS, typename T, int ITEMS_PER_THREAD>
__device__ __forceinline__ void StoreDirectStriped(int linear_tid, T* block_itr, T (&items)[ITEMS_PER_THREAD],
                                                   int valid_items) {
  for (int i = 0; i < ITEMS_PER_THREAD; ++i)
    if (i * BLOCK_THREADS + linear_tid < valid_items) block_itr[i * BLOCK_THREADS + linear_tid] = items[i];
}

template <typename T, int BLOCK_DIM_X, int ITEMS_PER_THREAD, BlockStoreAlgorithm ALGORITHM = BLOCK_STORE_DIRECT,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockStore {
 public:
  enum { BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z };
  struct TempStorage { unsigned char __polypy_unused; };

  __device__ __forceinline__ BlockStore() {}
  __device__ __forceinline__ BlockStore(TempStorage&) {}

 private:
  __device__ __forceinline__ static int Rank() {
    return RowMajorTid(BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z);
  }
  __device__ __forceinline__ static int Slot(int i) {
    return ALGORITHM == BLOCK_STORE_STRIPED ? i * BLOCK_THREADS + Rank() : Rank() * ITEMS_PER_THREAD + i;
  }

 public:
  template <typename OutputT>
  __device__ __forceinline__ void Store(OutputT* block_itr, T (&items)[ITEMS_PER_THREAD]) {
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) block_itr[Slot(i)] = items[i];
  }

  template <typename OutputT>
  __device__ __forceinline__ void Store(OutputT* block_itr, T (&items)[ITEMS_PER_THREAD], int valid_items) {
    for (int i = 0; i < ITEMS_PER_THREAD; ++i)
      if (Slot(i) < valid_items) block_itr[Slot(i)] = items[i];
  }
};

#endif /* POLYPY_DEVICE_H */

}  // namespace cub

#endif

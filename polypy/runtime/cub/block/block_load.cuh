/* polypy's <cub/block/block_load.cuh>: cub::BlockLoad and the direct load functions, with CUB's
 * interface and meaning.
 *
 * A tile of BLOCK_THREADS x ITEMS_PER_THREAD consecutive elements read into each thread's items:
 * a blocked arrangement (thread of linear rank r gets elements r * ITEMS_PER_THREAD ...) for every
 * algorithm but BLOCK_LOAD_STRIPED, which gives a striped one (item i of thread r is element
 * i * BLOCK_THREADS + r). With `valid_items`, elements at or past it are not read: the item is
 * `oob_default` where one is given, else left as it was (CUB leaves it unspecified). The block's
 * iterator is a pointer. Written for polypy (docs/cub.md). */
#ifndef POLYPY_CUB_BLOCK_LOAD_CUH
#define POLYPY_CUB_BLOCK_LOAD_CUH

#include <cub/util_ptx.cuh>

namespace cub {

enum BlockLoadAlgorithm {
  BLOCK_LOAD_DIRECT,
  BLOCK_LOAD_STRIPED,
  BLOCK_LOAD_VECTORIZE,
  BLOCK_LOAD_TRANSPOSE,
  BLOCK_LOAD_WARP_TRANSPOSE,
  BLOCK_LOAD_WARP_TRANSPOSE_TIMESLICED
};

#ifdef POLYPY_DEVICE_H /* polypy's frontend reads the definitions; a translated program's C++ does not need them */

template <typename T, int ITEMS_PER_THREAD>
__device__ __forceinline__ void LoadDirectBlocked(int linear_tid, const T* block_itr, T (&items)[ITEMS_PER_THREAD]) {
  for (int i = 0; i < ITEMS_PER_THREAD; ++i) items[i] = block_itr[linear_tid * ITEMS_PER_THREAD + i];
}

template <typename T, int ITEMS_PER_THREAD>
__device__ __forceinline__ void LoadDirectBlocked(int linear_tid, const T* block_itr, T (&items)[ITEMS_PER_THREAD],
                                                  int valid_items) {
  for (int i = 0; i < ITEMS_PER_THREAD; ++i)
    if (linear_tid * ITEMS_PER_THREAD + i < valid_items) items[i] = block_itr[linear_tid * ITEMS_PER_THREAD + i];
}

template <typename T, int ITEMS_PER_THREAD, typename DefaultT>
__device__ __forceinline__ void LoadDirectBlocked(int linear_tid, const T* block_itr, T (&items)[ITEMS_PER_THREAD],
                                                  int valid_items, DefaultT oob_default) {
  for (int i = 0; i < ITEMS_PER_THREAD; ++i)
    items[i] = linear_tid * ITEMS_PER_THREAD + i < valid_items ? block_itr[linear_tid * ITEMS_PER_THREAD + i]
                                                               : (T)oob_default;
}

template <int BLOCK_THREADS, typename T, int ITEMS_PER_THREAD>
__device__ __forceinline__ void LoadDirectStriped(int linear_tid, const T* block_itr, T (&items)[ITEMS_PER_THREAD]) {
  for (int i = 0; i < ITEMS_PER_THREAD; ++i) items[i] = block_itr[i * BLOCK_THREADS + linear_tid];
}

template <int BLOCK_THREADS, typename T, int ITEMS_PER_THREAD>
__device__ __forceinline__ void LoadDirectStriped(int linear_tid, const T* block_itr, T (&items)[ITEMS_PER_THREAD],
                                                  int valid_items) {
  for (int i = 0; i < ITEMS_PER_THREAD; ++i)
    if (i * BLOCK_THREADS + linear_tid < valid_items) items[i] = block_itr[i * BLOCK_THREADS + linear_tid];
}

template <int BLOCK_THREADS, typename T, int ITEMS_PER_THREAD, typename DefaultT>
__device__ __forceinline__ void LoadDirectStriped(int linear_tid, const T* block_itr, T (&items)[ITEMS_PER_THREAD],
                                                  int valid_items, DefaultT oob_default) {
  for (int i = 0; i < ITEMS_PER_THREAD; ++i)
    items[i] = i * BLOCK_THREADS + linear_tid < valid_items ? block_itr[i * BLOCK_THREADS + linear_tid]
                                                            : (T)oob_default;
}

template <typename T, int BLOCK_DIM_X, int ITEMS_PER_THREAD, BlockLoadAlgorithm ALGORITHM = BLOCK_LOAD_DIRECT,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockLoad {
 public:
  enum { BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z };
  struct TempStorage { unsigned char __polypy_unused; };

  __device__ __forceinline__ BlockLoad() {}
  __device__ __forceinline__ BlockLoad(TempStorage&) {}

 private:
  __device__ __forceinline__ static int Rank() {
    return RowMajorTid(BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z);
  }
  /* Where item i of this thread comes from in the tile. */
  __device__ __forceinline__ static int Slot(int i) {
    return ALGORITHM == BLOCK_LOAD_STRIPED ? i * BLOCK_THREADS + Rank() : Rank() * ITEMS_PER_THREAD + i;
  }

 public:
  template <typename InputT>
  __device__ __forceinline__ void Load(InputT* block_itr, T (&items)[ITEMS_PER_THREAD]) {
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) items[i] = block_itr[Slot(i)];
  }

  template <typename InputT>
  __device__ __forceinline__ void Load(InputT* block_itr, T (&items)[ITEMS_PER_THREAD], int valid_items) {
    for (int i = 0; i < ITEMS_PER_THREAD; ++i)
      if (Slot(i) < valid_items) items[i] = block_itr[Slot(i)];
  }

  template <typename InputT, typename DefaultT>
  __device__ __forceinline__ void Load(InputT* block_itr, T (&items)[ITEMS_PER_THREAD], int valid_items,
                                       DefaultT oob_default) {
    for (int i = 0; i < ITEMS_PER_THREAD; ++i)
      items[i] = Slot(i) < valid_items ? (T)block_itr[Slot(i)] : (T)oob_default;
  }
};

#endif /* POLYPY_DEVICE_H */

}  // namespace cub

#endif

/* polypy's <cub/block/block_histogram.cuh>: cub::BlockHistogram with CUB's interface and meaning.
 *
 * Counts the block's BLOCK_THREADS x ITEMS_PER_THREAD items (each a bin index below BINS) into a
 * histogram of BINS counters that the program provides (usually in shared memory). `InitHistogram`
 * zeroes it (each thread a strided share of the bins); `Composite` adds the block's items to it (one
 * atomic increment per item: counts are exact whatever the order); `Histogram` is InitHistogram, a
 * barrier, Composite. Both algorithms (BLOCK_HISTO_SORT, BLOCK_HISTO_ATOMIC) count alike. Every thread
 * of the block calls them, as CUB requires. Written for polypy (docs/cub.md). */
#ifndef POLYPY_CUB_BLOCK_HISTOGRAM_CUH
#define POLYPY_CUB_BLOCK_HISTOGRAM_CUH

#include <cub/util_ptx.cuh>

namespace cub {

enum BlockHistogramAlgorithm { BLOCK_HISTO_SORT, BLOCK_HISTO_ATOMIC };

#ifdef POLYPY_DEVICE_H /* polypy's frontend reads the definitions; a translated program's C++ does not need them */

template <typename T, int BLOCK_DIM_X, int ITEMS_PER_THREAD, int BINS,
          BlockHistogramAlgorithm ALGORITHM = BLOCK_HISTO_SORT, int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1,
          int LEGACY_PTX_ARCH = 0>
class BlockHistogram {
 public:
  enum { BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z };
  struct TempStorage { unsigned char __polypy_unused; };

  __device__ __forceinline__ BlockHistogram() {}
  __device__ __forceinline__ BlockHistogram(TempStorage&) {}

  template <typename CounterT>
  __device__ __forceinline__ void InitHistogram(CounterT histogram[BINS]) {
    for (int bin = RowMajorTid(BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z); bin < BINS; bin += BLOCK_THREADS)
      histogram[bin] = 0;
  }

  template <typename CounterT>
  __device__ __forceinline__ void Composite(T (&items)[ITEMS_PER_THREAD], CounterT histogram[BINS]) {
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) atomicAdd(&histogram[items[i]], (CounterT)1);
  }

  template <typename CounterT>
  __device__ __forceinline__ void Histogram(T (&items)[ITEMS_PER_THREAD], CounterT histogram[BINS]) {
    InitHistogram(histogram);
    __syncthreads();
    Composite(items, histogram);
  }
};

#endif /* POLYPY_DEVICE_H */

}  // namespace cub

#endif

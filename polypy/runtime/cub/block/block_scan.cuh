/* polypy's <cub/block/block_scan.cuh>: cub::BlockScan with CUB's interface and meaning.
 *
 * Prefix scans over the block's items in thread rank order (linear rank (z * BLOCK_DIM_Y + y)
 * * BLOCK_DIM_X + x; with ITEMS_PER_THREAD items a thread holds consecutive items, CUB's
 * "blocked arrangement"). Every thread of the block calls the scan. Thread 0's output of an
 * ExclusiveScan without an initial value is unspecified, as in CUB; `block_aggregate` is the
 * reduction of every input (the initial value excluded). The prefixes are combined left to
 * right (CUB leaves the association order unspecified: a floating-point scan may differ in its
 * last bits from a GPU's). Callback-prefix forms (`block_prefix_callback_op`) are not provided.
 * Written for polypy (docs/cub.md). */
#ifndef POLYPY_CUB_BLOCK_SCAN_CUH
#define POLYPY_CUB_BLOCK_SCAN_CUH

#include <cub/util_ptx.cuh>
#include <cub/thread/thread_operators.cuh>

#ifdef POLYPY_DEVICE_H /* polypy's frontend reads the definitions; a translated program's C++ does not need them */
namespace cub {

enum BlockScanAlgorithm {
  BLOCK_SCAN_RAKING,
  BLOCK_SCAN_RAKING_MEMOIZE,
  BLOCK_SCAN_WARP_SCANS
};

template <typename T, int BLOCK_DIM_X, BlockScanAlgorithm ALGORITHM = BLOCK_SCAN_RAKING,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockScan {
 public:
  enum { BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z };
  struct TempStorage { unsigned char __polypy_unused; };

  __device__ __forceinline__ BlockScan() {}
  __device__ __forceinline__ BlockScan(TempStorage&) {}

 private:
  /* The reduction of the partials of the threads ranked before this one (`prefix`; none for
   * thread 0) and of every thread's (`aggregate`). */
  template <typename ScanOp>
  __device__ __forceinline__ void Prefixes(T partial, ScanOp scan_op, T& prefix, T& aggregate) {
    __shared__ T items[BLOCK_THREADS];
    __shared__ T total[1];
    const int rank = RowMajorTid(BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z);
    items[rank] = partial;
    __syncthreads();
    if (rank == 0) {
      T running = items[0];
      for (int i = 1; i < BLOCK_THREADS; ++i) {
        T next = items[i];
        items[i] = running;
        running = scan_op(running, next);
      }
      total[0] = running;
    }
    __syncthreads();
    prefix = items[rank];
    aggregate = total[0];
    __syncthreads();
  }

  __device__ __forceinline__ static int Rank() {
    return RowMajorTid(BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z);
  }

 public:
  // ---- exclusive, with an initial value
  template <typename ScanOp>
  __device__ __forceinline__ void ExclusiveScan(T input, T& output, T initial_value, ScanOp scan_op,
                                                T& block_aggregate) {
    T prefix, aggregate;
    Prefixes(input, scan_op, prefix, aggregate);
    output = Rank() == 0 ? initial_value : scan_op(initial_value, prefix);
    block_aggregate = aggregate;
  }

  template <typename ScanOp>
  __device__ __forceinline__ void ExclusiveScan(T input, T& output, T initial_value, ScanOp scan_op) {
    T aggregate;
    ExclusiveScan(input, output, initial_value, scan_op, aggregate);
  }

  template <int ITEMS_PER_THREAD, typename ScanOp>
  __device__ __forceinline__ void ExclusiveScan(T (&input)[ITEMS_PER_THREAD], T (&output)[ITEMS_PER_THREAD],
                                                T initial_value, ScanOp scan_op, T& block_aggregate) {
    T partial = input[0];
    for (int i = 1; i < ITEMS_PER_THREAD; ++i)
      partial = scan_op(partial, input[i]);
    T prefix, aggregate;
    Prefixes(partial, scan_op, prefix, aggregate);
    T running = Rank() == 0 ? initial_value : scan_op(initial_value, prefix);
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
      T item = input[i];
      output[i] = running;
      running = scan_op(running, item);
    }
    block_aggregate = aggregate;
  }

  template <int ITEMS_PER_THREAD, typename ScanOp>
  __device__ __forceinline__ void ExclusiveScan(T (&input)[ITEMS_PER_THREAD], T (&output)[ITEMS_PER_THREAD],
                                                T initial_value, ScanOp scan_op) {
    T aggregate;
    ExclusiveScan(input, output, initial_value, scan_op, aggregate);
  }

  // ---- exclusive, without an initial value (thread 0's first output unspecified: its input here)
  template <typename ScanOp>
  __device__ __forceinline__ void ExclusiveScan(T input, T& output, ScanOp scan_op, T& block_aggregate) {
    T prefix, aggregate;
    Prefixes(input, scan_op, prefix, aggregate);
    output = prefix;
    block_aggregate = aggregate;
  }

  template <typename ScanOp>
  __device__ __forceinline__ void ExclusiveScan(T input, T& output, ScanOp scan_op) {
    T aggregate;
    ExclusiveScan(input, output, scan_op, aggregate);
  }

  // ---- sums
  __device__ __forceinline__ void ExclusiveSum(T input, T& output) {
    T aggregate;
    ExclusiveScan(input, output, T(0), cub::Sum(), aggregate);
  }

  __device__ __forceinline__ void ExclusiveSum(T input, T& output, T& block_aggregate) {
    ExclusiveScan(input, output, T(0), cub::Sum(), block_aggregate);
  }

  template <int ITEMS_PER_THREAD>
  __device__ __forceinline__ void ExclusiveSum(T (&input)[ITEMS_PER_THREAD], T (&output)[ITEMS_PER_THREAD]) {
    T aggregate;
    ExclusiveScan(input, output, T(0), cub::Sum(), aggregate);
  }

  template <int ITEMS_PER_THREAD>
  __device__ __forceinline__ void ExclusiveSum(T (&input)[ITEMS_PER_THREAD], T (&output)[ITEMS_PER_THREAD],
                                               T& block_aggregate) {
    ExclusiveScan(input, output, T(0), cub::Sum(), block_aggregate);
  }

  // ---- inclusive
  template <typename ScanOp>
  __device__ __forceinline__ void InclusiveScan(T input, T& output, ScanOp scan_op, T& block_aggregate) {
    T prefix, aggregate;
    Prefixes(input, scan_op, prefix, aggregate);
    output = Rank() == 0 ? input : scan_op(prefix, input);
    block_aggregate = aggregate;
  }

  template <typename ScanOp>
  __device__ __forceinline__ void InclusiveScan(T input, T& output, ScanOp scan_op) {
    T aggregate;
    InclusiveScan(input, output, scan_op, aggregate);
  }

  template <int ITEMS_PER_THREAD, typename ScanOp>
  __device__ __forceinline__ void InclusiveScan(T (&input)[ITEMS_PER_THREAD], T (&output)[ITEMS_PER_THREAD],
                                                ScanOp scan_op, T& block_aggregate) {
    T partial = input[0];
    for (int i = 1; i < ITEMS_PER_THREAD; ++i)
      partial = scan_op(partial, input[i]);
    T prefix, aggregate;
    Prefixes(partial, scan_op, prefix, aggregate);
    T running = Rank() == 0 ? input[0] : scan_op(prefix, input[0]);
    output[0] = running;
    for (int i = 1; i < ITEMS_PER_THREAD; ++i) {
      running = scan_op(running, input[i]);
      output[i] = running;
    }
    block_aggregate = aggregate;
  }

  template <int ITEMS_PER_THREAD, typename ScanOp>
  __device__ __forceinline__ void InclusiveScan(T (&input)[ITEMS_PER_THREAD], T (&output)[ITEMS_PER_THREAD],
                                                ScanOp scan_op) {
    T aggregate;
    InclusiveScan(input, output, scan_op, aggregate);
  }

  __device__ __forceinline__ void InclusiveSum(T input, T& output) {
    T aggregate;
    InclusiveScan(input, output, cub::Sum(), aggregate);
  }

  __device__ __forceinline__ void InclusiveSum(T input, T& output, T& block_aggregate) {
    InclusiveScan(input, output, cub::Sum(), block_aggregate);
  }

  template <int ITEMS_PER_THREAD>
  __device__ __forceinline__ void InclusiveSum(T (&input)[ITEMS_PER_THREAD], T (&output)[ITEMS_PER_THREAD]) {
    T aggregate;
    InclusiveScan(input, output, cub::Sum(), aggregate);
  }

  template <int ITEMS_PER_THREAD>
  __device__ __forceinline__ void InclusiveSum(T (&input)[ITEMS_PER_THREAD], T (&output)[ITEMS_PER_THREAD],
                                               T& block_aggregate) {
    InclusiveScan(input, output, cub::Sum(), block_aggregate);
  }
};

}  // namespace cub
#endif /* POLYPY_DEVICE_H */

#endif

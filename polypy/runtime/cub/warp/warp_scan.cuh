/* polypy's <cub/warp/warp_scan.cuh>: cub::WarpScan with CUB's interface and meaning.
 *
 * Prefix scans over the lanes of a logical warp (LOGICAL_WARP_THREADS consecutive lanes, a power
 * of two up to 32); every lane of the logical warp calls the scan. Lane 0's output of an
 * ExclusiveScan without an initial value is unspecified, as in CUB; `warp_aggregate` is the
 * reduction of every lane's input. Each lane combines the partial of the lanes before it with its
 * own, `op(earlier, later)`, at distances 1, 2, 4, ... (warp shuffles, run in lockstep).
 * Written for polypy (docs/cub.md). */
#ifndef POLYPY_CUB_WARP_SCAN_CUH
#define POLYPY_CUB_WARP_SCAN_CUH

#include <cub/util_ptx.cuh>
#include <cub/thread/thread_operators.cuh>

#ifdef POLYPY_DEVICE_H /* polypy's frontend reads the definitions; a translated program's C++ does not need them */
namespace cub {

template <typename T, int LOGICAL_WARP_THREADS = 32, int LEGACY_PTX_ARCH = 0>
class WarpScan {
  static_assert(LOGICAL_WARP_THREADS >= 1 && LOGICAL_WARP_THREADS <= 32 &&
                (LOGICAL_WARP_THREADS & (LOGICAL_WARP_THREADS - 1)) == 0,
                "polypy: cub::WarpScan supports logical warps of a power of two up to 32 threads");

 public:
  struct TempStorage { unsigned char __polypy_unused; };

  __device__ __forceinline__ WarpScan(TempStorage&) {}

 private:
  __device__ __forceinline__ static int Lane() {
    const int rank = RowMajorTid((int)blockDim.x, (int)blockDim.y, (int)blockDim.z);
    return rank % LOGICAL_WARP_THREADS;
  }

 public:
  template <typename ScanOp>
  __device__ __forceinline__ void InclusiveScan(T input, T& inclusive_output, ScanOp scan_op, T& warp_aggregate) {
    const int lane = Lane();
    T value = input;
    for (int offset = 1; offset < LOGICAL_WARP_THREADS; offset *= 2) {
      T earlier = __shfl_up_sync(0xffffffffu, value, offset, LOGICAL_WARP_THREADS);
      if (lane >= offset)
        value = scan_op(earlier, value);
    }
    inclusive_output = value;
    warp_aggregate = __shfl_sync(0xffffffffu, value, LOGICAL_WARP_THREADS - 1, LOGICAL_WARP_THREADS);
  }

  template <typename ScanOp>
  __device__ __forceinline__ void InclusiveScan(T input, T& inclusive_output, ScanOp scan_op) {
    T aggregate;
    InclusiveScan(input, inclusive_output, scan_op, aggregate);
  }

  __device__ __forceinline__ void InclusiveSum(T input, T& inclusive_output) {
    T aggregate;
    InclusiveScan(input, inclusive_output, cub::Sum(), aggregate);
  }

  __device__ __forceinline__ void InclusiveSum(T input, T& inclusive_output, T& warp_aggregate) {
    InclusiveScan(input, inclusive_output, cub::Sum(), warp_aggregate);
  }

  template <typename ScanOp>
  __device__ __forceinline__ void ExclusiveScan(T input, T& exclusive_output, T initial_value, ScanOp scan_op,
                                                T& warp_aggregate) {
    T inclusive;
    InclusiveScan(input, inclusive, scan_op, warp_aggregate);
    T earlier = __shfl_up_sync(0xffffffffu, inclusive, 1, LOGICAL_WARP_THREADS);
    exclusive_output = Lane() == 0 ? initial_value : scan_op(initial_value, earlier);
  }

  template <typename ScanOp>
  __device__ __forceinline__ void ExclusiveScan(T input, T& exclusive_output, T initial_value, ScanOp scan_op) {
    T aggregate;
    ExclusiveScan(input, exclusive_output, initial_value, scan_op, aggregate);
  }

  template <typename ScanOp>
  __device__ __forceinline__ void ExclusiveScan(T input, T& exclusive_output, ScanOp scan_op) {
    T inclusive, aggregate;
    InclusiveScan(input, inclusive, scan_op, aggregate);
    exclusive_output = __shfl_up_sync(0xffffffffu, inclusive, 1, LOGICAL_WARP_THREADS);  // lane 0: unspecified
  }

  __device__ __forceinline__ void ExclusiveSum(T input, T& exclusive_output) {
    T aggregate;
    ExclusiveScan(input, exclusive_output, T(0), cub::Sum(), aggregate);
  }

  __device__ __forceinline__ void ExclusiveSum(T input, T& exclusive_output, T& warp_aggregate) {
    ExclusiveScan(input, exclusive_output, T(0), cub::Sum(), warp_aggregate);
  }
};

}  // namespace cub
#endif /* POLYPY_DEVICE_H */

#endif

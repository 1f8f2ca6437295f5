/* polypy's <cub/cub.cuh>: the block- and warp-wide primitives polypy provides (docs/cub.md).
 * CUB's device-wide algorithms (cub::DeviceReduce, cub::DeviceScan, ...) and the headers not
 * listed here are CCCL's and refused at their #include. */
#ifndef POLYPY_CUB_CUH
#define POLYPY_CUB_CUH

#include <cub/thread/thread_operators.cuh>
#include <cub/util_ptx.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_load.cuh>
#include <cub/block/block_store.cuh>
#include <cub/block/block_exchange.cuh>
#include <cub/block/block_histogram.cuh>
#include <cub/block/block_discontinuity.cuh>
#include <cub/block/block_shuffle.cuh>
#include <cub/warp/warp_reduce.cuh>
#include <cub/warp/warp_scan.cuh>

#endif

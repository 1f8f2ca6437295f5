/* polypy's <cub/util_ptx.cuh>: CUB's thread-identity helpers, with CUB's meaning.
 * cub::RowMajorTid(x, y, z) is the row-major rank of the calling thread in a block of x*y*z threads,
 * a dimension of 1 ignoring that index (as CUB does); cub::LaneId() is the thread's lane in its warp.
 * The block and warp primitives rank threads with these. Written for polypy (docs/cub.md). */
#ifndef POLYPY_CUB_UTIL_PTX_CUH
#define POLYPY_CUB_UTIL_PTX_CUH

#ifdef POLYPY_DEVICE_H /* polypy's frontend reads the definitions; a translated program's C++ does not need them */
namespace cub {

__device__ __forceinline__ int RowMajorTid(int block_dim_x, int block_dim_y, int block_dim_z) {
  return (block_dim_z == 1 ? 0 : (int)threadIdx.z * block_dim_x * block_dim_y) +
         (block_dim_y == 1 ? 0 : (int)threadIdx.y * block_dim_x) + (int)threadIdx.x;
}

__device__ __forceinline__ unsigned int LaneId() {
  return (unsigned int)RowMajorTid((int)blockDim.x, (int)blockDim.y, (int)blockDim.z) % 32u;
}

}  // namespace cub
#endif /* POLYPY_DEVICE_H */

#endif

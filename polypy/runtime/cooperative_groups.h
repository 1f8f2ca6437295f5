/* polypy's <cooperative_groups.h>: CUDA's cooperative groups inside one thread block.
 *
 * Nothing here is compiled. The frontend recognizes these declarations (by their qualified
 * names in namespace cooperative_groups, never by text) and maps each call onto the IR:
 * a group's sync() -> the block barrier (a tile of up to 32 threads: __syncwarp of its lanes),
 * thread_rank() and size() -> arithmetic on the linear
 * thread index, a tile's shfl* -> warp shuffles of the tile's width, any/all/ballot -> warp
 * votes over the tile's lanes, cg::reduce -> a butterfly of shuffles, cg::inclusive_scan and
 * cg::exclusive_scan -> the lanes' values combined in rank order (docs/cooperative_groups.md).
 *
 * A group object holds what CUDA keeps at run time: its size and the size of the group it was
 * partitioned from (meta_group_rank/meta_group_size); a coalesced group also its warp lanes. A
 * grid's sync() is the grid barrier; labeled and binary partitions are coalesced groups
 * (frontend/lower/partitions.py); the members the frontend does not translate are declared so
 * that a program using them gets a located error naming the feature.
 * cg::memcpy_async, cg::wait and cg::wait_prior are defined in <cooperative_groups/memcpy_async.h>
 * (as in CUDA, a program includes it to use them).
 */
#ifndef POLYPY_COOPERATIVE_GROUPS_H
#define POLYPY_COOPERATIVE_GROUPS_H

#include <cuda_runtime.h>

namespace cooperative_groups {

/* The state a group object carries (the same three members in every group type; no base
 * classes, so that every member is the group's own). */
#define POLYPY_CG_STATE \
  unsigned int __polypy_size; \
  unsigned int __polypy_meta_group_rank; \
  unsigned int __polypy_meta_group_size;
#define POLYPY_CG_COMMON \
  __device__ void sync() const; \
  __device__ unsigned int thread_rank() const; \
  __device__ unsigned int size() const; \
  __device__ unsigned int num_threads() const;

class thread_block;
template <unsigned int Size, typename ParentT> class thread_block_tile;

class thread_block {
public:
  POLYPY_CG_STATE
  POLYPY_CG_COMMON
  __device__ dim3 group_index() const;
  __device__ dim3 thread_index() const;
  __device__ dim3 group_dim() const;
  __device__ dim3 dim_threads() const;
};

/* A group of a type known only at run time (its rank and size are unsigned long long, as in CUDA): the block, or a tile of tiled_partition(g, n). */
class thread_group {
public:
  POLYPY_CG_STATE
  __device__ void sync() const;
  __device__ unsigned long long thread_rank() const;
  __device__ unsigned long long size() const;
  __device__ unsigned long long num_threads() const;
  __device__ unsigned int meta_group_rank() const;
  __device__ unsigned int meta_group_size() const;
  __device__ thread_group(const thread_block& block);
  template <unsigned int Size, typename ParentT> __device__ thread_group(const thread_block_tile<Size, ParentT>& tile);
  __device__ thread_group(const thread_group& group) = default;
};

template <unsigned int Size, typename ParentT = void>
class thread_block_tile {
public:
  POLYPY_CG_STATE
  POLYPY_CG_COMMON
  __device__ unsigned int meta_group_rank() const;
  __device__ unsigned int meta_group_size() const;
  /* A tile converts to the same tile with its parent type erased (or restored), as in CUDA. */
  template <typename OtherParentT> __device__ thread_block_tile(const thread_block_tile<Size, OtherParentT>& tile);
  __device__ thread_block_tile(const thread_block_tile& tile) = default;
  template <typename T> __device__ T shfl(T var, int srcRank) const;
  template <typename T> __device__ T shfl_up(T var, unsigned int delta) const;
  template <typename T> __device__ T shfl_down(T var, unsigned int delta) const;
  template <typename T> __device__ T shfl_xor(T var, unsigned int laneMask) const;
  __device__ int any(int predicate) const;
  __device__ int all(int predicate) const;
  __device__ unsigned int ballot(int predicate) const;
};

/* The grid: its ranks and sizes are translated; sync() and is_valid() (whether the launch was
 * cooperative) are declared so that their use is a located error naming them. */
class grid_group {
public:
  POLYPY_CG_STATE
  __device__ void sync() const;
  __device__ unsigned long long thread_rank() const;
  __device__ unsigned long long size() const;
  __device__ unsigned long long num_threads() const;
  __device__ unsigned long long block_rank() const;
  __device__ unsigned long long num_blocks() const;
  __device__ dim3 block_index() const;
  __device__ dim3 dim_blocks() const;
  __device__ bool is_valid() const;
};

/* The lanes of the warp that run coalesced_threads() together (their mask), or a partition's. */
class coalesced_group {
public:
  POLYPY_CG_STATE
  unsigned int __polypy_mask;
  POLYPY_CG_COMMON
  __device__ unsigned int meta_group_rank() const;
  __device__ unsigned int meta_group_size() const;
  template <typename T> __device__ T shfl(T var, unsigned int srcRank) const;
  template <typename T> __device__ T shfl_up(T var, unsigned int delta) const;
  template <typename T> __device__ T shfl_down(T var, unsigned int delta) const;
  __device__ int any(int predicate) const;
  __device__ int all(int predicate) const;
  __device__ unsigned int ballot(int predicate) const;
};

__device__ thread_block this_thread_block();
__device__ grid_group this_grid();
__device__ coalesced_group coalesced_threads();

template <unsigned int Size, typename ParentT>
__device__ thread_block_tile<Size, ParentT> tiled_partition(const ParentT& parent);
__device__ thread_group tiled_partition(const thread_group& parent, unsigned int tilesz);
__device__ thread_group tiled_partition(const thread_block& parent, unsigned int tilesz);

/* The scratch CUDA's tiles of more than 32 threads use: accepted, and dropped (polypy needs none). */
template <unsigned int MaxBlockSize> struct block_tile_memory { };
/* The block, its scratch dropped (frontend/lower/cooperative.py). */
template <unsigned int MaxBlockSize> __device__ thread_block this_thread_block(block_tile_memory<MaxBlockSize>& scratch);
/* Coalesced groups of the parent's lanes with the same label / predicate (frontend/lower/partitions.py);
 * the parent is a thread_block_tile of at most 32 threads or a coalesced_group. */
template <typename GroupT, typename LabelT> __device__ coalesced_group labeled_partition(const GroupT& group, LabelT label);
template <typename GroupT> __device__ coalesced_group binary_partition(const GroupT& group, bool pred);

template <typename GroupT> __device__ void sync(const GroupT& group);
template <typename GroupT> __device__ unsigned long long thread_rank(const GroupT& group);
template <typename GroupT> __device__ unsigned long long group_size(const GroupT& group);

template <typename T> struct plus { __device__ T operator()(const T& a, const T& b) const; };
template <typename T> struct less { __device__ T operator()(const T& a, const T& b) const; };
template <typename T> struct greater { __device__ T operator()(const T& a, const T& b) const; };
template <typename T> struct bit_and { __device__ T operator()(const T& a, const T& b) const; };
template <typename T> struct bit_or { __device__ T operator()(const T& a, const T& b) const; };
template <typename T> struct bit_xor { __device__ T operator()(const T& a, const T& b) const; };

template <typename GroupT, typename T, typename OpT>
__device__ T reduce(const GroupT& group, T value, OpT op);

/* <cooperative_groups/scan.h>: the scans of a tile or a coalesced group (frontend/lower/scans.py).
 * The forms taking an operator have an empty body only so that clang accepts a lambda (a type
 * without linkage) as the operator; the frontend translates the call, never this body. */
template <typename GroupT, typename T> __device__ T inclusive_scan(const GroupT& group, T value);
template <typename GroupT, typename T, typename OpT>
__device__ auto inclusive_scan(const GroupT& group, T value, OpT op) -> decltype(op(value, value)) {
  __builtin_unreachable();
}
template <typename GroupT, typename T> __device__ T exclusive_scan(const GroupT& group, T value);
template <typename GroupT, typename T, typename OpT>
__device__ auto exclusive_scan(const GroupT& group, T value, OpT op) -> decltype(op(value, value)) {
  __builtin_unreachable();
}

}  // namespace cooperative_groups

#undef POLYPY_CG_STATE
#undef POLYPY_CG_COMMON

#endif

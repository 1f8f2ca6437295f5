/* polypy's <cooperative_groups/memcpy_async.h>: cg::memcpy_async, cg::wait and cg::wait_prior.
 *
 * polypy's frontend translates the definitions below (under POLYPY_DEVICE_H, its device prelude)
 * like the user's device code (only what <cooperative_groups.h> declares is mapped by name); a
 * translated program's host code sees the declarations only. The group's threads copy the elements in
 * turns at the call (thread rank r the elements r, r + size, ...): a correct program reads the
 * destination (and writes the source) only after the cg::wait that completes the copy, so copying
 * early is one legal schedule. cg::wait and cg::wait_prior are the group's sync(), which makes
 * every thread's part visible to the whole group; waiting for all copies where wait_prior<N>
 * allows N to stay pending is one legal schedule too (docs/async_copies.md). The copy is made in
 * the element type of the pointers; a size that is not a whole number of elements is a device
 * assert.
 */
#ifndef POLYPY_CG_MEMCPY_ASYNC_H
#define POLYPY_CG_MEMCPY_ASYNC_H

#include <cooperative_groups.h>
#include <cuda/barrier>

namespace cooperative_groups {

template <typename GroupT, typename T>
__device__ void memcpy_async(const GroupT& group, T* destination, const T* source, size_t size);
template <typename GroupT, typename T, size_t Alignment>
__device__ void memcpy_async(const GroupT& group, T* destination, const T* source, cuda::aligned_size_t<Alignment> size);
template <typename GroupT, typename T>
__device__ void memcpy_async(const GroupT& group, T* destination, size_t destination_size, const T* source,
                             size_t source_size);
template <typename GroupT> __device__ void wait(const GroupT& group);
template <unsigned int NumStages, typename GroupT> __device__ void wait_prior(const GroupT& group);

#ifdef POLYPY_DEVICE_H
template <typename GroupT, typename T>
__device__ void memcpy_async(const GroupT& group, T* destination, const T* source, size_t size) {
  POLYPY_ASYNC_CHECK(size % sizeof(T) == 0,
                     "cooperative_groups::memcpy_async of a size that is not a whole number of elements is not supported");
  for (size_t i = group.thread_rank(); i < size / sizeof(T); i += group.size()) destination[i] = source[i];
}

template <typename GroupT, typename T, size_t Alignment>
__device__ void memcpy_async(const GroupT& group, T* destination, const T* source, cuda::aligned_size_t<Alignment> size) {
  memcpy_async(group, destination, source, (size_t)size);
}

template <typename GroupT, typename T>
__device__ void memcpy_async(const GroupT& group, T* destination, size_t destination_size, const T* source,
                             size_t source_size) {
  POLYPY_ASYNC_CHECK(destination_size >= source_size,
                     "cooperative_groups::memcpy_async into a destination smaller than its source");
  memcpy_async(group, destination, source, source_size);
}

template <typename GroupT>
__device__ void wait(const GroupT& group) { group.sync(); }

template <unsigned int NumStages, typename GroupT>
__device__ void wait_prior(const GroupT& group) { group.sync(); }

#endif

}  // namespace cooperative_groups

#endif

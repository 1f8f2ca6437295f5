/* polypy's <cuda_pipeline.h>: the per-thread pipeline primitives (__pipeline_memcpy_async,
 * __pipeline_commit, __pipeline_wait_prior).
 *
 * polypy's frontend translates the definitions below (under POLYPY_DEVICE_H, its device prelude)
 * like the user's device code; a translated program's host code sees the declarations only.
 * The pipeline is the calling thread's own and the copy is made at the call: a correct program
 * reads the destination (and writes the source) only after the __pipeline_wait_prior that
 * completes the copy, so copying early is one legal schedule, and commits and waits have
 * nothing left to do (docs/async_copies.md). The copy is made in the element type of the
 * pointers; a size that is not a whole number of elements, and zero-filling (a nonzero fourth
 * argument), are device asserts.
 */
#ifndef POLYPY_CUDA_PIPELINE_H
#define POLYPY_CUDA_PIPELINE_H

#include <cuda_runtime.h>
#include <stddef.h>

template <typename T>
__device__ void __pipeline_memcpy_async(T* destination, const T* source, size_t size_and_align, size_t zfill = 0);
__device__ void __pipeline_commit();
__device__ void __pipeline_wait_prior(size_t prior);

#ifdef POLYPY_DEVICE_H
template <typename T>
__device__ void __pipeline_memcpy_async(T* destination, const T* source, size_t size_and_align, size_t zfill) {
  if (zfill != 0)
    __assert_fail("polypy: __pipeline_memcpy_async with zero-filling is not supported", __FILE__, __LINE__,
                  __PRETTY_FUNCTION__);
  if (size_and_align % sizeof(T) != 0)
    __assert_fail("polypy: __pipeline_memcpy_async of a size that is not a whole number of elements is not supported",
                  __FILE__, __LINE__, __PRETTY_FUNCTION__);
  for (size_t i = 0; i < size_and_align / sizeof(T); ++i) destination[i] = source[i];
}

__device__ inline void __pipeline_commit() { }
__device__ inline void __pipeline_wait_prior(size_t prior) { }
#endif

#endif

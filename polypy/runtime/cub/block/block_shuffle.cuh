/* polypy's <cub/block/block_shuffle.cuh>: cub::BlockShuffle with CUB's interface and meaning.
 *
 * Moves items between the block's threads through shared memory, threads ranked row-major:
 * `Offset(x, y, d)` gives thread r the x of thread r + d (d may be negative; y is left as it was
 * where r + d is outside the block); `Rotate(x, y, d)` the x of thread (r + d) mod BLOCK_THREADS;
 * `Up(in, prev)` shifts the blocked arrangement up by one item (prev[i] = in[i - 1], prev[0] = the
 * previous thread's last item; thread 0's prev[0] left as it was), `Up(in, prev, block_suffix)` also
 * gives every thread the last thread's last item; `Down(in, next)` shifts it down (next[i] = in[i + 1],
 * the last item from the next thread's first; the last thread's left as it was). CUB's `Down` with a
 * `block_prefix` is not declared. Every thread of the block calls each operation; each ends with a
 * barrier. Written for polypy (docs/cub.md). */
#ifndef POLYPY_CUB_BLOCK_SHUFFLE_CUH
#define POLYPY_CUB_BLOCK_SHUFFLE_CUH

#include <cub/util_ptx.cuh>

#ifdef POLYPY_DEVICE_H /* polypy's frontend reads the definitions; a translated program's C++ does not need them */
namespace cub {

template <typename T, int BLOCK_DIM_X, int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockShuffle {
 public:
  enum { BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z };
  struct TempStorage { unsigned char __polypy_unused; };

  __device__ __forceinline__ BlockShuffle() {}
  __device__ __forceinline__ BlockShuffle(TempStorage&) {}

 private:
  __device__ __forceinline__ static int Rank() { return RowMajorTid(BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z); }

 public:
  __device__ __forceinline__ void Offset(T input, T& output, int distance = 1) {
    __shared__ T items[BLOCK_THREADS];
    items[Rank()] = input;
    __syncthreads();
    const int from = Rank() + distance;
    if (from >= 0 && from < BLOCK_THREADS) output = items[from];
    __syncthreads();
  }

  __device__ __forceinline__ void Rotate(T input, T& output, unsigned int distance = 1) {
    __shared__ T items[BLOCK_THREADS];
    items[Rank()] = input;
    __syncthreads();
    output = items[(unsigned int)(Rank() + distance % BLOCK_THREADS) % BLOCK_THREADS];
    __syncthreads();
  }

  template <int ITEMS_PER_THREAD>
  __device__ __forceinline__ void Up(T (&input)[ITEMS_PER_THREAD], T (&prev)[ITEMS_PER_THREAD]) {
    T block_suffix;
    Up(input, prev, block_suffix);
  }

  template <int ITEMS_PER_THREAD>
  __device__ __forceinline__ void Up(T (&input)[ITEMS_PER_THREAD], T (&prev)[ITEMS_PER_THREAD], T& block_suffix) {
    __shared__ T last_items[BLOCK_THREADS];
    last_items[Rank()] = input[ITEMS_PER_THREAD - 1];
    __syncthreads();
    for (int i = ITEMS_PER_THREAD - 1; i > 0; --i) prev[i] = input[i - 1];
    if (Rank() > 0) prev[0] = last_items[Rank() - 1];
    block_suffix = last_items[BLOCK_THREADS - 1];
    __syncthreads();
  }

  template <int ITEMS_PER_THREAD>
  __device__ __forceinline__ void Down(T (&input)[ITEMS_PER_THREAD], T (&next)[ITEMS_PER_THREAD]) {
    __shared__ T first_items[BLOCK_THREADS];
    first_items[Rank()] = input[0];
    __syncthreads();
    for (int i = 0; i < ITEMS_PER_THREAD - 1; ++i) next[i] = input[i + 1];
    if (Rank() < BLOCK_THREADS - 1) next[ITEMS_PER_THREAD - 1] = first_items[Rank() + 1];
    __syncthreads();
  }
};

}  // namespace cub
#endif /* POLYPY_DEVICE_H */

#endif

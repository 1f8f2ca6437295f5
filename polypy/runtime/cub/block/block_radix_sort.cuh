/* polypy's <cub/block/block_radix_sort.cuh>: cub::BlockRadixSort with CUB's interface and meaning.
 *
 * Sorts the block's BLOCK_THREADS x ITEMS_PER_THREAD keys (and values that move with them) in a
 * blocked arrangement (thread of linear rank r holds items r * ITEMS_PER_THREAD ...), or into a
 * striped one (`...BlockedToStriped`: item i of thread r is element i * BLOCK_THREADS + r).
 * As CUB: a stable radix sort on the bits [begin_bit, end_bit) of each key's ordered bit pattern
 * (unsigned keys as they are; signed ones with the sign bit flipped; floating-point ones with
 * every bit flipped when the sign is set, else the sign bit set; -0.0 and +0.0 are the same key
 * and keep their order and their bits; NaNs sort by their bits); descending sorts invert the
 * pattern. Every thread of the block calls the sort. Written for polypy (docs/cub.md). */
#ifndef POLYPY_CUB_BLOCK_RADIX_SORT_CUH
#define POLYPY_CUB_BLOCK_RADIX_SORT_CUH

#include <cub/util_ptx.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/thread/thread_operators.cuh>

#ifdef POLYPY_DEVICE_H /* polypy's frontend reads the definitions; a translated program's C++ does not need them */
namespace cub {
namespace __polypy_radix {

/* The ordered bit pattern of a key (its unsigned bits, transformed so that unsigned order is the
 * key's order) and the key's width in bits. */
__device__ __forceinline__ unsigned long long ordered(unsigned char k) { return k; }
__device__ __forceinline__ unsigned long long ordered(unsigned short k) { return k; }
__device__ __forceinline__ unsigned long long ordered(unsigned int k) { return k; }
__device__ __forceinline__ unsigned long long ordered(unsigned long k) { return k; }
__device__ __forceinline__ unsigned long long ordered(unsigned long long k) { return k; }
__device__ __forceinline__ unsigned long long ordered(bool k) { return k ? 1ull : 0ull; }
__device__ __forceinline__ unsigned long long ordered(signed char k) { return (unsigned char)k ^ 0x80u; }
__device__ __forceinline__ unsigned long long ordered(char k) { return (unsigned char)k ^ 0x80u; }
__device__ __forceinline__ unsigned long long ordered(short k) { return (unsigned short)k ^ 0x8000u; }
__device__ __forceinline__ unsigned long long ordered(int k) { return (unsigned int)k ^ 0x80000000u; }
__device__ __forceinline__ unsigned long long ordered(long k) {
  return (unsigned long long)k ^ 0x8000000000000000ull;
}
__device__ __forceinline__ unsigned long long ordered(long long k) {
  return (unsigned long long)k ^ 0x8000000000000000ull;
}
__device__ __forceinline__ unsigned long long ordered(float k) {
  unsigned int b = __float_as_uint(k);
  if (b == 0x80000000u) b = 0u;  /* -0.0 is +0.0 */
  return (b & 0x80000000u) ? (unsigned long long)(~b) : (unsigned long long)(b | 0x80000000u);
}
__device__ __forceinline__ unsigned long long ordered(double k) {
  unsigned long long b = (unsigned long long)__double_as_longlong(k);
  if (b == 0x8000000000000000ull) b = 0ull;
  return (b & 0x8000000000000000ull) ? ~b : (b | 0x8000000000000000ull);
}

}  // namespace __polypy_radix

template <typename KeyT, int BLOCK_DIM_X, int ITEMS_PER_THREAD, typename ValueT = NullType, int RADIX_BITS = 4,
          bool MEMOIZE_OUTER_SCAN = true, BlockScanAlgorithm INNER_SCAN_ALGORITHM = BLOCK_SCAN_WARP_SCANS,
          int SMEM_CONFIG = 1, int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockRadixSort {
 public:
  enum { BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z, TILE_ITEMS = BLOCK_THREADS * ITEMS_PER_THREAD };
  struct TempStorage { unsigned char __polypy_unused; };

  __device__ __forceinline__ BlockRadixSort() {}
  __device__ __forceinline__ BlockRadixSort(TempStorage&) {}

 private:
  __device__ __forceinline__ static int Rank() {
    return RowMajorTid(BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z);
  }

  /* The digit of `key` at bit `shift`, `bits` wide (descending: of the inverted pattern). */
  __device__ __forceinline__ static unsigned int Digit(KeyT key, int shift, int bits, bool descending) {
    unsigned long long pattern = __polypy_radix::ordered(key);
    if (descending) pattern = ~pattern;
    return (unsigned int)((pattern >> shift) & ((1ull << bits) - 1ull));
  }

  /* The tile's position of item i of this thread, blocked or striped. */
  __device__ __forceinline__ static int Slot(int i, bool striped) {
    return striped ? i * BLOCK_THREADS + Rank() : Rank() * ITEMS_PER_THREAD + i;
  }

  /* One stable counting-sort pass on the digit at `shift` (run by one thread): `to[i]` becomes the
   * position of tile item i after the pass. The keys-only and the pairs sorts move their items by it. */
  __device__ __forceinline__ static void Destinations(const KeyT* tile, unsigned int* counts, unsigned int* to,
                                                      int shift, int bits, bool descending) {
    for (int d = 0; d < 256; ++d) counts[d] = 0u;
    for (int i = 0; i < TILE_ITEMS; ++i) counts[Digit(tile[i], shift, bits, descending)] += 1u;
    unsigned int start = 0u;
    for (int d = 0; d < 256; ++d) {
      unsigned int c = counts[d];
      counts[d] = start;
      start += c;
    }
    for (int i = 0; i < TILE_ITEMS; ++i) {
      unsigned int d = Digit(tile[i], shift, bits, descending);
      to[i] = counts[d];
      counts[d] += 1u;
    }
  }

  /* Moves the tile's items to the positions `to` gives, through `moved`. */
  template <typename ItemT>
  __device__ __forceinline__ static void Permute(ItemT* items, ItemT* moved, const unsigned int* to) {
    for (int i = 0; i < TILE_ITEMS; ++i) moved[to[i]] = items[i];
    for (int i = 0; i < TILE_ITEMS; ++i) items[i] = moved[i];
  }

  __device__ __forceinline__ void SortKeys(KeyT (&keys)[ITEMS_PER_THREAD], int begin_bit, int end_bit,
                                           bool descending, bool striped) {
    __shared__ KeyT tile[TILE_ITEMS];
    __shared__ KeyT moved[TILE_ITEMS];
    __shared__ unsigned int counts[256];
    __shared__ unsigned int to[TILE_ITEMS];
    for (int i = 0; i < ITEMS_PER_THREAD; ++i)
      tile[Rank() * ITEMS_PER_THREAD + i] = keys[i];
    __syncthreads();
    if (Rank() == 0) {
      for (int shift = begin_bit; shift < end_bit; shift += 8) {
        Destinations(tile, counts, to, shift, end_bit - shift < 8 ? end_bit - shift : 8, descending);
        Permute(tile, moved, to);
      }
    }
    __syncthreads();
    for (int i = 0; i < ITEMS_PER_THREAD; ++i)
      keys[i] = tile[Slot(i, striped)];
    __syncthreads();
  }

  __device__ __forceinline__ void SortPairs(KeyT (&keys)[ITEMS_PER_THREAD], ValueT (&values)[ITEMS_PER_THREAD],
                                            int begin_bit, int end_bit, bool descending, bool striped) {
    __shared__ KeyT tile[TILE_ITEMS];
    __shared__ KeyT moved[TILE_ITEMS];
    __shared__ ValueT tile_values[TILE_ITEMS];
    __shared__ ValueT moved_values[TILE_ITEMS];
    __shared__ unsigned int counts[256];
    __shared__ unsigned int to[TILE_ITEMS];
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
      tile[Rank() * ITEMS_PER_THREAD + i] = keys[i];
      tile_values[Rank() * ITEMS_PER_THREAD + i] = values[i];
    }
    __syncthreads();
    if (Rank() == 0) {
      for (int shift = begin_bit; shift < end_bit; shift += 8) {
        Destinations(tile, counts, to, shift, end_bit - shift < 8 ? end_bit - shift : 8, descending);
        Permute(tile, moved, to);
        Permute(tile_values, moved_values, to);
      }
    }
    __syncthreads();
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) {
      keys[i] = tile[Slot(i, striped)];
      values[i] = tile_values[Slot(i, striped)];
    }
    __syncthreads();
  }

 public:
  __device__ __forceinline__ void Sort(KeyT (&keys)[ITEMS_PER_THREAD], int begin_bit = 0,
                                       int end_bit = sizeof(KeyT) * 8) {
    SortKeys(keys, begin_bit, end_bit, false, false);
  }
  __device__ __forceinline__ void Sort(KeyT (&keys)[ITEMS_PER_THREAD], ValueT (&values)[ITEMS_PER_THREAD],
                                       int begin_bit = 0, int end_bit = sizeof(KeyT) * 8) {
    SortPairs(keys, values, begin_bit, end_bit, false, false);
  }
  __device__ __forceinline__ void SortDescending(KeyT (&keys)[ITEMS_PER_THREAD], int begin_bit = 0,
                                                 int end_bit = sizeof(KeyT) * 8) {
    SortKeys(keys, begin_bit, end_bit, true, false);
  }
  __device__ __forceinline__ void SortDescending(KeyT (&keys)[ITEMS_PER_THREAD], ValueT (&values)[ITEMS_PER_THREAD],
                                                 int begin_bit = 0, int end_bit = sizeof(KeyT) * 8) {
    SortPairs(keys, values, begin_bit, end_bit, true, false);
  }
  __device__ __forceinline__ void SortBlockedToStriped(KeyT (&keys)[ITEMS_PER_THREAD], int begin_bit = 0,
                                                       int end_bit = sizeof(KeyT) * 8) {
    SortKeys(keys, begin_bit, end_bit, false, true);
  }
  __device__ __forceinline__ void SortBlockedToStriped(KeyT (&keys)[ITEMS_PER_THREAD],
                                                       ValueT (&values)[ITEMS_PER_THREAD], int begin_bit = 0,
                                                       int end_bit = sizeof(KeyT) * 8) {
    SortPairs(keys, values, begin_bit, end_bit, false, true);
  }
  __device__ __forceinline__ void SortDescendingBlockedToStriped(KeyT (&keys)[ITEMS_PER_THREAD], int begin_bit = 0,
                                                                 int end_bit = sizeof(KeyT) * 8) {
    SortKeys(keys, begin_bit, end_bit, true, true);
  }
  __device__ __forceinline__ void SortDescendingBlockedToStriped(KeyT (&keys)[ITEMS_PER_THREAD],
                                                                 ValueT (&values)[ITEMS_PER_THREAD],
                                                                 int begin_bit = 0, int end_bit = sizeof(KeyT) * 8) {
    SortPairs(keys, values, begin_bit, end_bit, true, true);
  }
};

}  // namespace cub
#endif /* POLYPY_DEVICE_H */

#endif

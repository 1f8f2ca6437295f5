/* polypy's <cub/block/block_exchange.cuh>: cub::BlockExchange with CUB's interface and meaning.
 *
 * Rearranges the block's BLOCK_THREADS x ITEMS_PER_THREAD items between arrangements through shared
 * memory: *blocked* (item i of the thread of rank r is tile element r * ITEMS_PER_THREAD + i),
 * *striped* (element i * BLOCK_THREADS + r) and *warp-striped* (the tile cut into warps' segments of
 * 32 * ITEMS_PER_THREAD elements, item i of lane l at i * 32 + l of its warp's segment; whole warps
 * only), or by rank (`Scatter...`: the item with rank k goes to tile element k). Every thread of the
 * block calls each exchange, as CUB requires; each ends with a barrier, so that the next collective
 * may reuse the shared tile (CUB asks the program for that barrier; one more changes nothing).
 * Written for polypy (docs/cub.md). */
#ifndef POLYPY_CUB_BLOCK_EXCHANGE_CUH
#define POLYPY_CUB_BLOCK_EXCHANGE_CUH

#include <cub/util_ptx.cuh>

#ifdef POLYPY_DEVICE_H /* polypy's frontend reads the definitions; a translated program's C++ does not need them */
namespace cub {

template <typename InputT, int BLOCK_DIM_X, int ITEMS_PER_THREAD, bool WARP_TIME_SLICING = false,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockExchange {
 public:
  enum { BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z, TILE_ITEMS = BLOCK_THREADS * ITEMS_PER_THREAD };
  struct TempStorage { unsigned char __polypy_unused; };

  __device__ __forceinline__ BlockExchange() {}
  __device__ __forceinline__ BlockExchange(TempStorage&) {}

 private:
  enum { BLOCKED, STRIPED, WARP_STRIPED };

  __device__ __forceinline__ static int Rank() { return RowMajorTid(BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z); }

  /* The tile element of item i of this thread in an arrangement. */
  __device__ __forceinline__ static int Slot(int i, int arrangement) {
    if (arrangement == STRIPED) return i * BLOCK_THREADS + Rank();
    if (arrangement == WARP_STRIPED) return (Rank() / 32) * (32 * ITEMS_PER_THREAD) + i * 32 + Rank() % 32;
    return Rank() * ITEMS_PER_THREAD + i;
  }

  /* Writes this thread's items to the tile where `from` places them, and reads them back where `to` does. */
  template <typename OutputT>
  __device__ __forceinline__ void Exchange(const InputT (&input_items)[ITEMS_PER_THREAD],
                                           OutputT (&output_items)[ITEMS_PER_THREAD], int from, int to) {
    __shared__ InputT tile[TILE_ITEMS];
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) tile[Slot(i, from)] = input_items[i];
    __syncthreads();
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) output_items[i] = (OutputT)tile[Slot(i, to)];
    __syncthreads();
  }

  /* Writes item i to tile element ranks[i], and reads the tile back in arrangement `to`. */
  template <typename OutputT, typename OffsetT>
  __device__ __forceinline__ void Scatter(const InputT (&input_items)[ITEMS_PER_THREAD],
                                          OutputT (&output_items)[ITEMS_PER_THREAD],
                                          const OffsetT (&ranks)[ITEMS_PER_THREAD], int to) {
    __shared__ InputT tile[TILE_ITEMS];
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) tile[ranks[i]] = input_items[i];
    __syncthreads();
    for (int i = 0; i < ITEMS_PER_THREAD; ++i) output_items[i] = (OutputT)tile[Slot(i, to)];
    __syncthreads();
  }

 public:
  template <typename OutputT>
  __device__ __forceinline__ void StripedToBlocked(const InputT (&input_items)[ITEMS_PER_THREAD],
                                                   OutputT (&output_items)[ITEMS_PER_THREAD]) {
    Exchange(input_items, output_items, STRIPED, BLOCKED);
  }
  __device__ __forceinline__ void StripedToBlocked(InputT (&items)[ITEMS_PER_THREAD]) {
    Exchange(items, items, STRIPED, BLOCKED);
  }
  template <typename OutputT>
  __device__ __forceinline__ void BlockedToStriped(const InputT (&input_items)[ITEMS_PER_THREAD],
                                                   OutputT (&output_items)[ITEMS_PER_THREAD]) {
    Exchange(input_items, output_items, BLOCKED, STRIPED);
  }
  __device__ __forceinline__ void BlockedToStriped(InputT (&items)[ITEMS_PER_THREAD]) {
    Exchange(items, items, BLOCKED, STRIPED);
  }
  template <typename OutputT>
  __device__ __forceinline__ void WarpStripedToBlocked(const InputT (&input_items)[ITEMS_PER_THREAD],
                                                       OutputT (&output_items)[ITEMS_PER_THREAD]) {
    static_assert(BLOCK_THREADS % 32 == 0, "polypy: cub::BlockExchange's warp-striped arrangements need whole warps");
    Exchange(input_items, output_items, WARP_STRIPED, BLOCKED);
  }
  __device__ __forceinline__ void WarpStripedToBlocked(InputT (&items)[ITEMS_PER_THREAD]) {
    static_assert(BLOCK_THREADS % 32 == 0, "polypy: cub::BlockExchange's warp-striped arrangements need whole warps");
    Exchange(items, items, WARP_STRIPED, BLOCKED);
  }
  template <typename OutputT>
  __device__ __forceinline__ void BlockedToWarpStriped(const InputT (&input_items)[ITEMS_PER_THREAD],
                                                       OutputT (&output_items)[ITEMS_PER_THREAD]) {
    static_assert(BLOCK_THREADS % 32 == 0, "polypy: cub::BlockExchange's warp-striped arrangements need whole warps");
    Exchange(input_items, output_items, BLOCKED, WARP_STRIPED);
  }
  __device__ __forceinline__ void BlockedToWarpStriped(InputT (&items)[ITEMS_PER_THREAD]) {
    static_assert(BLOCK_THREADS % 32 == 0, "polypy: cub::BlockExchange's warp-striped arrangements need whole warps");
    Exchange(items, items, BLOCKED, WARP_STRIPED);
  }
  template <typename OutputT, typename OffsetT>
  __device__ __forceinline__ void ScatterToBlocked(const InputT (&input_items)[ITEMS_PER_THREAD],
                                                   OutputT (&output_items)[ITEMS_PER_THREAD],
                                                   OffsetT (&ranks)[ITEMS_PER_THREAD]) {
    Scatter(input_items, output_items, ranks, BLOCKED);
  }
  template <typename OffsetT>
  __device__ __forceinline__ void ScatterToBlocked(InputT (&items)[ITEMS_PER_THREAD], OffsetT (&ranks)[ITEMS_PER_THREAD]) {
    Scatter(items, items, ranks, BLOCKED);
  }
  template <typename OutputT, typename OffsetT>
  __device__ __forceinline__ void ScatterToStriped(const InputT (&input_items)[ITEMS_PER_THREAD],
                                                   OutputT (&output_items)[ITEMS_PER_THREAD],
                                                   OffsetT (&ranks)[ITEMS_PER_THREAD]) {
    Scatter(input_items, output_items, ranks, STRIPED);
  }
  template <typename OffsetT>
  __device__ __forceinline__ void ScatterToStriped(InputT (&items)[ITEMS_PER_THREAD], OffsetT (&ranks)[ITEMS_PER_THREAD]) {
    Scatter(items, items, ranks, STRIPED);
  }
};

}  // namespace cub
#endif /* POLYPY_DEVICE_H */

#endif

/* polypy's <cub/block/block_discontinuity.cuh>: cub::BlockDiscontinuity with CUB's interface and meaning.
 *
 * Flags the first item of each run (`FlagHeads`) and the last (`FlagTails`) in the block's blocked
 * arrangement of BLOCK_THREADS x ITEMS_PER_THREAD items: a head flag is `flag_op(previous, item)`, a
 * tail flag `flag_op(item, next)` (flag_op returns true where the two differ); the tile's first item
 * is a head (its last a tail) unless a `tile_predecessor_item` (`tile_successor_item`) is given to
 * compare with. `flag_op` takes two items (CUB's three-argument form, with the item's index, is not
 * declared). Every thread of the block calls each operation; each ends with a barrier. Written for
 * polypy (docs/cub.md). */
#ifndef POLYPY_CUB_BLOCK_DISCONTINUITY_CUH
#define POLYPY_CUB_BLOCK_DISCONTINUITY_CUH

#include <cub/util_ptx.cuh>

#ifdef POLYPY_DEVICE_H /* polypy's frontend reads the definitions; a translated program's C++ does not need them */
namespace cub {

template <typename T, int BLOCK_DIM_X, int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockDiscontinuity {
 public:
  enum { BLOCK_THREADS = BLOCK_DIM_X * BLOCK_DIM_Y * BLOCK_DIM_Z };
  struct TempStorage { unsigned char __polypy_unused; };

  __device__ __forceinline__ BlockDiscontinuity() {}
  __device__ __forceinline__ BlockDiscontinuity(TempStorage&) {}

 private:
  /* Head flags (HEADS) and/or tail flags (TAILS); the tile's ends compare with the given neighbours where
   * `has_...` is set. */
  template <bool HEADS, bool TAILS, int ITEMS_PER_THREAD, typename FlagT, typename FlagOp>
  __device__ __forceinline__ static void Flag(FlagT (&head_flags)[ITEMS_PER_THREAD], FlagT (&tail_flags)[ITEMS_PER_THREAD],
                                       const T (&input)[ITEMS_PER_THREAD],
                                       FlagOp flag_op, bool has_predecessor, T tile_predecessor_item,
                                       bool has_successor, T tile_successor_item) {
    __shared__ T first_items[BLOCK_THREADS];
    __shared__ T last_items[BLOCK_THREADS];
    const int rank = RowMajorTid(BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z);
    first_items[rank] = input[0];
    last_items[rank] = input[ITEMS_PER_THREAD - 1];
    __syncthreads();
    if (HEADS) {
      if (rank > 0)
        head_flags[0] = (FlagT)flag_op(last_items[rank - 1], input[0]);
      else
        head_flags[0] = has_predecessor ? (FlagT)flag_op(tile_predecessor_item, input[0]) : (FlagT)1;
      for (int i = 1; i < ITEMS_PER_THREAD; ++i) head_flags[i] = (FlagT)flag_op(input[i - 1], input[i]);
    }
    if (TAILS) {
      for (int i = 0; i < ITEMS_PER_THREAD - 1; ++i) tail_flags[i] = (FlagT)flag_op(input[i], input[i + 1]);
      if (rank < BLOCK_THREADS - 1)
        tail_flags[ITEMS_PER_THREAD - 1] = (FlagT)flag_op(input[ITEMS_PER_THREAD - 1], first_items[rank + 1]);
      else
        tail_flags[ITEMS_PER_THREAD - 1] =
            has_successor ? (FlagT)flag_op(input[ITEMS_PER_THREAD - 1], tile_successor_item) : (FlagT)1;
    }
    __syncthreads();
  }

 public:
  template <int ITEMS_PER_THREAD, typename FlagT, typename FlagOp>
  __device__ __forceinline__ void FlagHeads(FlagT (&head_flags)[ITEMS_PER_THREAD], T (&input)[ITEMS_PER_THREAD],
                                            FlagOp flag_op) {
    Flag<true, false>(head_flags, head_flags, input, flag_op, false, input[0], false, input[0]);
  }
  template <int ITEMS_PER_THREAD, typename FlagT, typename FlagOp>
  __device__ __forceinline__ void FlagHeads(FlagT (&head_flags)[ITEMS_PER_THREAD], T (&input)[ITEMS_PER_THREAD],
                                            FlagOp flag_op, T tile_predecessor_item) {
    Flag<true, false>(head_flags, head_flags, input, flag_op, true, tile_predecessor_item, false, input[0]);
  }
  template <int ITEMS_PER_THREAD, typename FlagT, typename FlagOp>
  __device__ __forceinline__ void FlagTails(FlagT (&tail_flags)[ITEMS_PER_THREAD], T (&input)[ITEMS_PER_THREAD],
                                            FlagOp flag_op) {
    Flag<false, true>(tail_flags, tail_flags, input, flag_op, false, input[0], false, input[0]);
  }
  template <int ITEMS_PER_THREAD, typename FlagT, typename FlagOp>
  __device__ __forceinline__ void FlagTails(FlagT (&tail_flags)[ITEMS_PER_THREAD], T (&input)[ITEMS_PER_THREAD],
                                            FlagOp flag_op, T tile_successor_item) {
    Flag<false, true>(tail_flags, tail_flags, input, flag_op, false, input[0], true, tile_successor_item);
  }
  template <int ITEMS_PER_THREAD, typename FlagT, typename FlagOp>
  __device__ __forceinline__ void FlagHeadsAndTails(FlagT (&head_flags)[ITEMS_PER_THREAD],
                                                    FlagT (&tail_flags)[ITEMS_PER_THREAD],
                                                    T (&input)[ITEMS_PER_THREAD], FlagOp flag_op) {
    Flag<true, true>(head_flags, tail_flags, input, flag_op, false, input[0], false, input[0]);
  }
  template <int ITEMS_PER_THREAD, typename FlagT, typename FlagOp>
  __device__ __forceinline__ void FlagHeadsAndTails(FlagT (&head_flags)[ITEMS_PER_THREAD],
                                                    FlagT (&tail_flags)[ITEMS_PER_THREAD], T tile_successor_item,
                                                    T (&input)[ITEMS_PER_THREAD], FlagOp flag_op) {
    Flag<true, true>(head_flags, tail_flags, input, flag_op, false, input[0], true, tile_successor_item);
  }
  template <int ITEMS_PER_THREAD, typename FlagT, typename FlagOp>
  __device__ __forceinline__ void FlagHeadsAndTails(FlagT (&head_flags)[ITEMS_PER_THREAD], T tile_predecessor_item,
                                                    FlagT (&tail_flags)[ITEMS_PER_THREAD],
                                                    T (&input)[ITEMS_PER_THREAD], FlagOp flag_op) {
    Flag<true, true>(head_flags, tail_flags, input, flag_op, true, tile_predecessor_item, false, input[0]);
  }
  template <int ITEMS_PER_THREAD, typename FlagT, typename FlagOp>
  __device__ __forceinline__ void FlagHeadsAndTails(FlagT (&head_flags)[ITEMS_PER_THREAD], T tile_predecessor_item,
                                                    FlagT (&tail_flags)[ITEMS_PER_THREAD], T tile_successor_item,
                                                    T (&input)[ITEMS_PER_THREAD], FlagOp flag_op) {
    Flag<true, true>(head_flags, tail_flags, input, flag_op, true, tile_predecessor_item, true, tile_successor_item);
  }
};

}  // namespace cub
#endif /* POLYPY_DEVICE_H */

#endif

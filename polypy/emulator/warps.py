"""Warp shuffles and votes over the active lanes of a chunk.

A warp is 32 consecutive linear thread ids of one block (``tid // 32``); the last warp of a
block whose size is not a multiple of 32 simply has fewer lanes. Only lanes executing the
shuffle/vote take part: divergent branches run their warp operations separately, as on
hardware without independent thread scheduling.

Shuffle source lanes (CUDA Programming Guide, "Warp Shuffle Functions"), with lanes grouped in
segments of ``width`` (a power of two, at most 32):

    idx   src = segment start + (srcLane mod width)
    up    src = lane - delta,   own value if that leaves the segment downwards
    down  src = lane + delta,   own value if that leaves the segment upwards
    xor   src = lane ^ laneMask, own value if that lands in a later segment

Reading a lane that does not execute the shuffle (masked off, returned, or beyond blockDim) is
undefined in CUDA and a ``LaneFault`` here.
"""
from __future__ import annotations

import numpy as np

from polypy.emulator.faults import LaneFault, first_true, pick
from polypy.emulator.grid import Chunk
from polypy.emulator.lanes import LaneSet

Value = np.ndarray | np.generic
WARP = 32


def shuffle(mode: str, value: Value, arg: Value, width: Value, lanes: LaneSet, chunk: Chunk) -> Value:
    tid = lanes.take_cached("tid", chunk.tid)
    lane = tid & (WARP - 1)
    w = np.asarray(width).astype(np.int64)
    bad = (w < 1) | (w > WARP) | ((w & (w - 1)) != 0)
    if np.any(bad):
        p = first_true(bad)
        raise LaneFault(f"shuffle width {int(pick(w, p))} is not a power of two between 1 and 32", p)
    seg = lane & ~(w - 1)
    a = np.asarray(arg).astype(np.int64) & 0xFFFFFFFF  # lane arguments are unsigned in CUDA
    if mode == "idx":
        src = seg + (a & (w - 1))
    elif mode == "up":
        src = lane - a
        src = np.where(src < seg, lane, src)
    elif mode == "down":
        src = lane + a
        src = np.where(src >= seg + w, lane, src)
    elif mode == "xor":
        src = lane ^ a
        src = np.where(src >= seg + w, lane, src)
    else:
        raise ValueError(f"unknown shuffle mode {mode!r}")
    src_tid = tid - lane + src
    # Position of each lane of the chunk in the active set (-1: not executing the shuffle).
    position = np.full(chunk.num_lanes + 1, -1, dtype=np.int64)
    position[lanes.ids] = np.arange(lanes.count)
    exists = src_tid < chunk.threads_per_block
    src_lane = np.where(exists, lanes.ids - tid + src_tid, chunk.num_lanes)
    src_pos = position[src_lane]
    inactive = src_pos < 0
    if np.any(inactive):
        p = first_true(inactive)
        why = ("is beyond blockDim" if not bool(pick(exists, p)) else
               "has returned" if chunk.returned[int(pick(src_lane, p))] else "is not executing this shuffle")
        raise LaneFault(f"shfl.{mode} reads lane {int(pick(src, p))} of its warp, which {why} "
                        f"(undefined in CUDA)", p)
    if not isinstance(value, np.ndarray):
        return value  # uniform: every source holds the same
    return value[src_pos]


def vote(mode: str, pred: Value, mask: Value, lanes: LaneSet, chunk: Chunk) -> Value:
    """ballot/activemask -> u32 lane bitmask; any/all -> i32 0 or 1 (over active lanes in mask)."""
    tid = lanes.take_cached("tid", chunk.tid)
    warps_per_block = -(-chunk.threads_per_block // WARP)
    warp = lanes.take_cached("lane_block", chunk.lane_block) * warps_per_block + (tid >> 5)
    bit = np.left_shift(np.uint64(1), (tid & (WARP - 1)).astype(np.uint64))
    active = np.zeros(chunk.num_blocks * warps_per_block, dtype=np.uint64)
    np.bitwise_or.at(active, warp, bit)
    pred_bits = np.zeros_like(active)
    np.bitwise_or.at(pred_bits, warp, np.where(pred, bit, np.uint64(0)))
    m = np.asarray(mask).astype(np.uint64) & np.uint64(0xFFFFFFFF)
    mine_active, mine_pred = active[warp], pred_bits[warp]
    if mode == "ballot":
        return (mine_pred & m).astype(np.uint32)
    if mode == "activemask":
        return mine_active.astype(np.uint32)
    if mode == "any":
        return ((mine_pred & m) != 0).astype(np.int32)
    if mode == "all":
        return ((mine_active & m & ~mine_pred) == 0).astype(np.int32)
    raise ValueError(f"unknown vote mode {mode!r}")

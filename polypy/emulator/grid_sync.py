"""``grid.sync()`` in the emulator (``Barrier`` of scope ``grid``, docs/cooperative_groups.md).

A kernel with a grid barrier runs as one chunk holding the whole grid (``launch.emulate``), so
every thread of the launch executes the barrier together, in lockstep. CUDA requires every
thread that has not exited to arrive (a thread that returned earlier does not count, as for
``__syncthreads``), and every block to have such a thread: a block that has left the kernel
would leave the others waiting forever. Anything else is reported, located.

Every access before the barrier is then ordered before every access after it, in every block:
the race detector forgets the summaries it kept (``races``), which is exact for that order.
"""
from __future__ import annotations

import numpy as np

from polypy.emulator.lanes import LaneSet
from polypy.emulator.state import ChunkState
from polypy.errors import UserError
from polypy.ir import nodes as n


def grid_barrier(state: ChunkState, s: n.Barrier, lanes: LaneSet) -> None:
    chunk = state.chunk
    if chunk.num_blocks != chunk.geometry.num_blocks:
        raise UserError("grid.sync() in a launch too big for the emulator to run every block at once", s.loc)
    present = np.zeros(chunk.num_lanes, dtype=bool)
    present[lanes.ids] = True
    missing = np.logical_not(present) & np.logical_not(chunk.returned)
    if missing.any():
        lane = int(np.argmax(missing))
        raise UserError(f"grid.sync() reached by only some threads of the grid: {chunk.describe_lane(lane)} does not "
                        "(every thread of every block must reach it, or have returned)", s.loc)
    gone = chunk.live == 0
    if gone.any():
        raise UserError(f"grid.sync() while block {chunk.block_name(int(np.argmax(gone)))} has left the kernel: "
                        "the other blocks would wait for it forever", s.loc)
    chunk.epoch += 1
    for mem in state.memories.values():
        if mem.records is not None:
            mem.records.reads = mem.records.writes = mem.records.atomics = None

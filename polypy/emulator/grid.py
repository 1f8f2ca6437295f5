"""Launch geometry and the per-chunk state of the threads being emulated.

Numbering follows CUDA: the linear thread id inside a block is ``x + y*bdx + z*bdx*bdy`` (warps
are consecutive runs of 32 of them), blocks are numbered ``x + y*gdx + z*gdx*gdy``, and the
linear thread id within the grid is ``block * threads_per_block + tid``. Atomics serialize in
that order, and race reports name threads by it.

A chunk is a run of consecutive blocks executed together; lane ``l`` of a chunk is thread
``l % T`` of the chunk's block ``l // T``.
"""
from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Geometry:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    # the launch's integer arguments: extents of local arrays may depend on them (a gradient's
    # tapes sized at launch, ``autodiff.tapes``)
    scalars: tuple[tuple[str, int], ...] = ()

    @property
    def threads_per_block(self) -> int:
        bx, by, bz = self.block
        return bx * by * bz

    @property
    def num_blocks(self) -> int:
        gx, gy, gz = self.grid
        return gx * gy * gz

    def block_coords(self, block: int) -> tuple[int, int, int]:
        gx, gy, _ = self.grid
        return block % gx, (block // gx) % gy, block // (gx * gy)

    def thread_coords(self, tid: int) -> tuple[int, int, int]:
        bx, by, _ = self.block
        return tid % bx, (tid // bx) % by, tid // (bx * by)

    def describe_thread(self, gtid: int) -> str:
        """``thread (x, y, z) of block (x, y, z)`` for a linear thread id within the grid."""
        t = self.threads_per_block
        return f"thread {_fmt(self.thread_coords(gtid % t))} of block {_fmt(self.block_coords(gtid // t))}"

    def describe_block(self, block: int) -> str:
        return _fmt(self.block_coords(block))


def _fmt(coords: tuple[int, int, int]) -> str:
    return "(" + ", ".join(str(int(c)) for c in coords) + ")"


class Chunk:
    """Threads of blocks ``first_block .. first_block + num_blocks - 1``, and their mutable state.

    ``returned`` marks threads that executed ``return``; ``live`` counts the threads of each
    block that have not; ``epoch`` counts the barriers each block has passed (the race detector
    orders accesses of one block by it).
    """

    def __init__(self, geometry: Geometry, first_block: int, num_blocks: int):
        self.geometry = geometry
        self.first_block = first_block
        self.num_blocks = num_blocks
        t = geometry.threads_per_block
        self.threads_per_block = t
        self.num_lanes = n = num_blocks * t
        lane = np.arange(n, dtype=np.int64)
        self.lane_block = lane // t  # block within the chunk
        self.tid = lane - self.lane_block * t  # linear thread id within the block
        self.gblock = (self.lane_block + first_block).astype(np.int32)
        self.gtid = (self.gblock.astype(np.int64) * t + self.tid).astype(np.int32)
        bx, by, _ = geometry.block
        self.thread_idx = (
            (self.tid % bx).astype(np.uint32),
            ((self.tid // bx) % by).astype(np.uint32),
            (self.tid // (bx * by)).astype(np.uint32),
        )
        gx, gy, _ = geometry.grid
        blocks = np.arange(first_block, first_block + num_blocks, dtype=np.int64)
        coords = (blocks % gx, (blocks // gx) % gy, blocks // (gx * gy))
        self.block_idx = tuple(c.astype(np.uint32)[self.lane_block] for c in coords)
        self.returned = np.zeros(n, dtype=bool)
        self.live = np.full(num_blocks, t, dtype=np.int64)
        self.epoch = np.zeros(num_blocks, dtype=np.int32)

    def describe_lane(self, lane: int) -> str:
        return self.geometry.describe_thread(int(self.gtid[lane]))

    def block_name(self, chunk_block: int) -> str:
        return self.geometry.describe_block(self.first_block + chunk_block)

"""Ordering between blocks through fences and atomics, for the race detector.

Without fences, threads of different blocks are never ordered (``races``). With them, CUDA's
release/acquire pattern orders them: thread ``t`` of block ``A`` writes, executes
``__threadfence()`` (device or system scope), then an atomic on element ``L``; a thread of
block ``B`` whose atomic on ``L`` comes later in ``L``'s order, and what follows it (in that
thread, or in its block after a barrier), sees the write. The last-block pattern is this: each
block writes its partial, fences and takes a ticket (``atomicInc``); the block holding the last
ticket reads every partial.

``Publications`` keeps, launch-wide, what the model needs and nothing more:

* per thread: the time and the block's barrier epoch of its latest fence;
* per block, its *release*: its latest atomic made by a thread that had fenced (the element,
  the time, that thread, and the time and epoch of its fence): the writes it covers are the
  fencing thread's earlier ones and every write of the block in an earlier epoch;
* per block, its *acquisition*: its latest atomic (the element, the time, the thread, the
  epoch): what follows it in that thread, or in a later epoch of the block, is after it.

An access of block ``B`` ordered after block ``A``'s write this way is no race. Only the latest
release and acquisition of each block are kept: a program that relies on an older one is
reported as racing, never the other way round. Atomics of one statement take effect in lane
order (``atomics``), and times count statements and lanes, launch-wide (chunk after chunk).
A plain access after atomics on the same element by other blocks is ordered when its block's
acquisition is an atomic on that element later than all of them (the element's own order:
``count = 0`` by the last block after every block took its ticket).
"""
from __future__ import annotations

import itertools

import numpy as np

from polypy.ir import nodes as n
from polypy.ir.visitor import walk

_RECORD_IDS = itertools.count(1)


def record_id() -> int:
    """A launch-wide name for one memory region's race records (an element is (region, index))."""
    return next(_RECORD_IDS)


def needs_publications(kernel: n.Kernel) -> bool:
    """Whether ``kernel`` has a fence that orders blocks (device or system scope)."""
    return any(isinstance(x, n.Fence) and x.scope != "block" for s in kernel.body for x in walk(s))


class Publications:
    def __init__(self, num_blocks: int, num_threads: int):
        self.now = 0
        self.fence_time = np.full(num_threads, -1, dtype=np.int64)
        self.fence_epoch = np.zeros(num_threads, dtype=np.int32)
        nb = num_blocks
        self.rel_region = np.zeros(nb, dtype=np.int64)
        self.rel_elem = np.full(nb, -1, dtype=np.int64)
        self.rel_time = np.full(nb, -1, dtype=np.int64)
        self.rel_thread = np.full(nb, -1, dtype=np.int64)
        self.rel_fence_time = np.full(nb, -1, dtype=np.int64)
        self.rel_fence_epoch = np.zeros(nb, dtype=np.int32)
        self.acq_region = np.zeros(nb, dtype=np.int64)
        self.acq_elem = np.full(nb, -1, dtype=np.int64)
        self.acq_time = np.full(nb, -1, dtype=np.int64)
        self.acq_thread = np.full(nb, -1, dtype=np.int64)
        self.acq_epoch = np.zeros(nb, dtype=np.int32)

    def tick(self, count: int) -> np.ndarray:
        """Times for the lanes of one statement, in lane order."""
        times = self.now + np.arange(count, dtype=np.int64)
        self.now += count + 1
        return times

    def fence(self, threads: np.ndarray, epochs: np.ndarray) -> None:
        times = self.tick(len(threads))
        self.fence_time[threads] = times
        self.fence_epoch[threads] = epochs

    def atomic(self, region: int, elems: np.ndarray, threads: np.ndarray, blocks: np.ndarray, epochs: np.ndarray,
               times: np.ndarray) -> None:
        """Atomics of one statement (lane order): acquisitions, and releases where the thread fenced."""
        self.acq_region[blocks] = region
        self.acq_elem[blocks] = elems
        self.acq_time[blocks] = times
        self.acq_thread[blocks] = threads
        self.acq_epoch[blocks] = epochs
        fenced = self.fence_time[threads] >= 0
        if fenced.any():
            b, t = blocks[fenced], threads[fenced]
            self.rel_region[b] = region
            self.rel_elem[b] = elems[fenced]
            self.rel_time[b] = times[fenced]
            self.rel_thread[b] = t
            self.rel_fence_time[b] = self.fence_time[t]
            self.rel_fence_epoch[b] = self.fence_epoch[t]

    def ordered(self, w_block: np.ndarray, w_thread: np.ndarray, w_epoch: np.ndarray, w_time: np.ndarray,
                block: np.ndarray, thread: np.ndarray, epoch: np.ndarray) -> np.ndarray:
        """Per access: whether block ``w_block``'s access (``w_thread``, -1: several threads; its
        epoch and time) is ordered before this one of ``block`` / ``thread`` / ``epoch``."""
        a = np.maximum(w_block, 0)
        covered = (self.rel_fence_time[a] > w_time) & \
            (((w_thread >= 0) & (w_thread == self.rel_thread[a])) | (w_epoch < self.rel_fence_epoch[a]))
        acquired = (self.acq_region[block] == self.rel_region[a]) & (self.acq_elem[block] == self.rel_elem[a]) & \
            (self.rel_elem[a] >= 0) & (self.acq_time[block] > self.rel_time[a]) & \
            ((self.acq_thread[block] == thread) | (self.acq_epoch[block] < epoch))
        return (w_block >= 0) & covered & acquired

    def after_element(self, region: int, elems: np.ndarray, latest: np.ndarray, block: np.ndarray,
                      thread: np.ndarray, epoch: np.ndarray) -> np.ndarray:
        """Per access: whether its block acquired through an atomic on this very element later than
        ``latest`` (the time of the element's latest atomic before), and the access follows it."""
        return (self.acq_region[block] == region) & (self.acq_elem[block] == elems) & \
            (self.acq_time[block] >= latest) & ((self.acq_thread[block] == thread) | (self.acq_epoch[block] < epoch))

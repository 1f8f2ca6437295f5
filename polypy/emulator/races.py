"""The data-race detector.

Two accesses of different threads to one element race when at least one is a plain write
(``Store``) or one is plain and the other atomic, and nothing orders them. The only ordering
CUDA gives without fences is ``__syncthreads``, inside a block; threads of different blocks
are never ordered. So for an element and each kind of access (read, write, atomic) it is
enough to remember a summary of the accesses so far:

* ``blk``: the block that made them (-1: none yet, -2: several blocks);
* ``ep``:  that block's barrier epoch (barriers it had passed) at the latest of them;
* ``thr``: a thread that made one in that epoch, and ``many``: whether several threads did;
* ``site``: where the latest one is in the source (for the report).

A new access by thread ``t`` of block ``b`` in epoch ``e`` conflicts with a summary when the
summary has several blocks (one of them is not ``b``), another block, or block ``b`` in epoch
``e`` with a thread other than ``t``. Older epochs of the same block are ordered by a barrier
and can be forgotten; other blocks never can, and ``blk`` keeps them. Writes need no "several":
two writes of different threads in one epoch, or of two blocks, are already a race.

The check is exact for this model (no false reports, no missed races between the accesses the
emulator performs). In a kernel with device-scope fences, ``fences.Publications`` also orders
blocks through fences and atomics (the last-block pattern); ``tm`` then keeps the time of the
latest access of a summary. Blocks run in lockstep within a chunk and chunk after chunk, but the
summaries do not depend on that order.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from polypy.emulator.fences import Publications, record_id
from polypy.errors import Loc
from polypy.ir import nodes as n


@dataclasses.dataclass(frozen=True)
class Accessors:
    """Who performs an access: one entry per active lane (linear thread id within the grid,
    block number, the block's barrier epoch)."""

    thread: np.ndarray
    block: np.ndarray
    epoch: np.ndarray
    time: np.ndarray | None = None  # with ``pubs``: the launch-wide time of each lane's access
    pubs: Publications | None = None  # the kernel has fences that order blocks


class RaceFound(Exception):
    """A conflict between lane ``position`` of the current access and an earlier access."""

    def __init__(self, position: int, other_kind: str, other_thread: int | None,
                 other_block: int | None, other_site: int):
        super().__init__(other_kind)
        self.position = position
        self.other_kind = other_kind
        self.other_thread = other_thread  # None: several threads
        self.other_block = other_block  # None: several blocks
        self.other_site = other_site


class _Summary:
    __slots__ = ("thr", "blk", "ep", "many", "site", "tm")

    def __init__(self, size: int):
        self.tm: np.ndarray | None = None  # allocated in kernels with fences only (``fences``)
        self.thr = np.full(size, -1, dtype=np.int32)
        self.blk = np.full(size, -1, dtype=np.int32)
        self.ep = np.zeros(size, dtype=np.int32)
        self.many = np.zeros(size, dtype=bool)
        self.site = np.full(size, -1, dtype=np.int32)

    def times(self) -> np.ndarray:
        if self.tm is None:
            self.tm = np.full(len(self.thr), -1, dtype=np.int64)
        return self.tm


class AccessRecords:
    """Summaries of the reads, writes and atomics of every element of one memory region."""

    def __init__(self, size: int):
        self.size = size
        self.region = record_id()
        self.reads: _Summary | None = None  # allocated on first use: most buffers are read-only
        self.writes: _Summary | None = None
        self.atomics: _Summary | None = None

    # -- the three kinds of access; ``flat`` holds one element per active lane
    def read(self, flat: np.ndarray, who: Accessors, site: int) -> None:
        self._check_single(self.writes, "write", flat, who)
        self._check_multi(self.atomics, "atomic", flat, who, self.region)
        if self.reads is None:
            self.reads = _Summary(self.size)
        _merge(self.reads, flat, who, site)

    def write(self, flat: np.ndarray, who: Accessors, site: int) -> None:
        self._check_duplicates(flat, who, site)
        self._check_single(self.writes, "write", flat, who)
        self._check_multi(self.reads, "read", flat, who, self.region)
        self._check_multi(self.atomics, "atomic", flat, who, self.region)
        if self.writes is None:
            self.writes = _Summary(self.size)
        w = self.writes
        w.thr[flat] = who.thread
        w.blk[flat] = who.block
        w.ep[flat] = who.epoch
        w.site[flat] = site
        if who.time is not None:
            w.times()[flat] = who.time

    def atomic(self, flat: np.ndarray, who: Accessors, site: int) -> None:
        self._check_single(self.writes, "write", flat, who)
        self._check_multi(self.reads, "read", flat, who, self.region)
        if self.atomics is None:
            self.atomics = _Summary(self.size)
        _merge(self.atomics, flat, who, site)
        if who.pubs is not None and who.time is not None:
            who.pubs.atomic(self.region, flat, who.thread, who.block, who.epoch, who.time)

    # -- checks
    @staticmethod
    def _check_single(s: _Summary | None, kind: str, flat: np.ndarray, who: Accessors) -> None:
        """Against the last plain write of each element (one thread of one block)."""
        if s is None or len(flat) == 0:
            return
        thr = s.thr[flat]
        bad = (thr >= 0) & (thr != who.thread) & ((s.blk[flat] != who.block) | (s.ep[flat] == who.epoch))
        if who.pubs is not None and bad.any():
            bad &= ~who.pubs.ordered(s.blk[flat], thr, s.ep[flat], s.times()[flat], who.block, who.thread, who.epoch)
        if bad.any():
            p = int(np.argmax(bad))
            f = flat[p]
            raise RaceFound(p, kind, int(s.thr[f]), int(s.blk[f]), int(s.site[f]))

    @staticmethod
    def _check_multi(s: _Summary | None, kind: str, flat: np.ndarray, who: Accessors, region: int) -> None:
        """Against a summary of reads or atomics (possibly several threads and blocks)."""
        if s is None or len(flat) == 0:
            return
        blk = s.blk[flat]
        same_epoch = s.ep[flat] == who.epoch
        other_thread = (s.thr[flat] != who.thread) | s.many[flat]
        bad = (blk == -2) | ((blk >= 0) & ((blk != who.block) | (same_epoch & other_thread)))
        if who.pubs is not None and bad.any():
            other_block = (blk >= 0) & (blk != who.block)
            thr = np.where(s.many[flat], -1, s.thr[flat])
            times = s.times()[flat]
            bad &= ~(other_block & who.pubs.ordered(blk, thr, s.ep[flat], times, who.block, who.thread, who.epoch))
            if kind == "atomic":
                bad &= ~who.pubs.after_element(region, flat, times, who.block, who.thread, who.epoch)
        if bad.any():
            p = int(np.argmax(bad))
            f = flat[p]
            several_blocks = s.blk[f] == -2
            several_threads = several_blocks or bool(s.many[f])
            raise RaceFound(p, kind, None if several_threads else int(s.thr[f]),
                            None if several_blocks else int(s.blk[f]), int(s.site[f]))

    @staticmethod
    def _check_duplicates(flat: np.ndarray, who: Accessors, site: int) -> None:
        """Two lanes of one store writing the same element."""
        if len(flat) < 2 or bool(np.all(flat[1:] > flat[:-1])):
            return
        order = np.argsort(flat, kind="stable")
        fs = flat[order]
        dup = np.flatnonzero(fs[1:] == fs[:-1])
        if len(dup) == 0:
            return
        first, second = order[dup[0]], order[dup[0] + 1]  # lane order: first < second
        raise RaceFound(int(second), "write", int(who.thread[first]), int(who.block[first]), site)


def _merge(s: _Summary, flat: np.ndarray, who: Accessors, site: int) -> None:
    """Add the accesses of one statement (one per lane) to a read/atomic summary."""
    if len(flat) == 0:
        return
    if len(flat) == 1 or bool(np.all(flat[1:] > flat[:-1])):
        elems, thr, blk, ep = flat, who.thread, who.block, who.epoch
        many = np.zeros(len(flat), dtype=bool)
    elif bool(np.all(flat == flat[0])):  # one element for every lane: a uniform index (x[j])
        elems, thr, ep = flat[:1], who.thread[:1], who.epoch[:1]
        single = who.block.min() == who.block.max()
        blk = who.block[:1] if single else np.full(1, -2, dtype=np.int32)
        many = np.ones(1, dtype=bool)
    else:
        order = np.argsort(flat, kind="stable")
        fs = flat[order]
        starts = np.flatnonzero(np.concatenate(([True], fs[1:] != fs[:-1])))
        elems = fs[starts]
        bs = who.block[order]
        thr = who.thread[order][starts]
        bmin = np.minimum.reduceat(bs, starts)
        bmax = np.maximum.reduceat(bs, starts)
        blk = np.where(bmin == bmax, bmin, np.int32(-2)).astype(np.int32)
        ep = who.epoch[order][starts]  # all lanes of one block share an epoch
        many = np.diff(np.concatenate((starts, [len(fs)]))) > 1  # distinct lanes: distinct threads
    old_blk = s.blk[elems]
    old_thr = s.thr[elems]
    fresh = old_blk == -1
    same_block = (old_blk >= 0) & (old_blk == blk)
    same_epoch = same_block & (s.ep[elems] == ep)
    s.blk[elems] = np.where(fresh | same_block, blk, np.int32(-2))
    s.many[elems] = np.where(same_epoch, s.many[elems] | many | (old_thr != thr), many)
    s.thr[elems] = np.where(same_epoch, old_thr, thr)
    s.ep[elems] = ep
    s.site[elems] = site
    if who.time is not None:
        tm = s.times()
        tm[elems] = np.maximum(tm[elems], who.time.max())


class Sites:
    """Numbers the accesses of a kernel so summaries can say where an access came from."""

    def __init__(self) -> None:
        self._ids: dict[int, int] = {}
        self._nodes: list[n.Node] = []

    def id(self, node: n.Node) -> int:
        key = id(node)
        got = self._ids.get(key)
        if got is None:
            got = len(self._nodes)
            self._ids[key] = got
            self._nodes.append(node)
        return got

    def loc(self, site: int) -> Loc | None:
        return self._nodes[site].loc if 0 <= site < len(self._nodes) else None

"""Read/write races on global memory between two blocks of one launch, or two threads of one block.

Blocks of one launch are not ordered at all (no barrier spans two blocks), so a thread reading
an element another block's thread stores to reads the old or the new value depending on the
schedule::

    y[i] = 2.0f * x[i];               // block b writes y[b * blockDim.x ...]
    if (threadIdx.x == 0)
        s = y[i + blockDim.x];        // ... and reads what block b + 1 writes

The CPU translation runs blocks in parallel too and picks one such value; a gradient of that one
schedule disagrees with finite differences of the others. ``block_read_races`` proves with isl,
for each exact plain (non-atomic) store to global memory and each exact read of the same array,
that a thread of one block and a thread of another can touch the same element: the question of
``write_conflicts`` (its write-write pairs of two blocks are already reported there) asked of a
store and a read, on the pairs of blocks 0 and 1 along one grid dimension only (where every
block value is known exactly), and for every launch and size of the generic range
(``RaceQuestion.decide``): every warning is a real race. Pairs with an atomic are not judged.

A read that no other block races with is then asked against the threads of its own block: a
store of another thread to the element it reads with no ``__syncthreads()`` of both between
them (``RaceQuestion.same_block_race``, the question ``write_conflicts`` asks of two stores) is
a race too (Rodinia heartwall's ``kernel.cu:761``/``:784``, through pointers held in a
``__constant__`` record: ``polypy.poly.held``).
"""
from __future__ import annotations

import dataclasses

from polypy.errors import Loc
from polypy.poly.held import race_accesses
from polypy.poly.model import Access
from polypy.poly.write_conflicts import RaceQuestion, thread_values


@dataclasses.dataclass(frozen=True)
class BlockReadRace:
    """A thread of block ``reader`` reads ``text`` (at ``loc``) that a thread of another block
    ``writer`` stores to (at ``store``), in one launch of ``kernel``; ``same_block``: a thread of
    the same block, with no barrier between them."""

    kernel: str
    buffer: str
    text: str
    loc: Loc | None
    reader: tuple[tuple[str, int], ...]
    writer: tuple[tuple[str, int], ...]
    store: Loc | None
    same_block: bool = False

    def message(self) -> str:
        def thread(values: tuple[tuple[str, int], ...]) -> str:
            return "(" + ", ".join(f"{k}={v}" for k, v in values) + ")"
        if self.same_block:
            return (f"thread {thread(self.reader)} reads '{self.text}' that thread {thread(self.writer)} of the same "
                    f"block writes in kernel {self.kernel}, with no __syncthreads() between them: the value read "
                    "depends on the schedule")
        return (f"thread {thread(self.reader)} reads '{self.text}' that thread {thread(self.writer)} of another "
                f"block writes in the same launch of kernel {self.kernel}: blocks are not ordered, so the value "
                "read depends on the schedule")

    def notes(self) -> tuple[tuple[str, Loc | None], ...]:
        return (("the store", self.store),)


def block_read_races(q: RaceQuestion) -> list[BlockReadRace]:
    """The exact global reads of ``q``'s model that a thread of another block of the same launch
    stores to, or else another thread of the same block with no barrier between (at most one
    race per read, in source order)."""
    model = q.model
    accesses = race_accesses(model.accesses)
    stores = [a for a in accesses if a.kind == "write"]
    out: list[BlockReadRace] = []
    for read in (a for a in accesses if a.kind == "read"):
        found = None
        for same_block in (False, True):
            for store in stores:
                if store.buffer != read.buffer:
                    continue
                point = _same_block_pair(q, read, store) if same_block else _other_block_pair(q, read, store)
                if point is not None:
                    found = BlockReadRace(model.kernel.name, read.buffer, read.text or f"{read.buffer}[...]",
                                          read.loc, thread_values(model, point, "1"),
                                          thread_values(model, point, "2"), store.loc, same_block)
                    break
            if found is not None:
                out.append(found)
                break
    return out


def _same_block_pair(q: RaceQuestion, read: Access, store: Access) -> dict[str, int] | None:
    """An example pair (``read`` in copy 1, ``store`` in copy 2) of two threads of one block
    touching one element with no barrier between them, at every launch of the generic range."""
    found = q.same_block_race(read, store)
    if found is None or found[1].is_empty():
        return None
    return q.decide(found[1])


def _other_block_pair(q: RaceQuestion, read: Access, store: Access) -> dict[str, int] | None:
    """An example pair (``read`` in copy 1, ``store`` in copy 2) of two blocks touching one element
    at every launch of the generic range, or None."""
    if not q.block_pieces:
        return None
    c = q.c
    same = c.same_element(read, "1", store, "2")
    if same is None:
        return None
    base = c.domain(read, "1") & c.domain(store, "2") & same & q.fixed
    if base.is_empty():
        return None
    race = c.empty
    for piece in q.block_pieces:
        race = race | (base & piece)
    return q.decide(race)

"""Which accesses a barrier orders: the exact question behind redundant-barrier elimination.

A barrier ``B`` is needed iff two accesses by *different threads of the same block*, at least
one of them writing, possibly to the same storage, are ordered by ``B`` and by no other
remaining barrier. "Ordered by B" means an instance of ``B`` lies between the two instances
in time; "by no other" means no instance of another barrier (with an exact domain) executed
by both threads lies between them. Within a loop this covers the wrap-around: an access after
``B`` in iteration ``k`` and one before ``B`` in iteration ``k + 1`` are ordered by another
barrier instance only if there is one in between.

Two atomics that commute (the same ``add``/``sub``, ``min``, ``max``, ``and``, ``or`` or
``xor`` family, neither using the old value) do not conflict: any order gives the same final
value (for floating-point ``add`` up to rounding, which the GPU does not fix either).

Answers are plain Python: ``Conflict`` describes one conflicting pair, the one nearest the
barrier: pairs on one buffer first, then by how far the two accesses are from the barrier in
program order. That is also the order the search takes, so a barrier that must stay is usually
decided by its first few pairs (a gradient kernel has thousands: nbody_step's took 7 s in
program order, 2 s this way).

Each pair is asked in the part of the model that can run in its block (``block_scope``): a
kernel that picks one version of its work per block (Rodinia's dwt2d) asks about a pair of one
version in that version's space, without the other versions' loops and barriers.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable

import islpy as isl

from polypy.errors import Loc
from polypy.poly.alias import alias_kind, describe_alias
from polypy.poly.block_scope import BlockScopes
from polypy.poly.model import THREAD_IDX, Access, Barrier, Model, build_model
from polypy.poly.paths import StmtPath, format_path, iter_statements
from polypy.poly.relations import Copies

_COMMUTING = {"add": "add", "sub": "add", "min": "min", "max": "max", "and": "and", "or": "or", "xor": "xor"}


def atomics_commute(a: Access, b: Access) -> bool:
    if a.kind != "atomic" or b.kind != "atomic" or a.atomic_has_result or b.atomic_has_result:
        return False
    fa, fb = _COMMUTING.get(a.atomic_op or ""), _COMMUTING.get(b.atomic_op or "")
    return fa is not None and fa == fb


@dataclasses.dataclass(frozen=True)
class AccessRef:
    """An access, described for people."""

    id: str
    buffer: str
    kind: str  # read / write / atomic
    text: str
    loc: Loc | None

    @property
    def line(self) -> int | None:
        return self.loc.line if self.loc is not None else None

    @staticmethod
    def of(a: Access) -> AccessRef:
        return AccessRef(str(a.id), a.buffer, a.kind, a.text, a.loc)

    def describe(self) -> str:
        verb = {"read": "read", "write": "write", "atomic": "atomic update"}[self.kind]
        where = f" (line {self.line})" if self.line is not None else f" ({self.id})"
        return f"{verb} of {self.text}{where}"


@dataclasses.dataclass(frozen=True)
class Conflict:
    """Two accesses of different threads of a block that only a given barrier orders."""

    hazard: str  # RAW, WAR or WAW (in program order: first access, then second)
    first: AccessRef
    second: AccessRef
    alias: str  # why two different buffers may be the same storage ("" for one buffer)
    carried_by: Loc | None  # the loop whose iterations the pair spans, when only across iterations
    witness: str  # an example: the two threads (and launch parameters isl picked)

    @property
    def buffers(self) -> tuple[str, ...]:
        if self.first.buffer == self.second.buffer:
            return (self.first.buffer,)
        return (self.first.buffer, self.second.buffer)

    def describe(self) -> str:
        text = (f"{self.hazard} hazard on {'/'.join(self.buffers)}: {self.first.describe()} "
                f"and {self.second.describe()} by another thread of the block")
        if self.carried_by is not None:
            text += f", across iterations of the loop at line {self.carried_by.line}"
        if self.alias:
            text += f"; {self.alias}"
        if self.witness:
            text += f" (e.g. {self.witness})"
        return text


def _hazard(first: Access, second: Access) -> str:
    if first.writes and second.writes:
        return "WAW"
    return "RAW" if first.writes else "WAR"


class BarrierAnalysis:
    """Conflict questions about the barriers of one kernel (symbolic launch, one block)."""

    def __init__(self, kernel_or_model):
        self.model: Model = kernel_or_model if isinstance(kernel_or_model, Model) else build_model(kernel_or_model)
        self.copies = Copies(self.model, ("1", "2"))
        self.pairs = self._eligible_pairs()
        self._base: dict[tuple[int, int, bool], isl.Set] = {}
        self._scopes = BlockScopes(self.model)
        self._scoped: dict[tuple[int, int], tuple[Copies, Access, Access]] = {}
        self._copies: dict[int, Copies] = {id(self.model): self.copies}
        self._orders: dict[int, tuple[isl.Set, isl.Set]] = {}
        self._never: set[tuple[int, int]] = set()
        # each statement's position in program order (accesses and barriers by their statement)
        self._position = {path: k for k, (path, _) in enumerate(iter_statements(self.model.kernel.body))}

    @property
    def barriers(self) -> tuple[Barrier, ...]:
        return self.model.barriers

    # ------------------------------------------------------------------ pairs
    def _eligible_pairs(self) -> list[tuple[int, int]]:
        """Ordered pairs of accesses that conflict if two threads run them unordered."""
        kernel = self.model.kernel
        out = []
        accesses = self.model.accesses
        for i, a in enumerate(accesses):
            if a.space in ("local", "constant"):
                continue
            for j, b in enumerate(accesses):
                if b.space in ("local", "constant"):
                    continue
                if not (a.writes or b.writes) or atomics_commute(a, b):
                    continue
                if alias_kind(kernel, a.buffer, b.buffer) is None:
                    continue
                out.append((i, j))
        # Pairs on one buffer first: they make the clearest explanation of a kept barrier.
        out.sort(key=lambda ij: accesses[ij[0]].buffer != accesses[ij[1]].buffer)
        return out

    def _pair(self, i: int, j: int) -> tuple[Copies, Access, Access]:
        """The copies of the part of the model that can run in the block of access i and j
        (``block_scope``), and the two accesses there."""
        key = (i, j)
        hit = self._scoped.get(key)
        if hit is None:
            a, b = self.model.accesses[i], self.model.accesses[j]
            scope = self._scopes.scope(a, b)
            if scope is None:  # never in one block: every set of the pair is empty
                self._never.add(key)
                scope = self.model
            c = self._copies.get(id(scope))
            if c is None:
                c = self._copies[id(scope)] = Copies(scope, ("1", "2"))
            hit = self._scoped[key] = (c, scope.access(a.id), scope.access(b.id))
        return hit

    def _pair_set(self, i: int, j: int, *, elements: bool = True) -> isl.Set:
        """Instances of access i (thread 1) before access j (thread 2), other threads of one block."""
        key = (i, j, elements)
        cached = self._base.get(key)
        if cached is not None:
            return cached
        c, a, b = self._pair(i, j)
        if (i, j) in self._never or elements and self._never_meet(c, a, b):
            self._base[key] = c.empty
            return c.empty
        s = c.lex_lt(a.time, "1", b.time, "2")
        if not s.is_empty():
            s &= c.other_thread("1", "2") & c.domain(a, "1") & c.domain(b, "2")
        if elements and not s.is_empty():
            overlap = c.overlap(a, "1", b, "2")
            s = s & overlap if overlap is not None else c.empty
        self._base[key] = s
        return s

    @staticmethod
    def _never_meet(c: Copies, a: Access, b: Access) -> bool:
        """Whether two threads of a block never touch one element with ``a`` and ``b``: a cheap
        test (basic sets, no time order) that spares most pairs the full question, whose
        answer it does not change (the full set is a subset of this one)."""
        overlap = c.overlap(a, "1", b, "2")
        if overlap is None:
            return True
        probe = c.domain(a, "1") & c.domain(b, "2") & overlap
        if probe.is_empty():
            return True
        return all((probe & piece).is_empty() for piece in c.other_thread_pieces("1", "2"))

    def _ordered_by(self, i: int, j: int, barrier: Barrier, *, must: bool) -> isl.Set:
        c, a, b = self._pair(i, j)
        try:
            barrier = c.model.barrier(barrier.path)
        except KeyError:  # the barrier never runs in the pair's block
            return c.empty
        if (i, j) in self._never:
            return c.empty
        return c.between(a.time, "1", b.time, "2", barrier, must=must)

    def _only_by(self, s: isl.Set, i: int, j: int, barrier: Barrier, others: Iterable[Barrier]) -> isl.Set:
        if s.is_empty():
            return s
        s = s & self._ordered_by(i, j, barrier, must=False)
        if s.is_empty():
            return s
        # The other barriers' "between" sets built inside what is left of ``s``, one by one until
        # nothing is (``Copies.unseparated``), not over the whole space; those that never run in
        # the pair's block (not in its scope) order nothing there.
        c, a, b = self._pair(i, j)
        scoped = {r.path: r for r in c.model.barriers}
        rest = [scoped[r.path] for r in others if r.path != barrier.path and r.path in scoped]
        return c.unseparated(s, a.time, "1", b.time, "2", rest)

    # ------------------------------------------------------------------ questions
    def conflict(self, barrier: StmtPath, remaining: Iterable[StmtPath]) -> Conflict | None:
        """The pair nearest ``barrier`` (see the module docstring) that only ``barrier`` orders,
        given the other barriers ``remaining``; None if ``barrier`` is removable."""
        b = self.model.barrier(barrier)
        others = [self.model.barrier(p) for p in remaining if p != barrier]
        for i, j in self._nearest_first(b):
            if self._ordered_by(i, j, b, must=False).is_empty():
                continue  # the barrier cannot lie between them: no need for the pair's set
            s = self._only_by(self._pair_set(i, j), i, j, b, others)
            if not s.is_empty():
                return self._describe(i, j, s, b)
        return None

    def crossing_order(self, barrier: StmtPath) -> str | None:
        """In which order of the threads a loop over them may run the code on both sides of
        ``barrier`` (no other barrier counted) thread by thread, each thread's part before the
        barrier then its part after it: ``"any"`` when no pair of accesses of two threads
        conflicts across it; ``"ascending"`` when in every pair that does, the thread on the
        near side comes first in the order ``(threadIdx.z, threadIdx.y, threadIdx.x)``
        (lexicographic), so that running thread by thread in that order still puts every such
        access before the one across the barrier; ``"descending"`` when it always comes last;
        None otherwise. Commuting atomics (see ``atomics_commute``) count as no conflict."""
        b = self.model.barrier(barrier)
        ascending = descending = True
        crossing = False
        for i, j in self.pairs:
            if self._ordered_by(i, j, b, must=False).is_empty():
                continue
            s = self._only_by(self._pair_set(i, j), i, j, b, [])
            if s.is_empty():
                continue
            crossing = True
            earlier, later = self._thread_order(self._pair(i, j)[0])
            ascending = ascending and (s - earlier).is_empty()
            descending = descending and (s - later).is_empty()
            if not (ascending or descending):
                return None
        if not crossing:
            return "any"
        return "ascending" if ascending else "descending"

    def _thread_order(self, c: Copies) -> tuple[isl.Set, isl.Set]:
        """Thread 1 before thread 2 in the order ``(threadIdx.z, threadIdx.y, threadIdx.x)``, and after."""
        hit = self._orders.get(id(c))
        if hit is None:
            earlier, later = c.empty, c.empty
            prefix = c.universe
            for d in sorted(self.model.thread_dims, reverse=True):  # z, then y, then x
                x1, x2 = c.dim(THREAD_IDX[d], "1"), c.dim(THREAD_IDX[d], "2")
                earlier |= prefix & x1.lt_set(x2)
                later |= prefix & x1.gt_set(x2)
                prefix &= x1.eq_set(x2)
            hit = self._orders[id(c)] = (earlier, later)
        return hit

    def _nearest_first(self, barrier: Barrier) -> list[tuple[int, int]]:
        """The eligible pairs, those on one buffer first, then by the distance of their two
        accesses from ``barrier`` in program order (ties: program order)."""
        accesses, position = self.model.accesses, self._position
        here = position[barrier.path]

        def key(ij: tuple[int, int]) -> tuple[bool, int]:
            a, c = accesses[ij[0]], accesses[ij[1]]
            return a.buffer != c.buffer, abs(position[a.id.path] - here) + abs(position[c.id.path] - here)

        return sorted(self.pairs, key=key)

    def removal_reason(self, barrier: StmtPath, remaining: Iterable[StmtPath]) -> str:
        """Why ``barrier`` is removable (call only when ``conflict`` returned None)."""
        b = self.model.barrier(barrier)
        others = [self.model.barrier(p) for p in remaining if p != barrier]
        disjoint: list[str] = []
        for i, j in self.pairs:
            if self.model.accesses[i].buffer in disjoint and self.model.accesses[j].buffer in disjoint:
                continue  # the answer could add nothing: both buffers are listed already
            if self._ordered_by(i, j, b, must=False).is_empty():
                continue
            s = self._only_by(self._pair_set(i, j, elements=False), i, j, b, others)
            if not s.is_empty():
                for a in (self.model.accesses[i], self.model.accesses[j]):
                    if a.buffer not in disjoint:
                        disjoint.append(a.buffer)
        atomics: list[str] = []
        for i, a in enumerate(self.model.accesses):
            for j, c in enumerate(self.model.accesses):
                if a.buffer not in atomics and atomics_commute(a, c) \
                        and alias_kind(self.model.kernel, a.buffer, c.buffer) is not None:
                    pc, pa, pb = self._pair(i, j)
                    base = pc.lex_lt(pa.time, "1", pb.time, "2") & pc.other_thread("1", "2")
                    if not self._only_by(base, i, j, b, others).is_empty() and a.buffer not in atomics:
                        atomics.append(a.buffer)
        parts = []
        if disjoint:
            parts.append("threads of a block touch disjoint elements of " + ", ".join(disjoint))
        if atomics:
            parts.append("only commuting atomic updates of " + ", ".join(atomics) + " cross it")
        if parts:
            return "; ".join(parts)
        return f"no conflicting accesses between {self._neighbour(b, others, -1)} and {self._neighbour(b, others, 1)}"

    def _neighbour(self, b: Barrier, others: list[Barrier], direction: int) -> str:
        order = list(self.model.barriers)
        index = order.index(b)
        remaining = {o.path for o in others}
        candidates = order[index + 1:] if direction > 0 else list(reversed(order[:index]))
        for o in candidates:
            if o.path in remaining:
                return f"the barrier at line {o.loc.line}" if o.loc is not None else f"barrier {format_path(o.path)}"
        return "the kernel exit" if direction > 0 else "the kernel entry"

    def _describe(self, i: int, j: int, s: isl.Set, barrier: Barrier) -> Conflict:
        c, a, b = self._pair(i, j)
        alias = describe_alias(self.model.kernel, a.buffer, b.buffer) if a.buffer != b.buffer else ""
        return Conflict(_hazard(a, b), AccessRef.of(a), AccessRef.of(b), alias,
                        self._carried_by(c, s, a, b, barrier), self._witness(c, s, a, b))

    def _carried_by(self, c: Copies, s: isl.Set, a: Access, b: Access, barrier: Barrier) -> Loc | None:
        """The innermost loop around the barrier whose iterations the conflict must span."""
        loops = {lp.dim: lp for lp in self.model.loops}
        for dim in reversed([t for t in barrier.time if isinstance(t, str)]):
            if dim in a.time and dim in b.time:
                same = s & c.dim(dim, "1").eq_set(c.dim(dim, "2"))
                if same.is_empty():
                    return loops[dim].loc
                return None
        return None

    def _witness(self, c: Copies, s: isl.Set, a: Access, b: Access) -> str:
        point = s.sample_point()
        if point.is_void():
            return ""
        names = c.names

        def coord(name: str) -> int:
            return int(point.get_coordinate_val(isl.dim_type.set, names.index(name)).to_python())

        dims = self.model.thread_dims
        def thread(copy: str) -> str:
            values = [coord(f"{THREAD_IDX[d]}#{copy}") for d in dims]
            if len(values) == 1:
                return f"threadIdx.x={values[0]}"
            return "threadIdx=(" + ",".join(str(v) for v in values) + ")"

        verb = {"read": "reads", "write": "writes", "atomic": "updates"}
        return f"{thread('1')} {verb[a.kind]}, then {thread('2')} {verb[b.kind]}"

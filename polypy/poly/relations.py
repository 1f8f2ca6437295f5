"""Relations between statement instances, built by names in a space of several instance copies.

A question about two (or three) instances — "can thread 1's write and thread 2's read touch
the same element, with only this barrier between them?" — is a set in a space holding copies
of the model's instance space: dimension ``threadIdx.x#1`` is thread 1's ``threadIdx.x``,
``i#2`` is the loop counter ``i`` of the second instance, and so on. A barrier instance in
between is a further copy ``#v`` of the loop dimensions only (barriers belong to the block).
Existential quantifiers are applied with ``eliminate``, which keeps the space, so every set of
one question lives in the same space and can be intersected and subtracted freely.

Happens-before across threads: instance ``p`` of one thread precedes instance ``q`` of
another thread of the same block iff some barrier instance executed by both lies between
their times (``separated``), because all threads of a block execute the same barrier
instances in the same order (CUDA requires it) and a barrier completes only when every
thread has reached it (or exited). Only barriers with exact domains are used this way.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable

import islpy as isl

from polypy.poly.affine import _val
from polypy.poly.alias import alias_kind
from polypy.poly.model import (BLOCK_DIM, BLOCK_IDX, CTX, GRID_DIM, MAX_BLOCK_DIM, THREAD_IDX, Access, Barrier,
                               Delinearized, Model)

Time = tuple[int | str, ...]


class Copies:
    """A space with named copies of the instance space (and a ``v`` copy of loop dimensions)."""

    def __init__(self, model: Model, copies: Iterable[str]):
        self.model = model
        self.copies = tuple(copies)
        names = [f"{d}#{c}" for c in self.copies for d in model.dims]
        names += [f"{d}#v" for d in model.loop_dims]
        self.space = isl.Space.create_from_names(CTX, set=names, params=[]).align_params(model.space.params())
        self.names = tuple(names)
        self.affs = isl.affs_from_space(self.space)
        self.universe = isl.Set.universe(self.space)
        self.empty = isl.Set.empty(self.space)
        self.zero = isl.PwAff.zero_on_domain(isl.LocalSpace.from_space(self.space))
        self._pull: dict[tuple[str, bool], isl.MultiAff] = {}
        self._relations: dict[tuple, isl.Set] = {}
        self._rows: dict[tuple, Delinearized | None] = {}  # ``_as_row``
        self._probes: tuple[isl.Set, ...] | None = None
        self.v_positions = (len(self.copies) * len(model.dims), len(model.loop_dims))
        self.block_level = {d for d in model.dims if d in BLOCK_IDX} | {bv.name for bv in model.block_values}

    def launch_probes(self) -> tuple[isl.Set, ...]:
        """Two launches where the model's launch extents are symbolic: the smallest block (2
        threads along each dimension) and the largest (1024 x 1024 x 64), 2 blocks along each
        grid dimension; () with a known launch.

        A question "for every launch, ..." asked at one launch first: at fixed extents isl
        answers at once what can take it minutes over symbolic ones (a 3-D block's accesses
        give sets of many pieces and existentials), and an answer "no" there is the answer.
        """
        if self._probes is None:
            present = [name for name in BLOCK_DIM + GRID_DIM if name in self.affs]
            small = large = self.universe
            for name in present:
                p = self.affs[name]
                small &= p.eq_set(self.const(2))
                large &= p.eq_set(self.const(MAX_BLOCK_DIM[BLOCK_DIM.index(name)] if name in BLOCK_DIM else 2))
            self._probes = (small, large) if present else ()
        return self._probes

    # ------------------------------------------------------------------ embedding
    def _pullback(self, copy: str, barrier: bool) -> isl.MultiAff:
        """The map from this space to the model's space that reads copy ``copy``.

        With ``barrier``, loop dimensions are read from the ``v`` copy instead.
        """
        key = (copy, barrier)
        ma = self._pull.get(key)
        if ma is not None:
            return ma
        ls = isl.LocalSpace.from_space(self.space)
        ma = isl.MultiAff.zero(self.space.map_from_domain_and_range(self.model.space))
        loops = set(self.model.loop_dims)
        for i, d in enumerate(self.model.dims):
            source = f"{d}#v" if barrier and d in loops else f"{d}#{copy}"
            ma = ma.set_aff(i, isl.Aff.var_on_domain(ls, isl.dim_type.set, self.names.index(source)))
        self._pull[key] = ma
        return ma

    def set(self, s: isl.Set, copy: str, *, barrier: bool = False) -> isl.Set:
        return s.preimage_multi_aff(self._pullback(copy, barrier))

    def aff(self, pa: isl.PwAff, copy: str) -> isl.PwAff:
        return pa.pullback_multi_aff(self._pullback(copy, False))

    def dim(self, name: str, copy: str) -> isl.PwAff:
        return self.affs[f"{name}#{copy}"]

    def const(self, value: int) -> isl.PwAff:
        return self.zero + _val(value)

    def eliminate(self, s: isl.Set, copy: str) -> isl.Set:
        """``s`` with the dimensions of ``copy`` existentially quantified (kept in the space)."""
        if copy == "v":
            start, count = self.v_positions
        else:
            start, count = self.copies.index(copy) * len(self.model.dims), len(self.model.dims)
        if count == 0:
            return s
        return s.eliminate(isl.dim_type.set, start, count)

    # ------------------------------------------------------------------ basic relations
    def coord(self, c: int | str, copy: str) -> isl.PwAff:
        return self.const(c) if isinstance(c, int) else self.dim(c, copy)

    def lex_lt(self, ta: Time, ca: str, tb: Time, cb: str, *, within: isl.Set | None = None) -> isl.Set:
        """Time ``ta`` of copy ``ca`` strictly before time ``tb`` of copy ``cb`` (``within``: only
        its points, each piece built inside it, which is cheaper than intersecting the union
        over the whole space with it afterwards)."""
        result = self.empty
        prefix = self.universe if within is None else within
        for x, y in zip(ta, tb):
            if within is not None and prefix.is_empty():
                return result
            if isinstance(x, int) and isinstance(y, int):
                if x < y:
                    return result | prefix
                if x > y:
                    return result
                continue
            ax, ay = self.coord(x, ca), self.coord(y, cb)
            result = result | (prefix & ax.lt_set(ay))
            prefix = prefix & ax.eq_set(ay)
        return result

    def _cached(self, key: tuple, make) -> isl.Set:
        value = self._relations.get(key)
        if value is None:
            value = make()
            self._relations[key] = value
        return value

    def same_block(self, a: str, b: str) -> isl.Set:
        return self._cached(("same_block", a, b), lambda: self._same_block(a, b))

    def same_thread(self, a: str, b: str) -> isl.Set:
        return self._cached(("same_thread", a, b), lambda: self._same_thread(a, b))

    def other_thread(self, a: str, b: str) -> isl.Set:
        """Two different threads of the same block."""
        return self._cached(("other_thread", a, b), lambda: self._other_thread(a, b))

    def _same_block(self, a: str, b: str) -> isl.Set:
        out = self.universe
        for name in self.block_level:
            out &= self.dim(name, a).eq_set(self.dim(name, b))
        return out

    def _same_thread(self, a: str, b: str) -> isl.Set:
        out = self.same_block(a, b)
        for d in range(3):
            out &= self.dim(THREAD_IDX[d], a).eq_set(self.dim(THREAD_IDX[d], b))
        return out

    def _other_thread(self, a: str, b: str) -> isl.Set:
        differ = self.empty
        for d in self.model.thread_dims:
            x, y = self.dim(THREAD_IDX[d], a), self.dim(THREAD_IDX[d], b)
            differ = differ | x.lt_set(y) | x.gt_set(y)
        return self.same_block(a, b) & differ

    def other_thread_pieces(self, a: str, b: str) -> list[isl.Set]:
        """``other_thread`` as a list of simple sets (one per dimension and direction)."""
        same = self.same_block(a, b)
        out = []
        for d in self.model.thread_dims:
            x, y = self.dim(THREAD_IDX[d], a), self.dim(THREAD_IDX[d], b)
            out += [same & x.lt_set(y), same & x.gt_set(y)]
        return out

    def other_block_pieces(self, a: str, b: str) -> list[isl.Set]:
        """Instances of two different blocks, one simple set per dimension and direction.

        Along the dimension ``d`` where the blocks differ, a block value
        ``blockIdx[d] * c * blockDim[e]`` grows by at least ``c * blockDim[e]`` from one block
        to the next, and one that is ``c * blockDim[e]`` times the blocks' row-major index in a
        plane of the grid containing ``d`` (``BlockValue.linear``) moves by at least that much,
        up or down; nothing is assumed about other block values.
        """
        out = []
        for d in self.model.block_dims:
            for first, second in ((a, b), (b, a)):
                lo, hi = self.dim(BLOCK_IDX[d], first), self.dim(BLOCK_IDX[d], second)
                piece = lo.lt_set(hi)
                for bv in self.model.block_values:
                    if bv.stride is not None and bv.stride[0] == d:
                        _, e, k = bv.stride
                        step = self._block_dim(e) * _val(k)
                        piece &= (self.dim(bv.name, second) - self.dim(bv.name, first)).ge_set(step)
                    elif bv.linear is not None and d in bv.linear[:2]:
                        _, _, e, k = bv.linear
                        step = self._block_dim(e) * _val(k)
                        gap = self.dim(bv.name, second) - self.dim(bv.name, first)
                        piece &= gap.ge_set(step) | gap.le_set(-step)
                for name, (e, factor, where) in self.model.block_factors.items():
                    if e == d:  # blockIdx[d] * P: P or more apart unless P < 0 (or it wraps)
                        p = self.aff(factor, first)
                        gap = self.dim(name, second) - self.dim(name, first)
                        apart = p.lt_set(self.zero) | gap.ge_set(p)
                        piece &= apart if where is None else apart | (self.universe - self.set(where, first))
                out.append(piece)
        return out

    def _block_dim(self, d: int) -> isl.PwAff:
        model = self.model
        if model.launch is not None:
            return self.const(model.launch.block[d])
        name = f"blockDim.{'xyz'[d]}"
        if name in self.affs:
            return self.affs[name]
        return self.const(1)

    # ------------------------------------------------------------------ accesses
    def domain(self, a: Access, copy: str) -> isl.Set:
        """``a``'s domain in ``copy``. Cached: every access meets every other in the pair loops."""
        return self._cached(("domain", a.id, copy), lambda: self.set(a.domain, copy))

    def congruence(self, a: Access, ca: str, b: Access, cb: str) -> isl.Set:
        """What strided loops (``Stride``) around ``a`` and ``b`` say about the pair.

        Inside loops with the same step ``S``: ``dim - start`` is a multiple of ``S`` in both,
        so their difference ``D`` is one too; kept as ``D == 0 or |D| >= S`` (affine, an
        over-approximation of the multiples of ``S``).
        """
        out = self.universe
        for fa in self.model.strides:
            if not fa.encloses(a.id.path):
                continue
            for fb in self.model.strides:
                if fb.key != fa.key or not fb.encloses(b.id.path):
                    continue
                d = (self.dim(fa.dim, ca) - self.aff(fa.start, ca)) - (self.dim(fb.dim, cb) - self.aff(fb.start, cb))
                step = self.aff(fa.step, ca)
                out &= d.eq_set(self.zero) | d.ge_set(step) | d.le_set(-step)
                for f, copy in ((fa, ca), (fb, cb)):
                    if f.start_below_step:
                        start = self.aff(f.start, copy)
                        out &= start.ge_set(self.zero) & start.lt_set(step)
        return out

    def overlap(self, a: Access, ca: str, b: Access, cb: str) -> isl.Set | None:
        """Where ``a`` (copy ``ca``) and ``b`` (copy ``cb``) may touch the same storage.

        None when the buffers never share storage; the universe when nothing is known.
        """
        kind = alias_kind(self.model.kernel, a.buffer, b.buffer)
        if kind is None:
            return None
        if kind == "any":
            return self.universe
        if kind == "same":
            out = self.universe
            for d in range(len(a.elems)):
                same = self._dim_equal(a, ca, b, cb, d, may=True)
                if same is not None:
                    out &= same
            return out
        # extern shared arrays: byte ranges intersect
        ea, eb = a.elems[0], b.elems[0]
        if ea is None or eb is None:
            return self.universe
        sa, sb = a.elem.itemsize, b.elem.itemsize
        xa, xb = self.aff(ea, ca) * _val(sa), self.aff(eb, cb) * _val(sb)
        return xa.lt_set(xb + _val(sb)) & xb.lt_set(xa + _val(sa))

    def same_element(self, a: Access, ca: str, b: Access, cb: str) -> isl.Set | None:
        """Where ``a`` and ``b`` certainly touch the same element of the same buffer (None: never provable)."""
        if a.buffer != b.buffer:
            return None
        out = self.universe
        for d in range(len(a.elems)):
            same = self._dim_equal(a, ca, b, cb, d)
            if same is None:
                return None
            out &= same
        return out

    def _dim_equal(self, a: Access, ca: str, b: Access, cb: str, d: int, *, may: bool = False) -> isl.Set | None:
        """Where index ``d`` of ``a`` equals index ``d`` of ``b`` (None: cannot be expressed).

        Through a delinearization valid only for some parameter values (``Delinearized.valid``):
        with ``may``, where they may be equal (everywhere outside those values), else where they
        certainly are (only inside)."""
        ea, eb = a.elems[d], b.elems[d]
        if ea is not None and eb is not None:
            return self.aff(ea, ca).eq_set(self.aff(eb, cb))
        da = a.delin[d] if a.delin else None
        db = b.delin[d] if b.delin else None
        if da is None and ea is not None and db is not None:
            da = self._as_row(a, d, db)
        elif db is None and eb is not None and da is not None:
            db = self._as_row(b, d, da)
        if da is not None and db is not None and da.factor == db.factor:
            equal = self.aff(da.outer, ca).eq_set(self.aff(db.outer, cb)) \
                & self.aff(da.inner, ca).eq_set(self.aff(db.inner, cb))
            if da.valid is None and db.valid is None:
                return equal
            valid = self.universe
            for x, copy in ((da, ca), (db, cb)):
                if x.valid is not None:
                    valid &= self.set(x.valid, copy)
            return (equal & valid) | (self.universe - valid) if may else equal & valid
        return None

    def _as_row(self, a: Access, d: int, like: Delinearized) -> Delinearized | None:
        """The affine index ``d`` of ``a`` as ``0 * P + e`` in the terms of ``like`` (``P`` its
        factor), valid where ``0 <= e < P`` on ``a``'s domain (backprop's ``w[tx + 1]`` beside
        ``w[(hid + 1) * row + tx + 1]``: apart while ``tx + 1 <= hid``); None without ``P`` or
        where that never holds."""
        if like.size is None:
            return None
        key = (a.id, d, like.factor)
        if key not in self._rows:
            e = a.elems[d]
            if not a.domain.is_subset(like.size.domain()):  # P known where the other access runs only
                self._rows[key] = None
                return None
            zero = isl.PwAff.zero_on_domain(isl.LocalSpace.from_space(self.model.space))
            outside = (e.lt_set(zero) | e.ge_set(like.size)) & a.domain
            row: Delinearized | None = Delinearized(like.factor, zero, e, None, like.size)
            if not outside.is_empty():
                valid = isl.Set.universe(self.model.space).intersect_params(outside.params().complement())
                row = None if (valid & a.domain).is_empty() else dataclasses.replace(row, valid=valid.coalesce())
            self._rows[key] = row
        return self._rows[key]

    def differ(self, a: Access, ca: str, b: Access, cb: str) -> isl.Set:
        """Where ``a`` and ``b`` may touch different elements of the same buffer."""
        out = self.empty
        for d in range(len(a.elems)):
            same = self._dim_equal(a, ca, b, cb, d)
            if same is None:
                return self.universe
            out = out | same.complement()
        return out

    # ------------------------------------------------------------------ barriers
    def between(self, t1: Time, c1: str, t2: Time, c2: str, barrier: Barrier, *, must: bool) -> isl.Set:
        """An instance of ``barrier`` lies between time ``t1`` of ``c1`` and ``t2`` of ``c2``.

        ``must``: the barrier instance is executed by both threads (needs an exact barrier
        domain to mean "certainly"); otherwise: the block may execute it (over-approximation).
        The answer depends only on the times, so it is cached by them.
        """
        key = ("between", t1, c1, t2, c2, barrier.path, must)
        cached = self._relations.get(key)
        if cached is None:
            cached = self._between(t1, c1, t2, c2, barrier, must)
            self._relations[key] = cached
        return cached

    def _between(self, t1: Time, c1: str, t2: Time, c2: str, barrier: Barrier, must: bool) -> isl.Set:
        if must and barrier.cut is not None:
            loop, outer = barrier.cut
            if loop not in t2:
                return self.empty
        s = self.lex_lt(t1, c1, barrier.time, "v") & self.lex_lt(barrier.time, "v", t2, c2)
        if s.is_empty():
            return s
        if must and barrier.cut is not None:
            for dim in outer:  # the later instance is in the same instance of the cut loop
                s &= self.dim(dim, c2).eq_set(self.dim(dim, "v"))
        if must:
            s &= self.set(barrier.domain, c1, barrier=True) & self.set(barrier.domain, c2, barrier=True)
        else:
            first_thread = self.model.dims.index(THREAD_IDX[0])
            anyone = barrier.domain.eliminate(isl.dim_type.set, first_thread, 3)
            s &= self.set(anyone, c1, barrier=True)
        return self.eliminate(s, "v")

    def between_within(self, within: isl.Set, t1: Time, c1: str, t2: Time, c2: str, barrier: Barrier) -> isl.Set | None:
        """``within & between(t1, c1, t2, c2, barrier, must=True)``, built inside ``within`` (a set
        that constrains no ``v`` dimension, so the intersection commutes with eliminating them):
        a small set where ``within`` fixes most dimensions, where ``between`` alone spans the
        whole copy space. None: no instance of ``barrier`` can lie between the two times."""
        if barrier.cut is not None and barrier.cut[0] not in t2:
            return None
        # ``within`` first, then each order in turn: the product of the two orders' unions is
        # what costs over the whole space.
        s = within
        for (ta, ca), (tb, cb) in (((t1, c1), (barrier.time, "v")), ((barrier.time, "v"), (t2, c2))):
            s = self.lex_lt(ta, ca, tb, cb, within=s)
            if s.is_empty():
                return None
        if barrier.cut is not None:
            for dim in barrier.cut[1]:  # the later instance is in the same instance of the cut loop
                s &= self.dim(dim, c2).eq_set(self.dim(dim, "v"))
        s &= self._barrier_domain(barrier, c1) & self._barrier_domain(barrier, c2)
        return self.eliminate(s, "v")

    def _barrier_domain(self, barrier: Barrier, copy: str) -> isl.Set:
        """``barrier``'s domain for the thread of ``copy``, its loop dimensions in the ``v`` copy."""
        return self._cached(("barrier_domain", barrier.path, copy),
                            lambda: self.set(barrier.domain, copy, barrier=True))

    def separated_within(self, within: isl.Set, t1: Time, c1: str, t2: Time, c2: str,
                         barriers: Iterable[Barrier]) -> isl.Set:
        """``within & separated(t1, c1, t2, c2, barriers)``, built inside ``within`` (see
        ``between_within``)."""
        out = self.empty
        for b in barriers:
            if b.exact:
                between = self.between_within(within, t1, c1, t2, c2, b)
                if between is not None:
                    out = out | between
        return out

    def unseparated(self, within: isl.Set, t1: Time, c1: str, t2: Time, c2: str,
                    barriers: Iterable[Barrier]) -> isl.Set:
        """``within - separated(t1, c1, t2, c2, barriers)``, asked barrier by barrier inside what
        is left of ``within`` (see ``between_within``), stopping once nothing is."""
        out = within
        for b in barriers:
            if not b.exact:
                continue
            between = self.between_within(out, t1, c1, t2, c2, b)
            if between is not None:
                out = out - between
                if out.is_empty():
                    return out
        return out

    def separated(self, t1: Time, c1: str, t2: Time, c2: str, barriers: Iterable[Barrier]) -> isl.Set:
        """Some exact barrier instance executed by both threads lies between the two times."""
        out = self.empty
        for b in barriers:
            if b.exact:
                out = out | self.between(t1, c1, t2, c2, b, must=True)
        return out

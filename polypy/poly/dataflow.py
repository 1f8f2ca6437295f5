"""Shared-memory dataflow proved per instance: store->load forwarding and dead stores.

Forwarding a load ``L`` from a store ``S`` (same shared array) is exact when, for every
instance ``l`` of ``L`` in thread ``t``:

1. the last instance ``s`` of ``S`` executed by ``t`` before ``l`` exists and writes exactly
   the element ``l`` reads (``S`` has an exact domain and both indices are exact);
2. ``t`` writes no storage that may overlap that element between ``s`` and ``l``;
3. no other thread of the block writes storage that may overlap it unless that write
   happens before ``s`` or after ``l`` — which, across threads, means an exact barrier
   instance lies in between (``relations.Copies.separated``).

Then ``l`` reads the value ``s`` stored, which a local assigned at ``S`` still holds.
Each question gets a bounded number of isl operations (``space.bounded``); where isl runs out
the load is not forwarded and the store not dead. Each is asked at two fixed launches first
(``Copies.launch_probes``): every set below is the one of every launch cut to those, so a "no"
there is the answer, and at fixed extents isl gives it at once; only a "yes" at both is asked
over symbolic extents (dct8x8's ``CUDAkernel2DCT``, a 3-D block with 34 shared accesses: 86 s
of forwarding questions, now about 1 s).

A shared store ``S`` is dead when no read can observe its value: every read instance ``r`` of
possibly overlapping storage either happens before ``s`` (same thread: earlier in time; other
thread: separated by a barrier), or happens after a later plain store ``w`` of the same
thread to the same element (``w`` with exact domain and index) that overwrote it. Shared
memory ends with the block, so values never read are dead.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import islpy as isl

from polypy.ir import nodes as n
from polypy.poly.alias import alias_kind
from polypy.poly.block_scope import BlockScopes
from polypy.poly.model import Access, Model, build_model
from polypy.poly.paths import AccessId, StmtPath
from polypy.poly.relations import Copies
from polypy.poly.space import bounded


@dataclasses.dataclass(frozen=True)
class Forwarding:
    """Load ``load`` always reads the value the same thread stored with statement ``store``."""

    load: AccessId
    store: StmtPath


def _model(kernel_or_model: n.Kernel | Model) -> Model:
    return kernel_or_model if isinstance(kernel_or_model, Model) else build_model(kernel_or_model)


class _Scopes:
    """Each access's ``block_scope`` scope, with one ``Copies`` per scope (its caches shared by
    the questions of one version of the kernel's work)."""

    def __init__(self, model: Model, copies: tuple[str, ...]):
        self.scopes = BlockScopes(model)
        self.names = copies
        self.copies: dict[int, tuple[Model, Copies]] = {}

    def of(self, a: Access) -> tuple[Model, Copies]:
        scope = self.scopes.scope(a) or self.scopes.model  # None: ``a`` never runs
        hit = self.copies.get(id(scope))
        if hit is None:
            hit = self.copies[id(scope)] = (scope, Copies(scope, self.names))
        return hit


def _at_probes(c: Copies, question: Callable[[isl.Set], bool]) -> bool:
    """Whether ``question`` holds at every launch probe (``Copies.launch_probes``): False as soon
    as one says no, or runs out of isl's budget there. At fixed extents the question is a
    restriction of the one over symbolic extents, so where it runs out the symbolic one would
    too, most likely: it is not asked (the conservative answer, as if it had run out)."""
    for probe in c.launch_probes():
        if not bounded(lambda: question(probe), None):
            return False
    return True


def _writes_to(model: Model, a: Access) -> list[Access]:
    return [w for w in model.accesses
            if w.writes and alias_kind(model.kernel, w.buffer, a.buffer) is not None]


def forwardable_loads(kernel_or_model: n.Kernel | Model) -> list[Forwarding]:
    """Every shared load that can read a local instead, with the store it reads from."""
    whole = _model(kernel_or_model)
    scopes = _Scopes(whole, ("l", "s", "w"))
    out = []
    for load in whole.accesses:
        if load.kind != "read" or load.space != "shared" or not load.index_exact:
            continue
        # Only what can run in the load's block (``block_scope``): one version of a kernel's work.
        model, c = scopes.of(load)
        load = model.access(load.id)
        stores = [s for s in model.accesses
                  if s.kind == "write" and s.buffer == load.buffer and s.index_exact and s.domain_exact]
        # Try the closest store before the load first (program order), then those after it.
        position = {a.id: i for i, a in enumerate(model.accesses)}
        here = position[load.id]
        stores.sort(key=lambda s: (0, here - position[s.id]) if position[s.id] < here else (1, position[s.id]))
        for store in stores:
            # At one launch first (``Copies.launch_probes``): most pairs fail there, at once.
            if not _at_probes(c, lambda probe: _forwards(model, c, store, load, probe)):
                continue
            if bounded(lambda: _forwards(model, c, store, load), False):
                out.append(Forwarding(load.id, store.id.path))
                break
    return out


def _forwards(model: Model, c: Copies, store: Access, load: Access, within: isl.Set | None = None) -> bool:
    """Whether ``load`` reads what ``store`` wrote (the module docstring's conditions); with
    ``within``, at its launches only: False there is False everywhere (each set below is the
    one of every launch, cut to those), True there says nothing of other launches."""
    def domain(a: Access, copy: str) -> isl.Set:
        d = c.domain(a, copy)
        return d if within is None else d & within

    if within is not None and domain(load, "l").is_empty():
        return True  # the load does not run at these launches: nothing is known there
    same = c.same_element(store, "s", load, "l")
    assert same is not None
    # The domains first, the program order built inside them last.
    cand = domain(load, "l") & domain(store, "s") & c.same_thread("s", "l") & same
    if cand.is_empty():
        return False
    cand = c.lex_lt(store.time, "s", load.time, "l", within=cand)
    if cand.is_empty():
        return False
    # Every load instance needs a candidate store instance (what survives below is a subset):
    # most pairs fail here, before the costlier questions.
    if not (domain(load, "l") - c.eliminate(cand, "s")).is_empty():
        return False
    # 1. s is the last instance of S before l in this thread.
    later = domain(store, "w") & c.same_thread("w", "l") \
        & c.lex_lt(store.time, "s", store.time, "w") & c.lex_lt(store.time, "w", load.time, "l")
    good = cand - c.eliminate(later, "w")
    writes = _writes_to(model, load)
    # 2. no write of this thread to the element in between.
    for w in writes:
        if good.is_empty():
            return False
        overlap = c.overlap(w, "w", load, "l")
        assert overlap is not None
        kill = c.lex_lt(store.time, "s", w.time, "w") & c.lex_lt(w.time, "w", load.time, "l")
        if kill.is_empty():
            continue
        kill &= domain(w, "w") & c.same_thread("w", "l") & overlap
        good = good - c.eliminate(kill, "w")
    # Step 3 only removes instances from ``good``: if what is left does not cover every load
    # instance now, it never will, and the other threads' writes (the costly part: each barrier
    # asked about in the three copies' space) need not be asked about.
    if not _covers(c, domain(load, "l"), good):
        return False
    # 3. no write of another thread that may fall between s and l.
    for w in writes:
        if good.is_empty():
            return False
        overlap = c.overlap(w, "w", load, "l")
        assert overlap is not None
        racing = good & domain(w, "w") & c.other_thread("w", "l") & overlap
        if racing.is_empty():
            continue
        racing = c.unseparated(racing, w.time, "w", store.time, "s", model.barriers)
        if not racing.is_empty():
            racing = c.unseparated(racing, load.time, "l", w.time, "w", model.barriers)
        good = good - c.eliminate(racing, "w")
    return _covers(c, domain(load, "l"), good)


def _covers(c: Copies, loads: isl.Set, good: isl.Set) -> bool:
    """Whether every load instance of ``loads`` has a store instance in ``good``."""
    return (loads - c.eliminate(good, "s")).is_empty()


def dead_shared_stores(kernel_or_model: n.Kernel | Model) -> list[StmtPath]:
    """Shared-memory stores whose values no read can observe (see module docstring)."""
    whole = _model(kernel_or_model)
    scopes = _Scopes(whole, ("s", "r", "w"))
    out = []
    for store in whole.accesses:
        if store.kind != "write" or store.space != "shared":
            continue
        model, c = scopes.of(store)  # only what can run in the store's block (``block_scope``)
        store = model.access(store.id)
        # At one launch first (``Copies.launch_probes``): a read that observes the store there
        # is one, and isl finds it at once.
        if not _at_probes(c, lambda probe: _dead(model, c, store, probe)):
            continue
        if bounded(lambda: _dead(model, c, store), False):
            out.append(store.id.path)
    return out


def _dead(model: Model, c: Copies, store: Access, within: isl.Set | None = None) -> bool:
    """Whether no read observes ``store`` (the module docstring); with ``within``, at its
    launches only (every set below is cut to them through ``base``): False there is False
    everywhere, True there says nothing of other launches."""
    overwrites = [w for w in model.accesses if w.kind == "write" and w.buffer == store.buffer
                  and w.domain_exact and w.index_exact and store.index_exact]
    for r in model.accesses:
        if not r.reads or alias_kind(model.kernel, r.buffer, store.buffer) is None:
            continue
        overlap = c.overlap(store, "s", r, "r")
        assert overlap is not None
        # The launch first (``within`` fixes the extents), then the rest.
        base = c.domain(store, "s") if within is None else c.domain(store, "s") & within
        base = base & c.domain(r, "r") & overlap
        if base.is_empty():
            continue
        same = c.lex_lt(store.time, "s", r.time, "r", within=base & c.same_thread("s", "r"))
        other = base & c.other_thread("s", "r")
        if not other.is_empty():
            other = c.unseparated(other, r.time, "r", store.time, "s", model.barriers)
        observers = same | other
        for w in overwrites:
            if observers.is_empty():
                break
            after = c.lex_lt(store.time, "s", w.time, "w")
            if after.is_empty():
                continue
            covers = c.same_element(w, "w", store, "s")
            assert covers is not None
            kill = after & c.domain(w, "w") & c.same_thread("w", "s") & covers
            killed = (kill & c.same_thread("s", "r") & c.lex_lt(w.time, "w", r.time, "r"))
            other_kill = kill & c.other_thread("s", "r")
            if not other_kill.is_empty():
                killed |= c.separated_within(other_kill, w.time, "w", r.time, "r", model.barriers)
            observers = observers - c.eliminate(killed, "w")
        if not observers.is_empty():
            return False
    return True

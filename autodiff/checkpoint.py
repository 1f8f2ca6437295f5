"""Binomial checkpointing (revolve, Griewank & Walther) of loops without a static trip count.

A loop whose trip count is only known at run time cannot have a statically sized tape. Without
checkpointing, the reverse sweep recomputes the loop-carried registers of iteration ``r`` from
the loop entry (``replay-loop``: r forward steps per reversed iteration, quadratic in total).
With a budget of ``B`` snapshots (``ReverseOptions.checkpoint_budget``), each thread keeps up to
``B`` copies of the carried registers in per-thread arrays of static size::

    snapshot 0 = the state at the loop entry                 (taken before the reversed loop)
    for r = n-1 down to 0:                                    (the reversed loop)
        drop the top snapshot if it lies after r
        state = top snapshot (iteration t)
        while t < r:                                          (advance; on the way, when t is
            if t == target: push a snapshot of state at t       the binomial position and a
            state = one forward iteration of state; t += 1      slot is free, take a snapshot)
        adjoint of iteration r, reading state

The target for a segment of N = r - t + 1 iterations still to reverse with ``f`` free slots is
chosen by the binomial rule, with ``s = f + 1`` slots counting the one at ``t``: the smallest
``k`` with C(s + k, s) >= N (k: how often an iteration is recomputed), and the snapshot placed at
``t + max(1, N - C(s - 1 + k, s - 1))``, so that the part after it can be reversed with ``s - 1``
slots and the same ``k``, the part before it with ``s`` slots and ``k - 1``. Memory is
``B`` snapshots whatever the trip count; forward steps grow like ``n * k`` with k ~ log n for
B ~ log n, instead of n^2 / 2 for the plain replay. Gradients are the same bit for bit as full
taping: the same forward statements run on the same values.

This module only builds the statements; ``autodiff.availability`` decides when to use them.
"""
from __future__ import annotations

import dataclasses

from autodiff import build as b
from autodiff.names import Names
from polypy.ir import nodes as n
from polypy.ir.types import I32, I64, ScalarType


@dataclasses.dataclass(frozen=True)
class Snapshots:
    """The per-thread arrays of one checkpointed loop."""

    budget: int
    iters: str  # i32[budget]: the iteration each snapshot holds the state at the start of
    values: dict[str, str]  # carried variable -> its f?[budget] array
    types: dict[str, ScalarType]
    top: str  # i32: index of the newest snapshot

    def buffers(self) -> list[n.Buffer]:
        shape = (b.const(self.budget, I32),)
        out = [n.Buffer(self.iters, I32, shape, "local")]
        out += [n.Buffer(arr, self.types[v], shape, "local") for v, arr in sorted(self.values.items())]
        return out

    def elements(self) -> int:
        """Elements per thread the snapshots take (values and iteration numbers)."""
        return self.budget * (len(self.values) + 1)


def make_snapshots(budget: int, carried: dict[str, ScalarType], names: Names, base: str) -> Snapshots:
    values = {v: names.fresh(v + "_snap") for v in sorted(carried)}
    return Snapshots(budget, names.fresh(base + "_snap_it"), values, dict(carried), names.fresh(base + "_top"))


def snapshot_init(s: Snapshots, entry: dict[str, n.Expr]) -> list[n.Stmt]:
    """Before the reversed loop: snapshot 0 is the state at the loop entry."""
    zero = b.const(0, I32)
    out: list[n.Stmt] = [n.Decl(s.top, I32, zero), n.Store(s.iters, (zero,), zero)]
    for v, arr in sorted(s.values.items()):
        out.append(n.Store(arr, (zero,), entry[v]))
    return out


def advance_code(s: Snapshots, r: n.Expr, state: dict[str, str], step: list[n.Stmt], q: str,
                 names: Names) -> list[n.Stmt]:
    """At the top of reversed iteration ``r``: ``state`` (declared here) holds the carried values
    at the start of iteration ``r``. ``step`` runs one forward iteration on ``state`` (its
    iteration number is the i32 variable ``q``, incremented here)."""
    top = n.Var(s.top, I32)
    qv = n.Var(q, I32)
    out: list[n.Stmt] = [
        # the newest snapshot lies after r once r + 1 has been reversed: not needed any more
        n.If(b.land(b.cmp("gt", top, b.const(0, I32)), b.cmp("gt", n.Load(s.iters, (top,), I32), r)),
             (n.Assign(s.top, n.Binary("sub", top, b.const(1, I32))),)),
        n.Decl(q, I32, n.Load(s.iters, (top,), I32)),
    ]
    for v, arr in sorted(s.values.items()):
        out.append(n.Decl(state[v], s.types[v], n.Load(arr, (top,), s.types[v])))
    target = names.fresh("target")
    out.append(n.Decl(target, I32, b.const(-1, I32)))
    out += _target_code(s, target, qv, r, names)
    push: list[n.Stmt] = [n.Assign(s.top, n.Binary("add", top, b.const(1, I32))),
                          n.Store(s.iters, (top,), qv)]
    for v, arr in sorted(s.values.items()):
        push.append(n.Store(arr, (top,), n.Var(state[v], s.types[v])))
    push += _target_code(s, target, qv, r, names)
    body: list[n.Stmt] = [n.If(b.cmp("eq", qv, n.Var(target, I32)), tuple(push))]
    body += step
    body.append(n.Assign(q, n.Binary("add", qv, b.const(1, I32))))
    out.append(n.While(b.cmp("lt", qv, r), tuple(body)))
    return out


def _target_code(s: Snapshots, target: str, t: n.Expr, r: n.Expr, names: Names) -> list[n.Stmt]:
    """``target`` = where the next snapshot goes for the segment [t, r] (or -1: none)."""
    free, count, c, k, c1, m = (names.fresh(x) for x in ("free", "left", "binom", "reps", "binom1", "m"))
    one = b.const(1, I64)
    fv, nv, cv, kv = n.Var(free, I64), n.Var(count, I64), n.Var(c, I64), n.Var(k, I64)
    search = n.While(b.cmp("lt", cv, nv), (
        n.Assign(k, n.Binary("add", kv, one)),
        # C(s + k, s) = C(s + k - 1, s) * (s + k) / k (exact)
        n.Assign(c, n.Binary("div", n.Binary("mul", cv, n.Binary("add", fv, kv)), kv)),
    ))
    place = (
        n.Decl(c, I64, one),
        n.Decl(k, I64, b.const(0, I64)),
        search,
        # C(s - 1 + k, s - 1) = C(s + k, s) * s / (s + k): iterations the slots left reverse
        n.Decl(c1, I64, n.Binary("div", n.Binary("mul", cv, fv), n.Binary("add", fv, kv))),
        n.Decl(m, I64, n.Binary("sub", nv, n.Var(c1, I64))),
        n.Assign(target, n.Binary("add", t, b.cast(I32, b.select(b.cmp("lt", n.Var(m, I64), one), one,
                                                                   n.Var(m, I64))))),
    )
    return [
        # s: the slots from the top snapshot on (the top one included)
        n.Decl(free, I64, b.cast(I64, n.Binary("sub", b.const(s.budget, I32), n.Var(s.top, I32)))),
        n.Decl(count, I64, b.cast(I64, n.Binary("add", n.Binary("sub", r, t), b.const(1, I32)))),
        n.Assign(target, b.const(-1, I32)),
        n.If(n.Binary("land", b.cmp("gt", fv, one), b.cmp("gt", nv, b.const(2, I64))), place),
    ]


def simulate(budget: int, trips: int) -> tuple[int, int]:
    """(forward iterations replayed, most snapshots held) by the schedule above, for ``trips``
    iterations and ``budget`` snapshots: the cost model the report and the tests use."""
    iters = [0]
    replayed = 0
    peak = 1
    for r in range(trips - 1, -1, -1):
        if len(iters) > 1 and iters[-1] > r:
            iters.pop()
        q = iters[-1]
        target = _target(budget, len(iters) - 1, q, r)
        while q < r:
            if q == target:
                iters.append(q)
                peak = max(peak, len(iters))
                target = _target(budget, len(iters) - 1, q, r)
            replayed += 1
            q += 1
    return replayed, peak


def _target(budget: int, top: int, t: int, r: int) -> int:
    free, count = budget - top, r - t + 1
    if free <= 1 or count <= 2:
        return -1
    c, k = 1, 0
    while c < count:
        k += 1
        c = c * (free + k) // k
    c1 = c * free // (free + k)
    return t + max(1, count - c1)


__all__ = ["Snapshots", "make_snapshots", "snapshot_init", "advance_code", "simulate"]

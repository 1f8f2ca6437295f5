"""Peeling boundary threads: step 2b of ``tighten_thread_bounds``.

Where no single index-set split applies (an ``if``/``else if`` chain too large to copy once per
condition: srad's ``ty == 0 && tx == 0``, ``tx == 15``, ...), every comparison in the top-level
chains that holds on a constant range of the counter is decided at once, one loop per range
between consecutive bounds (``[0, 1)``, ``[1, 15)``, ``[15, 16)``, ``[16, bdx)``); in the ranges
longer than ``SMALL_TRIP_COUNT`` a chain left with conditions that do not depend on the counter
is unswitched, one loop per branch, so that the interior range vectorizes.
"""
from __future__ import annotations

import dataclasses

from gpu2cpu.tighten_state import MAX_SPLITS, SMALL_TRIP_COUNT, Tightening, add_needs, size
from gpu2cpu.thread_affine import Facts, Need, counter_dim, is_check
from gpu2cpu.thread_loops import copy_loop
from polypy.ir import nodes as n
from polypy.ir.printer import format_expr
from polypy.ir.rewrite import fold_min
from polypy.ir.types import U32
from polypy.ir.visitor import Mutator, rebuild
from polypy.passes.fold_constants import fold_expr

# At most this many ranges of the counter, and versions of unswitched chains per range, and this
# many IR nodes in all the copies.
MAX_PEELED_RANGES = 5
MAX_PEELED_NODES = 4000


def peel_boundary_threads(st: Tightening, loop: n.For, facts: Facts, needs: list[Need],
                          depth: int) -> list[n.Stmt] | None:
    """The step: ``loop`` cut at the constant bounds of its chains' comparisons, or None."""
    if depth >= MAX_SPLITS + 1:
        return None
    if counter_dim(loop.var) is None or not isinstance(loop.start, n.Const):
        return None
    start = int(loop.start.value)
    if isinstance(loop.stop, n.Const) and int(loop.stop.value) - start <= SMALL_TRIP_COUNT:
        return None  # a short (or empty) range: nothing to vectorize
    atoms: dict[n.Expr, tuple[int | None, int | None]] = {}
    new_needs: list[Need] = []
    for i, s in enumerate(loop.body):
        if not isinstance(s, n.If) or is_check(s.cond):
            continue
        analysis = st.analysis(loop, i)
        for cond in _chain_conditions(s):
            for atom in _comparisons(cond):
                if atom in atoms or analysis.uniform(atom) is not None:
                    continue
                found = analysis.interval(atom)
                if found is None:
                    continue
                lo, hi = (_const_bound(b) for b in (found[0].lo, found[0].hi))
                if lo is False or hi is False:
                    continue  # a bound that is not a constant
                atoms[atom] = (lo, hi)  # type: ignore[assignment]
                new_needs.extend(found[1])
    points = sorted({b for bounds in atoms.values() for b in bounds if b is not None and b > start})
    if len(points) < 2 or len(points) + 1 > MAX_PEELED_RANGES:
        return None
    edges = [start, *points]
    pieces = []
    for k, a in enumerate(edges):
        b = edges[k + 1] if k + 1 < len(edges) else None
        truth = {atom: _holds(lo, hi, a, b) for atom, (lo, hi) in atoms.items()}
        body = _decide_atoms(loop.body, truth)
        short = b is not None and b - a <= SMALL_TRIP_COUNT  # nothing to vectorize: no versions
        pieces.append((a, b, [(None, body)] if short else unswitch_chain(st, loop, body)))
    if sum(size(body) for _, _, bodies in pieces for _, body in bodies) > MAX_PEELED_NODES:
        return None
    add_needs(needs, new_needs, facts)
    inner_facts = facts.with_needs(needs)
    out: list[n.Stmt] = []
    first = True
    for a, b, bodies in pieces:
        lo_u = loop.start if a == start else _clamped(a, loop.stop)
        hi_u = loop.stop if b is None else _clamped(b, loop.stop)
        copies: list[tuple[n.Expr | None, list[n.Stmt]]] = []
        for cond, body in bodies:
            part = copy_loop(loop, st.names, start=lo_u, stop=hi_u, body=body, fresh=not first)
            first = False
            copies.append((cond, st.transform(part, inner_facts, needs, depth + 1)))
        out.extend(_chain_of(copies, loop.loc))
    ranges = ", ".join(f"[{a}, {b if b is not None else format_expr(loop.stop)})" for a, b, _ in pieces)
    st.note(loop, f"thread loop over {loop.var}: {len(atoms)} comparison(s) on {loop.var} in if/else chains "
                  f"decided by its range, one loop per range: {ranges}")
    return out


def unswitch_chain(st: Tightening, loop: n.For,
                   body: tuple[n.Stmt, ...]) -> list[tuple[n.Expr | None, tuple[n.Stmt, ...]]]:
    """``body`` as ``[(condition, body)]`` versions: the one top-level ``if``/``else if`` chain
    whose conditions do not depend on the counter (nor on anything the loop computes) chosen
    outside the loop, one version per branch; ``[(None, body)]`` when there is none."""
    found: list[tuple[int, list[tuple[n.Expr | None, tuple[n.Stmt, ...]]]]] = []
    for i, s in enumerate(body):
        if not isinstance(s, n.If) or is_check(s.cond):
            continue
        analysis = st.analysis(dataclasses.replace(loop, body=body), i)
        branches: list[tuple[n.Expr | None, tuple[n.Stmt, ...]]] = []
        cur: tuple[n.Stmt, ...] = (s,)
        while len(cur) == 1 and isinstance(cur[0], n.If):
            u = analysis.uniform(cur[0].cond)
            if u is None:
                break
            branches.append((u, cur[0].then))
            cur = cur[0].orelse
        else:
            branches.append((None, cur))
            found.append((i, branches))
    if len(found) != 1 or len(found[0][1]) > MAX_PEELED_RANGES:
        return [(None, body)]
    i, branches = found[0]
    return [(cond, body[:i] + branch + body[i + 1:]) for cond, branch in branches]


def _chain_conditions(s: n.If) -> list[n.Expr]:
    """The conditions of an ``if``/``else if`` chain."""
    out = [s.cond]
    while len(s.orelse) == 1 and isinstance(s.orelse[0], n.If):
        s = s.orelse[0]
        out.append(s.cond)
    return out


def _comparisons(e: n.Expr) -> list[n.Expr]:
    """The comparisons a condition is built of with ``&&``, ``||`` and ``!``."""
    if isinstance(e, n.Binary) and e.op in ("land", "lor"):
        return _comparisons(e.a) + _comparisons(e.b)
    if isinstance(e, n.Unary) and e.op == "not":
        return _comparisons(e.x)
    return [e] if isinstance(e, n.Binary) and e.op in ("lt", "le", "gt", "ge", "eq", "ne") else []


def _const_bound(b: n.Expr | None) -> int | None | bool:
    """An interval bound as an int, None when unbounded, False when not a constant."""
    if b is None:
        return None
    b = fold_expr(b)
    return int(b.value) if isinstance(b, n.Const) and not isinstance(b.value, float) else False


def _holds(lo: int | None, hi: int | None, a: int, b: int | None) -> bool:
    """Whether ``lo <= t < hi`` for every ``t`` in ``[a, b)`` (``b`` None: unbounded); the range
    lies between consecutive bounds, so the atom holds on all of it or on none."""
    return (lo is None or a >= lo) and (hi is None or (b is not None and b <= hi))


def _decide_atoms(stmts: tuple[n.Stmt, ...], truth: dict[n.Expr, bool]) -> tuple[n.Stmt, ...]:
    """``stmts`` with the top-level ``if`` chains' comparisons in ``truth`` replaced by their
    values, and the branches that cannot run dropped."""

    class Replace(Mutator):
        def visit_Binary(self, e: n.Binary) -> n.Expr:
            value = truth.get(e)
            return n.Const(value, e.type) if value is not None else self.generic_visit(e)

    def decide(s: n.If) -> tuple[n.Stmt, ...]:
        cond = fold_expr(Replace().visit(s.cond))
        orelse = s.orelse
        if len(orelse) == 1 and isinstance(orelse[0], n.If) and not is_check(orelse[0].cond):
            orelse = decide(orelse[0])
        if isinstance(cond, n.Const):
            return s.then if cond.value else orelse
        return (rebuild(s, cond=cond, orelse=orelse),)

    out: list[n.Stmt] = []
    for s in stmts:
        out.extend(decide(s) if isinstance(s, n.If) and not is_check(s.cond) else (s,))
    return tuple(out)


def _clamped(bound: int, stop: n.Expr) -> n.Expr:
    """``min(bound, stop)`` in u32 (a range of the counter ends at the loop's own end)."""
    return fold_min([n.Const(bound, U32), stop], U32)


def _chain_of(copies: list[tuple[n.Expr | None, list[n.Stmt]]], loc) -> list[n.Stmt]:
    """``if (c1) {..} else if (c2) {..} else {..}`` of the versions (None: the last, unconditional)."""
    if len(copies) == 1 and copies[0][0] is None:
        return copies[0][1]
    cond, stmts = copies[0]
    if cond is None:
        return stmts
    return [n.If(cond, tuple(stmts), tuple(_chain_of(copies[1:], loc)), loc=loc)]

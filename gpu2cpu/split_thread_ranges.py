"""Index-set splitting of a thread loop: step 2 of ``tighten_thread_bounds``.

The first top-level ``if`` whose condition is a conjunction of *interval* atoms (affine in the
counter) and *uniform* atoms (not depending on it) is decided per range of the counter, one
copy of the loop per range (see the pass's docstring for the sketch); a top-level store,
assignment or declaration of a select that loads from memory is split the same way, with one
more version for blocks where every thread takes the first operand.
"""
from __future__ import annotations

import dataclasses

from gpu2cpu.tighten_state import MAX_SPLITS, SMALL_TRIP_COUNT, Tightening, add_needs, size
from gpu2cpu.thread_affine import Facts, Interval, Need, counter_dim, i64, split_conjuncts, to_u32
from gpu2cpu.thread_loops import copy_loop
from polypy.ir import nodes as n
from polypy.ir.printer import format_expr
from polypy.ir.queries import conjunction
from polypy.ir.rewrite import fold_max, fold_min
from polypy.ir.types import I64
from polypy.ir.visitor import walk
from polypy.passes.fold_constants import fold_expr

# Index-set splitting copies the loop body once per range: no split that would copy more than
# this many IR nodes (the guarded statements themselves move to one range and are not counted:
# a guard around a large body, itself split by the inner loops' steps, is no reason to stop).
MAX_COPIED_NODES = 600


@dataclasses.dataclass
class Split:
    """A top-level statement of a loop body whose condition decides it per range of the counter."""

    index: int
    intervals: list[Interval]
    uniform: list[n.Expr]
    residual: list[n.Expr]
    needs: list[Need]
    true_body: tuple[n.Stmt, ...]
    false_body: tuple[n.Stmt, ...]
    select: bool = False  # from a select, not an if


def split_ranges(st: Tightening, loop: n.For, facts: Facts, needs: list[Need], depth: int) -> list[n.Stmt] | None:
    """The step: ``loop`` split at its first decidable statement, or None."""
    split = find_split(st, loop) if depth < MAX_SPLITS + 1 else None
    return apply_split(st, loop, split, facts, needs, depth) if split is not None else None


def find_split(st: Tightening, loop: n.For) -> Split | None:
    if counter_dim(loop.var) is None:
        return None
    for i, s in enumerate(loop.body):
        found = None
        if isinstance(s, n.If):
            found = classify(st, loop, i, s.cond, s.then, s.orelse)
        elif (choice := _select_of(s)) is not None and _loads_memory(choice):
            # ``smem[l] = (g < n) ? in[g] : 0``: each range stores one operand (a select
            # evaluates only the chosen one, as the branches do), instead of masked loads.
            found = classify(st, loop, i, choice.cond, (_with_value(s, choice.a),), (_with_value(s, choice.b),))
            found = dataclasses.replace(found, select=True) if found is not None else None
        if found is not None:
            return found
    return None


def classify(st: Tightening, loop: n.For, i: int, cond: n.Expr, then: tuple[n.Stmt, ...],
             orelse: tuple[n.Stmt, ...]) -> Split | None:
    analysis = st.analysis(loop, i)
    intervals: list[Interval] = []
    uniform: list[n.Expr] = []
    residual: list[n.Expr] = []
    needs: list[Need] = []
    for atom in split_conjuncts(cond):
        u = analysis.uniform(atom)
        if u is not None:
            uniform.append(u)
            continue
        found = analysis.interval(atom)
        if found is None:
            residual.append(atom)
            continue
        intervals.append(found[0])
        needs.extend(found[1])
    if not intervals:
        return None  # uniform-only conditions are unswitched when alone in a loop
    if residual and orelse:
        return None
    body = loop.body
    work = [x for x in body if not _is_let(x)]  # lets only name values: no work of their own
    if (orelse or len(work) > 1) and st.ranges.of(
            n.Binary("sub", i64(loop.stop), i64(loop.start)))[1] <= SMALL_TRIP_COUNT:
        return None
    if residual:
        then = (n.If(conjunction(residual), then, loc=body[i].loc),)
    true_body = body[:i] + then + body[i + 1:]
    false_body = body[:i] + orelse + body[i + 1:]
    if all(_is_let(x) for x in false_body):
        false_body = ()  # threads failing a guard after lets: nothing to run
    if false_body and size(false_body) * 2 + size(true_body) - size(then) > MAX_COPIED_NODES:
        return None
    return Split(i, intervals, uniform, residual, needs, true_body, false_body)


def apply_split(st: Tightening, loop: n.For, split: Split, facts: Facts, needs: list[Need],
                depth: int) -> list[n.Stmt]:
    add_needs(needs, split.needs, facts)
    inner_facts = facts.with_needs(needs)
    lows = [iv.lo for iv in split.intervals if iv.lo is not None]
    highs = [iv.hi for iv in split.intervals if iv.hi is not None]
    start64, stop64 = i64(loop.start), i64(loop.stop)
    lo = st.clamp(fold_max(lows, I64), start64, stop64) if lows else start64
    hi_floor = lo if (split.false_body and lows) else start64
    hi = st.clamp(fold_min(highs, I64), hi_floor, stop64) if highs else stop64
    decls: list[n.Stmt] = []
    lo_u = st.named(to_u32(lo), loop, "lo", decls) if lows else loop.start
    hi_u = st.named(to_u32(hi), loop, "hi", decls) if highs else loop.stop
    pieces: list[tuple[n.Expr, n.Expr, tuple[n.Stmt, ...]]] = []
    if lows and split.false_body:
        pieces.append((loop.start, lo_u, split.false_body))
    pieces.append((lo_u, hi_u, split.true_body))
    if highs and split.false_body:
        pieces.append((hi_u, loop.stop, split.false_body))
    out: list[n.Stmt] = list(decls)
    for k, (start, stop, body) in enumerate(pieces):
        part = copy_loop(loop, st.names, start=start, stop=stop, body=body, fresh=k > 0)
        out.extend(st.transform(part, inner_facts, needs, depth + 1))
    if split.select:
        # In most blocks every thread takes the first operand (a tile inside the array): a
        # version over the loop's own bounds, which a specialized block shape makes constant
        # (a 16-wide tile row is then one vector, not two loops with remainders).
        whole = [n.Binary("eq", lo_u, loop.start)] if lows else []
        whole += [n.Binary("eq", hi_u, loop.stop)] if highs else []
        every = copy_loop(loop, st.names, body=split.true_body, fresh=True)
        out = list(decls) + [n.If(conjunction(whole), tuple(st.transform(every, inner_facts, needs, depth + 1)),
                                  tuple(out[len(decls):]), loc=loop.loc)]
    bounds = ", ".join(f"[{format_expr(fold_expr(a))}, {format_expr(fold_expr(b))})" for a, b, _ in pieces)
    if decls:
        bounds += " with " + ", ".join(f"{d.name} = {format_expr(d.init)}" for d in decls)  # type: ignore[union-attr]
    cond = conjunction([a for a in split_conjuncts(_split_cond(loop, split))])
    kind = "guard" if not split.false_body else "condition"
    st.note(loop, f"thread loop over {loop.var}: {kind} {format_expr(cond)} decided by the range of "
                  f"{loop.var}: {bounds}")
    if split.uniform:
        ucond = conjunction(split.uniform)
        orelse: tuple[n.Stmt, ...] = ()
        if split.false_body:
            orelse = (copy_loop(loop, st.names, body=split.false_body),)
        return [n.If(ucond, tuple(out), orelse, loc=loop.loc)]
    return out


def _is_let(s: n.Stmt) -> bool:
    return isinstance(s, n.Decl) and s.let


def _select_of(s: n.Stmt) -> n.Select | None:
    """The select a store, assignment or declaration writes (``x = c ? a : b``), if it is one."""
    value = s.init if isinstance(s, n.Decl) else s.value if isinstance(s, (n.Store, n.Assign)) else None
    return value if isinstance(value, n.Select) else None


def _loads_memory(choice: n.Select) -> bool:
    """Whether an operand of ``choice`` reads memory: a parameter, or the block's own arrays
    (a scan's ``(tx >= off) ? s[tx - off] : 0``, masked loads otherwise: prefix_scan through C
    6.0 -> 4.6 ms)."""
    return any(isinstance(x, n.Load) for e in (choice.a, choice.b) for x in walk(e))


def _with_value(s: n.Stmt, value: n.Expr) -> n.Stmt:
    return dataclasses.replace(s, init=value) if isinstance(s, n.Decl) else dataclasses.replace(s, value=value)


def _split_cond(loop: n.For, split: Split) -> n.Expr:
    s = loop.body[split.index]
    if isinstance(s, n.If):
        return s.cond
    choice = _select_of(s)
    assert choice is not None
    return choice.cond

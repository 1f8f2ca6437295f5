"""Unclamping indices: step 2c of ``tighten_thread_bounds``.

An index clamped by a select on the counter (pathfinder's and hotspot's
``prev[W < validXmin ? validXmin : W]``, ``W = tx - 1``; the select may be in the declaration of
a local the index reads) is a gather in a vector loop. On the range of the counter where every
such select takes its operand that varies with the counter, the loop reads with that operand
alone; the threads before and after the range keep the selects. A copy over the loop's own
bounds runs where the range is all of them (a block inside the array).
"""
from __future__ import annotations

from gpu2cpu.tighten_state import MAX_SPLITS, Tightening, add_needs, size
from gpu2cpu.thread_affine import Facts, Need, i64, is_check, to_u32
from gpu2cpu.thread_loops import copy_loop
from polypy.ir import nodes as n
from polypy.ir.printer import format_expr
from polypy.ir.rewrite import fold_max, fold_min
from polypy.ir.types import I64
from polypy.ir.visitor import Mutator, iter_children, walk_only

# Unclamping makes four copies of the loop body (all threads unclamped; the threads before, in
# and after the unclamped range): at most this many IR nodes in them (hotspot's stencil
# statement, its block-level bounds written out, is about 370 nodes).
MAX_CLAMP_NODES = 2000


def unclamp_indices(st: Tightening, loop: n.For, facts: Facts, needs: list[Need],
                    depth: int) -> list[n.Stmt] | None:
    """Step 2c: an index clamped by a select on the counter (pathfinder's and hotspot's
    ``prev[W < validXmin ? validXmin : W]`` with ``W = tx - 1``) is a gather in a vector
    loop. Where every such select takes its operand that varies with the counter (the
    clamp does nothing: all threads of a block inside the array), the loop runs with that
    operand alone, contiguous; the threads before and after that range run the selects::

        for threads tx = s to e {        for tx = s to L  { ... p[W < m ? m : W] ... }
          ... p[W < m ? m : W] ...  ==>  for tx = L to H  { ... p[W] ... }
        }                                for tx = H to e  { ... p[W < m ? m : W] ... }

    with ``L``/``H`` the ends of the range where ``W >= m``, clamped to ``[s, e]``, and a copy
    of the middle loop over ``[s, e)`` where that range is all of it. The selects taken: those
    in an index of a load or store or in the declaration of a local an index reads, with
    affine operands, a condition that holds on one interval of the counter, and one operand
    that depends on the counter and one that does not; or both depending on it and an ``==``
    condition (``W = (i == 0) ? c : c - 1``), on the longer side of its point."""
    if depth >= MAX_SPLITS + 1:
        return None
    if not (isinstance(loop.step, n.Const) and int(loop.step.value) == 1) or loop.var in st.clamp_edges:
        return None
    analysis = st.analysis(loop, len(loop.body))
    chosen: dict[int, n.Expr] = {}
    lows: list[n.Expr] = []
    highs: list[n.Expr] = []
    found_needs: list[Need] = []
    start64, stop64 = i64(loop.start), i64(loop.stop)
    for sel in _index_selects(loop.body):
        varies = (analysis.mentions_counter(sel.a), analysis.mentions_counter(sel.b))
        eq = isinstance(sel.cond, n.Binary) and sel.cond.op == "eq"
        if id(sel) in chosen or not any(varies) or (eq and varies == (True, False)):
            continue
        want = varies == (True, False)  # the operand that varies; both: the rarer case of ==
        if all(varies) and not eq:
            continue
        if analysis.linear(sel.a) is None or analysis.linear(sel.b) is None:
            continue  # not a clamp of an affine index (a trip count's select: a division in it)
        found = analysis.interval(sel.cond)
        if found is None:
            continue
        iv = found[0]
        if want:  # the condition must hold: on [lo, hi)
            if iv.lo is not None:
                lows.append(iv.lo)
            if iv.hi is not None:
                highs.append(iv.hi)
        elif iv.lo is None and iv.hi is not None:  # it must fail: from hi on
            lows.append(iv.hi)
        elif iv.hi is None and iv.lo is not None:  # ... or before lo
            highs.append(iv.lo)
        elif iv.lo is not None and iv.hi is not None:  # ... on the longer side of [lo, hi)
            after = n.Binary("gt", n.Binary("sub", stop64, iv.hi), n.Binary("sub", iv.lo, start64))
            lows.append(n.Select(after, iv.hi, start64))
            highs.append(n.Select(after, stop64, iv.lo))
        else:
            continue
        chosen[id(sel)] = sel.a if want else sel.b
        found_needs.extend(found[1])
    if not chosen or size(loop.body) * 4 > MAX_CLAMP_NODES:
        return None
    add_needs(needs, found_needs, facts)
    inner_facts = facts.with_needs(needs)
    lo = st.clamp(fold_max(lows, I64), start64, stop64) if lows else start64
    hi = st.clamp(fold_min(highs, I64), lo, stop64) if highs else stop64
    decls: list[n.Stmt] = []
    lo_u = st.named(to_u32(lo), loop, "lo", decls) if lows else loop.start
    hi_u = st.named(to_u32(hi), loop, "hi", decls) if highs else loop.stop

    class Choose(Mutator):
        def visit_Select(self, e: n.Select) -> n.Expr:
            pick = chosen.get(id(e))
            return self.generic_visit(e) if pick is None else self.visit(pick)

    unclamped = Choose().visit_block(loop.body)
    whole = copy_loop(loop, st.names, body=unclamped, fresh=False)
    before = copy_loop(loop, st.names, stop=lo_u) if lows else None
    after = copy_loop(loop, st.names, start=hi_u) if highs else None
    middle = copy_loop(loop, st.names, start=lo_u, stop=hi_u, body=unclamped)
    pieces: list[n.Stmt] = []
    for part in (before, middle, after):
        if part is None:
            continue
        if part is not middle:
            st.clamp_edges.add(part.var)  # its clamps stay: not split again
        pieces.extend(st.transform(part, inner_facts, needs, depth + 1))
    # Every thread unclamped (a block inside the array): one loop over the loop's own bounds.
    # The test has the shape of a run-time check (``is_check``), so that the pass's second
    # run leaves the three loops of the other branch, whose clamps remain, alone.
    zero = n.Const(0, I64)
    is_whole = n.Binary("land", n.Binary("le", n.Binary("sub", i64(lo_u), start64), zero),
                        n.Binary("le", n.Binary("sub", stop64, i64(hi_u)), zero))
    out: list[n.Stmt] = list(decls)
    out.append(n.If(is_whole, tuple(st.transform(whole, inner_facts, needs, depth + 1)), tuple(pieces),
                    loc=loop.loc))
    bounds = ", ".join(f"{d.name} = {format_expr(d.init)}" for d in decls)  # type: ignore[union-attr]
    st.note(loop, f"thread loop over {loop.var}: {len(chosen)} clamped index(es) unclamped on the range "
                  f"[{format_expr(lo_u)}, {format_expr(hi_u)})" + (f" with {bounds}" if bounds else ""))
    return out


def _index_selects(stmts: tuple[n.Stmt, ...]) -> list[n.Select]:
    """The selects that compute an index of a load, store or atomic in ``stmts``: inside the
    index, or in the declaration of a local the index reads (hotspot3D's ``W = (x == 0) ? c :
    c - 1``, read as ``tIn[W]``), outside nested thread loops and the originals kept by run-time
    checks."""
    in_index: list[n.Expr] = []
    decls: dict[str, n.Expr] = {}

    def visit(node: n.Node) -> None:
        if isinstance(node, n.For) and node.kind == "threads":
            return
        if isinstance(node, n.If) and is_check(node.cond):
            for s in node.then:
                visit(s)
            return
        if isinstance(node, (n.Load, n.Store, n.AtomicRMW)):
            in_index.extend(node.index)
        if isinstance(node, n.Decl) and node.init is not None:
            decls[node.name] = node.init
        for child in iter_children(node):
            visit(child)

    for s in stmts:
        visit(s)
    sources = list(in_index)
    seen: set[str] = set()
    while sources:  # the declarations the indices read, and those they read
        for x in walk_only(sources.pop(), n.Var):
            if x.name in decls and x.name not in seen:
                seen.add(x.name)
                sources.append(decls[x.name])
    roots = in_index + [decls[name] for name in sorted(seen)]
    return [x for e in roots for x in walk_only(e, n.Select)]

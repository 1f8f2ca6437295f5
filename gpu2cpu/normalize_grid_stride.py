"""normalize_grid_stride: strided loops in a thread loop over ``tx`` get a uniform iteration
space (CPU form -> CPU form).

Requires: a CPU-form kernel (thread counters named ``tx``/``ty``/``tz``, see
``gpu2cpu.thread_affine``). Guarantees: the same results; in each loop over ``tx``, every
top-level *grid-stride or block-stride loop* ``for (i = S + tx; i < E; i += D)`` (``D`` uniform,
an integer of at most 32 bits, the loop indexing memory with ``i``, no ``break``/``continue`` of
its own) iterates over blocks of ``D`` consecutive elements instead, so that once the loop over
``tx`` is inside it (``sink_thread_loops``) consecutive threads touch consecutive elements::

    for threads tx {                       for threads tx {
      for i = S + tx to E step D {   ==>     for b: i64 = S to E step D {
        body                                   if (b + tx < E) { var i = (i32)b + (i32)tx; body }
      }                                      }
    }                                      }

Exact: thread ``tx`` runs ``i = S + tx + k*D`` for the ``k`` with ``i < E``, in order. What that
needs beyond the interval analysis (``D >= 1``, ``i += D`` not wrapping for unsigned ``i``) is
checked once at run time, the original loop running otherwise::

    if (<needs>) { normalized loop } else { original loop (fresh names) }

The same loop run backwards, as the reverse sweep of a gradient runs it (``for v_r = 0 to v_n``
with ``v_i = v_n - 1 - v_r`` and ``v = S + tx + v_i * D``, ``v_n`` the thread's trip count), gets
a uniform iteration space too, visited from the last block down (``_reversed_stride``): each
thread still runs its iterations from its last to its first.

``normalize_strided_loops`` rewrites one thread loop and leaves the check to its caller:
``sink_thread_loops`` calls it on each loop over ``tx`` and keeps the result only where it then
interchanges the loops (in the CPU pipeline the normalization is part of that pass, since
whether it pays depends on the interchange). ``normalize_grid_stride`` is the pass on its own.
``report`` receives one ``LoweringDecision`` per strided loop and per run-time check.
"""
from __future__ import annotations

import dataclasses

from gpu2cpu.names import NameSupply
from gpu2cpu.report import LoweringDecision
from gpu2cpu.thread_affine import (
    CounterAnalysis,
    Linear,
    Need,
    Ranges,
    counter_dim,
    i64,
    linear_ir,
    need_exprs,
    safe_uniform,
)
from gpu2cpu.thread_loops import copy_loop, let_definitions, order_sensitive, rewrite_cpu_body, ThreadLoopStep
from polypy.ir import nodes as n
from polypy.ir.jumps import jumps_out
from polypy.ir.printer import format_expr
from polypy.ir.queries import conjunction, declared_names
from polypy.ir.types import I32, I64, U32
from polypy.ir.visitor import walk


def normalize_grid_stride(kernel: n.Kernel, *, report: list[LoweringDecision] | None = None) -> n.Kernel:
    """Every loop over ``tx`` with its strided loops normalized; see the module docstring."""
    return rewrite_cpu_body(kernel, _Normalize, what="normalize_grid_stride", report=report)


class _Normalize(ThreadLoopStep):
    def __init__(self, kernel: n.Kernel):
        super().__init__(kernel)
        self.ranges = Ranges.of_kernel(kernel.body)

    def visit_For(self, s: n.For) -> n.Stmt | tuple[n.Stmt, ...]:
        if not (s.kind == "threads" and counter_dim(s.var) == 0):
            return self.generic_visit(s)
        if order_sensitive(self.kernel, s.body):
            return s
        new, needs, notes = normalize_strided_loops(s, kernel_name=self.kernel.name, names=self.names,
                                                    ranges=self.ranges)
        self.decisions.extend(notes)
        if not needs:
            return new
        checks = conjunction(need_exprs(needs))
        fallback = copy_loop(s, self.names)
        self.decisions.append(LoweringDecision(
            self.kernel.name, s.loc, f"thread loop over {s.var}: run-time check {format_expr(checks)} for the "
                                     f"normalized strided loops; the original loop runs otherwise"))
        return n.If(checks, (new,), (fallback,), loc=s.loc)


def normalize_strided_loops(loop: n.For, *, kernel_name: str, names: NameSupply,
                            ranges: Ranges) -> tuple[n.For, list[Need], list[LoweringDecision]]:
    """``loop`` (a thread loop over ``tx``) with its top-level ``for i = S + tx to E step D``
    loops normalized; the needs that the run-time check must test; one decision per loop.

    ``names`` gives the block counters fresh names; ``ranges`` learns their loops.
    (``loop``, [], []) when there is nothing to do."""
    body = list(loop.body)
    needs: list[Need] = []
    notes: list[LoweringDecision] = []
    for i, s in enumerate(body):
        if not (isinstance(s, n.For) and s.kind == "serial" and s.vtype.is_int and s.vtype.bits <= 32):
            continue
        if jumps_out(s.body, n.Break, n.Continue):
            continue
        analysis = _analysis(loop, i, ranges)
        reversed_ = _reversed_stride(loop, body, i, analysis, names, ranges)
        if reversed_ is not None:
            new_stmts, local, note = reversed_
            body[i] = new_stmts
            needs.extend(x for x in local if x not in needs)
            notes.append(LoweringDecision(kernel_name, s.loc, f"thread loop over {loop.var}: {note}"))
            continue
        start = analysis.linear(s.start)
        stop, step = analysis.uniform(s.stop), analysis.uniform(s.step)
        if start is None or stop is None or step is None or start[0].coef != 1:
            continue
        if not _indexes_with(s.body, s.var):
            continue
        lin, start_needs = start
        step64, stop64 = i64(step), i64(stop)
        local: list[Need] = list(start_needs)
        step_lin = analysis.linear(step)
        stop_lin = analysis.linear(stop)
        if step_lin is None or stop_lin is None:
            continue
        if ranges.of(step64)[0] < 1:
            local.append(Need(step_lin[0], lo=1))
        if not s.vtype.is_signed:  # i += D must not wrap before the loop ends
            limit = (1 << s.vtype.bits) - 1
            bound = stop_lin[0].plus(step_lin[0]).plus(Linear(-1))
            if not analysis.proved(Need(bound, hi=limit)):
                local.append(Need(bound, hi=limit))
        if any(not _available_need(x, analysis) for x in local):
            continue
        b = names.fresh(f"{s.var}_base")
        base = linear_ir(lin.base())
        t64 = n.Cast(I64, n.Var(loop.var, U32))
        cur = n.Binary("add", n.Var(b, I64), t64)
        value = n.Binary("add", n.Cast(s.vtype, n.Var(b, I64)), n.Cast(s.vtype, n.Var(loop.var, U32)))
        inner = (n.Decl(s.var, s.vtype, value, loc=s.loc),) + s.body
        guarded = n.If(n.Binary("lt", cur, stop64), inner, loc=s.loc)
        if ranges.of(step64)[0] < 1:  # checked at run time; max() tells the analyses
            step64 = n.Call("max", (step64, n.Const(1, I64)), I64)
        new = n.For(b, I64, base, stop64, step64, (guarded,), loc=s.loc)
        ranges.loops[b] = new
        body[i] = new
        needs.extend(x for x in local if x not in needs)
        notes.append(LoweringDecision(kernel_name, s.loc, f"thread loop over {loop.var}: strided loop over '{s.var}' (start {format_expr(s.start)}, "
                     f"step {format_expr(s.step)}) iterates over its blocks of consecutive elements instead "
                     f"({b} = {format_expr(base)}, ...; {s.var} = {b} + {loop.var})"))
    if not notes:
        return loop, [], []
    flat: list[n.Stmt] = []
    for x in body:
        flat.extend(x if isinstance(x, tuple) else (x,))
    return dataclasses.replace(loop, body=tuple(flat)), needs, notes


def _reversed_stride(loop: n.For, body: list, i: int, analysis: CounterAnalysis, names: NameSupply,
                     ranges: Ranges) -> tuple[tuple[n.Stmt, ...], list[Need], str] | None:
    """A block-stride loop as the reverse sweep of a gradient runs it (``autodiff.sweeps``:
    ``_rev_loop``), with a uniform iteration space; None when ``body[i]`` is not one::

        var v_n: i32 = (i32)(S + tx < E ? ((i64)E - (i64)(S + tx) + (i64)D - 1) / (i64)D : 0)
        for v_r: i32 = 0 to v_n step 1 {
          var v_i: i32 = v_n - 1 - v_r                              (the forward iteration, backwards)
          var v: T = (T)((i64)(S + tx) + (i64)v_i * (i64)D)
          body
        }
    ==>
        var v_k: i64 = S < E ? (E - S + D - 1) / D : 0              (the iterations of thread 0)
        for v_j: i64 = 0 to v_k step 1 {
          var v_b: i64 = v_k - 1 - v_j
          if (S + v_b * D + tx < E) { var v_i: i32 = (i32)v_b; var v_r = v_n - 1 - v_i; var v = ...; body }
        }

    Exact: thread ``tx`` runs the iterations ``v_i`` with ``S + tx + v_i * D < E``, from the last
    down to 0, as before. Needs ``D >= 1`` (checked at run time where not proved)."""
    s = body[i]
    if not (s.vtype == I32 and isinstance(s.start, n.Const) and s.start.value == 0
            and isinstance(s.step, n.Const) and s.step.value == 1 and isinstance(s.stop, n.Var) and len(s.body) >= 2):
        return None
    count_decl = next((x for x in body[:i] if isinstance(x, n.Decl) and x.name == s.stop.name), None)
    first, second = s.body[0], s.body[1]
    if count_decl is None or count_decl.init is None or not isinstance(first, n.Decl) \
            or not isinstance(second, n.Decl) or first.init is None or second.init is None:
        return None
    if any(isinstance(x, (n.Assign, n.AtomicRMW)) and (x.name if isinstance(x, n.Assign) else x.dest) == s.stop.name
           for st in loop.body for x in walk(st)):
        return None
    count = count_decl.init.x if isinstance(count_decl.init, n.Cast) else count_decl.init
    if not (isinstance(count, n.Select) and isinstance(count.b, n.Const) and count.b.value == 0
            and isinstance(count.cond, n.Binary) and count.cond.op == "lt"):
        return None
    div = count.a
    if not (isinstance(div, n.Binary) and div.op == "div" and isinstance(div.a, n.Binary) and div.a.op == "sub"
            and isinstance(div.a.b, n.Const) and div.a.b.value == 1 and isinstance(div.a.a, n.Binary)
            and div.a.a.op == "add" and div.a.a.b == div.b and isinstance(div.a.a.a, n.Binary)
            and div.a.a.a.op == "sub"):
        return None
    stop64, start64, step64 = div.a.a.a.a, div.a.a.a.b, div.b
    # var v_i = v_n - 1 - v_r
    r = n.Var(s.var, s.vtype)
    if first.init != n.Binary("sub", n.Binary("sub", s.stop, n.Const(1, s.stop.type)), r):
        return None
    index = n.Var(first.name, first.vtype)
    # var v = (T)((i64)start + (i64)v_i * (i64)D), the start and step of the count
    value = second.init.x if isinstance(second.init, n.Cast) else second.init
    if not (isinstance(value, n.Binary) and value.op == "add" and value.a == start64 and isinstance(value.b, n.Binary)
            and value.b.op == "mul" and value.b.a == n.Cast(I64, index) and value.b.b == step64):
        return None
    if not (i64(count.cond.a) == start64 and i64(count.cond.b) == stop64) or not _indexes_with(s.body, second.name):
        return None
    start = analysis.linear(start64)
    stop, step = analysis.uniform(stop64), analysis.uniform(step64)
    if start is None or stop is None or step is None or start[0].coef != 1:
        return None
    lin, local = start
    local = list(local)
    step_lin = analysis.linear(step)
    if step_lin is None:
        return None
    if ranges.of(i64(step))[0] < 1:
        local.append(Need(step_lin[0], lo=1))
    if any(not _available_need(x, analysis) for x in local):
        return None
    base = linear_ir(lin.base())
    step = i64(step)
    stop = i64(stop)
    if ranges.of(step)[0] < 1:  # checked at run time; max() tells the analyses
        step = n.Call("max", (step, n.Const(1, I64)), I64)
    one = n.Const(1, I64)
    k = names.fresh(f"{second.name}_k")
    j = names.fresh(f"{second.name}_j")
    bk = names.fresh(f"{second.name}_b")
    trips = n.Select(n.Binary("lt", base, stop),
                     n.Binary("div", n.Binary("sub", n.Binary("add", n.Binary("sub", stop, base), step), one), step),
                     n.Const(0, I64))
    kv, bv = n.Var(k, I64), n.Var(bk, I64)
    at = n.Binary("add", n.Binary("add", base, n.Binary("mul", bv, step)), n.Cast(I64, n.Var(loop.var, U32)))
    inner: tuple[n.Stmt, ...] = (n.Decl(first.name, first.vtype, n.Cast(first.vtype, bv), loc=first.loc),)
    if any(isinstance(x, n.Var) and x.name == s.var for st in s.body[1:] for x in walk(st)):
        inner += (n.Decl(s.var, s.vtype, n.Binary("sub", n.Binary("sub", s.stop, n.Const(1, s.vtype)), index),
                         loc=s.loc),)
    inner += tuple(s.body[1:])
    new = n.For(j, I64, n.Const(0, I64), kv, one,
                (n.Decl(bk, I64, n.Binary("sub", n.Binary("sub", kv, one), n.Var(j, I64)), loc=s.loc),
                 n.If(n.Binary("lt", at, stop), inner, loc=s.loc)), loc=s.loc)
    ranges.loops[j] = new
    note = (f"reversed strided loop over '{second.name}' (start {format_expr(start64)}, step {format_expr(step64)}, "
            f"last iteration first) iterates over its blocks of consecutive elements instead "
            f"({bk} = {k} - 1 - {j}; {second.name} = {format_expr(base)} + {bk} * {format_expr(step)} + {loop.var})")
    return (n.Decl(k, I64, trips, loc=s.loc), new), local, note


def _analysis(loop: n.For, upto: int, ranges: Ranges) -> CounterAnalysis:
    inside = declared_names(loop.body) | {loop.var}
    return CounterAnalysis(loop.var, 0, lets=let_definitions(loop.body, upto),
                           available=lambda name: name not in inside, ranges=ranges)


def _available_need(need: Need, analysis: CounterAnalysis) -> bool:
    return all(safe_uniform(a, analysis.available) for a, _ in need.value.terms)


def _indexes_with(stmts: tuple[n.Stmt, ...], var: str) -> bool:
    """Whether some memory access in ``stmts`` has ``var`` in an index (worth making it stride-1)."""
    for s in stmts:
        for x in walk(s):
            if isinstance(x, (n.Load, n.Store, n.AtomicRMW)):
                if any(isinstance(v, n.Var) and v.name == var for i in x.index for v in walk(i)):
                    return True
    return False

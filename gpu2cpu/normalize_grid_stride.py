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
    conjunction,
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
from polypy.ir.queries import declared_names
from polypy.ir.types import I64, U32
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
    return dataclasses.replace(loop, body=tuple(body)), needs, notes


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

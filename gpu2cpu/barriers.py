"""eliminate_barriers: remove every ``__syncthreads()`` that provably orders nothing.

Requires: a GPU-form kernel (after ``SIMPLIFY``, so indices are expressions of the thread and
block registers). Guarantees: same results for every launch (the kernel's assumptions about
launches are those of ``polypy.poly.Model.assumptions``), and no new race.

A barrier is removed iff no two accesses by different threads of a block, at least one a
write, to possibly the same storage, are ordered by it and by no other remaining barrier —
including across loop iterations when the barrier is in a loop (``polypy.poly.hazards``).
isl decides each case exactly on the model; where the model over-approximates (unknown
indices, conditions, trip counts) the answer errs toward keeping the barrier.

Barriers are decided one at a time in source order, each against the barriers still present
(removing one can only make the others more necessary, so one pass reaches the greedy fixed
point)::

    s[t] = a          s[t] = a
    barrier     ->    barrier           (kept: RAW on s, thread t+1 reads s[t])
    b = s[t+1]        b = s[t+1]
    barrier           y[t] = b          (removed: no conflicting accesses between the
    y[t] = b                             barrier at line 2 and the kernel exit)

``report``, if given, receives one ``BarrierDecision`` (``polypy.analysis.barrier_decision``) per
barrier, in source order.
"""
from __future__ import annotations

from polypy.analysis.barrier_decision import BarrierDecision
from polypy.ir import nodes as n
from polypy.ir.visitor import has_kind
from polypy.analysis.grid_sync import is_grid_sync
from polypy.poly import BarrierAnalysis, StmtPath, edit_statements, format_path
from polypy.poly.paths import statement_at


def eliminate_barriers(kernel: n.Kernel, *, report: list[BarrierDecision] | None = None) -> n.Kernel:
    """Remove the barriers that order no conflicting accesses (see module docstring)."""
    if not has_kind(kernel, n.Barrier):
        return kernel
    analysis = BarrierAnalysis(kernel)
    remaining: list[StmtPath] = [b.path for b in analysis.barriers]
    removed: set[StmtPath] = set()
    decisions = []
    for barrier in analysis.barriers:
        if is_grid_sync(statement_at(kernel, barrier.path)):
            # It orders the accesses of different blocks, which this analysis (of one block) does
            # not see: always kept (it also orders the block's own accesses, for the others).
            decisions.append(BarrierDecision(barrier.loc, False, "grid.sync(): a barrier of the whole grid, kept",
                                             format_path(barrier.path)))
            continue
        conflict = analysis.conflict(barrier.path, remaining)
        if conflict is None:
            reason = analysis.removal_reason(barrier.path, remaining)
            remaining.remove(barrier.path)
            removed.add(barrier.path)
            decisions.append(BarrierDecision(barrier.loc, True, reason, format_path(barrier.path)))
        else:
            decisions.append(BarrierDecision(barrier.loc, False, conflict.describe(), format_path(barrier.path),
                                             conflict))
    if report is not None:
        report.extend(decisions)
    return edit_statements(kernel, {path: _delete for path in removed})


def _delete(stmt: n.Stmt) -> tuple[n.Stmt, ...]:
    return ()

"""Reverse mode: a GPU-form kernel ``K`` -> ``K_grad`` (forward sweep, then reverse sweep, per thread).

::

    kernel K_grad(<K's parameters with shadows>) {
      <zero the shadows of shared/local arrays>; barrier
      <forward sweep: K's body, plus tape stores and loop counters>
      <adjoint variables = 0>
      <reverse sweep: K's statements backwards, each replaced by its adjoint>
      <block reductions of scalar-parameter adjoints; one atomic per block>
    }

The work is cut at its seams; ``ReverseBuilder`` holds the state and combines the parts:

* ``autodiff.sweeps``        the forward sweep and the reverse sweep: statements backwards,
  cotangents through expressions (linear operations by their transpose, others by partials);
* ``autodiff.accumulation``  where a cotangent is added: adjoint registers, and for loads
  plain / block window / block reduction / atomic;
* ``autodiff.availability``  forward values in the reverse sweep: read, recomputed, closed
  forms, replays of shared arrays and loop-carried values;
* ``autodiff.tapes``         values stored by the forward sweep, indexed by loop iteration.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from autodiff import build as b
from autodiff.accumulation import AdjointAccumulation
from autodiff.activity import Activity, ActiveParams
from autodiff.availability import Availability, LoopCtx
from autodiff.names import Names
from autodiff.program import Program
from autodiff.report import Caching, Decision
from autodiff.shadows import (
    interleave_dynamic_shared, shadow_buffers, shadow_disjoint, shadow_params, zero_local, zero_shared,
)
from autodiff.sweeps import Sweeps, merge_barrier_runs
from autodiff.tapes import Tapes
from autodiff.windows import Privatized, Windows
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.types import ScalarType
from polypy.poly.paths import StmtPath
from polypy.poly.windows import Chunk

Point = StmtPath


@dataclasses.dataclass(frozen=True)
class ReverseOptions:
    """Switches for the benchmark (each off = the simple, always-correct choice)."""

    cache: str = "auto"  # auto | recompute | store: how overwritten values are recovered
    privacy: bool = True  # use isl proofs of thread privacy (else: atomics for shared shadows)
    block_reductions: bool = True  # register + block reduction for block-uniform reads and scalars
    windows: bool = True  # block windows in shared memory for read-only inputs read by several threads
    max_tape: int = 1 << 16  # elements per tape array
    # snapshots per loop without a static trip count (binomial checkpointing, autodiff.checkpoint);
    # None: its loop-carried values are recomputed from the loop entry
    checkpoint_budget: int | None = None
    # tapes of loops whose trip count is a function of the arguments, sized at launch
    # (autodiff.tapes.tape_extents): True always, False never, None only where nothing else works
    runtime_tapes: bool | None = None


# (kernel, statement path, load) -> (no other thread of the block touches the element the load
# reads between the same two barriers, reason): ``polypy.poly.intervals.interval_private``.
Intervals = Callable[[n.Kernel, StmtPath, n.Load], tuple[bool, str]]


class ReverseBuilder(Sweeps, AdjointAccumulation, Tapes, Availability):
    def __init__(self, kernel: n.Kernel, original: n.Kernel, active: ActiveParams, activity: Activity,
                 names: Names, options: ReverseOptions, report: list[Decision] | None,
                 privacy: Callable[[str], tuple[bool, str]], windows: Callable[..., object] | None = None,
                 intervals: Intervals | None = None, chunks: dict[str, Chunk] | None = None):
        self.k = kernel
        self.original = original
        self.prog = Program(kernel)
        self.active = active
        self.act = activity
        self.names = names
        self.opt = options
        self.report = report
        self.privacy = privacy
        self.intervals = intervals if options.privacy else None
        self.before: dict[Point, list[n.Stmt]] = {}
        self.loop_prologue: dict[StmtPath, list[n.Stmt]] = {}
        self.top_decls: list[n.Stmt] = []
        self.hoist: set[str] = set()
        self.tapes: list[n.Buffer] = []
        self.checkpoints: list[tuple[StmtPath, object]] = []  # (loop, autodiff.checkpoint.Snapshots)
        self.ctx: dict[StmtPath, LoopCtx] = {}
        self.memo: dict[tuple, n.Expr] = {}
        self.counters: dict[StmtPath, str] = {}
        self.adjoint: dict[str, str] = {}
        self.adjoint_type: dict[str, ScalarType] = {}
        self.deferred: dict[tuple[str, tuple[n.Expr, ...]], str] = {}
        self.entry_copies: dict[str, str] = {}
        self.pending: list[n.Stmt] = []
        self.replays: list[dict[tuple[str, StmtPath], str]] = []  # per reverse block: recomputed values
        self._private: dict[str, tuple[bool, str]] = {}
        self._reported: set[tuple] = set()
        self.window_oracle = windows
        self.chunks = chunks or {}  # buffer -> the chunk of a serial loop its window covers
        self.windows = Windows(names)
        self._windowed: dict[str, tuple[Privatized | None, str]] = {}
        self.params, self.param_shadow = shadow_params(original, active, names, mode="reverse")
        extra, self.buffer_shadow = shadow_buffers(kernel, activity.buffers, names)
        self.shadow_buffers = extra
        self.shadow = {**self.param_shadow, **self.buffer_shadow}
        self.dynamic = {buf.name: self.shadow[buf.name] for buf in kernel.buffers
                        if buf.name in self.buffer_shadow and buf.shape is None}
        for p in kernel.params:
            if p.name in active.scalars:
                self.adjoint[p.name] = names.fresh(f"d_{p.name}_sum")
                self.adjoint_type[p.name] = p.ptype  # type: ignore[assignment]

    def _note(self, key: tuple, decision: Decision) -> None:
        if self.report is None or key in self._reported:
            return
        self._reported.add(key)
        self.report.append(decision)

    # ================================================================== the whole kernel
    def build(self, name: str) -> n.Kernel:
        reverse = self.rev_block((), "body")
        forward = self.forward_sweep()
        body: list[n.Stmt] = []
        hoisted = []
        for v in sorted(self.hoist):
            hoisted.append(n.Decl(v, self._var_type(v)))
        body += hoisted + self.top_decls + self.windows.declarations()
        body += self._zero_shadows()
        body += forward
        for v, adj in self.adjoint.items():
            body.append(n.Decl(adj, self.adjoint_type[v], b.zero(self.adjoint_type[v])))
        for reg in self.deferred.values():
            body.append(n.Decl(reg, self.adjoint_type[reg], b.zero(self.adjoint_type[reg])))
        body += reverse
        body += self.windows.flush()
        body += self._reductions()
        buffers = tuple(self.k.buffers) + tuple(self.shadow_buffers) + tuple(self.tapes) + tuple(self._red_buffers)
        buffers += tuple(self.windows.buffers)
        body = merge_barrier_runs(tuple(body))
        while body and isinstance(body[-1], n.Barrier):
            body = body[:-1]  # nothing after it to order
        kernel = n.Kernel(name, self.params, buffers, tuple(body), "gpu", loc=self.k.loc,
                          disjoint=shadow_disjoint(self.original, self.param_shadow))
        return interleave_dynamic_shared(kernel, self.dynamic)

    def _zero_shadows(self) -> list[n.Stmt]:
        out: list[n.Stmt] = []
        shared = False
        for buf in self.shadow_buffers:
            if buf.space == "shared" and buf.shape is not None:
                out.append(zero_shared(buf, self.names))
                shared = True
            elif buf.space == "local":
                out.append(zero_local(buf, self.names))
        windows = self.windows.zero()
        out += windows
        if shared or windows:
            out.append(n.Barrier())
        return out


def reverse_kernel(kernel: n.Kernel, original: n.Kernel, active: ActiveParams, activity: Activity, names: Names,
                   options: ReverseOptions, report: list[Decision] | None,
                   privacy: Callable[[str], tuple[bool, str]], name: str,
                   windows: Callable[..., object] | None = None, intervals: Intervals | None = None,
                   chunks: dict[str, Chunk] | None = None) -> n.Kernel:
    if options.runtime_tapes is not None:
        return ReverseBuilder(kernel, original, active, activity, names, options, report, privacy,
                              windows, intervals, chunks).build(name)
    # Static tapes and recomputation first; tapes sized at launch where they fail, or where they
    # replay a loop from its entry (the second attempt names things afresh: the first one's
    # names are not in the kernel).
    first: list[Decision] = []
    try:
        result = ReverseBuilder(kernel, original, active, activity, names,
                                dataclasses.replace(options, runtime_tapes=False), first, privacy, windows,
                                intervals, chunks).build(name)
    except UserError as exc:
        if options.checkpoint_budget is not None:
            # a budget promises memory independent of the trip count: no tape sized at launch
            raise UserError(f"{exc.message} (checkpointing snapshots only the registers a loop carries; without a "
                            f"checkpoint budget a tape sized at launch would hold these values)", exc.loc,
                            notes=exc.notes) from None
        try:
            reserved = {name} | {c.first for c in (chunks or {}).values()}  # chosen before: still ours
            return ReverseBuilder(kernel, original, active, activity, Names(kernel, reserved),
                                  dataclasses.replace(options, runtime_tapes=True), report, privacy,
                                  windows, intervals, chunks).build(name)
        except UserError:
            raise exc from None
    replayed = [d for d in first if isinstance(d, Caching) and d.strategy == "replay-loop"]
    if replayed and options.checkpoint_budget is None:
        # Cost estimate (issue 38 item 3): replaying a loop of T iterations from its entry costs
        # T (T + 1) / 2 evaluations of the carried values per thread, a tape sized at launch T
        # stores and T loads; T is not known statically, and past T = 3 the tape is cheaper. The
        # tape holds T values per carried register and thread (the replay: none).
        second: list[Decision] = []
        try:
            reserved = {name} | {c.first for c in (chunks or {}).values()}
            taped = ReverseBuilder(kernel, original, active, activity, Names(kernel, reserved),
                                   dataclasses.replace(options, runtime_tapes=True), second, privacy,
                                   windows, intervals, chunks).build(name)
        except UserError:
            taped = None
        still = {(d.value, d.loc) for d in second if isinstance(d, Caching) and d.strategy == "replay-loop"}
        taped_instead = [d for d in replayed if (d.value, d.loc) not in still]
        if taped is not None and taped_instead:  # (a loop whose trip count is unknown at launch still replays)
            if report is not None:
                report.extend(second)
                report.extend(Caching(d.value, d.loc, "tape", "a tape sized at launch instead of replaying the loop "
                                      "from its entry in each reversed iteration (cost estimate: T stores and T "
                                      "loads against T (T + 1) / 2 replayed steps for T iterations)")
                              for d in taped_instead)
            return taped
    if report is not None:
        report.extend(first)
    return result

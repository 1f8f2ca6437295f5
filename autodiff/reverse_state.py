"""The state of one reverse-mode differentiation, in one explicit object.

Reverse mode (``autodiff.reverse``) builds ``K_grad`` with small functions that each take this
state as their first argument (JAX's ``backward_pass`` keeps its state in one local environment
the same way): ``sweeps.propagate(st, e, ct, p)``, ``accumulation.accumulate_load(st, e, ct, p)``,
``availability.avail(st, e, p)``, ``tapes.tape(st, e, p, ...)``. ``ReverseState`` says, field by
field, what they share:

* what is differentiated and how (set once, read only): the kernel, its activity, the options,
  the proofs the driver passes in (privacy, intervals, block windows);
* the shadows (fixed at the start): ``K_grad``'s parameters and the shadow arrays;
* what the reverse sweep asks of the forward sweep (filled while the reverse sweep is built,
  then put in by ``sweeps.forward_sweep``): tape stores and counters before statements,
  declarations moved to the top of the kernel, tapes;
* the adjoints: registers of variables and scalar parameters, per-block sums of loads, block
  windows, the accumulation strategy of each buffer;
* the scopes of the reverse sweep: the reversed loops being built, values already made
  available, statements to put before the current one, values replayed in the current block;
* the decisions reported (``--report``).

A ``ReverseState`` serves one attempt at building ``K_grad`` (``reverse.reverse_kernel`` makes
a fresh one for each).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from autodiff.activity import Activity, ActiveParams
from autodiff.names import Names
from autodiff.program import Program
from autodiff.report import Decision
from autodiff.shadows import shadow_buffers, shadow_params
from autodiff.windows import Privatized, Windows
from polypy.ir import nodes as n
from polypy.ir.types import PointerType, ScalarType
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


class NeedTape(Exception):
    """A value is not recomputable without a tape (raised where tapes are not allowed)."""


class CannotTape(Exception):
    def __init__(self, loop: StmtPath | None, reason: str):
        super().__init__(reason)
        self.loop = loop
        self.reason = reason


@dataclasses.dataclass
class LoopCtx:
    """A loop of K while its reversed loop is being built."""

    path: StmtPath
    index: str  # forward iteration number of the current reverse iteration (i32)
    var: str | None  # reconstructed loop variable of a for loop
    carried: dict[str, str] = dataclasses.field(default_factory=dict)  # loop-carried var -> replay copy
    values: list[n.Stmt] = dataclasses.field(default_factory=list)  # per-iteration values (closed forms)
    named: dict[str, str] = dataclasses.field(default_factory=dict)  # var -> its per-iteration value
    shared: list[str] = dataclasses.field(default_factory=list)  # shared arrays refilled per iteration


@dataclasses.dataclass(eq=False)
class ReverseState:
    # ---- what is differentiated, and how (read only)
    kernel: n.Kernel  # K, normalized for differentiation
    original: n.Kernel  # K as given: its parameters make K_grad's
    prog: Program  # statement paths, writers, reaching definitions of ``kernel``
    active: ActiveParams
    act: Activity
    names: Names
    opt: ReverseOptions
    privacy: Callable[[str], tuple]  # buffer -> (private, reason[, run-time condition])
    intervals: Intervals | None  # None: no interval proofs (or privacy proofs disabled)
    window_oracle: Callable[..., object] | None  # buffer[, kernel, chunk] -> Window or why none
    chunks: dict[str, Chunk]  # buffer -> the chunk of a serial loop its window covers
    # ---- shadows (fixed at the start)
    params: tuple[n.Param, ...]  # K_grad's parameters
    param_shadow: dict[str, str]  # active parameter -> its shadow parameter
    buffer_shadow: dict[str, str]  # active shared/local array -> its shadow array
    shadow_buffers: list[n.Buffer]  # the shadow arrays
    shadow: dict[str, str]  # both of the above
    dynamic: dict[str, str]  # extern shared array -> its shadow (interleaved at the end)
    windows: Windows  # the block windows adjoints go through (added as accumulation chooses them)
    # ---- what the reverse sweep asks of the forward sweep
    before: dict[Point, list[n.Stmt]] = dataclasses.field(default_factory=dict)  # tape stores, counter resets
    loop_prologue: dict[StmtPath, list[n.Stmt]] = dataclasses.field(default_factory=dict)  # counter increments
    top_decls: list[n.Stmt] = dataclasses.field(default_factory=list)  # at the top of K_grad
    hoist: set[str] = dataclasses.field(default_factory=set)  # locals declared at the top of K_grad
    tapes: list[n.Buffer] = dataclasses.field(default_factory=list)  # tapes and checkpoint snapshots
    counters: dict[StmtPath, str] = dataclasses.field(default_factory=dict)  # loop -> its iteration counter
    entry_copies: dict[str, str] = dataclasses.field(default_factory=dict)  # parameter -> its value at entry
    # ---- adjoints
    adjoint: dict[str, str] = dataclasses.field(default_factory=dict)  # variable -> its adjoint register
    adjoint_type: dict[str, ScalarType] = dataclasses.field(default_factory=dict)  # variable or register -> type
    deferred: dict[tuple[str, tuple[n.Expr, ...]], str] = dataclasses.field(default_factory=dict)  # (buffer,
    # index) -> the register summing a block-uniform load's adjoint (reduced over the block at the end)
    windowed: dict[str, tuple[Privatized | None, str]] = dataclasses.field(default_factory=dict)  # buffer ->
    # (its window, why or why not)
    private: dict[str, tuple] = dataclasses.field(default_factory=dict)  # buffer -> privacy's answer, cached
    versions: dict[str, str] = dataclasses.field(default_factory=dict)  # buffer -> flag of its privacy condition
    # buffer -> keys (loc, text) of its block-uniform loads that privacy left out: summed per block
    summed: dict[str, frozenset] = dataclasses.field(default_factory=dict)
    # ---- scopes of the reverse sweep
    ctx: dict[StmtPath, LoopCtx] = dataclasses.field(default_factory=dict)  # loops reversed (or being)
    memo: dict[tuple, n.Expr] = dataclasses.field(default_factory=dict)  # (expr, point, tape) -> available value
    pending: list[n.Stmt] = dataclasses.field(default_factory=list)  # recomputations to put before
    replays: list[dict[tuple[str, StmtPath], str]] = dataclasses.field(default_factory=list)  # per reverse
    # block: (variable, statement) -> the copy of the variable the replayed statement assigned
    replay_uses: int = 0  # lookups that found such a copy (``avail`` memoizes none of their results)
    # ---- the report
    report: list[Decision] | None = None
    reported: set[tuple] = dataclasses.field(default_factory=set)


def start(kernel: n.Kernel, original: n.Kernel, active: ActiveParams, activity: Activity, names: Names,
          options: ReverseOptions, report: list[Decision] | None, privacy: Callable[[str], tuple],
          windows: Callable[..., object] | None = None, intervals: Intervals | None = None,
          chunks: dict[str, Chunk] | None = None) -> ReverseState:
    """The state before the sweeps are built: shadows named, scalar parameters' adjoint registers."""
    block_windows = Windows(names)
    params, param_shadow = shadow_params(original, active, names, mode="reverse")
    extra, buffer_shadow = shadow_buffers(kernel, activity.buffers, names)
    shadow = {**param_shadow, **buffer_shadow}
    st = ReverseState(
        kernel=kernel, original=original, prog=Program(kernel), active=active, act=activity, names=names,
        opt=options, privacy=privacy, intervals=intervals if options.privacy else None, window_oracle=windows,
        chunks=chunks or {}, params=params, param_shadow=param_shadow, buffer_shadow=buffer_shadow,
        shadow_buffers=extra, shadow=shadow,
        dynamic={buf.name: shadow[buf.name] for buf in kernel.buffers
                 if buf.name in buffer_shadow and buf.shape is None},
        windows=block_windows, report=report)
    for p in kernel.params:
        if p.name in active.scalars:
            st.adjoint[p.name] = names.fresh(f"d_{p.name}_sum")
            st.adjoint_type[p.name] = p.ptype  # type: ignore[assignment]
    return st


def note(st: ReverseState, key: tuple, decision: Decision) -> None:
    """Report ``decision`` once (per ``key``), if a report is asked for."""
    if st.report is None or key in st.reported:
        return
    st.reported.add(key)
    st.report.append(decision)


def loc_at(st: ReverseState, p: Point):
    """The location of the innermost statement around ``p`` that has one (else the kernel's)."""
    for k in range(len(p), 0, -1):
        s = st.prog.stmts.get(p[:k])
        if s is not None and s.loc is not None:
            return s.loc
    return st.kernel.loc


def var_type(st: ReverseState, v: str) -> ScalarType:
    """The type of local or scalar parameter ``v``."""
    path = st.prog.decl.get(v)
    if path is not None:
        s = st.prog.stmt(path)
        return s.vtype  # type: ignore[union-attr]
    p = st.kernel.param(v)
    assert p is not None and not isinstance(p.ptype, PointerType)
    return p.ptype

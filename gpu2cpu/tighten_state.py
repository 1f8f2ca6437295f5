"""The state of one run of ``tighten_thread_bounds``, passed explicitly to each of its steps.

``Tightening`` holds what the steps share: the kernel, fresh names, the value ranges of the
variables (``thread_affine.Ranges``, grown with the bounds the steps name), the decisions for
``--report``, the counters whose clamps stay, and the steps themselves, tried in order by
``transform`` (the list lives in ``gpu2cpu.tighten_thread_bounds.STEPS``). A step is a function
``step(st, loop, facts, needs, depth)`` that returns the statements replacing ``loop`` or None
when it does not apply; steps that cut a loop into parts call ``st.transform`` on each part.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from gpu2cpu.names import NameSupply
from gpu2cpu.report import LoweringDecision
from gpu2cpu.thread_affine import CounterAnalysis, Facts, Need, Ranges, counter_dim, split_conjuncts
from gpu2cpu.thread_loops import definition_writes, let_definitions, stem_of
from polypy.ir import nodes as n
from polypy.ir.queries import conjunction
from polypy.ir.types import I64, U32
from polypy.ir.visitor import rebuild, walk, walk_only

# Steps that cut a loop into ranges (index-set splitting, peeling, unclamping) nest at most this deep.
MAX_SPLITS = 3
# A loop known to run at most this many iterations is not split into several loops (a guard
# still becomes its bounds): there is nothing to vectorize.
SMALL_TRIP_COUNT = 8

Step = Callable[["Tightening", n.For, Facts, list, int], "list[n.Stmt] | None"]


@dataclasses.dataclass
class Tightening:
    kernel: n.Kernel
    use_ranges: bool
    steps: tuple[tuple[str, Step], ...]
    names: NameSupply = dataclasses.field(init=False)
    ranges: Ranges = dataclasses.field(init=False)
    decisions: list[LoweringDecision] = dataclasses.field(default_factory=list)
    # counters of loops that run the threads a clamp split left clamped
    clamp_edges: set[str] = dataclasses.field(default_factory=set)
    # Per loop body (kept alive here, so ids stay unique): the names declared inside and the
    # writes ``let_definitions`` counts; asked once per ``if`` of the body otherwise.
    body_facts: dict[int, tuple[tuple[n.Stmt, ...], set[str], dict[str, int]]] = dataclasses.field(
        default_factory=dict)

    def __post_init__(self) -> None:
        self.names = NameSupply(self.kernel)
        self.ranges = Ranges.of_kernel(self.kernel.body)

    def note(self, loop: n.Stmt, message: str) -> None:
        self.decisions.append(LoweringDecision(self.kernel.name, loop.loc, message))

    def transform(self, loop: n.For, facts: Facts, needs: list, depth: int) -> list[n.Stmt]:
        """The statements replacing ``loop``: the first step that applies (the last always does)."""
        loop = rebuild(loop, body=tuple(_positive(s) for s in loop.body))
        for _name, step in self.steps:
            out = step(self, loop, facts, needs, depth)
            if out is not None:
                return out
        raise AssertionError("the last step of tighten_thread_bounds always applies")

    def analysis(self, loop: n.For, upto: int) -> CounterAnalysis:
        """The counter analysis of ``loop``'s body before its statement ``upto``."""
        dim = counter_dim(loop.var)
        assert dim is not None
        cached = self.body_facts.get(id(loop.body))
        if cached is None or cached[0] is not loop.body:
            names = {x.name for x in walk_only(loop.body, n.Decl)}
            names |= {x.var for x in walk_only(loop.body, n.For)}
            cached = (loop.body, names, definition_writes(loop.body))
            self.body_facts[id(loop.body)] = cached
        inside = cached[1] | {loop.var}
        return CounterAnalysis(loop.var, dim, lets=let_definitions(loop.body, upto, writes=cached[2]),
                               available=lambda name: name not in inside, ranges=self.ranges)

    def named(self, bound: n.Expr, loop: n.For, what: str, decls: list[n.Stmt]) -> n.Expr:
        """A computed bound, declared once before the loops that use it (``var tx_hi: u32 = ...``)."""
        if _simple(bound):
            return bound
        name = self.names.fresh(f"{stem_of(loop.var)}_{what}")
        decls.append(n.Decl(name, U32, bound, loc=loop.loc))
        self.ranges.lets[name] = bound
        return n.Var(name, U32)

    def clamp(self, x: n.Expr, lo: n.Expr, hi: n.Expr) -> n.Expr:
        """``min(max(x, lo), hi)`` in i64, leaving out what the value ranges make useless."""
        xr, lr, hr = self.ranges.of(x), self.ranges.of(lo), self.ranges.of(hi)
        if xr[0] < lr[1]:
            x = n.Call("max", (x, lo), I64)
            xr = (max(xr[0], lr[0]), max(xr[1], lr[1]))
        if xr[1] > hr[0]:
            x = n.Call("min", (x, hi), I64)
        return x


def size(stmts: tuple[n.Stmt, ...]) -> int:
    """The number of IR nodes in ``stmts`` (what a copy of them costs)."""
    return sum(1 for s in stmts for _ in walk(s))


def add_needs(needs: list[Need], found: list[Need], facts: Facts) -> None:
    """Append to ``needs`` those of ``found`` that ``facts`` do not imply and it lacks."""
    needs.extend(x for x in found if not facts.implies(x) and x not in needs)


def _positive(s: n.Stmt) -> n.Stmt:
    """``if (c) {} else {E}`` as ``if (!c) {E}`` (a guard written as an early exit)."""
    if isinstance(s, n.If) and not s.then and s.orelse:
        return n.If(conjunction(split_conjuncts(s.cond, negate=True)), s.orelse, loc=s.loc)
    return s


def _simple(e: n.Expr) -> bool:
    """A bound short enough to write inline: a constant, a name, blockDim, or min/max of those."""
    if isinstance(e, (n.Const, n.Var, n.GpuIndex)):
        return True
    return isinstance(e, n.Call) and e.fn in ("min", "max") and all(isinstance(a, (n.Const, n.Var, n.GpuIndex))
                                                                   for a in e.args)

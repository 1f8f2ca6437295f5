"""Exact index arithmetic on a thread counter: step 4 of ``tighten_thread_bounds``.

An index affine in the counter that contains wrapping arithmetic on it is rewritten as
``(i64)uniform + (i64)tx * c`` (``in[(i32)(blockIdx.x * blockDim.x + tx)]`` becomes
``in[(i64)(blockIdx.x * blockDim.x) + (i64)tx]``: compilers then see a unit stride); elsewhere
``(i32)(P + tx)`` becomes ``(i32)P + (i32)tx``. Exact only where the arithmetic looked through
does not wrap for any thread of the block: what the interval analysis cannot prove is appended
to ``needs`` (``thread_affine.Need``), which the caller turns into one run-time check.
"""
from __future__ import annotations

import dataclasses

from gpu2cpu.thread_affine import CounterAnalysis, Facts, Linear, Need, Ranges, counter_dim, linear_ir
from gpu2cpu.thread_loops import let_definitions
from polypy.ir import nodes as n
from polypy.ir.depth import MAX_ANALYZED_NODES
from polypy.ir.printer import format_expr
from polypy.ir.queries import nodes_reading, tree_size
from polypy.ir.types import I64, U32
from polypy.ir.visitor import Mutator, rebuild, substitute, walk, walk_only


def exact_indices(loop: n.For, facts: Facts, needs: list[Need], *, ranges: Ranges) -> n.For:
    """``loop`` with its indices on the counter free of wrap-around (``loop`` itself if none
    changed); the needs not implied by ``facts`` are appended to ``needs``."""
    dim = counter_dim(loop.var)
    if dim is None:
        return loop
    analysis = CounterAnalysis(loop.var, dim, lets=let_definitions(loop.body, len(loop.body)),
                               available=_outside(loop), ranges=ranges, free_atoms=True, index_forms=True,
                               start=_closed(loop.start, ranges.lets))
    rewriter = _ExactIndices(analysis, facts, needs)
    body = rewriter.visit_block(loop.body)
    if body is loop.body:
        return loop
    return dataclasses.replace(loop, body=body)


def _closed(e: n.Expr, lets: dict) -> n.Expr | None:
    """``e`` with the bounds this pass named (``tx_lo``) replaced by their definitions, or None
    if it still reads a variable: a run-time check made of it is hoisted above those names."""
    for _ in range(8):
        if any(isinstance(x, n.Load) for x in walk(e)):
            return None
        names = [x for x in walk(e) if isinstance(x, n.Var)]
        if not names:
            return e
        if not all(v.name in lets for v in names):
            return None
        e = substitute(e, {v: lets[v.name] for v in names})
    return None


def _outside(loop: n.For):
    inside = {x.name for x in walk_only(loop.body, n.Decl)}
    inside |= {x.var for x in walk_only(loop.body, n.For)}
    inside.add(loop.var)
    return lambda name: name not in inside


class _ExactIndices(Mutator):
    """Wrapping arithmetic on the counter rebuilt without wrap-around (under the recorded needs).

    * a conversion to a signed type of an unsigned value affine in the counter,
      ``(i32)(blockIdx.x * blockDim.x + tx)``, becomes ``(i32)(blockIdx.x * blockDim.x) + (i32)tx``
      (types unchanged; signed arithmetic, which compilers may assume does not overflow);
    * an index affine in the counter with such arithmetic inside, ``s[tx + k]``,
      ``x[(i32)(blockIdx.x * blockDim.x + tx) * 4 + 1]``, is computed in i64:
      ``x[(i64)(blockIdx.x * blockDim.x) * 4l + 1l + (i64)tx * 4l]`` (a zero-extended counter
      plus a loop-invariant part: C compilers see a unit stride, which they do not through
      ``(int)`` of an unsigned sum);
    * inside an index that is not affine as a whole (a run-time stride times the counter, as in
      PyTorch's accessors), a conversion to 64 bits of a 32-bit value affine in the counter is
      computed in i64 likewise (``widen``). Only there: elsewhere (a loop bound, a ``let``) the
      conversion stays, so that the later steps still see the source's form.
    """

    ALL_INDICES = True

    def __init__(self, analysis: CounterAnalysis, facts: Facts, needs: list[Need]):
        self.analysis = analysis
        self.facts = facts
        self.needs = needs
        self.rewritten = 0
        self.example = ""

    def exact(self, e: n.Expr) -> tuple[Linear, list[Need]] | None:
        found = self.analysis.linear(e)
        if found is None or found[0].coef == 0:
            return None
        return found

    def record(self, before: n.Expr, after: n.Expr, needs: list[Need]) -> n.Expr:
        for x in needs:
            if not self.facts.implies(x) and x not in self.needs:
                self.needs.append(x)
        self.rewritten += 1
        if not self.example:
            self.example = f"{format_expr(before)} -> {format_expr(after)}"
        return after

    def counter_term(self, ty, coef: int) -> n.Expr:
        t = n.Cast(ty, n.Var(self.analysis.counter, U32))
        return t if coef == 1 else n.Binary("mul", t, n.Const(coef, ty))

    def visit_Cast(self, e: n.Cast) -> n.Expr:
        x = e.x
        if not (e.to.is_int and e.to.is_signed and x.type.is_int and not x.type.is_signed) \
                or tree_size(e) > MAX_ANALYZED_NODES or not _wraps_on(x, self.analysis.counter):
            return self.generic_visit(e)
        found = self.exact(e)  # the value of the conversion: exact needs included
        if found is None:
            return self.generic_visit(e)
        lin, needs = found
        base = lin.base()
        # The counter-free part in the operand's own (modular) type: exact, since its true value
        # (the operand at counter 0) is in range; then converted, also exactly.
        parts = [n.Cast(x.type, a) if a.type != x.type else a for a, _ in base.terms]
        value: n.Expr | None = None
        for (atom, k), part in zip(base.terms, parts):
            term = part if k == 1 else n.Binary("mul", part, n.Const(k, x.type))
            value = term if value is None else n.Binary("add", value, term)
        if base.const or value is None:
            c = n.Const(base.const, x.type)
            value = c if value is None else n.Binary("add", value, c)
        counter = self.counter_term(e.to, lin.coef)
        out = counter if (isinstance(value, n.Const) and value.value == 0) else \
            n.Binary("add", n.Cast(e.to, value), counter)
        return self.record(e, out, needs)

    def index(self, e: n.Expr) -> n.Expr:
        if not (e.type.is_int and (self.ALL_INDICES or not e.type.is_signed)):
            return e
        if not _wraps_on(self.analysis.expand(e), self.analysis.counter):
            return e
        found = self.exact(e)
        if found is None:
            return _Widen(self).visit(e) if tree_size(e) <= MAX_ANALYZED_NODES else e
        lin, needs = found
        term = self.counter_term(I64, lin.coef)
        base = lin.base()
        out = term if (not base.terms and base.const == 0) else n.Binary("add", linear_ir(base), term)
        out = self.record(e, out, needs)
        return e if out == e else out  # already in this form (a second run): the node itself

    def widen(self, e: n.Cast) -> n.Expr | None:
        """A 32-bit value affine in the counter converted to 64 bits (a tensor accessor's
        ``stride2 * (u64)((i32)(blockIdx.x * 1024u) + (i32)tx)``, the stride a run-time value):
        computed in i64 as ``(i64)uniform + (i64)tx * c`` and converted. The same value where the
        32-bit arithmetic does not wrap (the needs); GCC then vectorizes the loop (strided
        accesses), which it does not through ``(i32)tx`` of the unsigned counter."""
        found = self.exact(e)
        if found is None:
            return None
        lin, needs = found
        term = self.counter_term(I64, lin.coef)
        base = lin.base()
        out = term if (not base.terms and base.const == 0) else n.Binary("add", linear_ir(base), term)
        if e.to != I64:
            out = n.Cast(e.to, out)
        return self.record(e, out, needs)

    def visit_Load(self, e: n.Load) -> n.Expr:
        index = tuple(self.index(i) for i in e.index)
        e = rebuild(e, index=index)
        return self.generic_visit(e)

    def visit_Store(self, s: n.Store) -> n.Stmt:
        index = tuple(self.index(i) for i in s.index)
        s = rebuild(s, index=index)
        return self.generic_visit(s)

    def visit_AtomicRMW(self, s: n.AtomicRMW) -> n.Stmt:
        index = tuple(self.index(i) for i in s.index)
        s = rebuild(s, index=index)
        return self.generic_visit(s)

    def visit_For(self, s: n.For) -> n.Stmt:
        if s.kind == "threads":
            return s  # inner thread loops were handled with their own counter
        return self.generic_visit(s)


class _Widen(Mutator):
    """The 64-bit conversions of counter-affine 32-bit values inside one non-affine index
    (``_ExactIndices.widen``); loads inside it have indices of their own, visited as such."""

    def __init__(self, outer: _ExactIndices):
        self.outer = outer

    def visit_Load(self, e: n.Load) -> n.Expr:
        return e

    def visit_Cast(self, e: n.Cast) -> n.Expr:
        x = e.x
        if e.to.is_int and e.to.bits == 64 and x.type.is_int and x.type.bits == 32 \
                and _wraps_on(x, self.outer.analysis.counter):
            widened = self.outer.widen(e)
            if widened is not None:
                return widened
        return self.generic_visit(e)


def _wraps_on(e: n.Expr, counter: str) -> bool:
    """Whether ``e`` has a conversion or unsigned arithmetic above a use of ``counter``."""
    reading = nodes_reading(e, {counter})
    return any(id(x) in reading and (isinstance(x, n.Cast) or (isinstance(x, n.Binary) and x.type.is_int
                                                                and not x.type.is_signed)) for x in walk(e))


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
from polypy.ir.queries import nodes_reading, read_names, tree_size, written_names
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
    rewriter.bindings = {s.name: s.vtype for s in loop.body if isinstance(s, n.Decl) and s.name in analysis.lets}
    rewriter.in_indices = _index_names(loop.body, analysis.lets)
    rewriter.read = {v.name for v in walk_only(loop.body, n.Var)}
    rewriter.assigned = written_names(loop.body)
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
        # The loop body's top-level bindings the analysis looks through (name -> type), and those
        # of them rewritten in i64 so far, in order (name -> their value's linear form).
        self.bindings: dict[str, n.ScalarType] = {}
        self.widened: dict[str, Linear] = {}
        self.seen: list[str] = []  # bindings whose value is set where the visit is
        self.in_indices: set[str] = set()  # the names indices read (bindings looked through)
        self.read: set[str] = set()  # the names read anywhere in the loop
        self.assigned: set[str] = set()  # the names assigned in it (a binding reading one is not named back)

    def visit_Decl(self, s: n.Decl) -> n.Stmt:
        """A binding affine in the counter with wrapping arithmetic (``let x: i32 =
        (i32)(blockIdx.x * 16u + tx)``) computed once in i64 (``let x: i64 = (i64)(blockIdx.x *
        16u) + (i64)tx``) under the same needs as an index of that value; its 32-bit uses read
        ``(i32)x`` and indices are expressed from it (``binding_form``). A 64-bit binding affine
        in the counter (one widened by an earlier run) serves indices likewise."""
        out = self.binding(s)
        if s.name in self.bindings and s.init is not None:
            self.seen.append(s.name)
        return out

    def visit_Assign(self, s: n.Assign) -> n.Stmt:
        """``var x; ...; x = e``: the binding holds its value from here on (not from its
        declaration: an index between them that reads ``e``'s terms must not read ``x``)."""
        out = self.generic_visit(s)
        if s.name in self.bindings and s.name not in self.seen:
            self.seen.append(s.name)
        return out

    def binding(self, s: n.Decl) -> n.Stmt:
        if s.let and s.name not in self.read:  # dead (a later pass removes it): no needs for it
            return _ReadWidened(self.widened).visit(s) if self.widened else s
        if s.name not in self.bindings or s.init is None or not s.vtype.is_int \
                or tree_size(s.init) > MAX_ANALYZED_NODES:
            return self.generic_visit(s)
        if s.vtype == I64:
            found = self.exact(s.init)
            if found is not None and not found[1]:  # exact as it is: indices may read it
                self.widened[s.name] = found[0]
            return self.generic_visit(s)
        if s.vtype.bits != 32 or s.name not in self.in_indices \
                or not _wraps_on(self.analysis.expand(s.init), self.analysis.counter):
            return self.generic_visit(s)
        found = self.exact(s.init)
        if found is None:
            return self.generic_visit(s)
        lin, needs = found
        init = self.record(s.init, self.binding_form(lin), needs)
        self.widened[s.name] = lin
        return dataclasses.replace(s, vtype=I64, init=init)

    def visit_Var(self, e: n.Var) -> n.Expr:
        if e.name in self.widened and e.type != I64:  # a 32-bit use of a widened binding
            return n.Cast(e.type, n.Var(e.name, I64))
        return e

    def binding_form(self, lin: Linear) -> n.Expr:
        """``lin`` (i64) from the widened binding that leaves the fewest other terms (``x - 1l``
        for ``(i64)(blockIdx.x * 16u) - 1l + (i64)tx`` where ``x`` is ``(i64)(blockIdx.x * 16u) +
        (i64)tx``), the other bindings in scope named in what is left; the counter form where
        no binding removes a term."""
        best: tuple[int, str, Linear, int] | None = None
        for name, blin in self.widened.items():
            if blin.coef == 0 or lin.coef % blin.coef:
                continue
            k = lin.coef // blin.coef
            rest = lin.plus(blin.scale(k), -1)
            if len(rest.terms) >= len(lin.terms) or not {a for a, _ in rest.terms} <= {a for a, _ in lin.terms}:
                continue
            if best is None or len(rest.terms) <= best[0]:
                best = (len(rest.terms), name, rest, k)
        if best is None:
            term = self.counter_term(I64, lin.coef)
            base = lin.base()
            out = term if (not base.terms and base.const == 0) else n.Binary("add", linear_ir(base), term)
            return self.named(out)
        _, name, rest, k = best
        var: n.Expr = n.Var(name, I64)
        if k != 1:
            var = n.Binary("mul", var, n.Const(k, I64))
        plus = tuple((a, k) for a, k in rest.terms if k > 0)
        minus = tuple((a, -k) for a, k in rest.terms if k < 0)
        out = var
        if plus:  # a name and an offset: `c + (i64)nx`; a sum of terms and the name: `(i64)(y * nx) + x`
            terms = self.named(linear_ir(Linear(0, plus)))
            alone = len(plus) == 1 and plus[0][1] == 1 and isinstance(_uncast(plus[0][0]), n.Var)
            out = n.Binary("add", var, terms) if alone else n.Binary("add", terms, var)
        if minus:
            out = n.Binary("sub", out, self.named(linear_ir(Linear(0, minus))))
        if rest.const == 0:
            return out
        return n.Binary("add" if rest.const > 0 else "sub", out, n.Const(abs(rest.const), I64))

    def named(self, e: n.Expr) -> n.Expr:
        """``e`` with the values of the unwidened bindings declared so far read by name (the
        analysis substituted them: ``(i32)(blockIdx.y * 16u + ty) * nx`` is ``y * nx``)."""
        env = {}
        for name in self.seen:
            if name not in self.widened:
                value = self.analysis.lets.get(name)
                if value is not None and not read_names(value) & self.assigned:
                    env[self.analysis.expand(value)] = n.Var(name, self.bindings[name])
        return substitute(e, env) if env else e

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

    def binding_cast(self, e: n.Cast) -> n.Expr | None:
        """``(i64)c`` of a widened binding ``c``: ``c`` itself (its value fits the 32-bit type, so
        the conversion of its truncation is the 64-bit value), without the round trip through 32
        bits that hides the stride from GCC (``sy1 * c``)."""
        x = e.x
        if isinstance(x, n.Var) and x.name in self.widened and x.type != I64 and e.to.is_int and e.to.bits == 64:
            var = n.Var(x.name, I64)
            return var if e.to == I64 else n.Cast(e.to, var)
        return None

    def visit_Cast(self, e: n.Cast) -> n.Expr:
        direct = self.binding_cast(e)
        if direct is not None:
            return direct
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
        out = self.record(e, self.binding_form(lin), needs)
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
        if s.kind == "threads":  # inner thread loops were handled with their own counter
            return _ReadWidened(self.widened).visit(s) if self.widened else s  # but a widened binding is 64 bits
        return self.generic_visit(s)


class _ReadWidened(Mutator):
    """The 32-bit reads of widened bindings as ``(i32)x`` (``_ExactIndices.visit_Var``), alone."""

    def __init__(self, widened: dict[str, Linear]):
        self.widened = widened

    def visit_Var(self, e: n.Var) -> n.Expr:
        if e.name in self.widened and e.type != I64:
            return n.Cast(e.type, n.Var(e.name, I64))
        return e


class _Widen(Mutator):
    """The 64-bit conversions of counter-affine 32-bit values inside one non-affine index
    (``_ExactIndices.widen``); loads inside it have indices of their own, visited as such."""

    def __init__(self, outer: _ExactIndices):
        self.outer = outer

    def visit_Load(self, e: n.Load) -> n.Expr:
        return e

    def visit_Cast(self, e: n.Cast) -> n.Expr:
        direct = self.outer.binding_cast(e)
        if direct is not None:
            return direct
        x = e.x
        if e.to.is_int and e.to.bits == 64 and x.type.is_int and x.type.bits == 32 \
                and _wraps_on(x, self.outer.analysis.counter):
            widened = self.outer.widen(e)
            if widened is not None:
                return widened
        return self.generic_visit(e)


def _uncast(e: n.Expr) -> n.Expr:
    while isinstance(e, n.Cast):
        e = e.x
    return e


def _index_names(body: tuple[n.Stmt, ...], lets: dict[str, n.Expr]) -> set[str]:
    """The names the indices of ``body``'s memory accesses read, and those the ``lets`` among
    them read in turn: the bindings worth computing in i64 (one no index reads stays as it is)."""
    todo = [v.name for x in walk_only(body, n.Load, n.Store, n.AtomicRMW) for e in x.index
            for v in walk_only(e, n.Var)]
    out: set[str] = set()
    while todo:
        name = todo.pop()
        if name in out:
            continue
        out.add(name)
        if name in lets:
            todo += [v.name for v in walk_only(lets[name], n.Var)]
    return out


def _wraps_on(e: n.Expr, counter: str) -> bool:
    """Whether ``e`` has a conversion or unsigned arithmetic above a use of ``counter``."""
    reading = nodes_reading(e, {counter})
    return any(id(x) in reading and (isinstance(x, n.Cast) or (isinstance(x, n.Binary) and x.type.is_int
                                                                and not x.type.is_signed)) for x in walk(e))


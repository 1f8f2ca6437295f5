"""Trip counts and induction variables: what reversing a loop needs to know.

* ``trip_bound(loop)``: a static upper bound on the iterations of one execution of a loop, or
  None. ``for`` loops with constant bounds are exact. A ``while`` loop whose condition depends
  only on one induction variable (below) and loop-invariant values is bounded: with a constant
  start, by running the induction on constants; with a geometric update (``v <<= c``,
  ``v >>= c``, ``v *= 2^k``, ``v /= 2^k``), by the width of ``v``'s type, because after that
  many updates ``v`` stops changing, and a loop whose condition then still holds would never
  end.
* ``induction(loop, v)``: ``v`` is assigned exactly once in the loop, unconditionally, at the
  top level of its body, as ``v = v op c`` with ``c`` constant; then the value of ``v`` in
  iteration ``i`` has a closed form (``closed_form``) and the reverse sweep recomputes it
  instead of recording it.
"""
from __future__ import annotations

import dataclasses

from autodiff import build as b
from autodiff.program import Def, Program
from polypy.ir import nodes as n
from polypy.ir.queries import conjuncts
from polypy.ir.semantics import eval_binary
from polypy.ir.types import I32, I64, ScalarType
from polypy.ir.visitor import walk
from polypy.launch import launch_positive  # noqa: F401 (autodiff's callers and tests import it from here)
from polypy.poly.paths import StmtPath

MAX_SIMULATED_TRIPS = 1 << 16


@dataclasses.dataclass(frozen=True)
class Induction:
    var: str
    vtype: ScalarType
    op: str  # add, sub, shl, shr, div (by a power of two)
    amount: int  # the constant (for shl/shr/div: the shift per iteration)
    index: int  # position of the update in the loop body

    @property
    def geometric(self) -> bool:
        return self.op in ("shl", "shr", "div")


def _pow2(value: int) -> int | None:
    if value > 0 and value & (value - 1) == 0:
        return value.bit_length() - 1
    return None


def induction(prog: Program, loop: StmtPath, v: str) -> Induction | None:
    writers = [w for w in prog.writers.get(v, ()) if w[:len(loop)] == loop and len(w) > len(loop)]
    if len(writers) != 1 or len(writers[0]) != len(loop) + 1:
        return None
    stmt = prog.stmt(writers[0])
    if not isinstance(stmt, n.Assign) or not stmt.value.type.is_int:
        return None
    e = stmt.value
    if not (isinstance(e, n.Binary) and isinstance(e.a, n.Var) and e.a.name == v and isinstance(e.b, n.Const)):
        return None
    c = int(e.b.value)
    ty = e.type
    if e.op in ("add", "sub"):
        return Induction(v, ty, e.op, c, writers[0][-1][1])
    if e.op in ("shl", "shr") and c > 0:
        return Induction(v, ty, e.op, c, writers[0][-1][1])
    if e.op == "mul" and _pow2(c):
        return Induction(v, ty, "shl", _pow2(c), writers[0][-1][1])  # type: ignore[arg-type]
    if e.op == "div" and _pow2(c):
        op = "shr" if not ty.is_signed else "div"
        return Induction(v, ty, op, _pow2(c), writers[0][-1][1])  # type: ignore[arg-type]
    return None


def closed_form(ind: Induction, v0: n.Expr, i: n.Expr) -> n.Expr:
    """The value of ``v`` after ``i`` updates (``i``: a non-negative i32 expression)."""
    ty = ind.vtype
    if ind.op in ("add", "sub"):
        step = b.mul(b.cast(ty, i), b.const(ind.amount, ty))
        return n.Binary(ind.op, v0, step)
    shift = b.mul(i, b.const(ind.amount, I32))
    limit = ty.bits if ind.op != "div" else ty.bits - 1
    saturated = b.cmp("ge", shift, b.const(limit, I32))
    if ind.op == "shl":
        return b.select(saturated, b.zero(ty), n.Binary("shl", v0, shift))
    if ind.op == "shr":
        final = b.zero(ty) if not ty.is_signed else b.select(b.cmp("lt", v0, b.zero(ty)), b.const(-1, ty), b.zero(ty))
        return b.select(saturated, final, n.Binary("shr", v0, shift))
    # signed division by 2^(amount*i): (v / 2^a) / 2^a ... == v / 2^(a*i) (truncation composes)
    divisor = n.Binary("shl", b.const(1, ty), shift)
    return b.select(saturated, b.zero(ty), n.Binary("div", v0, divisor))


def _inductions_in(prog: Program, loop: StmtPath, e: n.Expr) -> tuple[Induction, ...] | None:
    """The induction variables ``e`` reads; None if it reads anything else that the loop writes."""
    written = prog.written_in(loop)
    out = []
    for x in walk(e):
        if isinstance(x, n.Load) and x.buffer in prog.written_buffers:
            return None
        if isinstance(x, n.Var) and x.name in written:
            ind = induction(prog, loop, x.name)
            if ind is None:
                return None
            if all(o.var != ind.var for o in out):
                out.append(ind)
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class CountedWhile:
    """A ``while (v < stop)`` loop with ``v += step`` (step > 0): its trip count is known at entry."""

    induction: Induction
    ctype: ScalarType  # the type the condition compares in (v may be cast to it)
    stop: n.Expr  # exclusive bound, loop-invariant


def counted_while(prog: Program, loop: StmtPath) -> CountedWhile | None:
    s = prog.stmt(loop)
    if not isinstance(s, n.While) or not isinstance(s.cond, n.Binary):
        return None
    cond = s.cond
    sides = {"lt": (cond.a, cond.b), "le": (cond.a, cond.b), "gt": (cond.b, cond.a), "ge": (cond.b, cond.a)}
    if cond.op not in sides:
        return None
    lhs, rhs = sides[cond.op]
    inclusive = cond.op in ("le", "ge")
    var = lhs.x if isinstance(lhs, n.Cast) and lhs.x.type.is_int else lhs
    if not isinstance(var, n.Var) or not lhs.type.is_int:
        return None
    if isinstance(lhs, n.Cast) and lhs.to.bits < var.vtype.bits:
        return None  # a narrowing cast can wrap
    ind = induction(prog, loop, var.name)
    if ind is None or ind.op != "add" or ind.amount <= 0:
        return None
    written = prog.written_in(loop)
    for x in walk(rhs):
        if isinstance(x, n.Var) and x.name in written:
            return None
        if isinstance(x, n.Load) and x.buffer in prog.written_buffers:
            return None
    stop = rhs if not inclusive else n.Binary("add", rhs, b.one(rhs.type))
    return CountedWhile(ind, lhs.type, stop)


def exact_trips(prog: Program, loop: StmtPath) -> int | None:
    """The trip count of a ``while`` loop whose induction starts from a constant, if computable."""
    s = prog.stmt(loop)
    if not isinstance(s, n.While):
        return None
    inds = _inductions_in(prog, loop, s.cond)
    if inds is None or len(inds) != 1 or _reads_written(prog, loop, s.cond, inds[0]):
        return None
    start = prog.reaching_def(inds[0].var, loop)
    if isinstance(start, Def) and isinstance(start.value, n.Const):
        return _simulate(s.cond, inds[0], start.value)
    return None


def trip_bound(prog: Program, loop: StmtPath) -> int | None:
    s = prog.stmt(loop)
    if isinstance(s, n.For):
        if all(isinstance(x, n.Const) for x in (s.start, s.stop, s.step)):
            start, stop, step = int(s.start.value), int(s.stop.value), int(s.step.value)
            if step <= 0:
                return 0 if start >= stop else None
            return max(0, -(-(stop - start) // step))
        return None
    assert isinstance(s, n.While)
    inds = _inductions_in(prog, loop, s.cond)
    if inds is None or len(inds) != 1:
        return None
    ind = inds[0]
    start = prog.reaching_def(ind.var, loop)
    if isinstance(start, Def) and isinstance(start.value, n.Const) and not _reads_written(prog, loop, s.cond, ind):
        return _simulate(s.cond, ind, start.value)
    if ind.geometric:
        return ind.vtype.bits // ind.amount + 1
    return None


def _reads_written(prog: Program, loop: StmtPath, cond: n.Expr, ind: Induction) -> bool:
    """Whether ``cond`` reads a variable other than the induction (constants only are allowed)."""
    for x in walk(cond):
        if isinstance(x, n.Var) and x.name != ind.var:
            return True  # loop-invariant but unknown: fine for geometric, not for simulation
    return False


def _simulate(cond: n.Expr, ind: Induction, start: n.Const) -> int | None:
    value = start.value
    for trips in range(MAX_SIMULATED_TRIPS):
        c = _eval(cond, ind.var, value)
        if c is None:
            return None
        if not c:
            return trips
        value = _step(ind, value)
        if value is None:
            return None
    return None


def _step(ind: Induction, value):
    if ind.op == "div":
        return eval_binary("div", value, 1 << ind.amount, ind.vtype)
    return eval_binary(ind.op, value, ind.amount, ind.vtype)


def _eval(e: n.Expr, var: str, value):
    from polypy.ir.semantics import eval_cast, eval_unary
    if isinstance(e, n.Const):
        return e.value
    if isinstance(e, n.Var):
        return value if e.name == var else None
    if isinstance(e, n.Cast):
        x = _eval(e.x, var, value)
        return None if x is None else eval_cast(x, e.x.type, e.to)
    if isinstance(e, n.Unary):
        x = _eval(e.x, var, value)
        return None if x is None else eval_unary(e.op, x, e.x.type)
    if isinstance(e, n.Binary):
        x = _eval(e.a, var, value)
        y = _eval(e.b, var, value) if x is not None else None
        return None if y is None else eval_binary(e.op, x, y, e.a.type)
    return None


def trip_count_expr(start: n.Expr, stop: n.Expr, step: n.Expr) -> n.Expr:
    """Iterations of ``for (v = start; v < stop; v += step)`` as an i64 expression (step > 0)."""
    s, e, d = (b.cast(I64, x) for x in (start, stop, step))
    count = n.Binary("div", n.Binary("sub", n.Binary("add", n.Binary("sub", e, s), d), b.const(1, I64)), d)
    return b.select(b.cmp("lt", start, stop), count, b.const(0, I64))


def loop_base(s: n.Stmt) -> str:
    """A readable base for names derived from a loop (its variable, or the first one its condition reads)."""
    if isinstance(s, n.For):
        return s.var
    if isinstance(s, n.While):
        for x in walk(s.cond):
            if isinstance(x, n.Var):
                return x.name
    return "loop"


def affine_value(start: n.Expr, i: n.Expr, step: n.Expr, ty: ScalarType) -> n.Expr:
    """``start + i * step`` in type ``ty`` (computed in 64 bits unless everything is small and constant)."""
    if isinstance(start, n.Const) and isinstance(step, n.Const) and ty.bits <= 32:
        return b.add(start, b.mul(b.cast(ty, i), step)) if not b.is_const(start, 0) else b.mul(b.cast(ty, i), step)
    wide = I64
    value = n.Binary("add", b.cast(wide, start), b.mul(b.cast(wide, i), b.cast(wide, step)))
    return b.cast(ty, value)


def launch_uniform(prog: Program, e: n.Expr, *, per_thread: bool = False) -> bool:
    """Whether ``e`` is a function of the kernel's scalar arguments and launch dimensions only
    (parameters the kernel never assigns, ``blockDim``/``gridDim``, constants, arithmetic):
    the driver can evaluate it at launch, before any thread runs. ``per_thread``: the thread and
    block indices are allowed too (the driver then takes the largest value over the launch)."""
    for x in walk(e):
        if isinstance(x, n.Var) and (x.name not in prog.params or x.name in prog.writers):
            return False
        if isinstance(x, n.Load) or (isinstance(x, (n.ThreadIdx, n.BlockIdx)) and not per_thread):
            return False
        if isinstance(x, n.Call) and x.fn not in ("min", "max", "abs"):
            return False
    return True


def runtime_trip_bound(prog: Program, loop: StmtPath) -> n.Expr | None:
    """An upper bound on the iterations of one execution of ``loop`` as an i32 expression the
    driver evaluates at launch (``launch_uniform``), for loops without a static bound:

    * ``for (v = start; v < stop; v += c)``, c > 0 constant or a positive product of launch
      dimensions (``launch_positive``: ``c += blockDim.x``), start and stop launch-uniform:
      exactly its trip count;
    * ``while (... && v < stop && ...)`` with ``v += c`` (c > 0) once per iteration, ``v``
      starting from a launch-uniform value and ``stop`` launch-uniform (a ``for`` with a
      ``break``, as ``normalize_for_ad`` leaves it): the trip count of the counted part.

    A ``for`` whose bounds also read ``threadIdx``/``blockIdx`` gets its per-thread trip count:
    the tape is sized by its largest value over the launch (``polypy.poly.trips``, isl).
    """
    s = prog.stmt(loop)
    if isinstance(s, n.For):
        if not (isinstance(s.step, n.Const) and s.step.value > 0) and not launch_positive(s.step, s.vtype):
            return None
        if not (launch_uniform(prog, s.start, per_thread=True) and launch_uniform(prog, s.stop, per_thread=True)):
            return None
        return _count_i32(s.start, s.stop, s.step)
    if not isinstance(s, n.While):
        return None
    for term in conjuncts(s.cond):
        if not (isinstance(term, n.Binary) and term.op in ("lt", "le") and isinstance(term.a, n.Var)):
            continue
        ind = induction(prog, loop, term.a.name)
        if ind is None or ind.op != "add" or ind.amount <= 0 or not launch_uniform(prog, term.b):
            continue
        start = prog.reaching_def(term.a.name, loop)
        if not (isinstance(start, Def) and launch_uniform(prog, start.value)):
            continue
        stop = term.b if term.op == "lt" else n.Binary("add", term.b, b.one(term.b.type))
        return _count_i32(start.value, stop, b.const(ind.amount, term.a.type))
    return None


def _count_i32(start: n.Expr, stop: n.Expr, step: n.Expr) -> n.Expr:
    if b.is_const(step, 1) and b.is_const(start, 0) and stop.type == I32:
        return b.select(b.cmp("lt", start, stop), stop, b.const(0, I32))  # max(stop, 0), readable
    return b.cast(I32, trip_count_expr(start, stop, step))




"""Sound value ranges of floating-point expressions, to find the float -> integer conversions
that cannot saturate (``FloatRanges.exact_conversion``).

The GPU's conversion (PTX ``cvt.rzi``) truncates toward zero, makes NaN 0 and clamps what lies
out of the destination's range; C's cast truncates the same way but leaves NaN and out-of-range
values undefined. Where a value is provably not NaN and inside ``(MIN - 1, MAX + 1)``, the two
are the same conversion and the C backend writes the plain cast instead of the prelude's
``polypy_cvt_*`` (no test, no select).

An ``Interval`` is ``[lo, hi]`` (infinities allowed) and whether the value may be NaN. What is
known (every other expression: anything, NaN included):

- constants; an integer converted to a float (the integer's range: its type's, narrower for
  constants, ``%`` and ``&`` by a constant, ``min``/``max``, selects, conversions and the
  arithmetic that provably does not wrap);
- ``+ - * /`` and negation by interval arithmetic, with the NaN an operation can make (``inf -
  inf``, ``0 * inf``, ``0 / 0``, ``inf / inf``, anything over a divisor that may be 0); bounds are
  computed in double and widened outward by far more than the result's rounding (a fused
  multiply-add, which the compiler may form, rounds once where the interval assumed twice);
- ``floor``, ``ceil``, ``trunc``, ``round``, ``rint`` and ``fabs`` (monotone on the bounds),
  ``sqrt`` (NaN below 0), ``fmin``/``fmax`` (a NaN operand ignored, as C's), ``saturate``
  ([0, 1], NaN -> 0), conversions between float types;
- a local variable: the union over everything that defines it (its declaration, 0 where it has
  no initializer, and every assignment), a flow-insensitive bound that needs no order; a
  variable also written by an atomic, a shuffle, a vote or a loop header, or a parameter, is
  unknown;
- ``c ? a : b`` and an ``if``: a comparison of an expression without loads with a constant
  (``x < 255.0f``, ``&&`` of such) bounds that expression where it is true (and says it is not
  NaN: every ordered comparison with NaN is false) and where it is false; inside an ``if`` only
  for variables not assigned in that branch (``assuming``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import struct
from collections.abc import Iterator

from polypy.ir import nodes as n
from polypy.ir.types import ScalarType
from polypy.ir.visitor import walk, walk_only

INF = math.inf
_MAX = {"f32": float.fromhex("0x1.fffffep127"), "f64": 1.7976931348623157e308}
_SLACK = {"f32": 2.0 ** -20, "f64": 2.0 ** -50}  # relative widening: far above one rounding (2^-24, 2^-53)
_TINY = {"f32": 2.0 ** -140, "f64": 5e-324}  # absolute widening: above a subnormal result's rounding
_FLIP = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt"}
_MIRROR = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


@dataclasses.dataclass(frozen=True)
class Interval:
    lo: float
    hi: float
    nan: bool

    def may_be(self, v: float) -> bool:
        return self.lo <= v <= self.hi

    @property
    def infinite(self) -> bool:
        return self.lo == -INF or self.hi == INF

    def join(self, o: Interval) -> Interval:
        return Interval(min(self.lo, o.lo), max(self.hi, o.hi), self.nan or o.nan)

    def meet(self, o: Interval) -> Interval:
        return Interval(max(self.lo, o.lo), min(self.hi, o.hi), self.nan and o.nan)


TOP = Interval(-INF, INF, True)


def int_type_range(ty: ScalarType) -> tuple[int, int]:
    if ty.is_bool:
        return 0, 1
    if ty.is_signed:
        return -(1 << (ty.bits - 1)), (1 << (ty.bits - 1)) - 1
    return 0, (1 << ty.bits) - 1


def _rounded(lo: float, hi: float, nan: bool, ty: ScalarType) -> Interval:
    """``[lo, hi]`` computed in double widened to hold the value as computed in ``ty``."""
    if math.isnan(lo) or math.isnan(hi):
        return TOP
    slack, tiny, big = _SLACK[ty.name], _TINY[ty.name], _MAX[ty.name]
    if lo != -INF:
        lo = lo - abs(lo) * slack - tiny
        lo = -INF if lo < -big else lo
    if hi != INF:
        hi = hi + abs(hi) * slack + tiny
        hi = INF if hi > big else hi
    return Interval(lo, hi, nan)


def _single(v: float) -> float:
    """``v`` rounded to f32 as C rounds a literal (to nearest, ties to even; infinite past the range)."""
    try:
        return struct.unpack("f", struct.pack("f", v))[0]
    except OverflowError:
        return math.copysign(INF, v)


def _mul(x: float, y: float) -> float:
    return 0.0 if x == 0 or y == 0 else x * y  # a bound: the NaN of 0 * inf is counted apart


def _div(x: float, y: float) -> float:
    if math.isinf(x) and math.isinf(y):
        return math.nan  # _rounded makes the whole interval unknown
    return x / y


class FloatRanges:
    """Intervals of the expressions of one kernel body (see the module docstring)."""

    def __init__(self, body: tuple[n.Stmt, ...], params: tuple[str, ...] = ()):
        self.defs: dict[str, list[n.Expr]] = {}
        self.unknown: set[str] = set(params)
        for x in walk_only(body, n.Stmt):
            if isinstance(x, n.Decl):
                init = x.init if x.init is not None else n.Const(0, x.vtype)
                self.defs.setdefault(x.name, []).append(init)
            elif isinstance(x, n.Assign):
                self.defs.setdefault(x.name, []).append(x.value)
            elif isinstance(x, n.For):
                self.unknown.add(x.var)
            elif isinstance(x, (n.AtomicRMW, n.Shuffle, n.Vote)) and x.dest is not None:
                self.unknown.add(x.dest)
        self.facts: list[dict[n.Expr, Interval]] = []
        self._busy: set[str] = set()
        self._memo: dict[str, Interval] = {}

    # ------------------------------------------------------------------ queries
    def exact_conversion(self, e: n.Cast) -> bool:
        """Whether the float -> integer conversion ``e`` is C's plain cast: its operand provably
        not NaN and truncating into the destination's range."""
        if not (e.x.type.is_float and e.to.is_int and not e.to.is_bool):
            return False
        r = self.of(e.x)
        tmin, tmax = int_type_range(e.to)
        return not r.nan and r.lo > tmin - 1 and r.hi < tmax + 1  # exact float/int comparisons

    @contextlib.contextmanager
    def assuming(self, cond: n.Expr, truth: bool, branch: tuple[n.Stmt, ...]) -> Iterator[None]:
        """Within ``branch``, entered when ``cond`` is ``truth``: the bounds ``cond`` gives the
        variables that ``branch`` does not assign."""
        written = {x.name for x in walk_only(branch, n.Assign, n.Decl)}
        written |= {x.dest for x in walk_only(branch, n.AtomicRMW, n.Shuffle, n.Vote) if x.dest is not None}
        facts = {k: v for k, v in self._facts(cond, truth).items() if isinstance(k, n.Var) and k.name not in written}
        self.facts.append(facts)
        try:
            yield
        finally:
            self.facts.pop()

    # ------------------------------------------------------------------ analysis
    def of(self, e: n.Expr) -> Interval:
        r = self._of(e)
        for facts in self.facts:
            f = facts.get(e)
            if f is not None:
                r = r.meet(f)
        return r

    def _of(self, e: n.Expr) -> Interval:
        ty = e.type
        if not ty.is_float:
            lo, hi = self.int_range(e)
            return Interval(float(lo), float(hi), False)
        if ty.name not in _MAX:  # half precision: not analysed
            return TOP
        if isinstance(e, n.Const):
            v = float(e.value)
            if math.isnan(v):
                return TOP
            v = v if ty.name == "f64" else _single(v)  # the IR may hold more digits than the f32 literal
            return Interval(v, v, False)
        if isinstance(e, n.Var):
            return self._var(e.name)
        if isinstance(e, n.Cast):
            r = self.of(e.x)
            return r if ty.name == "f64" else _rounded(r.lo, r.hi, r.nan, ty)
        if isinstance(e, n.Unary) and e.op == "neg":
            r = self.of(e.x)
            return Interval(-r.hi, -r.lo, r.nan)
        if isinstance(e, n.Binary) and e.op in ("add", "sub", "mul", "div"):
            return self._binary(e.op, self.of(e.a), self.of(e.b), ty)
        if isinstance(e, n.Select):
            a, b = self.of_under(e.cond, True, e.a), self.of_under(e.cond, False, e.b)
            return a.join(b)
        if isinstance(e, n.Call):
            return self._call(e)
        return TOP

    def of_under(self, cond: n.Expr, truth: bool, e: n.Expr) -> Interval:
        self.facts.append(self._facts(cond, truth))
        try:
            return self.of(e)
        finally:
            self.facts.pop()

    def _var(self, name: str) -> Interval:
        if name in self._memo:
            return self._memo[name]
        defs = self.defs.get(name)
        if name in self.unknown or not defs or name in self._busy:
            return TOP
        self._busy.add(name)
        try:
            saved, self.facts = self.facts, []  # a definition is evaluated where it stands
            try:
                r = self.of(defs[0])
                for d in defs[1:]:
                    r = r.join(self.of(d))
            finally:
                self.facts = saved
        finally:
            self._busy.discard(name)
        if not self._busy:  # not computed inside a cycle (where a variable read TOP)
            self._memo[name] = r
        return r

    def _binary(self, op: str, a: Interval, b: Interval, ty: ScalarType) -> Interval:
        nan = a.nan or b.nan
        if op == "sub":
            op, b = "add", Interval(-b.hi, -b.lo, b.nan)
        if op == "add":
            nan = nan or (a.lo == -INF and b.hi == INF) or (a.hi == INF and b.lo == -INF)
            lo = -INF if -INF in (a.lo, b.lo) else a.lo + b.lo
            hi = INF if INF in (a.hi, b.hi) else a.hi + b.hi
            return _rounded(lo, hi, nan, ty)
        if op == "mul":
            nan = nan or (a.may_be(0) and b.infinite) or (b.may_be(0) and a.infinite)
            corners = [_mul(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
            return _rounded(min(corners), max(corners), nan, ty)
        # div
        if b.may_be(0):
            return Interval(-INF, INF, nan or a.may_be(0) or a.infinite)
        nan = nan or (a.infinite and b.infinite)
        corners = [_div(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
        if any(math.isnan(c) for c in corners):
            return Interval(-INF, INF, nan)
        return _rounded(min(corners), max(corners), nan, ty)

    def _call(self, e: n.Call) -> Interval:
        ty, args = e.rtype, [self.of(a) for a in e.args]
        if not ty.is_float:
            return TOP
        if e.fn in ("floor", "ceil", "trunc", "round", "rint") and len(args) == 1:
            f = {"floor": math.floor, "ceil": math.ceil, "trunc": math.trunc, "round": round, "rint": round}[e.fn]
            r = args[0]
            lo = r.lo if math.isinf(r.lo) else float(f(r.lo)) - 1.0  # -1/+1: round's and rint's ties
            hi = r.hi if math.isinf(r.hi) else float(f(r.hi)) + 1.0
            return Interval(lo, hi, r.nan)
        if e.fn == "fabs" and len(args) == 1:
            r = args[0]
            lo = 0.0 if r.may_be(0) else min(abs(r.lo), abs(r.hi))
            return Interval(lo, max(abs(r.lo), abs(r.hi)), r.nan)
        if e.fn == "sqrt" and len(args) == 1:
            r = args[0]
            hi = INF if r.hi == INF else math.sqrt(max(r.hi, 0.0))
            return _rounded(math.sqrt(max(r.lo, 0.0)), hi, r.nan or r.lo < 0, ty)
        if e.fn == "saturate" and len(args) == 1:
            return Interval(0.0, 1.0, False)
        if e.fn in ("fmin", "fmax") and len(args) == 2:
            a, b = args
            f = min if e.fn == "fmin" else max
            r = Interval(f(a.lo, b.lo), f(a.hi, b.hi), a.nan and b.nan)
            # A NaN operand is ignored: the result is then the other operand.
            if a.nan:
                r = r.join(dataclasses.replace(b, nan=r.nan))
            if b.nan:
                r = r.join(dataclasses.replace(a, nan=r.nan))
            return r
        return TOP

    def _facts(self, cond: n.Expr, truth: bool) -> dict[n.Expr, Interval]:
        """What ``cond == truth`` says of the operands it compares with constants."""
        if isinstance(cond, n.Unary) and cond.op == "not":
            return self._facts(cond.x, not truth)
        if isinstance(cond, n.Binary) and ((cond.op == "land" and truth) or (cond.op == "lor" and not truth)):
            facts = dict(self._facts(cond.a, truth))
            for k, v in self._facts(cond.b, truth).items():
                facts[k] = facts[k].meet(v) if k in facts else v
            return facts
        if not (isinstance(cond, n.Binary) and cond.op in _FLIP and cond.a.type.is_float):
            return {}
        op, x, c = cond.op, cond.a, cond.b
        if isinstance(x, n.Const) and not isinstance(c, n.Const):
            op, x, c = _MIRROR[op], c, x
        if not isinstance(c, n.Const) or math.isnan(float(c.value)) or any(isinstance(y, n.Load) for y in walk(x)):
            return {}  # (memory may change between the comparison and the use: a Load is not bounded)
        v = float(c.value)
        if not truth:  # false: the opposite comparison holds, or x is NaN
            op = _FLIP[op]
        lo, hi = (-INF, v) if op in ("lt", "le") else (v, INF)
        return {x: Interval(lo, hi, not truth)}

    # ------------------------------------------------------------------ integers
    def int_range(self, e: n.Expr) -> tuple[int, int]:
        full = int_type_range(e.type)
        r = self._int(e)
        if r is None or r[0] < full[0] or r[1] > full[1]:
            return full  # wraps (unsigned) or overflows (undefined): the type's range
        return r

    def _int(self, e: n.Expr) -> tuple[int, int] | None:
        if isinstance(e, n.Const) and not isinstance(e.value, float):
            return int(e.value), int(e.value)
        if isinstance(e, n.Cast) and not e.x.type.is_float:
            return self.int_range(e.x)
        if isinstance(e, n.Select):
            a, b = self.int_range(e.a), self.int_range(e.b)
            return min(a[0], b[0]), max(a[1], b[1])
        if isinstance(e, n.Call) and e.fn in ("min", "max") and len(e.args) == 2:
            a, b = self.int_range(e.args[0]), self.int_range(e.args[1])
            f = min if e.fn == "min" else max
            return f(a[0], b[0]), f(a[1], b[1])
        if isinstance(e, n.Binary) and not e.type.is_bool:
            a, b = self.int_range(e.a), self.int_range(e.b)
            if e.op == "add":
                return a[0] + b[0], a[1] + b[1]
            if e.op == "sub":
                return a[0] - b[1], a[1] - b[0]
            if e.op == "mul":
                p = [x * y for x in a for y in b]
                return min(p), max(p)
            if e.op == "rem" and b[0] == b[1] and b[0] > 0:
                c = b[0]
                return (0, c - 1) if a[0] >= 0 else (-(c - 1), c - 1)
            if e.op == "band" and b[0] == b[1] and b[0] >= 0:
                return 0, b[0]
        return None

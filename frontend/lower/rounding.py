"""CUDA's directed-rounding intrinsics, written with the IR's round-to-nearest arithmetic.

``__fadd_rd(a, b)``, ``__dmul_ru``, ``__fsqrt_rz``, ``__float2int_ru``, ``__ll2float_rd``... return
the exact result rounded toward minus infinity (``rd``), plus infinity (``ru``), zero (``rz``) or
to nearest even (``rn``), with no flush of subnormals. The floating-point environment is never
changed (the kernels run in vectorized loops): each one computes the round-to-nearest result
``r``, finds on which side of ``r`` the exact result lies with an error-free computation, and
steps ``r`` to its neighbour (``next_up``/``next_down`` on the bits) when the direction asks:

    exact < r: rd and (rz when r > 0) take the float below r
    exact > r: ru and (rz when r < 0) take the float above r

The side of the exact result:
- add, sub (float and double): TwoSum gives ``a + b - r`` exactly; an overflow (``r`` infinite
  from finite operands) lies beyond every finite value, on the side of ``r``.
- float mul, div, sqrt, rcp, fma: in double, where ``r * b``, ``r * r`` and ``a * b`` of floats are
  exact and ``a - r * b``, ``a - r * r`` keep their sign (nonzero differences of such products are
  far above double's underflow); fma: TwoSum of ``a * b`` and ``c`` in double, then the
  difference with ``r`` (exact by Sterbenz's lemma whenever it matters).
- double mul, div, sqrt, rcp: the residual ``fma(a, b, -r)``, ``fma(-r, b, a)``, ``fma(-r, r, a)``,
  with the operands first scaled by powers of two where a tiny result or operand could make a
  nonzero residual underflow to zero (the scalings are exact and keep the residual's sign; each
  case is argued at its code).
- conversions: the integer-to-float ones compare the integer with ``r`` converted back (exact);
  double-to-float compares ``r`` widened with the double; float-to-integer rounds with
  rint/floor/ceil/trunc and saturates as CUDA's conversions do (NaN gives 0; CUDA documents an
  out-of-range result as undefined).

An exact zero sum is -0 when rounding down (IEEE 754: x + (-x) is -0 in roundTowardNegative)
unless both terms are +0. ``__fma_r{d,u,z}`` on doubles are refused (``REFUSED``).
"""
from __future__ import annotations

from typing import Callable

from polypy.errors import Loc
from polypy.ir import nodes as n
from polypy.ir.types import BOOL, F32, F64, I32, I64, U32, U64, ScalarType

from frontend.arith import convert

Let = Callable[[n.Expr, str], n.Expr]
MODES = ("rn", "rz", "ru", "rd")

# name stem -> (operation, operand type): __fadd_rd is ("add", F32) in mode "rd".
_ARITH = {"__fadd": ("add", F32), "__fsub": ("sub", F32), "__fmul": ("mul", F32), "__fdiv": ("div", F32),
          "__frcp": ("rcp", F32), "__fsqrt": ("sqrt", F32), "__fmaf": ("fma", F32),
          "__dadd": ("add", F64), "__dsub": ("sub", F64), "__dmul": ("mul", F64), "__ddiv": ("div", F64),
          "__drcp": ("rcp", F64), "__dsqrt": ("sqrt", F64), "__fma": ("fma", F64)}
# Conversions: stem -> (source type, result type).
_CONVERT = {"__float2int": (F32, I32), "__float2uint": (F32, U32), "__double2int": (F64, I32),
            "__double2uint": (F64, U32), "__float2ll": (F32, I64), "__float2ull": (F32, U64),
            "__double2ll": (F64, I64), "__double2ull": (F64, U64), "__int2float": (I32, F32), "__uint2float": (U32, F32),
            "__ll2float": (I64, F32), "__ull2float": (U64, F32), "__ll2double": (I64, F64),
            "__ull2double": (U64, F64), "__double2float": (F64, F32)}
_ARITY = {"add": 2, "sub": 2, "mul": 2, "div": 2, "rcp": 1, "sqrt": 1, "fma": 3}

ROUNDING_INTRINSICS: dict[str, tuple[str, str]] = {}
for _stem in list(_ARITH) + list(_CONVERT):
    for _mode in MODES:
        ROUNDING_INTRINSICS[f"{_stem}_{_mode}"] = (_stem, _mode)
# Round to nearest is the IR's own arithmetic (calls.py maps these names already).
for _name in ("__fadd_rn", "__fsub_rn", "__fmul_rn", "__fdiv_rn", "__dadd_rn", "__dsub_rn", "__dmul_rn",
              "__ddiv_rn"):
    del ROUNDING_INTRINSICS[_name]

# Exact meaning not implemented: the name -> why.
REFUSED: dict[str, str] = {}
for _mode in ("rz", "ru", "rd"):
    REFUSED[f"__fma_{_mode}"] = "directed rounding of a double fma"
    del ROUNDING_INTRINSICS[f"__fma_{_mode}"]


def rounding_intrinsic(name: str, args: list[n.Expr], let: Let, loc: Loc | None) -> n.Expr:
    """The IR of ``name(args...)`` (``name`` in ``ROUNDING_INTRINSICS``); ``let(e, base)`` binds
    ``e`` to a fresh variable and returns it (values used several times are computed once)."""
    stem, mode = ROUNDING_INTRINSICS[name]
    b = _Builder(let, loc)
    if stem in _CONVERT:
        src, dst = _CONVERT[stem]
        x = b.let(convert(args[0], src), "x")
        if dst.is_float:
            return b.to_float(x, dst, mode)
        return b.to_int(x, dst, mode)
    op, ty = _ARITH[stem]
    values = [b.let(convert(a, ty), "x") for a in args]
    if op in ("add", "sub"):
        return b.add(values[0], b.neg(values[1]) if op == "sub" else values[1], mode)
    if op == "rcp":
        return b.div(b.const(1.0, ty), values[0], mode)
    return getattr(b, op)(*values, mode)


class _Builder:
    def __init__(self, let: Let, loc: Loc | None) -> None:
        self._let = let
        self.loc = loc

    # ------------------------------------------------------------------ small IR helpers
    def let(self, e: n.Expr, base: str = "t") -> n.Expr:
        return e if isinstance(e, (n.Var, n.Const)) else self._let(e, base)

    def const(self, v: float | int | bool, ty: ScalarType) -> n.Expr:
        return n.Const(v, ty, loc=self.loc)

    def bin(self, op: str, a: n.Expr, b: n.Expr) -> n.Expr:
        return n.Binary(op, a, b, loc=self.loc)

    def neg(self, a: n.Expr) -> n.Expr:
        return n.Unary("neg", a, loc=self.loc)

    def call(self, fn: str, *args: n.Expr, rtype: ScalarType | None = None) -> n.Expr:
        return n.Call(fn, tuple(args), rtype or args[0].type, loc=self.loc)

    def select(self, c: n.Expr, a: n.Expr, b: n.Expr) -> n.Expr:
        return n.Select(c, a, b, loc=self.loc)

    def both(self, a: n.Expr, b: n.Expr) -> n.Expr:
        return self.bin("land", a, b)

    def cast(self, e: n.Expr, ty: ScalarType) -> n.Expr:
        return e if e.type == ty else n.Cast(ty, e, loc=self.loc)

    def sign_of(self, e: n.Expr) -> tuple[n.Expr, n.Expr]:
        """(e < 0, e > 0) of a residual whose sign is the exact result's side of ``r``."""
        zero = self.const(0.0, e.type)
        return self.bin("lt", e, zero), self.bin("gt", e, zero)

    def small(self, x: n.Expr, bound: float) -> n.Expr:
        return self.bin("lt", self.call("fabs", x), self.const(bound, x.type))

    def scaled(self, x: n.Expr, cond: n.Expr, power: int) -> n.Expr:
        """``x * 2^power`` where ``cond``, else ``x`` (exact: the callers scale only values that
        stay finite)."""
        return self.bin("mul", x, self.select(cond, self.const(2.0 ** power, x.type), self.const(1.0, x.type)))

    def overflow(self, r: n.Expr, *operands: n.Expr) -> n.Expr:
        """An infinite round-to-nearest result from finite operands."""
        cond = self.call("isinf", r, rtype=BOOL)
        for x in operands:
            cond = self.both(cond, self.call("isfinite", x, rtype=BOOL))
        return cond

    # ------------------------------------------------------------------ stepping
    def _step(self, x: n.Expr, up: bool) -> n.Expr:
        """The float next to ``x`` toward +inf (``up``) or -inf, for ``x`` not NaN (and not the
        infinity it would step away from): on the bits, +1 moves away from zero, -1 toward it."""
        ty = x.type
        bits_ty = U32 if ty == F32 else U64
        bits = self.call("bitcast", x, rtype=bits_ty)
        one = self.const(1, bits_ty)
        away = self.bin("add", bits, one)
        toward = self.bin("sub", bits, one)
        positive = self.bin("gt", x, self.const(0.0, ty))
        stepped = self.call("bitcast", self.select(positive, away, toward) if up else
                            self.select(positive, toward, away), rtype=ty)
        tiny = self.call("bitcast", one, rtype=ty)  # the smallest subnormal
        zero_step = tiny if up else self.neg(tiny)
        return self.select(self.bin("eq", x, self.const(0.0, ty)), zero_step, stepped)

    def directed(self, r: n.Expr, above: n.Expr, below: n.Expr, mode: str) -> n.Expr:
        """``r`` rounded to nearest, ``above``: the exact result is below ``r``; ``below``: above it."""
        if mode == "rn":
            return r
        zero = self.const(0.0, r.type)
        if mode == "rd":
            return self.select(above, self._step(r, up=False), r)
        if mode == "ru":
            return self.select(below, self._step(r, up=True), r)
        down = self.both(above, self.bin("gt", r, zero))
        up = self.both(below, self.bin("lt", r, zero))
        return self.select(down, self._step(r, up=False), self.select(up, self._step(r, up=True), r))

    # ------------------------------------------------------------------ operations
    def two_sum_error(self, a: n.Expr, b: n.Expr, s: n.Expr) -> n.Expr:
        """``a + b - s`` exactly, for ``s`` the rounded ``a + b`` (Knuth's TwoSum, no branch)."""
        bb = self.let(self.bin("sub", s, a), "bb")
        aa = self.let(self.bin("sub", s, bb), "aa")
        return self.bin("add", self.bin("sub", a, aa), self.bin("sub", b, bb))

    def add(self, a: n.Expr, b: n.Expr, mode: str) -> n.Expr:
        r = self.let(self.bin("add", a, b), "r")
        if mode == "rn":
            return r
        err = self.let(self.two_sum_error(a, b, r), "err")
        lt, gt = self.sign_of(err)
        ov = self.let(self.overflow(r, a, b), "ov")
        zero = self.const(0.0, r.type)
        above = self.select(ov, self.bin("gt", r, zero), lt)
        below = self.select(ov, self.bin("lt", r, zero), gt)
        out = self.directed(r, above, below, mode)
        if mode == "rd":  # an exact zero sum rounds down to -0 (a nonzero exact sum never rounds to 0)
            out = self.select(self.bin("eq", r, zero), self.zero_down(a, b), out)
        return out

    def zero_down(self, x: n.Expr, y: n.Expr) -> n.Expr:
        """An exact zero x + y rounded down: +0 only when both are +0 (IEEE 754 6.3). (Written
        with sign tests: compilers fold -(-x + -y) to x + y, which loses the zero's sign.)"""
        plus = [self.both(self.bin("eq", v, self.const(0.0, v.type)), self.un_not(self.call("signbit", v, rtype=BOOL)))
                for v in (x, y)]
        # The zero's bits (float constants +0 and -0 compare equal, and a select of equal
        # constants would be folded).
        bits_ty = U32 if x.type == F32 else U64
        sign = self.const(1 << (bits_ty.bits - 1), bits_ty)
        return self.call("bitcast", self.select(self.both(*plus), self.const(0, bits_ty), sign), rtype=x.type)

    def mul(self, a: n.Expr, b: n.Expr, mode: str) -> n.Expr:
        r = self.let(self.bin("mul", a, b), "r")
        if mode == "rn":
            return r
        if r.type == F32:  # a * b is exact in double; r widened compares with it
            p = self.let(self.bin("mul", self.cast(a, F64), self.cast(b, F64)), "p")
            wide = self.let(self.cast(r, F64), "rw")
            return self.directed(r, self.bin("gt", wide, p), self.bin("lt", wide, p), mode)
        # Doubles: the residual a*b - r is a multiple of (lowest bit of a) * (lowest bit of b),
        # which is above 2^-1074 when |r| >= 2^-900. Below, one operand is under 2^-400 (else
        # |a b| >= 2^-800): each such operand and r are scaled by 2^600 (twice for r when both are:
        # r < 2^-900 stays finite), which leaves every lowest bit above 2^-474.
        tiny = self.let(self.small(r, 2.0 ** -900), "tiny")
        sa = self.let(self.both(tiny, self.small(a, 2.0 ** -400)), "sa")
        sb = self.let(self.both(tiny, self.small(b, 2.0 ** -400)), "sb")
        big_a = self.scaled(a, sa, 600)
        big_b = self.scaled(b, sb, 600)
        big_r = self.scaled(self.scaled(r, sa, 600), sb, 600)
        res = self.let(self.call("fma", big_a, big_b, self.neg(big_r)), "res")
        lt, gt = self.sign_of(res)
        return self.directed(r, lt, gt, mode)

    def div(self, a: n.Expr, b: n.Expr, mode: str) -> n.Expr:
        r = self.let(self.bin("div", a, b), "r")
        if mode == "rn":
            return r
        zero = self.const(0.0, a.type)
        if r.type == F32:  # a - r b in double: r b exact, the difference keeps its sign
            rb = self.bin("mul", self.cast(r, F64), self.cast(b, F64))
            res = self.let(self.bin("sub", self.cast(a, F64), rb), "res")
        else:
            # a - r b is a multiple of min(lowest bit of a, lowest bit of r * lowest bit of b).
            # sb: |b| < 2^-400 and |r| < 2^400 -> a and b times 2^600 (|a| < 1 then);
            # sr: |r| < 2^-400 and |a| < 2^400 -> a and r times 2^600. Then each of r, b has its
            # lowest bit above 2^-474 or is large (|r| >= 2^400, or |b| >= 2^800 when sr fails
            # for a large a), so a nonzero residual is above 2^-1074 and fma keeps its sign.
            sb = self.let(self.both(self.small(b, 2.0 ** -400), self.small(r, 2.0 ** 400)), "sb")
            sr = self.let(self.both(self.small(r, 2.0 ** -400), self.small(a, 2.0 ** 400)), "sr")
            big_a = self.scaled(self.scaled(a, sb, 600), sr, 600)
            res = self.let(self.call("fma", self.neg(self.scaled(r, sr, 600)), self.scaled(b, sb, 600), big_a), "res")
        # The exact quotient minus r is the residual divided by b; an overflow from finite
        # operands and a nonzero divisor lies beyond r.
        lt, gt = self.sign_of(res)
        positive = self.let(self.bin("gt", b, zero), "bpos")
        ov = self.let(self.both(self.overflow(r, a, b), self.bin("ne", b, zero)), "ov")
        above = self.select(ov, self.bin("gt", r, zero), self.select(positive, lt, gt))
        below = self.select(ov, self.bin("lt", r, zero), self.select(positive, gt, lt))
        return self.directed(r, above, below, mode)

    def sqrt(self, a: n.Expr, mode: str) -> n.Expr:
        r = self.let(self.call("sqrt", a), "r")
        if mode == "rn":
            return r
        if r.type == F32:  # a - r r in double: r r exact
            wide = self.let(self.cast(r, F64), "rw")
            res = self.let(self.bin("sub", self.cast(a, F64), self.bin("mul", wide, wide)), "res")
        else:
            # r >= 2^-450 has its lowest bit above 2^-502, so r r above 2^-1004; below, a times
            # 2^600 and r times 2^300 (the square root of the scaling) are exact and large enough.
            tiny = self.let(self.small(a, 2.0 ** -900), "tiny")
            big_r = self.let(self.scaled(r, tiny, 300), "rs")
            res = self.let(self.call("fma", self.neg(big_r), big_r, self.scaled(a, tiny, 600)), "res")
        lt, gt = self.sign_of(res)
        return self.directed(r, lt, gt, mode)

    def fma(self, a: n.Expr, b: n.Expr, c: n.Expr, mode: str) -> n.Expr:
        r = self.let(self.call("fma", a, b, c), "r")
        if mode == "rn":
            return r
        # Float only. p = a b exactly in double; TwoSum: p + c = s + t exactly. The exact result
        # minus r is (s - r) + t: s - r is exact whenever s and r are within a factor of two
        # (Sterbenz), and when they are not, |s - r| dwarfs t; either way d + t rounded keeps
        # the sign. Infinite or NaN operands make t NaN: no step.
        p = self.let(self.bin("mul", self.cast(a, F64), self.cast(b, F64)), "p")
        wc = self.let(self.cast(c, F64), "cw")
        s = self.let(self.bin("add", p, wc), "s")
        t = self.let(self.two_sum_error(p, wc, s), "t")
        w = self.let(self.bin("add", self.bin("sub", s, self.cast(r, F64)), t), "w")
        lt, gt = self.sign_of(w)
        out = self.directed(r, lt, gt, mode)
        if mode == "rd":  # an exact zero rounds down to -0 unless a b and c are +0 (p: a b's signed zero)
            exact_zero = self.both(self.bin("eq", r, self.const(0.0, F32)), self.bin("eq", w, self.const(0.0, F64)))
            out = self.select(exact_zero, self.cast(self.zero_down(p, wc), F32), out)
        return out

    # ------------------------------------------------------------------ conversions
    def to_float(self, x: n.Expr, ty: ScalarType, mode: str) -> n.Expr:
        r = self.let(self.cast(x, ty), "r")
        if mode == "rn":
            return r
        if x.type.is_float:  # double to float: r widened is exact
            wide = self.let(self.cast(r, F64), "rw")
            return self.directed(r, self.bin("gt", wide, x), self.bin("lt", wide, x), mode)
        if x.type.bits == 32:  # r is at most 2^32: back in 64 bits exactly
            back = self.let(self.cast(r, I64), "back")
            wide_x = self.let(self.cast(x, I64), "xw")
            return self.directed(r, self.bin("gt", back, wide_x), self.bin("lt", back, wide_x), mode)
        # 64-bit integers: r may be 2^63 (2^64 unsigned), one past the type; then it is above x.
        limit = self.const(2.0 ** (63 if x.type.is_signed else 64), ty)
        past = self.let(self.bin("ge", r, limit), "past")
        back = self.let(self.cast(self.select(past, self.const(0.0, ty), r), x.type), "back")
        above = self.bin("lor", past, self.bin("gt", back, x))
        below = self.both(self.un_not(past), self.bin("lt", back, x))
        return self.directed(r, above, below, mode)

    def un_not(self, e: n.Expr) -> n.Expr:
        return n.Unary("not", e, loc=self.loc)

    def to_int(self, x: n.Expr, ty: ScalarType, mode: str) -> n.Expr:
        """Rounded as asked, then saturated to the type's range; NaN gives 0. (CUDA documents a
        result outside the type's range as undefined; saturation is what its conversions do.)"""
        fn = {"rn": "rint", "rz": "trunc", "ru": "ceil", "rd": "floor"}[mode]
        r = self.let(self.call(fn, x), "rounded")
        bits = ty.bits - 1 if ty.is_signed else ty.bits
        lo = -(2.0 ** bits) if ty.is_signed else 0.0
        hi = 2.0 ** bits  # the first value past the range (exact in float and double)
        lo_int = -(2 ** bits) if ty.is_signed else 0
        hi_int = 2 ** bits - 1
        inside = self.cast(self.select(self.both(self.bin("ge", r, self.const(lo, x.type)),
                                                 self.bin("lt", r, self.const(hi, x.type))), r,
                                       self.const(0.0, x.type)), ty)
        return self.select(self.call("isnan", x, rtype=BOOL), self.const(0, ty),
                           self.select(self.bin("ge", r, self.const(hi, x.type)), self.const(hi_int, ty),
                                       self.select(self.bin("lt", r, self.const(lo, x.type)), self.const(lo_int, ty),
                                                   inside)))

"""``frexp``, ``ldexp`` and ``modf`` in device code, written on the bits of the IR's floats.

- ``frexp(x, &e)``: ``x = m * 2^e`` with ``0.5 <= |m| < 1`` (a subnormal ``x`` first scaled by an
  exact power of two); ``m = x``, ``e = 0`` for zeros, infinities and NaN (C's and CUDA's result).
- ``ldexp(x, n)``: ``x * 2^n`` rounded once: with ``x = m * 2^e`` (frexp) and ``t = e + n``, a
  normal result is ``(2 m) * 2^(t - 1)``, one exact multiplication (or the overflow to infinity);
  a subnormal one is ``m * 2^t`` with ``2^t`` itself subnormal, one correctly rounded
  multiplication; below ``2^(min subnormal - 1)`` it is a zero of ``x``'s sign.
- ``modf(x, &i)``: ``i = trunc(x)``, the fraction ``x - trunc(x)`` (exact) with ``x``'s sign
  (``modf(-3.0)`` is ``-0.0``); an infinity gives a zero fraction.
"""
from __future__ import annotations

from typing import Callable

from polypy.errors import Loc
from polypy.ir import nodes as n
from polypy.ir.types import BOOL, I32, I64, U32, U64, ScalarType

Let = Callable[[n.Expr, str], n.Expr]

# (bits type, mantissa bits, exponent mask, bias, smallest normal exponent, smallest subnormal exponent)
_LAYOUT = {32: (U32, 23, 0xFF, 127, -126, -149), 64: (U64, 52, 0x7FF, 1023, -1022, -1074)}


class FloatParts:
    def __init__(self, let: Let, loc: Loc | None) -> None:
        self.let = let
        self.loc = loc

    def c(self, v, ty: ScalarType) -> n.Expr:
        return n.Const(v, ty, loc=self.loc)

    def b(self, op: str, x: n.Expr, y: n.Expr) -> n.Expr:
        return n.Binary(op, x, y, loc=self.loc)

    def call(self, fn: str, *args: n.Expr, rtype: ScalarType | None = None) -> n.Expr:
        return n.Call(fn, tuple(args), rtype or args[0].type, loc=self.loc)

    def sel(self, cond: n.Expr, x: n.Expr, y: n.Expr) -> n.Expr:
        return n.Select(cond, x, y, loc=self.loc)

    def special(self, x: n.Expr) -> n.Expr:
        """Zero, infinite or NaN."""
        return self.b("lor", self.b("eq", x, self.c(0.0, x.type)),
                      n.Unary("not", self.call("isfinite", x, rtype=BOOL), loc=self.loc))

    def frexp(self, x: n.Expr) -> tuple[n.Expr, n.Expr]:
        """(m, e): the mantissa (x's type) and the exponent (i32)."""
        ty = x.type
        bits_ty, mbits, emask, bias, _, _ = _LAYOUT[ty.bits]
        shift = mbits + 1  # 2^24 (2^53) makes every subnormal normal
        field = self.b("band", self.b("shr", self.call("bitcast", x, rtype=bits_ty), self.c(mbits, bits_ty)),
                       self.c(emask, bits_ty))
        sub = self.let(self.b("eq", field, self.c(0, bits_ty)), "sub")
        xs = self.let(self.b("mul", x, self.sel(sub, self.c(2.0 ** shift, ty), self.c(1.0, ty))), "xs")
        bits = self.let(self.call("bitcast", xs, rtype=bits_ty), "xb")
        ef = n.Cast(I32, self.b("band", self.b("shr", bits, self.c(mbits, bits_ty)), self.c(emask, bits_ty)), loc=self.loc)
        e = self.b("sub", self.b("sub", ef, self.c(bias - 1, I32)), self.sel(sub, self.c(shift, I32), self.c(0, I32)))
        keep = self.c(((1 << (ty.bits - 1)) | ((1 << mbits) - 1)), bits_ty)  # sign and fraction
        m = self.call("bitcast", self.b("bor", self.b("band", bits, keep), self.c((bias - 1) << mbits, bits_ty)), rtype=ty)
        special = self.let(self.special(x), "special")
        return self.sel(special, x, m), self.sel(special, self.c(0, I32), e)

    def power(self, k: n.Expr, ty: ScalarType) -> n.Expr:
        """2^k for k (i64) from the smallest subnormal exponent to one past the largest (infinity)."""
        bits_ty, mbits, _, bias, min_normal, min_sub = _LAYOUT[ty.bits]
        normal = self.b("shl", n.Cast(bits_ty, self.b("add", k, self.c(bias, I64)), loc=self.loc), self.c(mbits, bits_ty))
        subnormal = self.b("shl", self.c(1, bits_ty), n.Cast(bits_ty, self.b("sub", k, self.c(min_sub, I64)), loc=self.loc))
        return self.call("bitcast", self.sel(self.b("ge", k, self.c(min_normal, I64)), normal, subnormal), rtype=ty)

    def ldexp(self, x: n.Expr, k: n.Expr) -> n.Expr:
        ty = x.type
        _, _, _, bias, min_normal, min_sub = _LAYOUT[ty.bits]
        m, e = self.frexp(x)
        m = self.let(m, "m")
        # t = e + n in 64 bits, clamped where the result no longer changes (n is any int).
        t = self.b("add", n.Cast(I64, e, loc=self.loc), n.Cast(I64, k, loc=self.loc))
        lo, hi = min_sub - 2, bias + 2
        t = self.let(self.call("max", self.call("min", t, self.c(hi, I64)), self.c(lo, I64)), "t")
        two_m = self.b("mul", m, self.c(2.0, ty))
        normal = self.b("mul", two_m, self.power(self.call("min", self.b("sub", t, self.c(1, I64)), self.c(bias + 1, I64)), ty))
        tiny = self.b("mul", m, self.power(self.call("max", t, self.c(min_sub, I64)), ty))
        zero = self.call("copysign", self.c(0.0, ty), x)
        value = self.sel(self.b("ge", t, self.c(min_normal + 1, I64)), normal,
                         self.sel(self.b("ge", t, self.c(min_sub, I64)), tiny, zero))
        return self.sel(self.special(x), x, value)

    def modf(self, x: n.Expr) -> tuple[n.Expr, n.Expr]:
        """(fraction, integral part)."""
        whole = self.let(self.call("trunc", x), "whole")
        frac = self.sel(self.call("isinf", x, rtype=BOOL), self.c(0.0, x.type), self.b("sub", x, whole))
        return self.call("copysign", frac, x), whole

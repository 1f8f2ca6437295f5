"""IR integer expressions and conditions as isl piecewise quasi-affine functions and sets.

Semantics (what "exact" means here):

* Signed integer arithmetic is mathematical: overflow of a signed operation is undefined in
  C and CUDA, so a well-defined kernel never does it and the model need not wrap.
* Unsigned arithmetic and integer casts wrap exactly: when isl cannot prove that the value
  of an unsigned ``+ - * << ~`` or of a conversion lies in the range of its type under the
  conditions known at that point, the result is reduced modulo ``2**bits`` (and shifted into
  the signed range for signed targets), which is quasi-affine and exact. So the common
  ``(i32)(blockIdx.x * blockDim.x + threadIdx.x)`` is the plain sum as soon as the model's
  launch assumptions bound it, and ``threadIdx.x - 1u`` outside ``if (threadIdx.x > 0)`` is
  exactly ``(threadIdx.x - 1) mod 2**32``.
  An operand of a comparison that wraps so is handed to the scope (``Scope.wrapped_operand``):
  the model's builder puts a block value in place of a block-uniform one (the comparison is
  then one constraint instead of pieces with floor divisions by ``2**32``, see there).
* ``/`` and ``%`` by a constant truncate toward zero (``tdiv``); ``>>`` by a constant is a floor
  division (arithmetic shift); ``&`` with a constant ``2**k - 1`` is a floor modulo.

What is not quasi-affine: products of two non-constant values, division by a non-constant,
loads, floating-point values, variables that are assigned after their declaration. Such a
value is *unknown* (``None``) unless it is uniform:

* uniform over the whole grid (built only from ``blockDim``, ``gridDim``, constants and scalar
  parameters that are never assigned, e.g. ``n * m``): an isl parameter named after the
  expression, which is exact (one unknown constant for the whole launch);
* uniform over a block (also uses ``blockIdx``, e.g. ``blockIdx.x * blockDim.x``): a *block
  value*, a set dimension of the instance space that two instances of the same block share.
  The model asks its owner for the dimension (``BlockValues.lookup``).

Conditions are over-approximated on both sides: ``Cond.true`` holds every instance where the
condition may be true, ``Cond.false`` where it may be false; ``exact`` says both are exact.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Protocol

import islpy as isl

from polypy.ir import nodes as n
from polypy.ir.depth import MAX_ANALYZED_NODES
from polypy.ir.queries import tree_size
from polypy.ir.printer import format_expr
from polypy.ir.types import ScalarType


def int_range(ty: ScalarType) -> tuple[int, int]:
    if ty.is_bool:
        return 0, 1
    if ty.is_signed:
        return -(1 << (ty.bits - 1)), (1 << (ty.bits - 1)) - 1
    return 0, (1 << ty.bits) - 1


@dataclasses.dataclass(frozen=True)
class Cond:
    """Where a condition may be true and where it may be false (both over-approximations)."""

    true: isl.Set
    false: isl.Set
    exact: bool


class Scope(Protocol):
    """What the converter needs from the model being built."""

    space: isl.Space

    def variable(self, name: str) -> isl.PwAff | None: ...

    def gpu_index(self, e: n.GpuIndex) -> isl.PwAff: ...

    def uniform_value(self, e: n.Expr) -> isl.PwAff | None: ...

    def wrapped_operand(self, e: n.Expr, wrapped: bool) -> isl.PwAff | None: ...


def _val(value: int) -> isl.Val:
    """``value`` as an isl value: ``isl.Val(int)`` takes a C long only, so u64 values (``2**64 - 1``,
    the modulus ``2**64``) go through their decimal form."""
    value = int(value)
    return isl.Val(value) if -(1 << 63) <= value < (1 << 63) else isl.Val(str(value))


class Converter:
    """Converts IR expressions in the context of a ``Scope`` (see module docstring)."""

    def __init__(self, scope: Scope):
        self.scope = scope
        self.universe = isl.Set.universe(scope.space)
        self.zero = isl.PwAff.zero_on_domain(isl.LocalSpace.from_space(scope.space))
        self.wraps = 0  # how many values ``wrap`` has reduced so far (those that did not fit)

    # ------------------------------------------------------------------ helpers
    def const(self, value: int) -> isl.PwAff:
        return self.zero + _val(value)

    @staticmethod
    def constant_value(pa: isl.PwAff) -> int | None:
        """The value of ``pa`` if it is one integer constant everywhere."""
        if not pa.is_cst():
            return None
        pieces = pa.get_pieces()
        if len(pieces) != 1:
            return None
        aff = pieces[0][1]
        val = aff.get_constant_val()
        if not val.is_int():
            return None
        return int(val.to_python())

    def fits(self, pa: isl.PwAff, ty: ScalarType, ctx: isl.Set) -> bool:
        lo, hi = int_range(ty)
        outside = pa.lt_set(self.const(lo)) | pa.gt_set(self.const(hi))
        return (outside & ctx).is_empty()

    def wrap(self, pa: isl.PwAff, ty: ScalarType, ctx: isl.Set) -> isl.PwAff:
        """``pa`` reduced to the range of ``ty`` (two's complement), exactly."""
        if self.fits(pa, ty, ctx):
            return pa
        self.wraps += 1
        modulus = 1 << ty.bits
        m = pa.mod_val(_val(modulus))
        if not ty.is_signed:
            return m
        half = self.const(1 << (ty.bits - 1))
        high = (m - _val(modulus)).intersect_domain(m.ge_set(half))
        low = m.intersect_domain(m.lt_set(half))
        return high.union_add(low)

    # ------------------------------------------------------------------ integers
    def int_expr(self, e: n.Expr, ctx: isl.Set) -> isl.PwAff | None:
        """``e`` (integer or bool typed) as a quasi-affine function, or None if unknown."""
        result = self._int_expr(e, ctx) if tree_size(e) <= MAX_ANALYZED_NODES else None
        if result is None and (e.type.is_int or e.type.is_bool):
            return self.scope.uniform_value(e)
        return result

    def _int_expr(self, e: n.Expr, ctx: isl.Set) -> isl.PwAff | None:
        ty = e.type
        if not (ty.is_int or ty.is_bool):
            return None
        if isinstance(e, n.Const):
            return self.const(int(e.value))
        if isinstance(e, n.Var):
            return self.scope.variable(e.name)
        if isinstance(e, n.GpuIndex):
            return self.scope.gpu_index(e)
        if isinstance(e, n.Cast):
            return self._cast(e, ctx)
        if isinstance(e, n.Unary):
            x = self.int_expr(e.x, ctx)
            if x is None or e.op == "not":
                return None
            value = -x if e.op == "neg" else -x - _val(1)
            return value if ty.is_signed else self.wrap(value, ty, ctx)
        if isinstance(e, n.Binary):
            if ty.is_bool:
                return self._bool_as_int(e, ctx)
            return self._binary(e, ctx)
        if isinstance(e, n.Select):
            c = self.cond(e.cond, ctx)
            if not c.exact:
                return None
            a, b = self.int_expr(e.a, ctx), self.int_expr(e.b, ctx)
            if a is None or b is None:
                return None
            return a.intersect_domain(c.true).union_add(b.intersect_domain(c.false))
        if isinstance(e, n.Call) and e.fn in ("min", "max", "abs"):
            args = [self.int_expr(a, ctx) for a in e.args]
            if any(a is None for a in args):
                return None
            if e.fn == "min":
                return args[0].min(args[1])
            if e.fn == "max":
                return args[0].max(args[1])
            return args[0].max(-args[0])
        return None

    def _bool_as_int(self, e: n.Expr, ctx: isl.Set) -> isl.PwAff | None:
        c = self.cond(e, ctx)
        if not c.exact:
            return None
        one, zero = self.const(1), self.const(0)
        return one.intersect_domain(c.true).union_add(zero.intersect_domain(c.false))

    def _cast(self, e: n.Cast, ctx: isl.Set) -> isl.PwAff | None:
        src = e.x.type
        if src.is_float or not (e.to.is_int or e.to.is_bool):
            return None
        if e.to.is_bool:
            return self._bool_as_int(e, ctx)
        x = self.int_expr(e.x, ctx)
        if x is None:
            return None
        return self.wrap(x, e.to, ctx)

    def _binary(self, e: n.Binary, ctx: isl.Set) -> isl.PwAff | None:
        ty = e.type
        a = self.int_expr(e.a, ctx)
        b = self.int_expr(e.b, ctx)
        if a is None or b is None:
            return None
        ca, cb = self.constant_value(a), self.constant_value(b)
        op = e.op
        result: isl.PwAff | None
        if op == "add":
            result = a + b
        elif op == "sub":
            result = a - b
        elif op == "mul":
            if cb is not None:
                result = a * _val(cb)
            elif ca is not None:
                result = b * _val(ca)
            else:
                return None
        elif op in ("div", "rem"):
            if cb is None or cb == 0:
                return None
            divisor = self.const(cb)
            return a.tdiv_q(divisor) if op == "div" else a.tdiv_r(divisor)
        elif op == "shl":
            if cb is None or not 0 <= cb < ty.bits:
                return None
            result = a * _val(1 << cb)
        elif op == "shr":
            if cb is None or not 0 <= cb < ty.bits:
                return None
            return a.div(self.const(1 << cb)).floor()
        elif op == "band":
            mask, other = (cb, a) if cb is not None else (ca, b)
            if mask is None or mask < 0 or (mask + 1) & mask:
                return None
            return other.mod_val(_val(mask + 1))
        else:
            return None
        return result if ty.is_signed else self.wrap(result, ty, ctx)

    # ------------------------------------------------------------------ conditions
    def cond(self, e: n.Expr, ctx: isl.Set) -> Cond:
        unknown = Cond(self.universe, self.universe, False)
        if tree_size(e) > MAX_ANALYZED_NODES:
            return unknown
        if isinstance(e, n.Const):
            return Cond(self.universe, self.universe.subtract(self.universe), True) if e.value else \
                Cond(self.universe.subtract(self.universe), self.universe, True)
        if isinstance(e, n.Unary) and e.op == "not":
            c = self.cond(e.x, ctx)
            return Cond(c.false, c.true, c.exact)
        if isinstance(e, n.Binary) and e.op in ("land", "lor"):
            a = self.cond(e.a, ctx)
            b = self.cond(e.b, ctx & a.true if e.op == "land" else ctx & a.false)
            if e.op == "land":
                return Cond(a.true & b.true, a.false | b.false, a.exact and b.exact)
            return Cond(a.true | b.true, a.false & b.false, a.exact and b.exact)
        if isinstance(e, n.Binary) and e.op in _COMPARE and not e.a.type.is_float:
            a = self._compared(e.a, ctx)
            b = self._compared(e.b, ctx)
            if a is None or b is None:
                return unknown
            true = _COMPARE[e.op](a, b)
            false = _COMPARE[_NEGATED[e.op]](a, b)
            return Cond(true, false, True)
        if e.type.is_int or (e.type.is_bool and isinstance(e, (n.Var, n.Cast))):
            x = self.int_expr(e if not isinstance(e, n.Cast) else e.x, ctx)
            if x is None or (isinstance(e, n.Cast) and e.x.type.is_float):
                return unknown
            zero = self.const(0)
            return Cond(x.ne_set(zero), x.eq_set(zero), True)
        return unknown


    def _compared(self, e: n.Expr, ctx: isl.Set) -> isl.PwAff | None:
        """An operand of a comparison: its value, or what the scope puts in place of a value that
        wraps (``Scope.wrapped_operand``: the builder's block value for a block-uniform one)."""
        before = self.wraps
        value = self.int_expr(e, ctx)
        if value is None:
            return None
        other = self.scope.wrapped_operand(e, self.wraps > before)
        return value if other is None else other


_COMPARE: dict[str, Callable[[isl.PwAff, isl.PwAff], isl.Set]] = {
    "lt": lambda a, b: a.lt_set(b),
    "le": lambda a, b: a.le_set(b),
    "gt": lambda a, b: a.gt_set(b),
    "ge": lambda a, b: a.ge_set(b),
    "eq": lambda a, b: a.eq_set(b),
    "ne": lambda a, b: a.ne_set(b),
}
_NEGATED = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}


def expression_key(e: n.Expr, text: str | None = None) -> str:
    """The name of the isl parameter or block value standing for a uniform expression (``text``:
    ``format_expr(e)`` when the caller has it)."""
    return "(" + (format_expr(e) if text is None else text) + ")"

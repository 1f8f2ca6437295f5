"""C semantics of the IR's operators and conversions on lane vectors.

Values carry exactly the NumPy dtype of their IR type, so NumPy does the typed arithmetic:
integers wrap to their width, f32 arithmetic rounds to f32, comparisons give bool. What NumPy
does differently from C is handled here: ``/`` and ``%`` truncate toward zero (``%`` takes the
dividend's sign), shift counts are converted to the shifted type, float->int conversion
truncates.

Integer division by zero, undefined in C, raises ``LaneFault`` naming the first faulty lane.
Shifts by a negative count or by at least the type's width, also undefined in C, give what the
GPU's shift instructions give (the count clamped to the width: 0, or the sign fill for a signed
``>>``), as the LLVM and C backends do.
Float->int conversion of NaN or an out-of-range value is also undefined in C; here it saturates
(NaN -> 0), which is what CUDA's ``cvt.rzi`` instructions do.

Callers run inside ``np.errstate(all="ignore")``: float overflow and 0/0 are IEEE, not errors.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from polypy.emulator.faults import LaneFault, first_true
from polypy.ir.types import ScalarType

Value = np.ndarray | np.generic


def scalar(value: np.ndarray | np.generic) -> Value:
    """NumPy returns 0-d arrays from some functions on scalars; values are scalars or vectors."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value[()]
    return value


def convert(value: Value, dtype: np.dtype) -> Value:
    """``value`` as ``dtype`` with C's integer wrap (a plain dtype change)."""
    if value.dtype == dtype:
        return value
    if isinstance(value, np.ndarray):
        return value.astype(dtype)
    return np.asarray(value).astype(dtype)[()]


# --------------------------------------------------------------------------- unary

def unary(op: str, x: Value, ty: ScalarType) -> Value:
    if op == "neg":
        return np.negative(x)
    if op == "not":
        return np.logical_not(x)
    if op == "bnot":
        return np.invert(x)
    raise ValueError(f"unknown unary operator {op!r}")


# --------------------------------------------------------------------------- binary

_PLAIN: dict[str, Callable[[Value, Value], Value]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply,
    "band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor,
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "eq": np.equal, "ne": np.not_equal,
    # The evaluator short-circuits these; the table entry serves callers with both operands.
    "land": np.logical_and, "lor": np.logical_or,
}


def binary(op: str, a: Value, b: Value, ty: ScalarType) -> Value:
    """``a op b``; ``ty`` is the type of ``a`` (and of ``b`` except for shifts)."""
    plain = _PLAIN.get(op)
    if plain is not None:
        return plain(a, b)
    if op in ("div", "rem"):
        return _div_rem(op, a, b, ty)
    if op in ("shl", "shr"):
        return _shift(op, a, b, ty)
    raise ValueError(f"unknown binary operator {op!r}")


def _div_rem(op: str, a: Value, b: Value, ty: ScalarType) -> Value:
    if ty.is_float:
        return np.true_divide(a, b) if op == "div" else np.fmod(a, b)
    zero = b == 0
    if np.any(zero):
        raise LaneFault(f"integer {'division' if op == 'div' else 'remainder'} by zero", first_true(zero))
    if not ty.is_signed:
        return np.floor_divide(a, b) if op == "div" else np.remainder(a, b)
    # np.fmod on integers is C's %: the sign of the dividend. a - r is then an exact multiple
    # of b, so floor division of it is the truncating quotient (INT_MIN / -1 wraps, as on GPUs).
    r = np.fmod(a, b)
    if op == "rem":
        return r
    return np.floor_divide(np.subtract(a, r), b)


def _shift(op: str, a: Value, b: Value, ty: ScalarType) -> Value:
    """C's ``<<``/``>>`` where C defines them; a count that is negative or at least the width, which
    C leaves undefined, is clamped to the width as the GPU's ``shl``/``shr`` instructions do (PTX:
    the count is unsigned, amounts above the width are clamped): ``<<`` and an unsigned ``>>`` give
    0, a signed ``>>`` the sign fill. Programs rely on it (Rodinia's huffman shifts by ``32 - bit``
    with ``bit`` 0)."""
    count = np.asarray(b)
    if count.dtype.kind == "u":
        over = count >= ty.bits
    else:
        over = (count < 0) | (count >= ty.bits)
    safe = scalar(np.where(over, 0, count).astype(ty.dtype))
    # NumPy's >> is arithmetic on signed and logical on unsigned types: C's behaviour.
    shifted = np.left_shift(a, safe) if op == "shl" else np.right_shift(a, safe)
    if not np.any(over):
        return shifted
    fill = np.right_shift(a, ty.dtype.type(ty.bits - 1)) if op == "shr" and ty.is_signed else np.zeros_like(a)
    return scalar(np.where(over, fill, shifted).astype(ty.dtype))


# --------------------------------------------------------------------------- conversions

def cast(x: Value, src: ScalarType, dst: ScalarType) -> Value:
    """C conversion of ``x`` from ``src`` to ``dst``."""
    if src == dst:
        return x
    if dst.is_bool:
        return np.not_equal(x, 0)  # NaN != 0: true, as in C
    if dst.is_float or not src.is_float:
        return convert(x, dst.dtype)  # int/bool/float -> float rounds; int -> int wraps
    return _float_to_int(x, dst)


def _float_to_int(x: Value, dst: ScalarType) -> Value:
    t = np.trunc(np.asarray(x, dtype=np.float64))
    if dst.is_signed:
        lo, hi = -(1 << (dst.bits - 1)), (1 << (dst.bits - 1)) - 1
    else:
        lo, hi = 0, (1 << dst.bits) - 1
    over = t >= float(hi + 1)  # hi + 1 is a power of two: exact in float64
    under = t < float(lo)
    nan = np.isnan(t)
    safe = np.where(over | under | nan, 0.0, t)
    out = safe.astype(dst.dtype)
    out = np.where(over, dst.dtype.type(hi), out)
    out = np.where(under, dst.dtype.type(lo), out)
    return scalar(out.astype(dst.dtype))

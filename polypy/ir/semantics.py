"""C semantics of IR operations on Python scalars (used by constant folding).

Results are exactly what C (and CUDA) computes for the IR types: integers wrap to their width,
division truncates toward zero, ``%`` takes the sign of the dividend, f32 arithmetic rounds to
f32. Operations whose C result is undefined (division by zero, over-wide shifts, float→int
overflow) return ``None``: the folder leaves them alone rather than guessing.
"""
from __future__ import annotations

import math

import numpy as np

from polypy.ir.types import ScalarType, normalize_value, wrap_int

Value = int | float | bool


def _float(value: float, ty: ScalarType) -> float:
    return float(np.float32(value)) if ty.name == "f32" else float(value)


def eval_binary(op: str, a: Value, b: Value, ty: ScalarType) -> Value | None:
    """``a op b`` where both operands have type ``ty`` (shifts: ``ty`` is the lhs type)."""
    if op in ("lt", "le", "gt", "ge", "eq", "ne"):
        return {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b, "eq": a == b, "ne": a != b}[op]
    if op == "land":
        return bool(a) and bool(b)
    if op == "lor":
        return bool(a) or bool(b)
    if ty.is_float:
        with np.errstate(all="ignore"):
            x, y = (np.float32(a), np.float32(b)) if ty.name == "f32" else (np.float64(a), np.float64(b))
            if op == "add":
                return _float(x + y, ty)
            if op == "sub":
                return _float(x - y, ty)
            if op == "mul":
                return _float(x * y, ty)
            if op == "div":
                return _float(x / y, ty) if y != 0 else None
            if op == "rem":
                return _float(math.fmod(float(x), float(y)), ty) if y != 0 else None
        return None
    if ty.is_bool:
        if op == "band":
            return bool(a) and bool(b)
        if op == "bor":
            return bool(a) or bool(b)
        if op == "bxor":
            return bool(a) != bool(b)
        return None
    a, b = int(a), int(b)
    if op == "add":
        r = a + b
    elif op == "sub":
        r = a - b
    elif op == "mul":
        r = a * b
    elif op in ("div", "rem"):
        if b == 0:
            return None
        q = abs(a) // abs(b)
        if (a < 0) != (b < 0):
            q = -q
        r = q if op == "div" else a - q * b
    elif op in ("shl", "shr"):
        if b < 0 or b >= ty.bits:
            return None
        if op == "shl":
            r = a << b
        else:
            r = a >> b  # a is already in range for its type: arithmetic for signed, logical for unsigned
    elif op == "band":
        r = a & b
    elif op == "bor":
        r = a | b
    elif op == "bxor":
        r = a ^ b
    else:
        return None
    return wrap_int(r, ty)


def eval_unary(op: str, a: Value, ty: ScalarType) -> Value | None:
    if op == "not":
        return not a
    if op == "neg":
        if ty.is_float:
            return _float(-float(a), ty)
        return wrap_int(-int(a), ty)
    if op == "bnot":
        return wrap_int(~int(a), ty)
    return None


def eval_cast(value: Value, src: ScalarType, dst: ScalarType) -> Value | None:
    """C conversion of ``value`` (of type ``src``) to ``dst``."""
    if dst.is_bool:
        return bool(value)
    if dst.is_float:
        return normalize_value(float(value), dst)
    # to integer
    if src.is_float:
        f = float(value)
        if math.isnan(f) or math.isinf(f):
            return None
        t = int(f)  # truncation toward zero
        lo, hi = _int_range(dst)
        if not lo <= t <= hi:
            return None  # undefined in C
        return t
    return wrap_int(int(value), dst)


def _int_range(ty: ScalarType) -> tuple[int, int]:
    if ty.is_signed:
        return -(1 << (ty.bits - 1)), (1 << (ty.bits - 1)) - 1
    return 0, (1 << ty.bits) - 1


def eval_bitcast(value: Value, src: ScalarType, dst: ScalarType) -> Value | None:
    """``bitcast<dst>`` of ``value`` (of type ``src``): its bits read as ``dst``. ``None`` where a NaN
    is involved: a float literal does not keep a NaN's sign and payload through the backends
    (each prints its own ``nan``), so a NaN's bits are left for run time."""
    if src.is_float:
        if math.isnan(float(value)):
            return None
        bits = int(np.array(value, dtype=src.dtype).view(np.uint32 if src.bits == 32 else np.uint64))
        return wrap_int(bits, dst)
    unsigned = np.uint32 if src.bits == 32 else np.uint64
    out = float(np.array(wrap_int(int(value), ScalarType("u32" if src.bits == 32 else "u64")),
                         dtype=unsigned).view(dst.dtype))
    return None if math.isnan(out) else out

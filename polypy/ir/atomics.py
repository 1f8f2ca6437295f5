"""What an atomic read-modify-write stores, as IR: CUDA's definition of each ``AtomicRMW`` op
(``polypy.ir.nodes.AtomicRMW``), used where an atomic becomes a plain read-modify-write (block-
private memory in the CPU form) or a compare-and-swap loop (an atomic through a typed view)."""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.ir.types import I32, I64, ScalarType


def atomic_result(op: str, old: n.Expr, value: n.Expr, compare: n.Expr | None, ty: ScalarType) -> n.Expr:
    """The value an atomic ``op`` stores, given the old value (see ``polypy.ir.nodes.AtomicRMW``)."""
    b = n.Binary
    if op == "add":
        return b("add", old, value)
    if op == "sub":
        return b("sub", old, value)
    if op in ("and", "or", "xor"):
        return b({"and": "band", "or": "bor", "xor": "bxor"}[op], old, value)
    if op == "exch":
        return value
    if op == "cas":  # compares bits, as CUDA's atomicCAS does (a float CAS comes from a typed view)
        assert compare is not None
        if ty.is_float:
            bits = I32 if ty.bits == 32 else I64
            return n.Select(b("eq", n.Call("bitcast", (old,), bits), n.Call("bitcast", (compare,), bits)), value, old)
        return n.Select(b("eq", old, compare), value, old)
    if op in ("min", "max"):
        if ty.is_float:
            # NumPy's minimum/maximum (the emulator's definition): NaN if either operand is NaN.
            pick = b("lt" if op == "min" else "gt", old, value)
            nan_old = b("ne", old, old)
            return n.Select(b("lor", nan_old, pick), old, value)
        return n.Select(b("lt" if op == "min" else "gt", old, value), old, value)
    zero, one = n.Const(0, ty), n.Const(1, ty)
    if op == "inc":  # atomicInc: old >= limit ? 0 : old + 1
        return n.Select(b("ge", old, value), zero, b("add", old, one))
    if op == "dec":  # atomicDec: (old == 0 || old > limit) ? limit : old - 1
        return n.Select(b("lor", b("eq", old, zero), b("gt", old, value)), value, b("sub", old, one))
    raise ValueError(f"unknown atomic operation {op!r}")

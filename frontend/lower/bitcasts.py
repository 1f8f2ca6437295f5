"""Bit reinterpretation of scalars: CUDA's ``__float_as_int`` family, and the parts of a double.

Each is the IR's one ``bitcast`` (``polypy.ir.mathfns``): the argument's bits read as the other
type, never a value conversion. ``__double2hiint`` / ``__double2loint`` / ``__hiloint2double``
are a 64-bit bit cast and integer shifts. Pointer punning of a local variable (``*(int*)&f``)
becomes the same ``bitcast``: ``bit_view`` below, read and written as a ``BitsLV``.
"""
from __future__ import annotations

import clang.cindex as ci

from polypy.errors import Loc
from polypy.ir import nodes as n
from polypy.ir.mathfns import BIT_CAST_INTRINSICS, is_bit_cast
from polypy.ir.types import F64, I32, I64, ScalarType, U8, U16, U32, U64

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.values import AggLV, BitsLV, VarAddress, VarLV

BIT_CAST_CALLS = frozenset(BIT_CAST_INTRINSICS) | {"__double2hiint", "__double2loint", "__hiloint2double"}


def bit_cast_call(name: str, args: list[n.Expr], loc: Loc | None) -> n.Expr:
    """The IR of CUDA's ``name(args...)`` (``name`` in ``BIT_CAST_CALLS``), arguments converted to
    the intrinsic's parameter types as C would."""
    if name in BIT_CAST_INTRINSICS:
        source, target = BIT_CAST_INTRINSICS[name]
        return n.Call("bitcast", (convert(args[0], source),), target, loc=loc)
    if name == "__hiloint2double":
        hi = convert(convert(args[0], I32), U64)
        lo = convert(convert(args[1], I32), U32)
        bits = n.Binary("bor", n.Binary("shl", hi, n.Const(32, U64), loc=loc), convert(lo, U64), loc=loc)
        return n.Call("bitcast", (convert(bits, I64),), F64, loc=loc)  # as __longlong_as_double takes it
    bits = n.Call("bitcast", (convert(args[0], F64),), I64, loc=loc)
    if name == "__double2hiint":
        bits = n.Binary("shr", bits, n.Const(32, I64), loc=loc)  # arithmetic: the sign stays
    return convert(bits, I32)


def views_as_itself(address: VarAddress, target: ci.Type) -> bool:
    """Whether ``(T*)&x`` reads ``x`` as what it is: ``T`` is void, ``x``'s own scalar type (or the
    integer of its width and the other signedness), or a record with ``x``'s members. Anything
    else reinterprets bytes."""
    c = tm.canonical(target)
    if c.kind == ci.TypeKind.VOID:
        return True
    lv = address.target
    if isinstance(lv, VarLV):
        st = tm.scalar_type(target)
        # `(unsigned*)&int_var`: integers of one width differ only in how their bits read, which is
        # what the conversion between them does (two's complement).
        return st == lv.type or (st is not None and st.is_int and lv.type.is_int and st.itemsize == lv.type.itemsize)
    if isinstance(lv, AggLV) and tm.is_record(target):
        mine = {path: getattr(field, "type", None) for path, field in lv.fields.items()}
        return mine == {leaf.path: leaf.scalar for leaf in tm.leaves(target)}
    return False


def can_view(stored: ScalarType, seen: ScalarType) -> bool:
    """Whether memory of ``stored`` elements can be read and written exactly as ``seen`` elements
    one for one (a typed view of the same size): the same type, integers of one width (two's
    complement: the conversion between them keeps the bits), or a ``bitcast`` pair."""
    if stored == seen:
        return True
    if stored.is_int and seen.is_int:
        return stored.bits == seen.bits
    return is_bit_cast(stored, seen)


def reinterpret(value: n.Expr, target: ScalarType, loc: Loc | None = None) -> n.Expr:
    """``value``'s bits read as ``target`` (``can_view(value.type, target)``)."""
    if value.type == target:
        return value
    if value.type.is_int and target.is_int:
        assert value.type.bits == target.bits
        return convert(value, target)
    assert is_bit_cast(value.type, target), (value.type, target)
    return n.Call("bitcast", (value,), target, loc=loc)


def read_bits(lv: BitsLV, loc: Loc | None) -> n.Expr:
    """The value of ``lv``: its variable's bits as ``lv.type``, or (narrower) the slice of them
    shifted down and truncated."""
    var: n.Expr = n.Var(lv.var.name, lv.var.type, loc=loc)
    if lv.type.bits == lv.var.type.bits:
        return reinterpret(var, lv.type, loc)
    if lv.shift:
        var = n.Binary("shr", var, n.Const(lv.shift, lv.var.type), loc=loc)
    return reinterpret(convert(var, _unsigned(lv.type.bits)), lv.type, loc)


def with_bits(lv: BitsLV, value: n.Expr, loc: Loc | None) -> n.Expr:
    """The new value of ``lv``'s variable once ``value`` (of ``lv.type``) is stored in ``lv``: its
    bits, or (narrower) the variable with the slice's bits replaced."""
    vt = lv.var.type
    if lv.type.bits == vt.bits:
        return reinterpret(value, vt, loc)
    part: n.Expr = convert(reinterpret(value, _unsigned(lv.type.bits), loc), vt)
    keep = ~(((1 << lv.type.bits) - 1) << lv.shift) & ((1 << vt.bits) - 1)
    if lv.shift:
        part = n.Binary("shl", part, n.Const(lv.shift, vt), loc=loc)
    kept = n.Binary("band", n.Var(lv.var.name, vt, loc=loc), n.Const(keep, vt), loc=loc)
    return n.Binary("bor", kept, part, loc=loc)


def _unsigned(bits: int) -> ScalarType:
    return {8: U8, 16: U16, 32: U32, 64: U64}[bits]


def bit_view(address: VarAddress, target: ci.Type) -> BitsLV | None:
    """``(T*)&x`` of a local scalar ``x`` and a scalar ``T`` of its size and the other kind (float
    and int, double and long long, either signedness): exact bit casts of ``x`` (CUDA's
    ``__float_as_int``). Byte views (other sizes), records and unions stay refused."""
    lv = address.target
    st = tm.scalar_type(target)
    if not isinstance(lv, VarLV) or st is None or not is_bit_cast(lv.type, st):
        return None
    return BitsLV(lv, st)

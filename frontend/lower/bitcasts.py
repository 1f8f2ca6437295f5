"""Bit reinterpretation of scalars: CUDA's ``__float_as_int`` family, and the parts of a double.

Each is the IR's one ``bitcast`` (``polypy.ir.mathfns``): the argument's bits read as the other
type, never a value conversion. ``__double2hiint`` / ``__double2loint`` / ``__hiloint2double``
are a 64-bit bit cast and integer shifts. Pointer punning of a local variable (``*(int*)&f``)
becomes the same ``bitcast``: ``bit_view`` below, read and written as a ``BitsLV``. Pointer
punning between a local record of scalars and a type of its size (``*(uint32_t*)&rgba`` of a
``uchar4``, ``*(uchar4*)&word``) is ``record_view``: each byte of the one is the same byte of the
other (little-endian, as on the GPU), composed with shifts and ors and split with shifts.
"""
from __future__ import annotations

import clang.cindex as ci

from polypy.errors import Loc, UserError
from polypy.ir import nodes as n
from polypy.ir.mathfns import BIT_CAST_INTRINSICS, is_bit_cast
from polypy.ir.types import F64, I32, I64, ScalarType, U8, U16, U32, U64

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.values import AggLV, BitsLV, LValue, PackLV, UnionLV, VarAddress, VarLV

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
    bits = reinterpret(var, _unsigned(lv.var.type.bits), loc)  # a float's or a signed integer's bits
    if lv.shift:
        bits = n.Binary("shr", bits, n.Const(lv.shift, bits.type), loc=loc)
    return reinterpret(convert(bits, _unsigned(lv.type.bits)), lv.type, loc)


def with_bits(lv: BitsLV, value: n.Expr, loc: Loc | None) -> n.Expr:
    """The new value of ``lv``'s variable once ``value`` (of ``lv.type``) is stored in ``lv``: its
    bits, or (narrower) the variable with the slice's bits replaced."""
    vt = lv.var.type
    if lv.type.bits == vt.bits:
        return reinterpret(value, vt, loc)
    ut = _unsigned(vt.bits)
    part: n.Expr = convert(reinterpret(value, _unsigned(lv.type.bits), loc), ut)
    keep = ~(((1 << lv.type.bits) - 1) << lv.shift) & ((1 << vt.bits) - 1)
    if lv.shift:
        part = n.Binary("shl", part, n.Const(lv.shift, ut), loc=loc)
    old = reinterpret(n.Var(lv.var.name, vt, loc=loc), ut, loc)
    kept = n.Binary("band", old, n.Const(keep, ut), loc=loc)
    return reinterpret(n.Binary("bor", kept, part, loc=loc), vt, loc)


def compose_bits(parts: list[tuple[n.Expr, int]], target: ScalarType, loc: Loc | None) -> n.Expr:
    """A ``PackLV``'s value: each part's bits (``(value, shift)``) zero-extended, shifted to its
    place and or-ed, read as ``target``."""
    wide = _unsigned(target.bits)
    total: n.Expr | None = None
    for value, shift in parts:
        piece = convert(reinterpret(value, _unsigned(value.type.bits), loc), wide)
        if shift:
            piece = n.Binary("shl", piece, n.Const(shift, wide), loc=loc)
        total = piece if total is None else n.Binary("bor", total, piece, loc=loc)
    assert total is not None
    return reinterpret(total, target, loc)


def split_bits(value: n.Expr, parts: list[tuple[ScalarType, int]], loc: Loc | None) -> list[n.Expr]:
    """What each part of a ``PackLV`` (``(type, shift)``) takes when ``value`` is stored in it:
    its slice of ``value``'s bits, read as its type."""
    bits = reinterpret(value, _unsigned(value.type.bits), loc)
    out = []
    for t, shift in parts:
        piece = bits if not shift else n.Binary("shr", bits, n.Const(shift, bits.type), loc=loc)
        out.append(reinterpret(convert(piece, _unsigned(t.bits)), t, loc))
    return out


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


def record_view(address: VarAddress, source: ci.Type | None, target: ci.Type) -> LValue | None:
    """``(T*)&x`` of a local record of scalars ``x`` (``source``, its type: ``uchar4``, ``short2``,
    ``struct { unsigned short lo; unsigned char a, b; }``) or a local scalar ``x``, and ``T`` a
    scalar or a record of scalars of ``x``'s size: each byte of ``T`` is the same byte of ``x``
    (little-endian, as on the GPU). Both must tile their bytes without a gap (a padding byte
    holds no value); no bool (its bytes other than 0 and 1 have no value) and no half (not a
    ``bitcast`` type). A scalar part of ``T`` that covers whole members of ``x`` is a ``PackLV``
    of them; one inside a member is a slice of that member's bits (``BitsLV``). None otherwise."""
    lv = address.target
    if isinstance(lv, VarLV):
        parts = [(lv, lv.type, 0)]
        size = lv.type.itemsize
    elif isinstance(lv, AggLV) and not isinstance(lv, UnionLV) and source is not None and tm.is_record(source):
        tiles = _tiles(source)
        if tiles is None or {path for path, _, _ in tiles} != set(lv.fields):
            return None
        parts = [(lv.fields[path], st, offset) for path, st, offset in tiles]
        if any(getattr(place, "type", None) != st for place, st, _ in parts):
            return None
        size = tm.canonical(source).get_size()
    else:
        return None
    if tm.canonical(target).get_size() != size or not all(_bits_type(st) for _, st, _ in parts):
        return None
    st = tm.scalar_type(target)
    if st is not None:
        return _place(parts, 0, st, lv) if _bits_type(st) else None
    if not tm.is_record(target) or tm.is_union(target):
        return None
    tiles = _tiles(target)
    if tiles is None:
        return None
    fields: dict[str, LValue] = {}
    for path, t, offset in tiles:
        place = _place(parts, offset, t, lv)
        if place is None:
            return None
        fields[path] = place
    return AggLV(fields, target.spelling)


def record_pointee(c: ci.Cursor) -> ci.Type | None:
    """The record type that the pointer expression ``c`` points to, seen through its casts
    (``(void*)&rgba`` is still the address of a ``uchar4``), or None."""
    while True:
        t = c.type
        if tm.is_pointer(t) and tm.is_record(tm.pointee(t)):
            return tm.pointee(t)
        inner = [ch for ch in c.get_children() if ch.kind.is_expression()]
        if c.kind not in _CAST_KINDS or not inner:
            return None
        c = inner[-1]


_CAST_KINDS = frozenset({ci.CursorKind.CSTYLE_CAST_EXPR, ci.CursorKind.CXX_STATIC_CAST_EXPR,
                         ci.CursorKind.CXX_REINTERPRET_CAST_EXPR, ci.CursorKind.UNEXPOSED_EXPR,
                         ci.CursorKind.PAREN_EXPR, ci.CursorKind.CXX_FUNCTIONAL_CAST_EXPR,
                         ci.CursorKind.CXX_CONST_CAST_EXPR})


def _bits_type(t: ScalarType) -> bool:
    """Whether ``t``'s bits can be read as an unsigned integer of its size (``reinterpret``)."""
    return not t.is_bool and t.bits in (8, 16, 32, 64) and can_view(t, _unsigned(t.bits))


def _tiles(t: ci.Type) -> list[tuple[str, ScalarType, int]] | None:
    """The scalar leaves of record ``t`` as (path, type, byte offset) when they cover its bytes
    without a gap (no padding, no bit-field, no union), else None."""
    try:
        found = tm.byte_leaves(t)
    except UserError:  # a union or a bit-field inside: its bytes are not one leaf each
        return None
    out: list[tuple[str, ScalarType, int]] = []
    end = 0
    for path, lt, offset in sorted(found, key=lambda leaf: leaf[2]):
        st = tm.scalar_type(lt)
        if st is None or offset != end:
            return None
        out.append((path, st, offset))
        end = offset + st.itemsize
    return out if end == tm.canonical(t).get_size() else None


def _place(parts: list[tuple[LValue, ScalarType, int]], offset: int, t: ScalarType, whole: LValue
           ) -> LValue | None:
    """The place of type ``t`` at bytes ``[offset, offset + size(t))`` of the parts (each a scalar
    place, its type and byte offset): a view of one part of its size, a ``PackLV`` of the whole
    parts it covers, or a slice of the one part it is inside. None when it straddles a part."""
    end = offset + t.itemsize
    inside = [(place, st, o) for place, st, o in parts if o >= offset and o + st.itemsize <= end]
    if sum(st.itemsize for _, st, _ in inside) == t.itemsize:
        if len(inside) == 1 and isinstance(inside[0][0], VarLV):
            var = inside[0][0]
            return var if var.type == t else BitsLV(var, t)  # type: ignore[arg-type]
        return PackLV(tuple((place, 8 * (o - offset)) for place, _, o in inside), t, whole)
    for place, st, o in parts:
        if o <= offset and end <= o + st.itemsize:
            if isinstance(place, VarLV):
                return BitsLV(place, t, 8 * (offset - o))
            if isinstance(place, BitsLV):
                return BitsLV(place.var, t, place.shift + 8 * (offset - o))
    return None

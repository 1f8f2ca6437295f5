"""C/C++ types (clang) → IR types and aggregate layouts.

The IR is scalar. An aggregate (``float4``, a struct) is seen through its *flat layout*: the
list of its scalar (or pointer) leaves with their member paths, e.g. ``float4`` →
``[(".x", f32), (".y", f32), (".z", f32), (".w", f32)]``. A record whose leaves all have one
scalar type and no padding is *homogeneous*: memory holding such records (a ``float4*``
parameter, a ``__shared__ float4 s[64]``) is a buffer of that scalar with ``stride`` slots per
record.
"""
from __future__ import annotations

import dataclasses

import clang.cindex as ci

from polypy.errors import UserError
from polypy.ir.types import SCALAR_TYPES, U64, PointerType, ScalarType

from frontend import bases as cxx_bases
from frontend import function_ids
from frontend.function_ids import is_function_type

TK = ci.TypeKind
# A pointer to a device function is its id (0: null), 8 bytes as the host's function pointers are,
# so records holding one keep their layout (docs/function_pointers.md).
FUNCTION_POINTER = SCALAR_TYPES["i64"]

_SCALAR_KINDS: dict[TK, str] = {
    TK.BOOL: "bool",
    TK.CHAR_S: "i8", TK.SCHAR: "i8", TK.CHAR_U: "u8", TK.UCHAR: "u8",
    TK.SHORT: "i16", TK.USHORT: "u16",
    TK.INT: "i32", TK.UINT: "u32",
    TK.LONG: "i64", TK.ULONG: "u64", TK.LONGLONG: "i64", TK.ULONGLONG: "u64",
    TK.FLOAT: "f32", TK.DOUBLE: "f64",
}


def canonical(t: ci.Type) -> ci.Type:
    return t.get_canonical()


def scalar_type(t: ci.Type) -> ScalarType | None:
    """The IR scalar type of ``t`` (enums are their underlying int), or None."""
    name = _SCALAR_KINDS.get(t.kind)  # a builtin type is its own canonical type (canonicalizing is a call into libclang)
    if name is not None:
        return SCALAR_TYPES[name]
    c = canonical(t)
    if c.kind == TK.ENUM:
        return scalar_type(c.get_declaration().enum_type)
    if c.kind == TK.POINTER and is_function_type(c.get_pointee()):
        return FUNCTION_POINTER  # a device function's id (frontend.function_ids)
    name = _SCALAR_KINDS.get(c.kind)
    return SCALAR_TYPES[name] if name is not None else None


def is_pointer(t: ci.Type) -> bool:
    """Whether ``t`` points into memory (a function pointer is a number: ``scalar_type``)."""
    c = canonical(t)
    return c.kind == TK.POINTER and not is_function_type(c.get_pointee())


def is_function_pointer(t: ci.Type) -> bool:
    return function_ids.is_function_pointer(t)


def is_builtin_scalar(t: ci.Type) -> bool:
    """Whether ``t`` is spelled as a builtin arithmetic type (no record, pointer or reference), told
    without asking libclang for its canonical type."""
    return t.kind in _SCALAR_KINDS


def is_record(t: ci.Type) -> bool:
    return canonical(t).kind == TK.RECORD


def is_array(t: ci.Type) -> bool:
    return canonical(t).kind in (TK.CONSTANTARRAY, TK.INCOMPLETEARRAY, TK.VARIABLEARRAY, TK.DEPENDENTSIZEDARRAY)


def is_reference(t: ci.Type) -> bool:
    return canonical(t).kind in (TK.LVALUEREFERENCE, TK.RVALUEREFERENCE)


def pointee(t: ci.Type) -> ci.Type:
    return canonical(t).get_pointee()


def strip_reference(t: ci.Type) -> ci.Type:
    c = canonical(t)
    return c.get_pointee() if c.kind in (TK.LVALUEREFERENCE, TK.RVALUEREFERENCE) else t


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One scalar or pointer leaf of an aggregate: member path and type."""

    path: str
    ctype: ci.Type

    @property
    def scalar(self) -> ScalarType | None:
        return scalar_type(self.ctype)


def is_union(t: ci.Type) -> bool:
    c = canonical(t)
    return c.kind == TK.RECORD and c.get_declaration().kind == ci.CursorKind.UNION_DECL


def union_scalars(t: ci.Type) -> list[tuple[str, ScalarType]] | None:
    """The members of union ``t`` as (path, scalar type) when every member is a scalar (not bool)
    of one size, else None."""
    out: list[tuple[str, ScalarType]] = []
    for f in canonical(t).get_fields():  # an anonymous struct member too (a field without a name)
        st = scalar_type(f.type)
        if st is None or f.is_bitfield() or st.is_bool or (out and st.itemsize != out[0][1].itemsize):
            return None
        out.append(("." + f.spelling, st))
    return out or None


def union_slices(t: ci.Type) -> tuple[int, list[tuple[str, ScalarType, int]]] | None:
    """The members of union ``t`` as one unsigned integer of ``bits`` (8, 16, 32 or 64) and each
    scalar leaf's (path, type, byte offset) in it, when every member is a scalar or a record of
    scalars (no bool, array, bit-field or nested union) and each member's leaves tile the same
    bytes, ``[0, bits / 8)``, without a gap (a struct's padding after them is part of no leaf):
    then every byte a member reads is one another member wrote. Else None."""
    out: list[tuple[str, ScalarType, int]] = []
    ends = set()
    for f in canonical(t).get_fields():  # an anonymous struct's members are the union's
        if f.is_bitfield():
            return None
        if scalar_type(f.type) is None and (canonical(f.type).kind != TK.RECORD
                                            or canonical(f.type).get_declaration().kind == ci.CursorKind.UNION_DECL):
            return None
        try:
            # An anonymous struct's field has no name (libclang spells it after its type).
            found = byte_leaves(f.type, None, "." + f.spelling if f.spelling.isidentifier() else "")
        except UserError:
            return None
        end = 0
        for path, ft, offset in sorted(found, key=lambda leaf: leaf[2]):
            st = scalar_type(ft)
            if st is None or st.is_bool or "[" in path or offset != end:
                return None
            end = offset + st.itemsize
            out.append((path, st, offset))
        ends.add(end)
    if len(ends) != 1 or (bits := 8 * ends.pop()) not in (8, 16, 32, 64):
        return None
    return bits, out


def union_fields(t: ci.Type, where=None) -> list[tuple[str, ci.Type]]:
    """The members of union ``t`` in memory, each a typed view of the union's bytes from offset 0
    (docs/typed_views.md, unions in memory). Refused, located: bit-fields and bool members (a
    bool's bytes other than 0 and 1 have no value, and another member may write them)."""
    out = []
    for f in canonical(t).get_fields():
        if f.is_bitfield():
            raise UserError(f"union '{t.spelling}' in device memory has a bit-field member '{f.spelling}': "
                            "bit-fields are not supported", where)
        if any(scalar_type(lt) is not None and scalar_type(lt).is_bool  # type: ignore[union-attr]
               for _, lt, _ in byte_leaves(f.type, where)):
            raise UserError(f"union '{t.spelling}' in device memory has a bool in member '{f.spelling}': "
                            "unions with bool members are not supported (a bool's bytes other than 0 and 1, "
                            "written through another member, have no value)", where)
        out.append((f.spelling, f.type))
    return out


def has_union(t: ci.Type) -> bool:
    """A union, or a record or array holding one (its members overlap in memory)."""
    c = canonical(t)
    if c.kind == TK.CONSTANTARRAY:
        return has_union(c.element_type)
    if c.kind != TK.RECORD:
        return False
    if is_union(c):
        return True
    try:
        bases = [b.type for b in cxx_bases.bases(c)]
    except UserError:  # bases polypy cannot lay out: refused where the record is used, at its place
        bases = []
    return any(has_union(ft) for ft in bases + [f.type for f in c.get_fields()])


def record_fields(t: ci.Type) -> list[tuple[str, ci.Type]]:
    c = canonical(t)
    if c.get_declaration().kind == ci.CursorKind.UNION_DECL:
        # Members of a union share their bytes: reading one as another is a reinterpretation,
        # which needs a byte-addressed memory model; apart members would give another answer.
        raise UserError(f"unions are not supported in device code ('{t.spelling}': its members share bytes, "
                        "and reading one member as another reinterprets them)")
    fields = list(c.get_fields())
    for f in fields:
        if f.is_bitfield():
            # A member of its own would hold values its width cannot (`b.a = 9` of `unsigned a : 3`
            # reads back 1 in CUDA): refused, not widened.
            raise UserError(f"bit-field member '{f.spelling}' of '{t.spelling}' is not supported in device code")
    # Base subobjects first (as members named ``__base0``... see ``frontend.bases``), then own members.
    return [(b.name, b.type) for b in cxx_bases.bases(c)] + [(f.spelling, f.type) for f in fields]


def leaves(t: ci.Type, prefix: str = "") -> list[Leaf]:
    """The flat layout of a scalar, pointer or record type (arrays inside records: one leaf per element)."""
    c = canonical(t)
    if c.kind == TK.RECORD:
        out: list[Leaf] = []
        for name, ft in record_fields(c):
            out.extend(leaves(ft, f"{prefix}.{name}"))
        return out
    if c.kind == TK.CONSTANTARRAY:
        out = []
        for i in range(c.element_count):
            out.extend(leaves(c.element_type, f"{prefix}[{i}]"))
        return out
    return [Leaf(prefix, t)]


@dataclasses.dataclass(frozen=True)
class ElemLayout:
    """How one element of a buffer of ``ctype`` maps to scalar slots of the buffer.

    ``stride`` slots per element; ``slots`` maps a member path ("" for a scalar element) to its
    slot offset within the element.
    """

    scalar: ScalarType
    stride: int
    slots: tuple[tuple[str, int], ...]
    ctype_spelling: str
    record: RecordLayout | None = None  # records of mixed member types (then ``slots`` is empty)
    # Records holding unions of members of several types (``overlay_leaves``): each member path's
    # (path, type, byte offset), a view of the buffer of ``scalar`` (then ``slots`` is empty).
    views: tuple[tuple[str, ScalarType, int], ...] = ()

    @property
    def is_scalar(self) -> bool:
        return self.stride == 1 and self.slots == (("", 0),)


def elem_layout(t: ci.Type, where=None) -> ElemLayout:
    """Layout of memory elements of type ``t``: a scalar, or a homogeneous record without padding
    (with unions in it whose members are the same elements: ``overlay_layout``)."""
    st = scalar_type(t)
    if st is not None:
        return ElemLayout(st, 1, (("", 0),), t.spelling)
    c = canonical(t)
    if c.kind == TK.RECORD and has_union(c):
        overlay = overlay_layout(c)
        if overlay is not None:
            return dataclasses.replace(overlay, ctype_spelling=t.spelling)
        found = overlay_leaves(c)
        if found is not None:  # members of several types: views of a buffer of the smallest
            small = min(found, key=lambda leaf: leaf[1].itemsize)[1]
            return ElemLayout(small, c.get_size() // small.itemsize, (), t.spelling, views=tuple(found))
    if c.kind == TK.RECORD:
        ls = leaves(c)
        types = {leaf.scalar for leaf in ls}
        if len(ls) > 0 and len(types) == 1 and None not in types:
            scalar = next(iter(types))
            assert scalar is not None
            if c.get_size() == len(ls) * scalar.itemsize:
                return ElemLayout(scalar, len(ls), tuple((leaf.path, i) for i, leaf in enumerate(ls)), t.spelling)
        held = next((leaf for leaf in ls if is_pointer(leaf.ctype)), None)
        if held is not None:
            raise UserError(f"memory of type '{t.spelling}' is not supported: it holds pointers (member "
                            f"'{held.path[1:]}' of type '{held.ctype.spelling}'), and pointers stored in "
                            f"__constant__, __device__, shared or local arrays are not supported", where)
        raise UserError(
            f"memory of type '{t.spelling}' is not supported: only scalars and records whose members all "
            f"have one scalar type and no padding (like float4) can live in arrays (pointer parameters may "
            f"point to records of mixed member types)", where)
    raise UserError(f"memory of type '{t.spelling}' is not supported", where)


def is_homogeneous(t: ci.Type) -> bool:
    """A scalar, or a record whose leaves all have one scalar type and no padding (``float4``)."""
    if scalar_type(t) is not None:
        return True
    c = canonical(t)
    if c.kind != TK.RECORD:
        return False
    if has_union(c):  # unions covering every byte with elements of one buffer (``overlay_leaves``)
        return overlay_leaves(c) is not None
    ls = leaves(c)
    types = {leaf.scalar for leaf in ls}
    return len(ls) > 0 and len(types) == 1 and None not in types and \
        c.get_size() == len(ls) * next(iter(types)).itemsize  # type: ignore[union-attr]


def overlay_layout(t: ci.Type) -> ElemLayout | None:
    """Memory of record ``t`` holding unions (mummergpu's ``union { int2 data; struct { int node;
    int edge_match_length; }; }``) when every scalar leaf of every member has one scalar type (not
    bool) at an offset that is a whole number of its size, and together they cover every element
    of the record: a buffer of that scalar, each member path the element at its offset. Members of
    a union that share bytes are then the same elements, of the same type: a read of one is the
    value the other wrote, exactly. Else None (no base classes, bit-fields or other leaves)."""
    found = overlay_leaves(t)
    if found is None or len({st for _, st, _ in found}) != 1:
        return None
    st = found[0][1]
    return ElemLayout(st, canonical(t).get_size() // st.itemsize,
                      tuple((path, offset // st.itemsize) for path, _, offset in found), t.spelling)


def overlay_leaves(t: ci.Type) -> list[tuple[str, ScalarType, int]] | None:
    """Every scalar leaf of record ``t`` through its unions' members, as (path, type, byte offset),
    when none is a bool, each sits at a whole number of its size, and together they cover every
    byte of ``t`` (no byte that one member leaves unset is read through another); else None."""
    c = canonical(t)
    found: list[tuple[str, ScalarType, int]] = []
    if not _overlay_leaves(c, "", 0, found) or not found:
        return None
    covered: set[int] = set()
    for _, st, offset in found:
        if st.is_bool or offset % st.itemsize:
            return None
        covered.update(range(offset, offset + st.itemsize))
    return found if covered == set(range(c.get_size())) else None


def _overlay_leaves(t: ci.Type, prefix: str, base: int, out: list) -> bool:
    c = canonical(t)
    st = scalar_type(c)
    if st is not None:
        out.append((prefix, st, base))
        return True
    if c.kind == TK.CONSTANTARRAY:
        size = canonical(c.element_type).get_size()
        return all(_overlay_leaves(c.element_type, f"{prefix}[{i}]", base + i * size, out)
                   for i in range(c.element_count))
    if c.kind != TK.RECORD or cxx_bases.bases(c):
        return False
    for f in c.get_fields():
        bits = f.get_field_offsetof()
        if f.is_bitfield() or bits < 0 or bits % 8:
            return False
        # An anonymous struct or union member has no name (libclang spells it after its type).
        path = f"{prefix}.{f.spelling}" if f.spelling.isidentifier() else prefix
        if not _overlay_leaves(f.type, path, base + bits // 8, out):
            return False
    return True


@dataclasses.dataclass(frozen=True)
class RecordLayout:
    """clang's layout of a record of mixed member types in memory (``struct Node { int a; bool b; }``).

    Memory holding such records is seen through one buffer per scalar member type (its *views*,
    ``p_i32``, ``p_bool``): a member of type ``T`` at byte ``o`` of record ``r`` is element
    ``r * size / sizeof(T) + o / sizeof(T)`` of the ``T`` view. C's alignment rules make both
    divisions exact; a packed record that breaks them is refused.
    """

    spelling: str
    size: int
    scalars: tuple[ScalarType, ...]  # the views' element types, in order of first appearance
    ctype: ci.Type = dataclasses.field(compare=False, repr=False)

    @property
    def overlaps(self) -> bool:
        """Whether members share bytes (a union inside): then the views are of one storage, and a
        member read through another type is the bit reinterpretation of the bytes written."""
        return has_union(self.ctype)


def member_type(record: ci.Type, name: str) -> ci.Type | None:
    fields = union_fields(record) if is_union(record) else record_fields(record)  # a union in memory
    for fname, ft in fields:
        if fname == name:
            return ft
    for fname, ft in _anonymous_members(record):  # a member of an anonymous struct or union
        found = member_type(ft, name)
        if found is not None:
            return found
    return None


def member_offset(record: ci.Type, name: str, where=None) -> int:
    """Byte offset of member ``name`` of ``record`` (clang's layout; a base subobject's, see ``bases``)."""
    base = cxx_bases.base_offset(record, name)
    if base is not None:
        return base
    bits = canonical(record).get_offset(name)
    if bits < 0 and any(fname == name for fname, _ in _anonymous_members(record)):
        return _anonymous_offset(record, name)  # the anonymous struct or union member itself (``r->node``'s step)
    if bits < 0:  # a member of an anonymous struct or union: that member's offset plus its own
        for fname, ft in _anonymous_members(record):
            if member_type(ft, name) is not None:
                return _anonymous_offset(record, fname) + member_offset(ft, name, where)
    if bits < 0 or bits % 8:
        raise UserError(f"member '{name}' of '{record.spelling}' has no byte offset (bit-fields are not supported "
                        "in device memory)", where)
    return bits // 8


def _member_prefix(prefix: str, name: str) -> str:
    """The path of member ``name``; an anonymous struct's or union's members are the record's own
    (libclang spells such a field after its type, not an identifier)."""
    return f"{prefix}.{name}" if name.isidentifier() else prefix


def _anonymous_offset(record: ci.Type, spelling: str) -> int:
    """The byte offset of the anonymous struct or union member spelled ``spelling``."""
    field = next(f for f in canonical(record).get_fields() if f.spelling == spelling)
    return field.get_field_offsetof() // 8


def _anonymous_members(record: ci.Type) -> list[tuple[str, ci.Type]]:
    return [(f.spelling, f.type) for f in canonical(record).get_fields() if not f.spelling.isidentifier()]


def byte_leaves(t: ci.Type, where=None, prefix: str = "", base: int = 0) -> list[tuple[str, ci.Type, int]]:
    """``leaves(t)`` with each leaf's byte offset: ``[(".a", int, 0), (".b[1]", float, 8), ...]``."""
    c = canonical(t)
    if c.kind == TK.RECORD and is_union(c):  # every member at the union's own offset: they overlap
        out: list[tuple[str, ci.Type, int]] = []
        for name, ft in union_fields(c, where):
            out.extend(byte_leaves(ft, where, _member_prefix(prefix, name), base))
        return out
    if c.kind == TK.RECORD:
        out = []
        for name, ft in record_fields(c):
            offset = _anonymous_offset(c, name) if not name.isidentifier() else member_offset(c, name, where)
            out.extend(byte_leaves(ft, where, _member_prefix(prefix, name), base + offset))
        return out
    if c.kind == TK.CONSTANTARRAY:
        size = canonical(c.element_type).get_size()
        out = []
        for i in range(c.element_count):
            out.extend(byte_leaves(c.element_type, where, f"{prefix}[{i}]", base + i * size))
        return out
    return [(prefix, t, base)]


def record_layout(t: ci.Type, where=None, *, pointers: bool = False) -> RecordLayout:
    """The layout of records of mixed member types in memory (see ``RecordLayout``). ``pointers``
    (``__constant__``/``__device__`` memory): a pointer member is a ``u64`` of its address, read
    as a pointer into device memory (``frontend.lower.held_pointers``)."""
    c = canonical(t)
    size = c.get_size()
    scalars: list[ScalarType] = []
    for path, lt, offset in byte_leaves(c, where):
        st = scalar_type(lt)
        if st is None and pointers and is_pointer(lt) and offset % 8 == 0:
            st = U64
        if st is None:
            if is_pointer(lt):
                continue  # a pointer member: the record is fine, reading the member is refused
            raise UserError(f"member '{path[1:]}' of type '{lt.spelling}' of '{t.spelling}' is not supported in "
                            "device memory", where)
        if offset % st.itemsize or size % st.itemsize:
            raise UserError(f"'{t.spelling}' is packed (member '{path[1:]}' is not aligned to its type): not "
                            "supported in device memory", where)
        if st not in scalars:
            scalars.append(st)
    if not scalars:
        raise UserError(f"memory of type '{t.spelling}' is not supported: it has no scalar members", where)
    return RecordLayout(t.spelling, size, tuple(scalars), c)


def array_layout(t: ci.Type, where=None, *, pointers: bool = False) -> ElemLayout:
    """Layout of the elements of a C array (shared, local, ``__constant__``, ``__device__``):
    ``elem_layout``, or records of mixed member types without pointer members (``layout.record``:
    the array is one buffer per member type, see ``RecordLayout``). ``pointers`` (module memory):
    records may hold pointers too (a ``u64`` view of their addresses, ``record_layout``)."""
    if has_union(t):  # members that overlap: a byte pool (``RecordLayout.overlaps``)
        return _union_layout(t, where)
    held = any(is_pointer(leaf.ctype) for leaf in leaves(t)) if is_record(t) else False
    if is_record(t) and (not is_homogeneous(t) or held) and (pointers or not held):
        record = record_layout(t, where, pointers=pointers)
        return ElemLayout(record.scalars[0], 1, (), t.spelling, record)
    return elem_layout(t, where)


def has_array_member(t: ci.Type) -> bool:
    """A record with an array among its members (or its members' members): ``struct { float x[8]; }``."""
    return is_record(t) and any("[" in leaf.path for leaf in leaves(t))


def local_layout(t: ci.Type, where=None) -> ElemLayout:
    """Layout of a local variable's or a local array's elements: ``array_layout``, except that a
    record with an array member is laid out in memory as a record (``RecordLayout``) even when its
    members have one type, so that the array member can be indexed at run time (``f.x[i]``)."""
    if has_union(t):
        return _union_layout(t, where)
    if has_array_member(t) and not any(is_pointer(leaf.ctype) for leaf in leaves(t)):
        record = record_layout(t, where)
        return ElemLayout(record.scalars[0], 1, (), t.spelling, record)
    return array_layout(t, where)


def _union_layout(t: ci.Type, where=None) -> ElemLayout:
    """The layout of memory holding unions (``union U``, a record with a union member, arrays of
    them): clang's record layout (size and alignment as the C++ ABI gives them), its members
    overlapping where a union's do (``RecordLayout.overlaps``)."""
    record = record_layout(t, where)
    return ElemLayout(record.scalars[0], 1, (), t.spelling, record)


def view_length(count: int, record: RecordLayout, st: ScalarType) -> int:
    """Elements of the ``st`` view of ``count`` records."""
    return count * record.size // st.itemsize


def view_initializer(values: list, count: int, record: RecordLayout, st: ScalarType) -> tuple:
    """The ``st`` view's part of a flat initializer of ``count`` records (leaf values in order)."""
    from polypy.ir.types import normalize_value

    leaves_ = byte_leaves(record.ctype)
    out: list = [normalize_value(0, st)] * view_length(count, record, st)
    for e in range(count):
        for i, (_, lt, offset) in enumerate(leaves_):
            k = e * len(leaves_) + i
            if k < len(values) and scalar_type(lt) == st:
                out[(e * record.size + offset) // st.itemsize] = normalize_value(values[k], st)
    return tuple(out)


def pointer_param_type(t: ci.Type, where=None, layout: ElemLayout | None = None) -> tuple[PointerType, ElemLayout]:
    """IR type of a pointer parameter (``const float* __restrict__`` → ``const f32* restrict``);
    ``layout``: its elements' layout when known otherwise (a ``void*`` parameter's buffer)."""
    target = pointee(t)
    if layout is None and is_record(target) and not is_homogeneous(target):
        record = record_layout(target, where)
        layout = ElemLayout(record.scalars[0], 1, (), target.spelling, record)
    elif layout is None:
        layout = elem_layout(target, where)
    restrict = canonical(t).is_restrict_qualified() or t.is_restrict_qualified()
    return PointerType(layout.scalar, const=target.is_const_qualified(), restrict=restrict), layout

"""``void*`` kernel parameters: an untyped buffer, typed by the casts the kernel makes of it.

``__global__ void k(void* match_coords, ...) { _MatchCoord* r = (_MatchCoord*)match_coords + q; }``
(Rodinia's mummergpu): the kernel sees the argument's bytes only through the typed pointers it
casts the parameter to. So the parameter becomes a buffer of one of those types, and every cast
of it is a typed view of that buffer (``frontend.lower.views``, docs/typed_views.md), the same
bytes read and written bit for bit as CUDA does:

- the casts of the parameter itself in the kernel's body (``(T*)p``, ``static_cast<T*>(p)``,
  ``reinterpret_cast<T*>(p)``) name the candidate element types;
- the buffer's elements are of the smallest scalar among them (the first in source order on a
  tie): every other cast is then a same-size view (a bit cast) or a wider one (whole elements
  composed), never a narrower one, whose stores are refused;
- one record type of mixed member types (``struct { int a; float b; }``) cast alone is a pointer
  to those records (one IR buffer per member type, as for a typed parameter); mixed with other
  types its cast is refused, located, as any such cast is;
- no cast in the kernel's body (the pointer only handed to a device function, stored, compared):
  a buffer of bytes, which every view reads and writes exactly.

C++ has no arithmetic on ``void*`` (clang refuses ``p + 4``), so the element size of the buffer
never shows through the parameter itself.
"""
from __future__ import annotations

import clang.cindex as ci

from polypy.errors import Loc, UserError
from polypy.ir.types import U8

from frontend import ctypes_map as tm
from frontend.clang_setup import cursor_loc, preorder
from frontend.lower.casts import CASTS
from frontend.lower.context import CK, decl_key
from frontend.lower.helpers import strip

BYTES = tm.ElemLayout(U8, 1, (("", 0),), "unsigned char")


def is_void_pointer(t: ci.Type) -> bool:
    return tm.is_pointer(t) and tm.canonical(tm.pointee(t)).kind == ci.TypeKind.VOID


def cast_targets(kernel: ci.Cursor, param: ci.Cursor) -> list[tuple[ci.Type, ci.Cursor]]:
    """The pointee types of the casts of ``param`` to typed pointers in ``kernel``'s body, in
    source order, each with its cast."""
    key = decl_key(param)
    out: list[tuple[ci.Type, ci.Cursor]] = []
    for x in preorder(kernel):
        if x.kind not in CASTS or not tm.is_pointer(x.type) or is_void_pointer(x.type):
            continue
        operand = [ch for ch in x.get_children() if ch.kind.is_expression()]
        if not operand:
            continue
        ref = strip(operand[-1])
        if ref.kind == CK.DECL_REF_EXPR and ref.referenced is not None and decl_key(ref.referenced) == key:
            out.append((tm.pointee(x.type), x))
    return out


def buffer_layout(kernel: ci.Cursor, param: ci.Cursor) -> tm.ElemLayout:
    """The element layout of the buffer behind ``void*`` parameter ``param`` (see the module)."""
    targets = cast_targets(kernel, param)
    if not targets:
        return BYTES
    try:
        return _chosen(targets)
    except UserError as e:  # a type memory cannot hold (a union of other types): at its cast
        if e.loc is not None:
            raise
        raise UserError(e.message, _loc(targets[0][1]), notes=e.notes) from None


def _chosen(targets: list[tuple[ci.Type, ci.Cursor]]) -> tm.ElemLayout:
    records = [(t, c) for t, c in targets if tm.is_record(t) and not tm.is_homogeneous(t)]
    if records and len(records) == len(targets) and \
            len({tm.canonical(t).get_declaration().hash for t, _ in records}) == 1:
        t, c = records[0]
        record = tm.record_layout(t, _loc(c))
        return tm.ElemLayout(record.scalars[0], 1, (), t.spelling, record)
    plain = [(t, c) for t, c in targets if not (tm.is_record(t) and not tm.is_homogeneous(t))]
    if not plain:  # records of several types: the cast of the second one is refused, located
        t, c = records[0]
        record = tm.record_layout(t, _loc(c))
        return tm.ElemLayout(record.scalars[0], 1, (), t.spelling, record)
    layouts = [tm.elem_layout(t, _loc(c)) for t, c in plain]
    return min(layouts, key=lambda layout: layout.scalar.itemsize)


def _loc(c: ci.Cursor) -> Loc | None:
    return cursor_loc(c)

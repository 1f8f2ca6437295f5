"""Array members of several dimensions of a record in memory (``struct M { float a[3][3]; }`` as a
local, a by-value parameter or an element of an array of records): ``m.a`` is a ``RowsRef`` at
the member's byte address; indexing it moves by whole rows (``m.a[r]``: the address plus ``r``
rows), and the last dimension is the pointer to the row's first element a one-dimensional array
member is (``places.record_member``), so ``m.a[r][s]`` reads and writes element ``s`` of row
``r``, at a run-time index too."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import clang.cindex as ci

from frontend import ctypes_map as tm
from frontend.values import Pointer, RecordAddress

if TYPE_CHECKING:
    from polypy.ir import nodes as n

    from frontend.lower.builder import KernelBuilder


@dataclasses.dataclass(frozen=True, eq=False)
class RowsRef:
    """Rows of an array member in memory: ``dims`` (two or more) of elements of ``elem`` (a
    clang scalar type) from ``address``."""

    address: RecordAddress
    dims: tuple[int, ...]
    elem: ci.Type

    def index(self, kb: KernelBuilder, i: n.Expr, c: ci.Cursor) -> "RowsRef | Pointer":
        row = tm.canonical(self.elem).get_size()
        for d in self.dims[1:]:
            row *= d
        address = self.address.plus(i, row)
        if len(self.dims) > 2:
            return RowsRef(address, self.dims[1:], self.elem)
        return row_pointer(address, self.elem)


def row_pointer(address: RecordAddress, elem: ci.Type) -> Pointer:
    """A pointer to the scalar of C type ``elem`` at ``address`` (an array member's first element)."""
    st = tm.scalar_type(elem)
    assert st is not None
    view = address.view(st)
    assert view is not None
    return Pointer(view, (), address.index(st), tm.ElemLayout(st, 1, (("", 0),), elem.spelling),
                   stored=None if address.stored in (None, st) else address.stored)


def member_rows(address: RecordAddress, t: ci.Type) -> RowsRef | None:
    """The ``RowsRef`` of an array member of type ``t`` at ``address``, when it has several
    dimensions of scalars; else None."""
    ct = tm.canonical(t)
    dims: list[int] = []
    while ct.kind == ci.TypeKind.CONSTANTARRAY:
        dims.append(int(ct.element_count))
        ct = tm.canonical(ct.element_type)
    st = tm.scalar_type(ct)
    if len(dims) < 2 or st is None or address.view(st) is None:
        return None
    return RowsRef(address, tuple(dims), ct)

"""``memcpy`` and ``memset`` in device code, on typed places.

A copy of ``n`` bytes (a constant) between two places made of scalars of one type (an array or a
pointer into a buffer of such scalars, a local scalar, a local record whose members are all that
type: ``struct { uint4 a, b; }`` from ``unsigned int r[8]``) is the copy of each scalar, in
order; between scalars of one size and different types (``float`` into ``unsigned int``, the
idiom of a bit cast) each scalar's bits are read as the destination's type. A fill of such a
place with a constant byte is each scalar set to the byte repeated (any byte for integers, 0 for
floating point). Anything else (mixed types, types of different sizes, a size that is not a whole
number of scalars, records of mixed member types in memory, a size known only at run time) is
refused with a located error.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import ScalarType

from frontend.arith import add_offsets, convert, plus, scale
from frontend.clang_setup import evaluate
from frontend.lower.bitcasts import can_view, reinterpret
from frontend.lower.helpers import ArrayRef
from frontend.lower.views import element
from frontend.values import AggLV, MemLV, Pointer, VarAddress, VarLV

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


def _leaves(lv) -> list | None:
    if isinstance(lv, (VarLV, MemLV)):
        return [lv]
    if isinstance(lv, AggLV):
        out = []
        for leaf in lv.fields.values():
            inner = _leaves(leaf)
            if inner is None:
                return None
            out += inner
        return out
    return None


def _cells(b: KernelBuilder, arg: ci.Cursor, nbytes: int, what: str, c: ci.Cursor) -> list:
    """The scalar lvalues of the first ``nbytes`` bytes at the address ``arg``, all of one type."""
    value = b.expr(arg)
    if isinstance(value, ArrayRef):
        value = value.decay(b, c)
    cells: list | None = None
    if isinstance(value, Pointer) and value.layout.record is None:
        ty = value.layout.scalar
        count = nbytes // ty.itemsize
        # Element j's slots are consecutive scalars (a vector type's members in order), so the
        # run of scalars from the pointer is slot i of element 0 onward.
        base = scale(add_offsets(value.offset, None), value.layout.stride)
        # Through a typed view (`(const int*)floats`), each cell is the view's (views.element).
        cells = [element(value.buffer, value.prefix + (plus(base, i),), ty, value.stored) for i in range(count)]
    elif isinstance(value, VarAddress):
        cells = _leaves(value.target)
    if not cells:
        raise b.error(f"{what} of this place is not supported in device code (only arrays, pointers into buffers and "
                      "local variables made of scalars of one type)", c)
    ty = cells[0].type
    if any(cell.type != ty for cell in cells) or nbytes % ty.itemsize or nbytes // ty.itemsize > len(cells):
        raise b.error(f"{what} of {nbytes} bytes over scalars of different types or sizes is not supported in "
                      "device code", c)
    return cells[: nbytes // ty.itemsize]


def _size(b: KernelBuilder, arg: ci.Cursor, what: str, c: ci.Cursor) -> int:
    size = evaluate(arg)  # clang's constant evaluation (sizeof, arithmetic on constants)
    if not isinstance(size, int):
        raise b.error(f"{what} with a size known only at run time is not supported in device code", c)
    return size


def device_memcpy(b: KernelBuilder, args: list[ci.Cursor], c: ci.Cursor, discard: bool) -> n.Expr | None:
    nbytes = _size(b, args[2], "memcpy", c)
    dst = _cells(b, args[0], nbytes, "memcpy", c)
    src = _cells(b, args[1], nbytes, "memcpy", c)
    if len(dst) != len(src) or not can_view(src[0].type, dst[0].type):
        raise b.error(f"memcpy between {src[0].type} and {dst[0].type} is not supported in device code (a bit "
                      "cast: use __float_as_int and relatives)", c)
    values = [b.temp(cell.type, b.read(cell, c), "cp", c) for cell in src]  # all read, then written
    for cell, v in zip(dst, values):
        # The bytes of scalars of one size: the same bits read as the destination's type (a
        # float's bits as an unsigned int: std::bit_cast's idiom), never a value conversion.
        b.assign(cell, reinterpret(n.Var(v.name, v.type), cell.type, b.loc(c)), c)
    if not discard:
        raise b.error("the value of memcpy in device code is not supported", c)
    return None


def device_memset(b: KernelBuilder, args: list[ci.Cursor], c: ci.Cursor, discard: bool) -> n.Expr | None:
    nbytes = _size(b, args[2], "memset", c)
    dst = _cells(b, args[0], nbytes, "memset", c)
    byte = b.scalar(args[1])
    if not isinstance(byte, n.Const):
        raise b.error("memset with a value known only at run time is not supported in device code", c)
    ty: ScalarType = dst[0].type
    pattern = int(byte.value) & 0xFF
    if ty.is_float and pattern != 0:
        raise b.error("memset of floating-point values with a nonzero byte is not supported in device code", c)
    word = 0
    for _ in range(ty.itemsize):
        word = (word << 8) | pattern
    if ty.is_signed and word >= 1 << (ty.bits - 1):
        word -= 1 << ty.bits
    fill = n.Const(0.0 if ty.is_float else word, ty)
    for cell in dst:
        b.assign(cell, convert(fill, ty), c)
    if not discard:
        raise b.error("the value of memset in device code is not supported", c)
    return None

"""Views of memory through pointers to element types of another size: the byte-addressed model.

A buffer keeps its own element type (``stored``, size ``s``); a pointer that views it as ``T``
(size ``t``, ``(float*)bytes``, ``(unsigned char*)floats``, ``(int2*)shorts``) reads and writes
the bytes ``[i * t, (i + 1) * t)`` of it, as CUDA does (little-endian, like every CUDA device):

- ``t > s`` (a wide view, ``(float*)uchar_buf``): element ``i`` is stored elements
  ``i*k .. i*k + k - 1`` (``k = t / s``), each read as its unsigned bits, shifted into place and
  or-ed, then read as ``T`` (bit cast); a store splits the value's bits the same way. Every
  access is a plain load or store of the typed buffer at an index affine in ``i``, so the isl
  access relations stay exact and cover exactly the bytes the program touches.
- ``t < s`` (a narrow view, ``(unsigned char*)floats``): element ``i`` is part ``i % k`` of
  stored element ``i / k``: read exactly (shift and truncate). A store of one part would have to
  rewrite the whole stored element, which loses a concurrent write of its other bytes by another
  thread: refused. A record stored whole through such a view (``*(int4*)doubles = v``, the
  tensor-core GEMMs' 16-byte copies) covers whole stored elements: its members are grouped, ``k``
  at a time, into one store of each element they cover, their bits composed
  (``whole_elements``), so no byte of another element is touched.

Bit casts are the IR's ``bitcast`` (never value conversions); atomics through such a view are
refused by the caller.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import clang.cindex as ci

from polypy.errors import Loc, UserError
from polypy.ir import nodes as n
from polypy.ir.types import I64, U8, U16, U32, U64, ScalarType

from frontend import ctypes_map as tm
from frontend.arith import convert, plus, scale, split_constant
from frontend.lower.bitcasts import can_view, compose_bits, reinterpret
from frontend.values import LValue, MemLV, PartLV, Pointer, Value, ViewLV

_UNSIGNED = {8: U8, 16: U16, 32: U32, 64: U64}


def element(buffer: str, index: tuple[n.Expr, ...], seen: ScalarType, stored: ScalarType | None
            ) -> MemLV | ViewLV | PartLV:
    """Scalar element ``index`` of ``buffer`` (of ``stored`` elements, or of ``seen`` ones when
    ``stored`` is None) seen as ``seen``; the last index counts elements of the view."""
    if stored is None or stored == seen:
        return MemLV(buffer, index, seen)
    if stored.itemsize != seen.itemsize:
        return PartLV(buffer, index[:-1], index[-1], stored, seen)
    return ViewLV(MemLV(buffer, index, stored), seen)


def overlay_element(buffer: str, prefix: tuple[n.Expr, ...], record: n.Expr | None, layout: tm.ElemLayout,
                    stored: ScalarType | None) -> dict[str, LValue]:
    """The members of record ``record`` (an index in records) of a buffer of records holding
    unions of members of several types (``layout.views``): each the typed view of its bytes."""
    size = layout.stride * layout.scalar.itemsize
    out: dict[str, LValue] = {}
    for path, st, offset in layout.views:
        index = plus(scale(record, size // st.itemsize), offset // st.itemsize) if record is not None else \
            n.Const(offset // st.itemsize, I64)
        out[path] = element(buffer, prefix + (index,), st, stored or layout.scalar)
    return out


def view_pointer(v: Pointer, target: ci.Type, spelling: str, loc: Loc | None,
                 check: Callable[[n.Expr, str], None] | None = None) -> Pointer:
    """``(T*)v`` for a pointer ``v`` into a buffer of scalars (or of records of one scalar type)
    and ``T`` such a type: the same buffer, seen through a view of ``T`` (``Pointer.stored``).

    An offset polypy cannot see is a multiple of ``sizeof(T)`` is checked at run time where
    ``sizeof(T)`` is ``T``'s alignment (a power of two: scalars, ``float2``, ``int4``...):
    ``check(misaligned, text)`` emits the fault for the condition ``misaligned`` (CUDA's
    misaligned address); past it the offset is an exact quotient."""
    layout = tm.elem_layout(target, loc)
    stored = v.stored or v.layout.scalar  # the buffer's own element type
    if not can_view(stored, layout.scalar) and (stored.is_bool or layout.scalar.is_bool):
        # A bool's bytes other than 0 and 1 have no value.
        raise UserError(f"pointer cast to '{spelling}' views memory of {stored.c_name} as {layout.scalar.c_name}: "
                        "views of bool memory are not supported", loc)
    view = None if layout.scalar == stored else stored
    before = v.layout.stride * v.layout.scalar.itemsize  # bytes per element, old and new
    after = layout.stride * layout.scalar.itemsize
    if before == after or v.offset is None:
        # e.g. (int*)x, reinterpret_cast<float4*>(x), (uint4*)x of a float buffer, (float*)bytes
        return dataclasses.replace(v, layout=layout, stored=view)
    # A view at an offset (`reinterpret_cast<float4*>(x + 4 * k)`, `(float*)&bytes[off]`): the
    # offset in bytes must be a whole number of the new elements, as CUDA's alignment rules
    # require of the accesses through it.
    g = math.gcd(before, after)
    offset = _exact_quotient(scale(v.offset, before // g), after // g)
    k = after // g
    if offset is None and check is not None and _checkable(target, after):
        # `reinterpret_cast<float4*>(&x[row * n + col])`: CUDA faults when the address is not a
        # multiple of 16 bytes; the check stops the thread there (and the launch) as the GPU does.
        units = scale(v.offset, before // g)  # the offset in units of after / g bytes
        misaligned = n.Binary("ne", n.Binary("band", units, _const(k - 1, units), loc=loc), _const(0, units), loc=loc)
        check(misaligned, f"{spelling} view at a byte offset that is not a multiple of {after}")
        offset = n.Binary("div", units, _const(k, units), loc=loc)  # exact past the check
    if offset is None:
        raise UserError(f"this pointer reinterpretation is not supported: polypy cannot tell that the offset is a "
                        f"multiple of {after} bytes", loc)
    return dataclasses.replace(v, offset=offset, layout=layout, stored=view)


def _checkable(target: ci.Type, size: int) -> bool:
    """Whether an access through ``T*`` faults exactly when its address is not a multiple of
    ``sizeof(T)`` (``size``): ``T``'s alignment is its size, a power of two (not ``float3``)."""
    return size & (size - 1) == 0 and tm.canonical(target).get_align() == size


def _bits(e: n.Expr, loc: Loc | None) -> n.Expr:
    """``e``'s bits as the unsigned integer of its size."""
    return reinterpret(e, _UNSIGNED[e.type.bits], loc)


def _wide_index(i: n.Expr) -> n.Expr:
    """An index of the view scaled to the stored elements can outgrow 32 bits: 64-bit."""
    return i if i.type.bits == 64 else convert(i, I64)


def _log2(k: int) -> int:
    return k.bit_length() - 1


def _const(v: int, like: n.Expr) -> n.Const:
    return n.Const(v, like.type, loc=like.loc)


def read_part(lv: PartLV, loc: Loc | None) -> n.Expr:
    s, t = lv.stored.itemsize, lv.type.itemsize
    wide = _UNSIGNED[lv.type.bits]
    if t > s:
        k = t // s
        base = n.Binary("mul", _wide_index(lv.index), _const(k, _wide_index(lv.index)), loc=loc)
        total: n.Expr | None = None
        for j in range(k):
            at = base if j == 0 else n.Binary("add", base, _const(j, base), loc=loc)
            part = convert(_bits(n.Load(lv.buffer, lv.prefix + (at,), lv.stored, loc=loc), loc), wide)
            if j:
                part = n.Binary("shl", part, n.Const(8 * s * j, wide), loc=loc)
            total = part if total is None else n.Binary("bor", total, part, loc=loc)
        assert total is not None
        return reinterpret(total, lv.type, loc)
    k = s // t
    bits_of = lambda element: _bits(n.Load(lv.buffer, lv.prefix + (element,), lv.stored, loc=loc), loc)  # noqa: E731
    rest, c = split_constant(lv.index)
    q = _exact_quotient(rest, k) if rest is not None else None
    if q is not None:  # `i = m*k + c` (a record's members through the view): element m + c/k, part c%k
        bits = bits_of(q if c // k == 0 else n.Binary("add", q, _const(c // k, q), loc=loc))
        shifted = bits if c % k == 0 else n.Binary("shr", bits, n.Const(8 * t * (c % k), bits.type), loc=loc)
        return reinterpret(convert(shifted, wide), lv.type, loc)
    element = n.Binary("shr", lv.index, _const(_log2(k), lv.index), loc=loc)  # floor(i / k)
    which = n.Binary("band", lv.index, _const(k - 1, lv.index), loc=loc)      # i mod k
    bits = bits_of(element)
    shift = n.Binary("mul", convert(which, bits.type), n.Const(8 * t, bits.type), loc=loc)
    return reinterpret(convert(n.Binary("shr", bits, shift, loc=loc), wide), lv.type, loc)


def store_part(lv: PartLV, value: n.Expr, loc: Loc | None) -> list[n.Stmt]:
    s, t = lv.stored.itemsize, lv.type.itemsize
    if t < s:
        raise UserError(f"writing a {lv.type.c_name} into part of a {lv.stored.c_name} element (a narrower view of "
                        "the memory) is not supported: it would rewrite the whole element and could lose another "
                        "thread's write to the rest of it", loc)
    k = t // s
    bits = _bits(value, loc)
    narrow = _UNSIGNED[lv.stored.bits]
    base = n.Binary("mul", _wide_index(lv.index), _const(k, _wide_index(lv.index)), loc=loc)
    out: list[n.Stmt] = []
    for j in range(k):
        at = base if j == 0 else n.Binary("add", base, _const(j, base), loc=loc)
        shifted = bits if j == 0 else n.Binary("shr", bits, n.Const(8 * s * j, bits.type), loc=loc)
        out.append(n.Store(lv.buffer, lv.prefix + (at,), reinterpret(convert(shifted, narrow), lv.stored, loc),
                           loc=loc))
    return out


def whole_elements(items: list[tuple[LValue, Value]], loc: Loc | None) -> list[tuple[LValue, Value]]:
    """The member stores of a record assignment (place, value, in the record's member order), with
    each run of ``k`` narrow parts (``PartLV``, ``t = s / k``) that covers one whole stored element
    from its first byte (indices ``j*k .. j*k + k - 1`` of one row of one buffer, ``j*k`` visibly
    a multiple of ``k``) replaced by one store of that element: the parts' bits composed
    (little-endian) and read as the element's type, never a value conversion. So a 16-byte
    ``int4`` copied into ``double`` memory is two ``double`` stores, bit for bit (NaN payloads,
    -0.0). Parts that cover an element only in part stay as they are (and are refused)."""
    out: list[tuple[LValue, Value]] = []
    i = 0
    while i < len(items):
        lv, _ = items[i]
        run = _whole_run(items, i)
        if run is None:
            out.append(items[i])
            i += 1
            continue
        assert isinstance(lv, PartLV)
        k = lv.stored.itemsize // lv.type.itemsize
        parts = [(value, 8 * lv.type.itemsize * j) for j, (_, value) in enumerate(items[i:i + k])]
        bits = compose_bits(parts, lv.stored, loc)  # type: ignore[arg-type]
        out.append((MemLV(lv.buffer, lv.prefix + (run,), lv.stored), bits))
        i += k
    return out


def _whole_run(items: list[tuple[LValue, Value]], i: int) -> n.Expr | None:
    """The stored element's index when ``items[i:i+k]`` are the ``k`` narrow parts of one whole
    stored element, in order; else None."""
    first = items[i][0]
    if not isinstance(first, PartLV) or first.type.itemsize >= first.stored.itemsize:
        return None
    k = first.stored.itemsize // first.type.itemsize
    if i + k > len(items):
        return None
    base, at = split_constant(first.index)
    for j, (lv, value) in enumerate(items[i:i + k]):
        if not isinstance(lv, PartLV) or not isinstance(value, n.Expr) or value.type != first.type or \
                (lv.buffer, lv.prefix, lv.stored, lv.type) != (first.buffer, first.prefix, first.stored, first.type) or \
                split_constant(lv.index) != (base, at + j):
            return None
    return _exact_quotient(first.index, k)


def _exact_quotient(e: n.Expr, k: int) -> n.Expr | None:
    """``e / k`` when ``e`` is visibly a multiple of ``k`` (constants, products with such a
    constant, sums of multiples), else None."""
    if k == 1:
        return e
    if isinstance(e, n.Const) and isinstance(e.value, int):
        return n.Const(e.value // k, e.type, loc=e.loc) if e.value % k == 0 else None
    if isinstance(e, n.Cast) and e.type.is_int and e.x.type.is_int and e.type.bits >= e.x.type.bits and \
            (e.type.is_signed == e.x.type.is_signed or not e.x.type.is_signed):  # widening keeps the value
        inner = _exact_quotient(e.x, k)
        return None if inner is None else convert(inner, e.type)
    if isinstance(e, n.Binary) and e.op in ("add", "sub"):
        a, b = _exact_quotient(e.a, k), _exact_quotient(e.b, k)
        return None if a is None or b is None else n.Binary(e.op, a, b, loc=e.loc)
    if isinstance(e, n.Binary) and e.op == "mul":
        for x, y in ((e.a, e.b), (e.b, e.a)):
            q = _exact_quotient(x, k)
            if q is not None:
                return n.Binary("mul", q, y, loc=e.loc)
    if isinstance(e, n.Unary) and e.op == "neg":
        q = _exact_quotient(e.x, k)
        return None if q is None else n.Unary("neg", q, loc=e.loc)
    return None

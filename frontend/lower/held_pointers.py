"""Pointers held in ``__constant__``/``__device__`` records (Rodinia heartwall, issue 36 item 8).

``__constant__ params_unique d_unique[51]`` holds records of device pointers (``d_in2``,
``d_T``...), filled on the host and copied in with ``cudaMemcpyToSymbol``; the kernel reads
``d_unique[bx].d_in2[ei]``. The symbol's pointer members are a ``u64`` view of its bytes
(``ctypes_map.record_layout(pointers=True)``): reading one gives the address the host stored.
That address is a real CPU address (polypy's ``cudaMalloc`` is host memory), so the pointer is
an offset into a *pool*: a hidden pointer parameter of the pointee's scalar type starting at the
``u64`` address ``base``, the memory of every allocation the symbol's pointers point into::

    d_unique[bx].d_in2[ei]   ->   d_in2_pool[(d_unique_u64[bx * 29 + 9] - base) / 4 + ei]

Launchers fill the pool at each launch from the symbol's bytes (``n.HeldPointerSlots``): every
pointer of the members the kernel reads must be null or point into a live ``cudaMalloc``
allocation, aligned to its type; a pointer to freed memory, a host pointer or a misaligned one
stops the launch, located at the member's first read. ``__constant__`` memory cannot change
during a launch, and a kernel cannot store a pointer member (refused where it tries).

For isl an access through such a pointer is an access of the pool at an index read from memory:
a may-access of a pointer parameter that may alias every other one, so barriers, races and
footprints stay sound; accesses through ordinary pointers stay exact.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import I64, U64, PointerType

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.values import Pointer, RecordAddress

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


def held_pointer(kb: KernelBuilder, address: RecordAddress, ft: ci.Type, member: str,
                 c: ci.Cursor) -> Pointer | None:
    """The pointer member ``member`` (of type ``ft``) at ``address``, where that is a module
    array of records holding pointers: a pointer into the pool of its pointee type. None
    elsewhere (a record in global memory through a pointer parameter: refused by the caller)."""
    view = address.view(U64)
    held = kb.ctx.held_pointers.get(view) if view is not None else None
    if held is None:
        return None
    target = tm.pointee(ft)
    st = tm.scalar_type(target)
    if st is None or tm.is_pointer(target):
        raise kb.error(f"member '{member}' of type '{ft.spelling}' of '{held.symbol}': a pointer read from "
                       "__constant__ or __device__ memory is supported to scalars only (not to "
                       f"'{target.spelling}')", c)
    pool, base = _pool(kb, st, held, member, c)
    value = n.Load(view, (address.index(U64),), U64, loc=kb.loc(c))
    _note_spelling(kb, (st, held.symbol), value.loc, member, c)
    diff = convert(n.Binary("sub", value, n.Var(base, U64), loc=value.loc), I64)
    offset = diff if st.itemsize == 1 else n.Binary("div", diff, n.Const(st.itemsize, I64), loc=value.loc)
    return Pointer(pool, (), offset, tm.ElemLayout(st, 1, (("", 0),), target.spelling))


def _pool(kb: KernelBuilder, st, held, member: str, c: ci.Cursor) -> tuple[str, str]:
    """The pool of ``st`` for the pointers of ``held`` named ``member`` (made at the first read),
    with those pointers' byte offsets noted for the launch's check."""
    offsets = tuple((offset, path) for path, lt, offset in tm.byte_leaves(held.record.ctype)
                    if tm.is_pointer(lt) and path.rsplit(".", 1)[-1] == member)
    key = (st, held.symbol)
    slots = kb.held_pointers.get(key)
    if slots is None:
        where = kb.loc(c)
        pool = kb.names.fresh(f"{held.symbol}_{st.name}_pool")
        base = kb.names.fresh(f"{held.symbol}_{st.name}_base")
        extent = kb.names.fresh(f"{held.symbol}_{st.name}_extent")
        kb.params.append(n.Param(pool, PointerType(st), loc=where))
        kb.params.append(n.Param(base, U64, loc=where))
        kb.params.append(n.Param(extent, U64, loc=where))
        slots = n.HeldPointerSlots(pool, base, extent, st, held.symbol, held.record.size, held.count, (), where)
    merged = tuple(sorted(set(slots.offsets) | set(offsets)))
    kb.held_pointers[key] = dataclasses.replace(slots, offsets=merged)
    return slots.pool, slots.base


def _note_spelling(kb: KernelBuilder, key, where, member: str, c: ci.Cursor) -> None:
    """The source text of the read of ``member`` at ``c`` (``d_unique[bx].d_in2``), for the race
    diagnostics to spell accesses through it as the source does; none where the text is not
    that member access (a macro's name or call, ``PTR(bx)``)."""
    slots = kb.held_pointers[key]
    tokens = list(c.get_tokens())
    if where is None or [t.spelling for t in tokens[-2:]] not in (['.', member], ['->', member]) \
            or any(loc == where for loc, _ in slots.spellings):
        return
    kb.held_pointers[key] = dataclasses.replace(slots, spellings=slots.spellings + ((where, spaced(tokens)),))


def spaced(tokens: list[ci.Token]) -> str:
    """``tokens`` as the source spaces them on one line (one space where it breaks the line)."""
    out: list[str] = []
    last = None
    for t in tokens:
        start = t.extent.start
        if last is not None and (start.line != last.line or start.column > last.column):
            out.append(" " * (start.column - last.column if start.line == last.line else 1))
        out.append(t.spelling)
        last = t.extent.end
    return "".join(out)

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

Plain pointer variables and arrays of pointers in module memory (``__device__ float* d_scratch;``,
``__device__ int* table[4];``, set with ``cudaMemcpyToSymbol``) are the same: a ``u64`` view of the
variable (``ModuleContext.pointer_global``), each element read through the pools
(``held_variable``); a kernel storing to one is refused (``refuse_stores``).

For isl an access through such a pointer is an access of the pool at an index read from memory:
a may-access of a pointer parameter that may alias every other one, so barriers, races and
footprints stay sound; accesses through ordinary pointers stay exact.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.visitor import walk_only
from polypy.ir.types import I64, U64, PointerType

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.values import HeldPointer, Pointer, RecordAddress

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
    slot = address.index(U64)
    pointer = _through_pool(kb, held, view, slot, ft, member, f"member '{member}' of type '{ft.spelling}' of "
                            f"'{held.symbol}'", c)
    return HeldPointer(**{f.name: getattr(pointer, f.name) for f in dataclasses.fields(pointer)}, view=view, slot=slot)


def held_variable(kb: KernelBuilder, buffer: str, index: tuple[n.Expr, ...], c: ci.Cursor) -> Pointer:
    """Element ``index`` (one index per C dimension) of a module pointer variable or array of
    pointers (``__device__ float* d_scratch;``, ``__device__ int* table[4];``, its ``u64`` view
    ``buffer``): a pointer into the pool of its pointee type. Only read: a kernel storing to such
    a variable is refused (``refuse_stores``)."""
    held = kb.ctx.held_pointers[buffer]
    assert held.dims is not None
    if len(index) != max(len(held.dims), 1):
        raise kb.error(f"'{held.symbol}' (an array of pointers in __constant__ or __device__ memory) used here as "
                       "a pointer to its rows is not supported", c)
    flat: n.Expr | None = None
    for m, i in enumerate(index):
        row = 1
        for d in held.dims[m + 1:]:
            row *= d
        term = i if row == 1 else n.Binary("mul", i, n.Const(row, i.type), loc=i.loc)
        flat = term if flat is None else n.Binary("add", convert(flat, I64), convert(term, I64), loc=i.loc)
    assert flat is not None
    pointer = _through_pool(kb, held, buffer, flat, held.ctype, "", f"'{held.symbol}' of type '{held.ctype.spelling}'", c)
    return HeldPointer(**{f.name: getattr(pointer, f.name) for f in dataclasses.fields(pointer)}, view=buffer,
                       slot=flat)


def store_held(kb: KernelBuilder, lv: HeldPointer, address: n.Expr, c: ci.Cursor) -> None:
    """``d_keep[i] = p``: the address ``p`` holds (a heap block's, a pointer read from memory, or 0)
    stored into the variable's ``u64`` view. A kernel that also reads the variable is refused
    (``refuse_stores``): its pool is found when the launch starts."""
    assert lv.slot is not None
    buffer = next((b for b in kb.ctx.globals.values() if b.name == lv.view), None)
    if buffer is not None and buffer.space == "constant":
        raise kb.error(f"'{kb.ctx.held_pointers[lv.view].symbol}' is in __constant__ memory: device code cannot write "
                       "it", c)
    kb.emit(n.Store(lv.view, (lv.slot,), convert(address, U64), loc=kb.loc(c)))
    kb.pointer_stores.append((lv.view, kb.loc(c)))


def is_held_variable(kb: KernelBuilder, buffer: str, layout: tm.ElemLayout | None = None) -> bool:
    """Whether ``buffer`` is the ``u64`` view of a module pointer variable or array of pointers
    (``held_variable``), seen through ``layout`` (where given) as its pointers, not through a cast
    as numbers (``*(unsigned long long*)&d_scratch``: that is its ``u64`` element)."""
    held = kb.ctx.held_pointers.get(buffer)
    return held is not None and held.dims is not None and (layout is None or layout == held.layout)


def refuse_stores(kb: KernelBuilder, body: tuple[n.Stmt, ...]) -> None:
    """A kernel storing to a module pointer variable that it also reads (``d_scratch = p;`` then
    ``d_scratch[i]``; also a store through a view or an atomic) is refused at the store: the launch
    checks and pools the pointers the symbol holds when it starts, and a pointer set during the
    launch is in no pool. A kernel that only stores there (``d_keep[i] = (float*)malloc(n)``, a
    setup kernel of the device heap, ``store_held``) leaves the pointers to later launches, whose
    pools find them."""
    read = {x.buffer for x in walk_only(body, n.Load)}  # type: ignore[attr-defined]
    for x in walk_only(body, n.Store, n.AtomicRMW):
        held = kb.ctx.held_pointers.get(x.buffer)  # type: ignore[attr-defined]
        if held is not None and held.dims is not None and (x.buffer in read or not isinstance(x, n.Store)):
            raise UserError(f"'{held.symbol}' holds device pointers in __constant__ or __device__ memory: a kernel "
                            "storing to it is not supported (set it from the host with cudaMemcpyToSymbol)",
                            x.loc)
    for view, where in kb.pointer_stores:  # pointer members of records (`d_vec.data = p`) too
        held = kb.ctx.held_pointers[view]
        if view in read:
            raise UserError(f"'{held.symbol}' holds device pointers in __constant__ or __device__ memory: a kernel "
                            "storing a pointer to it and reading it is not supported (the launch finds the pools "
                            "of the pointers it reads when it starts)", where)


def _through_pool(kb: KernelBuilder, held, view: str, slot: n.Expr, ft: ci.Type, member: str, what: str,
                  c: ci.Cursor) -> Pointer:
    """The pointer of type ``ft`` read from element ``slot`` of the ``u64`` view ``view`` of
    ``held``'s symbol: an offset into the pool of its pointee type."""
    target = tm.pointee(ft)
    st = tm.scalar_type(target)
    if st is None or tm.is_pointer(target):
        raise kb.error(f"{what}: a pointer read from __constant__ or __device__ memory is supported to scalars only "
                       f"(not to '{target.spelling}')", c)
    pool, base = _pool(kb, st, held, member, c)
    value = n.Load(view, (slot,), U64, loc=kb.loc(c))
    _note_spelling(kb, (st, held.symbol), value.loc, member, c)
    diff = convert(n.Binary("sub", value, n.Var(base, U64), loc=value.loc), I64)
    offset = diff if st.itemsize == 1 else n.Binary("div", diff, n.Const(st.itemsize, I64), loc=value.loc)
    return Pointer(pool, (), offset, tm.ElemLayout(st, 1, (("", 0),), target.spelling))


def _pool(kb: KernelBuilder, st, held, member: str, c: ci.Cursor) -> tuple[str, str]:
    """The pool of ``st`` for the pointers of ``held`` named ``member`` (made at the first read),
    with those pointers' byte offsets noted for the launch's check."""
    offsets = tuple((offset, path) for path, lt, offset in tm.byte_leaves(held.ctype)
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
        slots = n.HeldPointerSlots(pool, base, extent, st, held.symbol, held.size, held.count, (), where)
    merged = tuple(sorted(set(slots.offsets) | set(offsets)))
    kb.held_pointers[key] = dataclasses.replace(slots, offsets=merged)
    return slots.pool, slots.base


def _note_spelling(kb: KernelBuilder, key, where, member: str, c: ci.Cursor) -> None:
    """The source text of the read of ``member`` at ``c`` (``d_unique[bx].d_in2``), for the race
    diagnostics to spell accesses through it as the source does; none where the text is not
    that member access (a macro's name or call, ``PTR(bx)``)."""
    slots = kb.held_pointers[key]
    tokens = list(c.get_tokens())
    whole = not member and c.kind in (ci.CursorKind.DECL_REF_EXPR, ci.CursorKind.ARRAY_SUBSCRIPT_EXPR)
    if where is None or (not whole and [t.spelling for t in tokens[-2:]] not in (['.', member], ['->', member])) \
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

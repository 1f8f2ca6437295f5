"""The device heap: ``malloc``/``free`` (and ``new``/``delete`` of numbers) in device code
(docs/device_heap.md).

The heap is one allocation of the whole program's runtime (``parts/heap.h``), made at the first
launch of a kernel that uses it, sized by ``cudaLimitMallocHeapSize``. A kernel sees it as the
pools of held pointers (``frontend/lower/held_pointers.py``): a hidden pointer parameter per
element type (``n.HeldPointerSlots`` of symbol ``n.HEAP``) at the heap's address ``base``. A
pointer into the heap is an offset into the pool of its type, exactly as a pointer read from a
``__device__`` variable is, so one model covers both: a heap pointer stored in module memory and
read by a later launch points into that launch's pool of the variable, which spans the heap::

    float* p = (float*)malloc(n * 4);   ->   atomic.malloc heap_u64[0], (u64)(n * 4) -> a
                                             p is heap_f32[(i64)(a - heap_f32_base) / 4 + ...]
    free(p);                            ->   atomic.free heap_u64[0], heap_f32_base + (u64)(off * 4)

The allocator is an atomic read-modify-write of the heap's bookkeeping (``n.HEAP_OPS``): never
moved, merged or removed by a pass, a may-access of the heap for isl. A null pointer is the
address 0 (``pool_address``): its offset is ``-base / size``, which no block has.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import I64, U64, PointerType, ScalarType

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.lower.printing import misaligned_fault
from frontend.values import HeapBlock, Pointer

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


def heap_pool(kb: KernelBuilder, st: ScalarType, c: ci.Cursor) -> tuple[str, str]:
    """The heap seen as elements of ``st``: its pool parameter and the heap's address (made once)."""
    key = (st, n.HEAP)
    slots = kb.held_pointers.get(key)
    if slots is None:
        where = kb.loc(c)
        pool = kb.names.fresh(f"heap_{st.name}")
        base = kb.names.fresh(f"heap_{st.name}_base")
        extent = kb.names.fresh(f"heap_{st.name}_extent")
        kb.params.append(n.Param(pool, PointerType(st), loc=where))
        kb.params.append(n.Param(base, U64, loc=where))
        kb.params.append(n.Param(extent, U64, loc=where))
        slots = n.HeldPointerSlots(pool, base, extent, st, n.HEAP, 0, 0, (), where)
        kb.held_pointers[key] = slots
    return slots.pool, slots.base


def pool_bases(kb: KernelBuilder) -> dict[str, tuple[str, ScalarType]]:
    """Every pool of the kernel (the heap's, and those of pointers read from memory): its base's
    name and element type."""
    return {s.pool: (s.base, s.elem) for s in kb.held_pointers.values()}


def is_pool_pointer(kb: KernelBuilder, v: object) -> bool:
    return isinstance(v, Pointer) and v.buffer in pool_bases(kb) and not v.prefix and v.record is None \
        and v.stored is None and v.layout.is_scalar


def pool_address(kb: KernelBuilder, v: Pointer, c: ci.Cursor) -> n.Expr:
    """The address (``u64``) a pointer into a pool holds: the pool's base plus its offset in bytes;
    0 for a null pointer (whose offset is ``-base / size``)."""
    base, st = pool_bases(kb)[v.buffer]
    loc = kb.loc(c)
    if v.offset is None:
        return n.Var(base, U64, loc=loc)
    offset = convert(v.offset, I64)
    if st.itemsize != 1:
        offset = n.Binary("mul", offset, n.Const(st.itemsize, I64), loc=loc)
    return n.Binary("add", n.Var(base, U64, loc=loc), convert(offset, U64), loc=loc)


def at_address(kb: KernelBuilder, address: n.Expr, target: ci.Type, c: ci.Cursor) -> Pointer:
    """The pointer of pointee type ``target`` holding ``address`` (a heap block's, or 0)."""
    st = tm.scalar_type(target)
    if st is None or tm.is_pointer(target):
        raise kb.error(f"device heap memory seen as '{target.spelling}' is not supported (numbers only: records, "
                       "objects and pointers in heap memory are not modelled)", c)
    pool, base = heap_pool(kb, st, c)
    loc = kb.loc(c)
    diff = convert(n.Binary("sub", convert(address, U64), n.Var(base, U64, loc=loc), loc=loc), I64)
    offset = diff if st.itemsize == 1 else n.Binary("div", diff, n.Const(st.itemsize, I64), loc=loc)
    return Pointer(pool, (), offset, tm.ElemLayout(st, 1, (("", 0),), target.spelling))


def null_in(kb: KernelBuilder, v: Pointer, c: ci.Cursor) -> Pointer:
    """A null pointer of ``v``'s pool and type (``p = nullptr`` of a pointer into a pool)."""
    base, st = pool_bases(kb)[v.buffer]
    loc = kb.loc(c)
    diff = convert(n.Binary("sub", n.Const(0, U64), n.Var(base, U64, loc=loc), loc=loc), I64)
    offset = diff if st.itemsize == 1 else n.Binary("div", diff, n.Const(st.itemsize, I64), loc=loc)
    return dataclasses.replace(v, offset=offset)


def device_malloc(kb: KernelBuilder, size: n.Expr, c: ci.Cursor) -> HeapBlock:
    """``malloc(size)``: a block of the heap, or 0 when it has no room (as CUDA's)."""
    pool, _ = heap_pool(kb, U64, c)
    block = kb.temp(U64, n.Const(0, U64), "block", c)
    kb.emit(n.AtomicRMW("malloc", pool, (n.Const(0, I64),), convert(size, U64), dest=block.name, loc=kb.loc(c)))
    return HeapBlock(n.Var(block.name, U64, loc=kb.loc(c)))


def device_free(kb: KernelBuilder, address: n.Expr, c: ci.Cursor) -> None:
    """``free(p)`` of a block's address (0: nothing). An address that is no block in use (freed
    twice, not from the heap, inside a block) stops the thread as a failed device assertion."""
    pool, _ = heap_pool(kb, U64, c)
    bad = kb.temp(U64, n.Const(0, U64), "freed", c)
    loc = kb.loc(c)
    kb.emit(n.AtomicRMW("free", pool, (n.Const(0, I64),), convert(address, U64), dest=bad.name, loc=loc))
    misaligned_fault(kb, n.Binary("ne", n.Var(bad.name, U64, loc=loc), n.Const(0, U64), loc=loc),
                     "free() of a pointer that is no block of the device heap in use", c, fault="assert")


def address_of(kb: KernelBuilder, v: object, c: ci.Cursor) -> n.Expr:
    """The address a pointer value holds, for ``free`` and for a store to module memory: a heap
    block, or a pointer into a pool; anything else is refused."""
    if isinstance(v, HeapBlock):
        return v.address
    if isinstance(v, Pointer) and is_pool_pointer(kb, v):
        return pool_address(kb, v, c)
    raise kb.error("this pointer is not one polypy can pass to free or store to memory in device code (pointers "
                   "from device malloc or new, or read from __device__ variables, are supported)", c)


def new_expr(kb: KernelBuilder, c: ci.Cursor, discard: bool) -> Pointer | None:
    """``new T(v)``, ``new T``, ``new T[n]`` of a number type ``T``: a block of the heap (null when
    it has no room, as device ``new`` gives) and, for ``new T(v)``, ``v`` stored in it. Objects of
    classes, placement new, brace initializers and ``new T[n]()`` are refused."""
    target = tm.pointee(c.type)
    st = tm.scalar_type(target)
    if st is None or tm.is_pointer(target):
        raise kb.error(f"'new' of '{target.spelling}' in device code is not supported (the device heap holds numbers "
                       "only: objects, their constructors and virtual functions on the heap are not modelled)", c)
    tokens = [t.spelling for t in c.get_tokens()]
    at = tokens.index("new") + 1 if "new" in tokens else len(tokens)
    if at < len(tokens) and tokens[at] == "(":
        raise kb.error("placement new in device code is not supported", c)
    opener = next((t for t in tokens[at:] if t in ("[", "(", "{")), None)
    args = [x for x in c.get_children() if x.kind.is_expression()]
    loc = kb.loc(c)
    if opener == "[":
        if tokens[-1] in (")", "}"):
            raise kb.error("'new T[n]' with an initializer in device code is not supported", c)
        count = convert(kb.scalar(args[0]), U64)
        size = n.Binary("mul", count, n.Const(st.itemsize, U64), loc=loc)
        return at_address(kb, device_malloc(kb, size, c).address, target, c)
    if opener == "{" or len(args) > 1:
        raise kb.error("'new T{...}' in device code is not supported (write new T(v))", c)
    block = device_malloc(kb, n.Const(st.itemsize, U64), c)
    pointer = at_address(kb, block.address, target, c)
    if args:  # new T(v): v stored where the block is
        value = convert(kb.scalar(args[0]), st)
        with kb.sub_block() as stmts:
            kb.emit(n.Store(pointer.buffer, (pointer.offset,), value, loc=loc))  # type: ignore[arg-type]
        kb.emit(n.If(n.Binary("ne", block.address, n.Const(0, U64), loc=loc), tuple(stmts), (), loc=loc))
    return None if discard else pointer


def delete_expr(kb: KernelBuilder, c: ci.Cursor, null: Callable[[ci.Cursor], bool]) -> None:
    """``delete p`` / ``delete[] p`` of a pointer to numbers: ``free`` (no destructor to run);
    ``null`` says whether the operand is a null pointer constant (``null_tests.is_null_pointer``)."""
    args = [x for x in c.get_children() if x.kind.is_expression()]
    if len(args) != 1:
        raise kb.error("unsupported delete expression", c)
    target = tm.pointee(args[0].type)
    if tm.scalar_type(target) is None or tm.is_pointer(target):
        raise kb.error(f"'delete' of '{target.spelling}' in device code is not supported (the device heap holds "
                       "numbers only)", c)
    if null(args[0]):  # `delete nullptr`: nothing
        return None
    device_free(kb, address_of(kb, kb.expr(args[0]), args[0]), c)
    return None

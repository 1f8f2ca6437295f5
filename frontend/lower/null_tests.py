"""Null pointers in device code: ``p == NULL`` / ``p != NULL`` (``nullptr``, ``0``) of a pointer
into a kernel's pointer parameter tests the launch's argument, an i32 parameter the launcher
computes (``n.NONNULL``); a pointer variable initialized to null waits for its first assignment
(``declarations``). ``self`` is the ``KernelBuilder``."""
from __future__ import annotations

import dataclasses

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import I32, U64

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.clang_setup import evaluate
from frontend.lower.context import CK
from frontend.lower.heap import is_pool_pointer, pool_address
from frontend.lower.helpers import ArrayRef, strip
from frontend.lower.pointer_choice import choice_value
from frontend.values import HeapBlock, Pointer, PointerChoice


def is_null_pointer(c: ci.Cursor) -> bool:
    """``NULL``, ``nullptr``, ``0`` or ``(T*)0`` where a pointer is expected."""
    inner = strip(c)
    if inner.kind in (CK.CXX_NULL_PTR_LITERAL_EXPR, CK.GNU_NULL_EXPR):
        return True
    if not tm.is_pointer(c.type):
        return False
    while inner.kind in (CK.CSTYLE_CAST_EXPR, CK.UNEXPOSED_EXPR, CK.PAREN_EXPR):
        kids = [x for x in inner.get_children() if x.kind.is_expression()]
        if len(kids) != 1:
            return False
        inner = strip(kids[0])
    return inner.kind in (CK.CXX_NULL_PTR_LITERAL_EXPR, CK.GNU_NULL_EXPR) or \
        (inner.kind == CK.INTEGER_LITERAL and evaluate(inner) == 0)


def null_test(self, op: str, pointer_c: ci.Cursor, c: ci.Cursor) -> n.Expr:
    """``p == NULL`` / ``p != NULL`` of a pointer into a pointer parameter: whether the
    argument was null, an i32 its launcher computes (``n.NONNULL``). Any other pointer
    polypy tracks points into a buffer, so it is not null."""
    v = self.expr(pointer_c)
    if isinstance(v, ArrayRef):
        v = v.decay(self)
    if isinstance(v, HeapBlock):  # `malloc(n) == NULL`: the block's address (heap.py)
        v = n.Binary("ne", v.address, n.Const(0, U64), loc=self.loc(c))
        result = v if op == "!=" else n.Unary("not", v, loc=self.loc(c))
        st = tm.scalar_type(c.type)
        return convert(result, st) if st is not None else result
    if not isinstance(v, (Pointer, PointerChoice)):
        raise self.error("comparing this kind of value with a null pointer is not supported in device code", c)
    result = n.Binary("ne" if op == "!=" else "eq", _nonnull(self, v, c), n.Const(0, I32), loc=self.loc(c))
    st = tm.scalar_type(c.type)
    return convert(result, st) if st is not None else result


def pointer_condition(self, c: ci.Cursor) -> n.Expr:
    """A condition of pointer type (C's ``if (p)``): whether the pointer is not null."""
    v = self.expr(c)
    if isinstance(v, ArrayRef):
        v = v.decay(self)
    if not isinstance(v, (Pointer, PointerChoice)):
        raise self.error("pointer tests are not supported in device code", c)
    return pointer_truth(self, v, c)


def pointer_truth(self, v: Pointer | PointerChoice, c: ci.Cursor) -> n.Expr:
    """A pointer as a truth value (``if (p)``, ``!p``, ``p && x``, ``p != NULL``): 1 when it is
    not null, an i32. A pointer into a pointer parameter is null when its argument was (an
    offset never makes a null pointer non-null in a well-defined program: CUDA's pointer
    arithmetic stays inside the allocation); any other pointer polypy tracks points into a
    buffer, so it is not null."""
    return n.Binary("ne", _nonnull(self, v, c), n.Const(0, I32), loc=self.loc(c))


def _nonnull(self, v: Pointer | PointerChoice, c: ci.Cursor) -> n.Expr:
    """An i32, not 0 when ``v`` is not null (see ``pointer_truth``); of a pointer into one of
    several buffers, that of the one it points into."""
    if isinstance(v, PointerChoice):
        return choice_value(v.sel, [_nonnull(self, o, c) for o in v.options], self.loc(c))
    if is_pool_pointer(self, v):  # into the heap, or read from memory: its address is not 0 (heap.py)
        return convert(n.Binary("ne", pool_address(self, v, c), n.Const(0, U64), loc=self.loc(c)), I32)
    if v.record is None and any(p.name == v.buffer for p in self.params):
        return nonnull_param(self, v.buffer, c)
    if v.record is not None or not any(b == v.buffer for b in self.buffers):
        raise self.error("comparing this pointer with a null pointer is not supported in device code", c)
    return n.Const(1, I32)


def nonnull_param(self, buffer: str, c: ci.Cursor) -> n.Expr:
    """The i32 parameter saying whether pointer parameter ``buffer`` is not null (made once)."""
    for i, sp in enumerate(self.source_params):
        paths = dict(sp.members)
        if paths.get("") != buffer or len(sp.members) > 2:
            continue
        if n.NONNULL not in paths:
            name = self.names.fresh(buffer + "_nonnull")
            self.params.append(n.Param(name, I32, loc=self.loc(c)))
            self.source_params[i] = dataclasses.replace(sp, members=sp.members + ((n.NONNULL, name),))
            paths[n.NONNULL] = name
        return n.Var(paths[n.NONNULL], I32, loc=self.loc(c))
    raise self.error("comparing this pointer with a null pointer is not supported in device code", c)

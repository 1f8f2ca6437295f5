"""Casts: ``(T)v``, ``static_cast``, ``reinterpret_cast``... to numbers, pointers (views of a
buffer at another type, checked for alignment where needed) and records."""
from __future__ import annotations

from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import BOOL

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.lower.bitcasts import bit_view, record_pointee, record_view, views_as_itself
from frontend.function_ids import is_function_type
from frontend.lower.context import CK
from frontend.lower.function_pointers import is_null_constant
from frontend.lower.helpers import ArrayRef, describe
from frontend.lower.inheritance import converted
from frontend.lower.pointer_choice import settled
from frontend.lower.printing import misaligned_fault
from frontend.lower.views import view_pointer
from frontend.lower.heap import at_address
from frontend.values import Aggregate, BitsLV, HeapBlock, PackLV, Pointer, PointerChoice, Value, VarAddress

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


CASTS = (CK.CSTYLE_CAST_EXPR, CK.CXX_STATIC_CAST_EXPR, CK.CXX_FUNCTIONAL_CAST_EXPR, CK.CXX_CONST_CAST_EXPR,
          CK.CXX_REINTERPRET_CAST_EXPR)


def function_pointer_cast(kb: KernelBuilder, c: ci.Cursor, operand: ci.Cursor, discard: bool) -> Value | None:
    """A cast from or to a function pointer: to its own type or to bool (its id, or whether it is
    not null), a null constant to a function pointer; anything else (the id is no address) refused."""
    def function_type(t: ci.Type) -> str | None:
        t = t.get_canonical()
        if tm.is_function_pointer(t):
            return t.get_pointee().get_canonical().spelling
        return t.spelling if is_function_type(t) else None

    src, dst = function_type(operand.type), function_type(c.type)
    if dst is not None and src is None and is_null_constant(operand):
        return n.Const(0, tm.FUNCTION_POINTER, loc=kb.loc(c))
    if src is not None and (dst == src or (dst is None and tm.scalar_type(c.type) == BOOL)):
        v = kb.expr(operand, discard=discard)
        return None if discard else convert(v, tm.scalar_type(c.type))
    raise kb.error(f"conversion from '{operand.type.spelling}' to '{c.type.spelling}' is not supported in device code "
                   "(a device function pointer is polypy's id of the function, not an address: it converts only "
                   "to its own type and to bool)", c)


def cast(kb: KernelBuilder, c: ci.Cursor, discard: bool) -> Value | None:
    operand = [ch for ch in c.get_children() if ch.kind.is_expression()]
    if not operand:
        raise kb.error("unsupported cast", c)
    if tm.is_function_pointer(c.type) or tm.is_function_pointer(operand[-1].type) or \
            is_function_type(operand[-1].type):
        return function_pointer_cast(kb, c, operand[-1], discard)
    v = kb.expr(operand[-1], discard=discard)
    if discard:
        return None
    v = converted(kb, v, operand[-1], c)  # `static_cast<Base*>(&d)`; a downcast is refused
    if isinstance(v, ArrayRef):
        v = v.decay(kb)
    st = tm.scalar_type(c.type)
    if st is not None:
        if isinstance(v, (Pointer, PointerChoice, VarAddress)):
            raise kb.error("pointer-to-number conversions are not supported in device code (the address as an "
                           "integer: alignment tests, pointers passed as integers)", c)
        if not isinstance(v, n.Expr):
            raise kb.error(f"cannot convert a {describe(v)} to a number", c)
        return convert(v, st)
    if isinstance(v, HeapBlock):  # `(float*)malloc(n)`: a pointer into the heap's pool of floats (heap.py)
        if tm.is_pointer(c.type) and tm.pointee(c.type).get_canonical().kind == ci.TypeKind.VOID:
            return v
        if tm.is_pointer(c.type):
            return at_address(kb, v.address, tm.pointee(c.type), c)
        raise kb.error(f"conversion of device malloc's result to '{c.type.spelling}' is not supported", c)
    if tm.is_pointer(c.type):
        if isinstance(v, Pointer):
            return pointer_cast(kb, v, c, True)
        if isinstance(v, PointerChoice):  # each candidate seen through the view; its offset checked once
            v = settled(kb, v, c)
            return PointerChoice(v.sel, tuple(pointer_cast(kb, o, c, k == 0) for k, o in enumerate(v.options)))
        if isinstance(v, VarAddress):
            target = tm.pointee(c.type)
            if isinstance(v.target, BitsLV):
                v = VarAddress(v.target.var)  # `(float*)(int*)&f`: f again, or another view of it
            if isinstance(v.target, PackLV) and v.target.whole is not None:
                v = VarAddress(v.target.whole)  # `(char4*)(uint32_t*)&rgba`: the record again
            if views_as_itself(v, target):
                return v
            view = bit_view(v, target) or record_view(v, record_pointee(operand[-1]), target)
            if view is not None:
                return VarAddress(view)
            raise kb.error(f"reading a variable's bytes as another type ('{c.type.spelling}': pointer "
                           "punning) is not supported here: only between a local scalar or record of "
                           "scalars without padding, bool or half and a type of its size, made of whole "
                           "members or parts of one; a value conversion would give another answer", c)
    if tm.is_record(c.type) and isinstance(v, Aggregate):
        return v
    if c.type.get_canonical().kind == ci.TypeKind.VOID:
        return None
    raise kb.error(f"unsupported conversion to '{c.type.spelling}'", c)


def pointer_cast(kb: KernelBuilder, v: Pointer, c: ci.Cursor, check: bool) -> Pointer:
    """``(T*)v``; ``check``: emit the run-time alignment check where one is needed."""
    target = tm.pointee(c.type)
    if target.get_canonical().kind == ci.TypeKind.VOID:
        return v
    if v.layout.record is not None or (tm.is_record(target) and not tm.is_homogeneous(target)):
        same = v.layout.record is not None and tm.is_record(target) and \
            tm.canonical(target).get_size() == v.layout.record.size and \
            tm.canonical(target).get_declaration() == v.layout.record.ctype.get_declaration()
        if same:
            return v
        raise kb.error("pointer casts to or from records of mixed member types are not supported", c)
    align = tm.canonical(target).get_align()
    if v.record is None and align > (v.stored or v.layout.scalar).itemsize and \
            any(p.name == v.buffer for p in kb.params) and v.buffer not in kb.aligned:
        kb.aligned[v.buffer] = (align, kb.loc(c))  # the argument's own address
    return view_pointer(v, target, c.type.spelling, kb.loc(c),
                        lambda cond, text: misaligned_fault(kb, cond, text, c) if check else None)

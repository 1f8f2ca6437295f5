"""The conditional operator ``cond ? a : b`` (for ``frontend.lower.expressions``)."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import I32, I64

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.lower.helpers import ArrayRef
from frontend.lower.pointer_choice import choose_pointer
from frontend.values import Aggregate, Pointer, PointerChoice, Value

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


def lower_conditional(kb: KernelBuilder, c: ci.Cursor) -> Value:
    """``cond ? a : b``: a select of numbers, records or pointers into one buffer (an ``if``
    assigning a temporary where a side has statements), a ``PointerChoice`` of pointers into
    different buffers (``pointer_choice``); with type ``void``, an ``if``."""
    cond_c, a_c, b_c = list(c.get_children())
    cond = kb.condition(cond_c)
    if c.type.get_canonical().kind == ci.TypeKind.VOID:
        # `cond ? f() : (void)0` (assert's expansion): a statement, no value.
        with kb.sub_block() as a_stmts:
            kb.expr(a_c, discard=True)
        with kb.sub_block() as b_stmts:
            kb.expr(b_c, discard=True)
        if a_stmts or b_stmts:
            kb.emit(n.If(cond, tuple(a_stmts), tuple(b_stmts), loc=kb.loc(c)))
        return None  # type: ignore[return-value]
    with kb.sub_block() as a_stmts:
        a = kb.expr(a_c)
    with kb.sub_block() as b_stmts:
        b = kb.expr(b_c)
    loc = kb.loc(c)
    if isinstance(a, ArrayRef):
        a = a.decay(kb)
    if isinstance(b, ArrayRef):
        b = b.decay(kb)
    st = tm.scalar_type(c.type)
    if isinstance(a, n.Expr) and isinstance(b, n.Expr):
        if st is not None:
            a, b = convert(a, st), convert(b, st)
        if not a_stmts and not b_stmts:
            return n.Select(cond, a, b, loc=loc)
        t = kb.temp(a.type, None, "sel", c)
        kb.emit(n.If(cond, tuple(a_stmts) + (n.Assign(t.name, a, loc=loc),),
                       tuple(b_stmts) + (n.Assign(t.name, b, loc=loc),), loc=loc))
        return n.Var(t.name, t.type)
    if isinstance(a, Aggregate) and isinstance(b, Aggregate) and set(a.fields) == set(b.fields):
        if not all(isinstance(v, n.Expr) for v in list(a.fields.values()) + list(b.fields.values())):
            raise kb.error("conditional between records holding pointers is not supported", c)
        if not a_stmts and not b_stmts:
            return Aggregate({k: n.Select(cond, a.fields[k], b.fields[k], loc=loc)  # type: ignore[arg-type]
                              for k in a.fields}, a.spelling)
        temps = {k: kb.temp(v.type, None, "sel", c) for k, v in a.fields.items()}  # type: ignore[union-attr]
        kb.emit(n.If(cond,
                       tuple(a_stmts) + tuple(n.Assign(t.name, a.fields[k], loc=loc) for k, t in temps.items()),  # type: ignore[arg-type]
                       tuple(b_stmts) + tuple(n.Assign(t.name, b.fields[k], loc=loc) for k, t in temps.items()),  # type: ignore[arg-type]
                       loc=loc))
        return Aggregate({k: n.Var(t.name, t.type) for k, t in temps.items()}, a.spelling)
    if isinstance(a, Pointer) and isinstance(b, Pointer) and not a_stmts and not b_stmts \
            and a.buffer == b.buffer and a.prefix == b.prefix and a.layout == b.layout and a.stored == b.stored:
        oa = a.offset if a.offset is not None else n.Const(0, I32)
        ob = b.offset if b.offset is not None else n.Const(0, I32)
        if oa.type != ob.type:
            oa, ob = convert(oa, I64), convert(ob, I64)
        return dataclasses.replace(a, offset=n.Select(cond, oa, ob, loc=loc))
    if isinstance(a, (Pointer, PointerChoice)) and isinstance(b, (Pointer, PointerChoice)):
        return choose_pointer(kb, cond, a, b, a_stmts, b_stmts, c)  # into different buffers
    raise kb.error("this conditional expression is not supported in device code "
                     "(both sides must be numbers, or records, or pointers)", c)

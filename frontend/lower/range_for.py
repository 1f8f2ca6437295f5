"""Range-based ``for`` in device code: ``for (float v : a)``, ``for (auto& p : pts)``,
``for (float v : arr)`` of a ``std::array``, ``for (float v : {a, b, c})``.

C++ runs ``auto&& __range = a; auto __begin = begin; auto __end = end; for (; __begin != __end;
++__begin) { decl = *__begin; body }``. Libclang shows the loop variable, whose initializer names
the hidden ``__begin``, the range expression and the body. Where ``__begin`` and ``__end`` are
pointers into one buffer (an array: its first element and one past its last; a class whose
``begin()``/``end()`` return pointers, as ``std::array``'s do; an initializer list: a local array
of its items), the loop is a counted loop of the element offset ``k`` from ``__begin``'s to
``__end``'s, both computed once before it, and ``__begin`` is a pointer at ``k``: the loop
variable's declaration is then lowered as any other (a copy, a reference, a record by its copy
constructor). Iterators of class type and ranges polypy cannot place are refused."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import I32, I64

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.lower import declarations, inlining
from frontend.lower.context import CK, function_body, initializer_of
from frontend.lower.helpers import ArrayRef, strip
from frontend.lower.initializer_lists import is_initializer_list, list_array, list_items
from frontend.lower.member_rows import RowsRef
from frontend.lower.param_arrays import element_of
from frontend.values import Aggregate, Pointer, PtrVarLV, RefBinding, VarLV

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


def range_for(kb: KernelBuilder, c: ci.Cursor) -> None:
    children = list(c.get_children())
    if len(children) != 3 or children[0].kind != CK.VAR_DECL:
        raise kb.error("a range-based for statement polypy cannot read", c)
    var, range_c, body_c = children
    hidden = _hidden(var, "__begin")
    if hidden is None or not tm.is_pointer(hidden.type):
        raise kb.error("a range-based for statement over iterators of class type is not supported in device code "
                       "(begin() and end() must return pointers)", range_c)
    begin_decl = hidden
    rt = tm.canonical(tm.strip_reference(range_c.type))
    if rt.kind == ci.TypeKind.CONSTANTARRAY and tm.canonical(rt.element_type).kind == ci.TypeKind.CONSTANTARRAY:
        _rows(kb, c, var, range_c, body_c, int(rt.element_count))
        return
    items = list_items(range_c)
    if items is not None:  # `for (float v : {a, b, c})`: the list's array of its items, made now
        begin = list_array(kb, items, range_c)
        start = n.Const(0, I32)
        end_offset: n.Expr = n.Const(len(list(items.get_children())), I32)
    elif rt.kind == ci.TypeKind.CONSTANTARRAY:  # `__begin = __range`: the array's first element
        begin = _pointer(kb, kb.expr(range_c), range_c)
        start = begin.offset if begin.offset is not None else n.Const(0, I32)
        end_offset = n.Binary("add", start, n.Const(rt.element_count, start.type))
    elif tm.is_record(rt) and (not is_initializer_list(rt) or strip(range_c).kind == CK.DECL_REF_EXPR):
        # `auto&& __range = range; auto __begin = __range.begin(), __end = __range.end();`
        begin_init = initializer_of(begin_decl)
        range_decl = None if begin_init is None else _hidden(begin_init, "__range")
        if range_decl is None:
            raise kb.error("a range-based for statement polypy cannot read", c)
        obj = kb.lvalue(range_c)
        kb.bind(range_decl, RefBinding(obj))
        begin = _pointer(kb, kb.expr(begin_init), range_c)
        start = begin.offset if begin.offset is not None else n.Const(0, I32)
        size = _std_array_size(rt)
        if size is not None:  # std::array<T, N> (an implicit instance: libclang lists no end()): begin() + N
            end_offset = n.Binary("add", start, n.Const(size, start.type))
        elif is_initializer_list(rt):  # a std::initializer_list parameter: begin() + its length member
            length = kb.read(kb.member_lv(obj, list(rt.get_fields())[1].spelling, range_c), range_c)
            if not isinstance(length, n.Expr):
                raise kb.error("a std::initializer_list polypy cannot read", range_c)
            end_offset = n.Binary("add", convert(start, I64), convert(length, I64))
        else:
            end_method = _end_method(strip(begin_init).referenced)
            if end_method is None:
                raise kb.error(f"'{range_c.type.spelling}' has no end() polypy can find", range_c)
            end = _pointer(kb, inlining.inline(kb, end_method, [], range_c, False, this=obj), range_c)
            if (end.buffer, end.prefix, end.record) != (begin.buffer, begin.prefix, begin.record):
                raise kb.error("begin() and end() of this range point into different buffers", range_c)
            end_offset = end.offset if end.offset is not None else n.Const(0, I32)
    else:
        raise kb.error(f"a range-based for statement over '{range_c.type.spelling}' is not supported in device code",
                       range_c)
    ty = start.type if start.type.bits >= end_offset.type.bits else end_offset.type
    first = kb.temp(ty, convert(start, ty), "range_begin", c)
    last = kb.temp(ty, convert(end_offset, ty), "range_end", c)
    k = kb.names.fresh("range_k")
    kb.bind(begin_decl, PtrVarLV(dataclasses.replace(begin, offset=None), VarLV(k, ty)))
    kb.loop_depth += 1
    try:
        with kb.sub_block() as body:
            declarations.var_decl(kb, var)
            kb.statement(body_c)
    finally:
        kb.loop_depth -= 1
    kb.emit(n.For(k, ty, n.Var(first.name, ty), n.Var(last.name, ty), n.Const(1, ty), tuple(body), loc=kb.loc(c)))


def _rows(kb: KernelBuilder, c: ci.Cursor, var: ci.Cursor, range_c: ci.Cursor, body_c: ci.Cursor, count: int) -> None:
    """``for (auto& row : m)`` of an array of arrays: ``row`` names row ``k`` (a reference; a
    copy of a row would decay to a pointer, refused)."""
    if not tm.is_reference(var.type):
        raise kb.error("a range-based for statement over the rows of an array with a loop variable that is not a "
                       "reference is not supported in device code (write auto& row)", var)
    rows = kb.expr(range_c)
    if not isinstance(rows, (ArrayRef, RowsRef)):
        raise kb.error("a range-based for statement over rows polypy cannot place is not supported in device code",
                       range_c)
    k = kb.names.fresh("range_row")
    kb.loop_depth += 1
    try:
        with kb.sub_block() as body:
            kb.bind(var, RefBinding(rows.index(kb, n.Var(k, I32), range_c)))  # type: ignore[arg-type]
            kb.statement(body_c)
    finally:
        kb.loop_depth -= 1
    kb.emit(n.For(k, I32, n.Const(0, I32), n.Const(count, I32), n.Const(1, I32), tuple(body), loc=kb.loc(c)))


def _hidden(c: ci.Cursor, prefix: str) -> ci.Cursor | None:
    """The hidden variable (``__begin1``, ``__range1``) a reference in ``c`` names."""
    for x in c.walk_preorder():
        if x.kind == CK.DECL_REF_EXPR and x.referenced is not None and x.referenced.kind == CK.VAR_DECL and \
                x.referenced.spelling.startswith(prefix):
            return x.referenced
    return None


def _pointer(kb: KernelBuilder, value, c: ci.Cursor) -> Pointer:
    if isinstance(value, ArrayRef):
        value = value.decay(kb, c)
    if isinstance(value, Aggregate):  # an array member of a record parameter held in memory (param_arrays.py)
        first = element_of(value, n.Const(0, I32))
        if first is not None:
            elem = tm.canonical(tm.strip_reference(c.type))
            spelling = elem.element_type.spelling if elem.kind == ci.TypeKind.CONSTANTARRAY else first.type.name
            value = Pointer(first.buffer, first.index[:-1], first.index[-1],
                            tm.ElemLayout(first.type, 1, (("", 0),), spelling))
    if not isinstance(value, Pointer):
        raise kb.error("a range-based for statement whose begin() or end() polypy cannot place in a buffer is not "
                       "supported in device code", c)
    return value


def _end_method(begin: ci.Cursor | None) -> ci.Cursor | None:
    """The ``end()`` beside member function ``begin`` (of the same constness)."""
    if begin is None or begin.kind != CK.CXX_METHOD or begin.semantic_parent is None:
        return None
    for m in begin.semantic_parent.get_children():
        if m.kind == CK.CXX_METHOD and m.spelling == "end" and not list(m.get_arguments()) and \
                m.is_const_method() == begin.is_const_method() and function_body(m.get_definition() or m) is not None:
            return m.get_definition() or m
    return None


def _std_array_size(t: ci.Type) -> int | None:
    """``N`` of ``std::array<T, N>``, or None."""
    t = tm.canonical(t)
    if not t.spelling.startswith("std::array<") or t.get_num_template_arguments() != 2:
        return None
    decl = t.get_declaration()
    parent = decl.semantic_parent
    while parent is not None and parent.kind == CK.NAMESPACE and parent.spelling != "std":
        parent = parent.semantic_parent  # (an inline namespace: libc++'s __1)
    if parent is None or parent.spelling != "std":
        return None
    arrays = [tm.canonical(f.type) for f in t.get_fields()]
    if len(arrays) != 1 or arrays[0].kind != ci.TypeKind.CONSTANTARRAY:
        return None
    return int(arrays[0].element_count)  # its one member, T[N]

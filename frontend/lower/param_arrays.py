"""Array members of by-value record kernel parameters indexed at run time.

A record parameter is flattened into one IR parameter per scalar leaf (``kernel_param``), an
array member one per element: ``p.w[2]`` is the parameter ``p_w_2_``. An index known only at run
time (``for (int i = 0; i < N; ++i) tmp += p.param[i];``, NVIDIA's LargeKernelParameter) needs
the elements in memory: such an array member (one dimension, scalar elements, the parameter
never assigned) becomes one read-only pointer parameter instead, and its launcher passes the
array of its own by-value copy of the record (``(int*)(p.param)``), which lives until the
launch returns. Each element is then a place in that memory, so constant indices, copies of
the record and run-time indices all read the same values.
"""
from __future__ import annotations

import clang.cindex as ci

from polypy.ir import nodes as n

from frontend import ctypes_map as tm
from frontend.arith import add_offsets, split_constant
from frontend.clang_setup import evaluate, preorder
from frontend.function_scan import scan
from frontend.lower.context import CK, decl_key
from frontend.lower.helpers import strip
from frontend.values import Aggregate, AggLV, LValue, MemLV


def runtime_indexed_arrays(kernel: ci.Cursor, param: ci.Cursor) -> set[str]:
    """The member paths (``.param``, ``.a.w``) of the array members of record parameter ``param``
    of scalar elements that ``kernel``'s body indexes with an index that is not a constant."""
    key = decl_key(param)
    out: set[str] = set()
    for x in preorder(kernel):
        if x.kind == CK.CXX_FOR_RANGE_STMT:  # `for (float v : p.w)`: a loop over its elements
            children = list(x.get_children())
            base, path = (children[1], _member_path(children[1], key)) if len(children) == 3 else (x, None)
        elif x.kind != CK.ARRAY_SUBSCRIPT_EXPR:
            continue
        else:
            base, index = list(x.get_children())
            path = _member_path(base, key)
            if evaluate(index) is not None:
                continue
        if path is None:
            continue
        t = tm.canonical(strip(base).type)
        if t.kind == ci.TypeKind.CONSTANTARRAY and tm.scalar_type(t.element_type) is not None:
            out.add(path)
    record = tm.canonical(tm.strip_reference(param.type)).get_declaration().get_usr()
    return out | _method_indexed(kernel).get(record, set())


def _method_indexed(kernel: ci.Cursor) -> dict[str, set[str]]:
    """For the member functions ``kernel`` reaches (``Arr<T, N>::operator[]``'s ``return v[i];``):
    class (USR) -> its own array members of scalar elements that they index at run time
    through ``this``. A parameter of such a class keeps those members in memory, as its own
    run-time indices do (a member function's index is a run-time one wherever it is called)."""
    out: dict[str, set[str]] = {}
    seen: set[str] = set()
    todo = [kernel]
    while todo:
        f = todo.pop()
        key = f.get_usr() + "@" + str(f.hash)
        if key in seen:
            continue
        seen.add(key)
        todo.extend(scan(f).callees)
        if f.kind != CK.CXX_METHOD or f.semantic_parent is None:
            continue
        owner = tm.canonical(f.semantic_parent.type).get_declaration().get_usr()
        for x in preorder(f):
            if x.kind != CK.ARRAY_SUBSCRIPT_EXPR:
                continue
            base, index = list(x.get_children())
            member = strip(base)
            if member.kind != CK.MEMBER_REF_EXPR or evaluate(index) is not None or \
                    any(strip(ch).kind != CK.CXX_THIS_EXPR for ch in member.get_children() if ch.kind.is_expression()):
                continue
            t = tm.canonical(member.type)
            if t.kind == ci.TypeKind.CONSTANTARRAY and tm.scalar_type(t.element_type) is not None:
                out.setdefault(owner, set()).add("." + member.spelling)
    return out


def _member_path(c: ci.Cursor, key: tuple) -> str | None:
    """``.a.b`` for ``p.a.b`` where ``p`` is the parameter of ``key`` (no pointer on the way)."""
    parts: list[str] = []
    c = strip(c)
    while c.kind == CK.MEMBER_REF_EXPR:
        children = list(c.get_children())
        if not children or tm.is_pointer(children[0].type):
            return None
        parts.append(c.spelling)
        c = strip(children[0])
    if c.kind != CK.DECL_REF_EXPR or c.referenced is None or decl_key(c.referenced) != key or not parts:
        return None
    return "".join("." + p for p in reversed(parts))


def is_variable_member(c: ci.Cursor) -> bool:
    """``v.a.b`` of a record variable ``v`` (no pointer on the way): a place ``lvalue`` finds."""
    c = strip(c)
    seen = False
    while c.kind == CK.MEMBER_REF_EXPR:
        children = [ch for ch in c.get_children() if ch.kind.is_expression()]
        if not children:  # `v` in a member function: `this->v`, of the object `this` is (a place)
            return c.referenced is not None and c.referenced.kind == CK.FIELD_DECL
        if strip(children[0]).kind == CK.CXX_THIS_EXPR:  # `this->v`
            return True
        if tm.is_pointer(children[0].type):
            return False
        seen = True
        c = strip(children[0])
    return seen and c.kind == CK.DECL_REF_EXPR


def element_lv(base: AggLV, index: n.Expr) -> LValue | None:
    """Element ``index`` of an array member of a record place (``AggLV`` with fields ``[0]``,
    ``[1]``...): the field for a constant index, the memory element for an array member held in
    memory (``MemLV`` fields of one buffer at consecutive indices: a record parameter's array,
    an array member of a record in shared, local or global memory); None otherwise."""
    fields = base.fields
    if isinstance(index, n.Const) and f"[{int(index.value)}]" in fields:
        return fields[f"[{int(index.value)}]"]
    return _consecutive([fields.get(f"[{k}]") for k in range(len(fields))], index,
                        lambda e: (e.buffer, e.index, e.type) if isinstance(e, MemLV) else None)


def element_of(base: Aggregate, index: n.Expr) -> MemLV | None:
    """Element ``index`` of an array member held in memory (``Aggregate`` of the loads of its
    elements ``[0]``, ``[1]``... of one buffer at consecutive indices), or None for any other
    aggregate."""
    fields = base.fields
    return _consecutive([fields.get(f"[{k}]") for k in range(len(fields))], index,
                        lambda e: (e.buffer, e.index, e.etype) if isinstance(e, n.Load) else None)


def _consecutive(elements: list, index: n.Expr, parts) -> MemLV | None:
    """``MemLV`` of element ``index`` when ``elements`` (``parts(e)``: buffer, indices, type) are
    elements ``b + c``, ``b + c + 1``... of one row of one buffer (``b`` any expression, ``c`` a
    constant): element ``b + c + index``. The indices stay affine where ``b`` is."""
    if not elements or any(e is None for e in elements):
        return None
    first = parts(elements[0])
    if first is None or not first[1]:
        return None
    buffer, indices, ty = first
    rest, c0 = split_constant(indices[-1])
    for k, e in enumerate(elements):
        p = parts(e)
        if p is None or (p[0], p[2], p[1][:-1]) != (buffer, ty, indices[:-1]) or \
                split_constant(p[1][-1]) != (rest, c0 + k):
            return None
    last = index if rest is None else add_offsets(rest, index)
    if c0:
        last = n.Binary("add", last, n.Const(c0, last.type), loc=index.loc)
    return MemLV(buffer, indices[:-1] + (last,), ty)


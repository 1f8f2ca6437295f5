"""Virtual member function calls in device code, closed world (docs/function_pointers.md).

A virtual call runs the final overrider of the object's dynamic class. polypy knows that class
where the object is one the kernel made: a local of a concrete class (its dynamic class is its
declared class: a copy of a derived object into a base local is a base object), reached
directly, through ``Base& r = d`` or ``Base* p = &d`` or a ``Base&`` parameter (the place is a
base subobject that remembers the object it lies in: ``BaseLV``), or through ``this`` in a
member function called on such an object. The call is then the overrider, inlined with
``this`` its subobject of the object. What is left is refused, located: an object in memory
(device memory written by the host holds a host vtable pointer, on which CUDA itself forbids
virtual calls; shared or global memory the kernel fills is not modelled either), a call made
while a constructor or destructor runs (the dynamic class is then the one being built), a call
through a pointer that may point to one of several objects.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import clang.cindex as ci

from frontend import bases as cxx
from frontend import ctypes_map as tm
from frontend.lower import inlining
from frontend.lower.context import CK, function_body
from frontend.lower.helpers import strip
from frontend.lower.inheritance import class_of, subobject, this_source
from frontend.values import AggLV, BaseLV, BoundCopyLV, UnionLV, Value

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


def virtual_call(kb: KernelBuilder, c: ci.Cursor, fn: ci.Cursor, children: list[ci.Cursor], discard: bool,
                 place_of) -> Value | None:
    """Call ``c`` of virtual member ``fn``; ``place_of(base)``: the place of the object
    expression ``base`` (None: the implicit ``this``), as for any member call."""
    callee = strip(children[0]) if children else None
    if fn.spelling.startswith("operator") or callee is None or callee.kind != CK.MEMBER_REF_EXPR:
        raise kb.error(f"this call of the virtual member function '{fn.spelling}' is not supported in device code", c)
    args = children[1:]
    base = next((ch for ch in callee.get_children() if ch.kind.is_expression()), None)
    static = this_source(kb, base)
    if static is None:
        raise kb.error(f"virtual call of '{fn.spelling}' on an object whose class polypy does not know", c)
    place = _object_place(kb, base, fn, c, place_of)
    if _qualified(callee, base):  # `b.Base::f()`: no dispatch, that very function
        this = subobject(kb, place, cxx.base_path(static, fn.semantic_parent.type) or [], c, static)
        return _inline(kb, fn, args, c, discard, this)
    if any(f.cursor is not None and f.cursor.kind in (CK.CONSTRUCTOR, CK.DESTRUCTOR) for f in kb.frames):
        raise kb.error(f"virtual call of '{fn.spelling}' while a constructor or destructor runs is not supported in "
                       "device code (the object's dynamic class is then the one being built)", c)
    dynamic, whole = _dynamic_class(kb, place, static, fn, c)
    owner, target = _final_overrider(dynamic, fn)
    if target is None:
        raise kb.error(f"'{dynamic.spelling}' has no definition of the virtual member function '{fn.spelling}' "
                       "(a pure virtual call)", c)
    path = cxx.base_path(dynamic, owner)
    if path is None:
        raise kb.error(f"virtual call of '{fn.spelling}': '{owner.spelling}' is not a base of '{dynamic.spelling}'", c)
    this = subobject(kb, whole, path, c, dynamic)
    return _inline(kb, target, args, c, discard, this)


def _object_place(kb: KernelBuilder, base: ci.Cursor | None, fn: ci.Cursor, c: ci.Cursor, place_of):
    """The place of a virtual call's object: never a copy of an object a reference names (a
    copy's class is the static one: ``id(q).f()`` with ``const Shape& id(const Shape&)``)."""
    inner = strip(base) if base is not None else None
    if inner is None or tm.is_pointer(inner.type) or inner.kind in _PLACES:
        return place_of(base)
    if inner.kind == CK.CALL_EXPR:
        called = inner.referenced
        if called is not None and called.kind != CK.CONSTRUCTOR and tm.is_reference(called.result_type):
            return kb.lvalue(inner)  # the place the call's reference names
        return place_of(base)  # an object made by the call: its class is the static one
    if inner.kind == CK.CXX_FUNCTIONAL_CAST_EXPR:  # `Square(v).f()`: a new object
        return place_of(base)
    raise kb.error(f"virtual call of '{fn.spelling}' on this kind of object expression is not supported in device code "
                   "(name the object, or call through a reference or pointer to it)", c)


_PLACES = (CK.DECL_REF_EXPR, CK.MEMBER_REF_EXPR, CK.ARRAY_SUBSCRIPT_EXPR, CK.UNARY_OPERATOR, CK.CXX_THIS_EXPR)


def _qualified(callee: ci.Cursor, base: ci.Cursor | None) -> bool:
    """Whether member expression ``callee`` names its member with a qualifier (``b.Base::f``), told
    by the tokens after its object expression."""
    end = base.extent.end.offset if base is not None else -1
    return any(t.spelling == "::" for t in callee.get_tokens() if t.extent.start.offset >= end)


def _inline(kb: KernelBuilder, target: ci.Cursor, args, c, discard, this) -> Value | None:
    definition = target.get_definition() or target
    if function_body(definition) is None:
        raise kb.error(f"member function '{target.spelling}' has no definition polypy can translate", c)
    return inlining.inline(kb, definition, args, c, discard, this=this)


def _dynamic_class(kb: KernelBuilder, place, static: ci.Type, fn: ci.Cursor, c: ci.Cursor):
    """The class of the complete object ``place`` lies in, and that object's place."""
    dynamic = static
    tu = static.get_declaration().translation_unit
    while isinstance(place, BaseLV):
        found = class_of(place.whole_class, tu)
        if found is None:
            raise kb.error(f"virtual call of '{fn.spelling}' on an object whose class polypy does not know", c)
        dynamic, place = found, place.whole
    if isinstance(place, BoundCopyLV):  # its class is the reference's, maybe not the object's
        raise kb.error(f"virtual call of '{fn.spelling}' on an object bound to a const reference that polypy holds as "
                       "a copy is not supported in device code (pass a named object)", c)
    if type(place) is not AggLV or isinstance(place, UnionLV):
        raise kb.error(f"virtual call of '{fn.spelling}' on an object in memory is not supported in device code: "
                       "polypy knows the dynamic class only of objects the kernel makes as locals (an object "
                       "the host wrote to device memory holds a host vtable pointer, on which CUDA forbids "
                       "virtual calls too)", c)
    return dynamic, place


def _final_overrider(dynamic: ci.Type, fn: ci.Cursor) -> tuple[ci.Type, ci.Cursor | None]:
    """The class declaring the final overrider of ``fn`` in ``dynamic``, and that member (None if
    it is pure virtual there): the first declaration along ``dynamic``'s bases (single
    inheritance down to ``fn``'s class) with ``fn``'s name and type."""
    signature = fn.type.get_canonical().spelling
    t: ci.Type | None = dynamic
    while t is not None:
        decl = t.get_canonical().get_declaration()
        for m in decl.get_children():
            if m.kind == CK.CXX_METHOD and m.spelling == fn.spelling and m.is_virtual_method() and \
                    m.type.get_canonical().spelling == signature:
                return t, (None if m.is_pure_virtual_method() and function_body(m.get_definition() or m) is None
                           else m)
        if cxx.same_class(t, fn.semantic_parent.type):
            break
        t = next((b.type for b in cxx.bases(t) if cxx.base_path(b.type, fn.semantic_parent.type) is not None), None)
    return fn.semantic_parent.type, None

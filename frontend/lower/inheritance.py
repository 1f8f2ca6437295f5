"""Base-class subobjects in device code (see ``frontend.bases``): a member named through a
derived object (``this->end``, ``d.x``), a base member function's ``this``, and derived-to-base
conversions (``Base& b = d;``, ``static_cast<Base&>(d)``, ``Base* p = &d;``) all select the
base subobject of the object's place, found from the static types clang gives; a downcast is
refused."""
from __future__ import annotations

from typing import TYPE_CHECKING

import clang.cindex as ci

from frontend import bases as cxx
from frontend import ctypes_map as tm
from frontend.lower.context import CK
from frontend.lower.helpers import select_member, strip

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


def object_type(b: KernelBuilder, obj: ci.Cursor | None) -> ci.Type | None:
    """The static record type of a member expression's object (``None``: the implicit ``this``)."""
    if obj is None:
        fn = b.frame.cursor
        parent = fn.semantic_parent if fn is not None else None
        return parent.type if parent is not None and parent.kind in _RECORDS else None
    t = tm.strip_reference(obj.type)
    if tm.is_pointer(t):
        t = tm.pointee(t)
    return t if tm.is_record(t) else None


_RECORDS = (CK.STRUCT_DECL, CK.CLASS_DECL, CK.CLASS_TEMPLATE, CK.CLASS_TEMPLATE_PARTIAL_SPECIALIZATION)


def path_to(b: KernelBuilder, source: ci.Type | None, target: ci.Type | None, c: ci.Cursor) -> list[str]:
    """The base subobject names from an object of ``source`` to its ``target`` subobject."""
    if source is None or target is None or not tm.is_record(source) or not tm.is_record(target):
        return []
    path = cxx.base_path(source, target)
    if path is not None:
        return path
    if cxx.base_path(target, source) is not None:
        raise b.error(f"conversion of '{source.spelling}' to its derived class '{target.spelling}' (a downcast) "
                      "is not supported in device code", c)
    return []


def subobject(b: KernelBuilder, place, path: list[str], c: ci.Cursor):
    for name in path:
        place = b.member_lv(place, name, c)
    return place


def sub_value(b: KernelBuilder, value, path: list[str], c: ci.Cursor):
    from frontend.values import Aggregate

    for name in path:
        value = select_member(value.fields, name, c, lambda fields, sp: Aggregate(fields, sp), b)
    return value


def member_path(b: KernelBuilder, obj: ci.Cursor | None, c: ci.Cursor) -> list[str]:
    """For member expression ``c`` (``obj.x``, ``p->x``, an implicit ``this->x``): the base
    subobjects down to the class that declares the member clang resolved."""
    ref = c.referenced
    if ref is None or ref.kind != CK.FIELD_DECL or ref.semantic_parent is None:
        return []
    # ``obj`` as the caller evaluates it: its implicit derived-to-base conversions already applied
    return path_to(b, object_type(b, obj), ref.semantic_parent.type, c)


def this_path(b: KernelBuilder, obj: ci.Cursor | None, fn: ci.Cursor, c: ci.Cursor) -> list[str]:
    """For a call of member function ``fn`` on ``obj``: the subobject that is its ``this``."""
    parent = fn.semantic_parent
    if parent is None or parent.kind not in _RECORDS + (CK.UNION_DECL,):
        return []
    # ``obj`` as ``object_place`` evaluates it: without its implicit conversions
    return path_to(b, object_type(b, None if obj is None else strip(obj)), parent.type, c)


def conversion_path(b: KernelBuilder, source: ci.Cursor, target: ci.Type, c: ci.Cursor) -> list[str]:
    """A reference or pointer to ``target`` bound to expression ``source`` (derived-to-base)."""
    t = tm.strip_reference(target)
    if tm.is_pointer(t):
        t = tm.pointee(t)
    return path_to(b, object_type(b, strip(source)), t, c)


def _record_of(t: ci.Type) -> ci.Type | None:
    if tm.is_builtin_scalar(t):  # (most conversions: told without canonicalizing)
        return None
    t = tm.strip_reference(t)
    if tm.is_pointer(t):
        t = tm.pointee(t)
    return t if tm.is_record(t) else None


def converted(b: KernelBuilder, v, source: ci.Cursor, c: ci.Cursor):
    """Value ``v`` of expression ``source`` converted to ``c``'s type: a derived object (or a
    pointer to one) as its base subobject; anything else unchanged."""
    from frontend.values import Accessor, Aggregate, AggLV, RecLV, VarAddress

    if isinstance(v, Accessor):  # PyTorch's accessors: their base's members are the accessor's (frontend.lower.accessors)
        return v
    target = _record_of(c.type)
    if target is None or _record_of(source.type) is None or \
            tm.is_pointer(tm.strip_reference(c.type)) != tm.is_pointer(tm.strip_reference(source.type)):
        return v
    path = path_to(b, _record_of(source.type), target, c)
    if not path:
        return v
    if isinstance(v, Aggregate):
        return sub_value(b, v, path, c)
    if isinstance(v, VarAddress):
        return VarAddress(subobject(b, v.target, path, c))
    if isinstance(v, (AggLV, RecLV)):
        return subobject(b, v, path, c)
    raise b.error(f"converting this '{source.type.spelling}' to its base class '{target.spelling}' is not supported "
                  "in device code", c)

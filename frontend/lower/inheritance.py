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
from frontend.unit_cache import PerUnit

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
        raise _downcast_error(b, source, target, c)
    return []


def _downcast_error(b: KernelBuilder, source: ci.Type, target: ci.Type, c: ci.Cursor):
    return b.error(f"conversion of '{source.spelling}' to its derived class '{target.spelling}' (a downcast) "
                   "is not supported in device code here: polypy follows a downcast only of an object it knows "
                   "to be a base subobject of a '" + target.spelling + "' (CRTP's static_cast<Derived*>(this))", c)


def subobject(b: KernelBuilder, place, path: list[str], c: ci.Cursor, source: ci.Type | None = None):
    """The subobject of ``place`` down base ``path``. Given the static type ``source`` of
    ``place``, each record subobject found remembers the object it lies in and its class
    (``BaseLV``), for a downcast back to it."""
    from frontend.values import AggLV, BaseLV, UnionLV

    for name in path:
        whole = place
        place = b.member_lv(place, name, c)
        if source is None:
            continue
        if type(place) is AggLV and not isinstance(whole, UnionLV):
            place = BaseLV(place.fields, place.spelling, whole, name, _usr(source))
            _CLASSES.of(source.get_declaration().translation_unit)[_usr(source)] = source  # (class_of)
        source = next((base.type for base in cxx.bases(source) if base.name == name), None)
    return place


_CLASSES = PerUnit(4)  # the classes of the objects ``BaseLV`` s lie in, by USR


def class_of(whole_class: str, tu: ci.TranslationUnit) -> ci.Type | None:
    """The class a ``BaseLV`` 's ``whole_class`` names (a virtual call's dynamic type: virtual_calls.py)."""
    return _CLASSES.of(tu).get(whole_class)


def _usr(t: ci.Type) -> str:
    return t.get_canonical().get_declaration().get_usr()


def downcast(b: KernelBuilder, place, source: ci.Type, target: ci.Type, c: ci.Cursor):
    """The ``target`` object that base subobject ``place`` (of class ``source``) lies in:
    exact only where ``place`` was reached from that object through the bases ``target``
    derives ``source`` by; anything else is refused."""
    from frontend.values import BaseLV

    path = cxx.base_path(target, source)
    if path is None:
        return None
    whole_class = ""
    for name in reversed(path):
        if not isinstance(place, BaseLV) or place.name != name:
            raise _downcast_error(b, source, target, c)
        whole_class, place = place.whole_class, place.whole
    if whole_class != _usr(target):
        raise _downcast_error(b, source, target, c)
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
    return path_to(b, this_source(b, obj), parent.type, c)


def this_source(b: KernelBuilder, obj: ci.Cursor | None) -> ci.Type | None:
    """The static class of the object of a member function call (``None``: the implicit ``this``)."""
    return object_type(b, None if obj is None else strip(obj))


def conversion_path(b: KernelBuilder, source: ci.Cursor, target: ci.Type, c: ci.Cursor) -> list[str]:
    """A reference or pointer to ``target`` bound to expression ``source`` (derived-to-base)."""
    t = tm.strip_reference(target)
    if tm.is_pointer(t):
        t = tm.pointee(t)
    return path_to(b, object_type(b, strip(source)), t, c)


def bound_subobject(b: KernelBuilder, place, source: ci.Cursor, target: ci.Type, c: ci.Cursor):
    """The place a reference to ``target`` bound to expression ``source`` (at ``place``) names."""
    t = tm.strip_reference(target)
    if tm.is_pointer(t):
        t = tm.pointee(t)
    from_type = object_type(b, strip(source))
    return subobject(b, place, path_to(b, from_type, t, c), c, from_type)


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
    from_type = _record_of(source.type)
    if from_type is not None and not cxx.same_class(from_type, target) and \
            cxx.base_path(target, from_type) is not None:  # a downcast
        if isinstance(v, VarAddress):
            return VarAddress(downcast(b, v.target, from_type, target, c))
        if isinstance(v, AggLV):
            return downcast(b, v, from_type, target, c)
    path = path_to(b, from_type, target, c)
    if not path:
        return v
    if isinstance(v, Aggregate):
        return sub_value(b, v, path, c)
    if isinstance(v, VarAddress):
        return VarAddress(subobject(b, v.target, path, c, from_type))
    if isinstance(v, (AggLV, RecLV)):
        return subobject(b, v, path, c, from_type)
    raise b.error(f"converting this '{source.type.spelling}' to its base class '{target.spelling}' is not supported "
                  "in device code", c)


def downcast_place(b: KernelBuilder, cast: ci.Cursor):
    """The place named by cast expression ``cast`` when it converts an object of a base class
    to its derived class (``static_cast<Derived&>(*this)``; clang types the expression
    without its reference, but a record cast from a base to its derived class can only be a
    reference downcast: a constructor call in between would show as the operand), or None."""
    to = _record_of(cast.type)
    operands = [ch for ch in cast.get_children() if ch.kind.is_expression()]
    if to is None or not operands or tm.is_pointer(tm.strip_reference(cast.type)):
        return None
    source = operands[-1]
    from_type = _record_of(source.type)
    if from_type is None or tm.is_pointer(tm.strip_reference(source.type)) or cxx.same_class(from_type, to) or \
            cxx.base_path(to, from_type) is None:
        return None
    return downcast(b, b.lvalue(source), from_type, to, cast)


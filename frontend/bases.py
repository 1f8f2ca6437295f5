"""Non-virtual base classes of C++ records (``struct D : B1, protected B2 { ... }``).

A base subobject is seen as a member of the derived record with a reserved name, ``__base0``,
``__base1``... (in declaration order; names starting with ``__`` are reserved to the
implementation in C++, so no user member can clash): a derived object's flat layout is its
bases' leaves first (``.__base0.end``), then its own members, as C++ lays them out. Clang has
already resolved names (hiding, qualification), so a member expression names the class that
declares the member: the frontend walks from the object's static type down ``base_path`` to
that class's subobject.

What is not exact is refused: virtual bases, classes with virtual member functions (a vtable
pointer polypy does not model), and the bases of an implicit class template instantiation
(libclang lists no children for it, so its base classes cannot be seen).
"""
from __future__ import annotations

import dataclasses

import clang.cindex as ci

from polypy.errors import UserError

CK = ci.CursorKind
TK = ci.TypeKind
PREFIX = "__base"


@dataclasses.dataclass(frozen=True)
class Base:
    """A direct non-virtual base subobject: its member name, type and byte offset."""

    name: str
    type: ci.Type
    offset: int


def _decl(t: ci.Type) -> ci.Cursor:
    return t.get_canonical().get_declaration()


def _specifiers(decl: ci.Cursor) -> list[ci.Cursor]:
    return [ch for ch in decl.get_children() if ch.kind == CK.CXX_BASE_SPECIFIER]


def _pattern(decl: ci.Cursor) -> ci.Cursor | None:
    """The class template (or partial specialization) that implicit instantiation ``decl``
    comes from, or None."""
    pattern = ci.conf.lib.clang_getSpecializedCursorTemplate(decl)
    if pattern is None or pattern.kind not in (CK.CLASS_TEMPLATE, CK.CLASS_TEMPLATE_PARTIAL_SPECIALIZATION):
        return None
    return pattern


def has_bases(t: ci.Type) -> bool:
    """Whether record ``t`` derives from a class (seen directly or through its template)."""
    decl = _decl(t)
    if _specifiers(decl):
        return True
    pattern = _pattern(decl)
    return pattern is not None and bool(_specifiers(pattern))


def is_polymorphic(decl: ci.Cursor) -> bool:
    return any(ch.kind in (CK.CXX_METHOD, CK.DESTRUCTOR) and ch.is_virtual_method() for ch in decl.get_children())


def _is_empty(t: ci.Type) -> bool:
    c = t.get_canonical()
    return not any(True for _ in c.get_fields()) and all(_is_empty(b.type) for b in bases(c))


def bases(t: ci.Type, where=None) -> list[Base]:
    """The direct base subobjects of record ``t`` in declaration order, at their offsets."""
    c = t.get_canonical()
    if c.kind != TK.RECORD:
        return []
    decl = c.get_declaration()
    specs = _specifiers(decl)
    if not specs:
        pattern = _pattern(decl)
        if pattern is not None and _specifiers(pattern):
            if all(s.type.get_canonical().kind == TK.RECORD for s in _specifiers(pattern)):
                specs = _specifiers(pattern)  # bases that do not depend on the template's parameters
            else:
                raise UserError(f"base classes of the class template instance '{t.spelling}' are not supported in "
                                f"device code: its base '{_specifiers(pattern)[0].type.spelling}' depends on the "
                                "template's parameters, and libclang does not show an implicit instance's bases",
                                where)
        else:
            return []
    out: list[Base] = []
    end = 0
    for i, s in enumerate(specs):
        bt = s.type.get_canonical()
        if ci.conf.lib.clang_isVirtualBase(s):
            raise UserError(f"virtual base class '{s.type.spelling}' of '{t.spelling}' is not supported in device "
                            "code", where)
        if bt.kind != TK.RECORD:
            raise UserError(f"base class '{s.type.spelling}' of '{t.spelling}' is not supported in device code",
                            where)
        if is_polymorphic(decl) or is_polymorphic(bt.get_declaration()):
            raise UserError(f"'{t.spelling}' or its base '{s.type.spelling}' has virtual member functions: "
                            "classes with a vtable are not supported in device code", where)
        if _is_empty(bt):
            # An empty base takes no space (at offset 0), unless another subobject of its type
            # would share that address: then C++ moves it, which polypy does not model.
            if any(_decl(o.type) == bt.get_declaration() for o in out) or \
                    any(f.type.get_canonical().get_declaration() == bt.get_declaration() for f in c.get_fields()):
                raise UserError(f"empty base class '{s.type.spelling}' of '{t.spelling}' shares its address with "
                                "another subobject of its type: not supported in device code", where)
            out.append(Base(f"{PREFIX}{i}", bt, 0))
            continue
        align = bt.get_align()
        offset = -(-end // align) * align
        if out and any(not _is_empty(o.type) for o in out) and _tail_padding(out[-1].type):
            # C++ may place this base in the tail padding of the one before (non-POD bases).
            raise UserError(f"base class '{s.type.spelling}' of '{t.spelling}' follows a base with tail padding: "
                            "this layout is not supported in device code", where)
        out.append(Base(f"{PREFIX}{i}", bt, offset))
        end = offset + bt.get_size()
    own = [c.get_offset(f.spelling) for f in c.get_fields() if f.spelling]
    if any(o >= 0 and o // 8 < end for o in own) or c.get_size() < end:
        raise UserError(f"the layout of '{t.spelling}' and its bases is not one polypy can follow", where)
    return out


def _tail_padding(t: ci.Type) -> bool:
    """Whether record ``t`` ends in padding (bytes after its last member)."""
    c = t.get_canonical()
    last = 0
    for b in bases(c):
        last = max(last, b.offset + b.type.get_size())
    for f in c.get_fields():
        o = c.get_offset(f.spelling)
        if o >= 0:
            last = max(last, o // 8 + f.type.get_canonical().get_size())
    return last < c.get_size()


def base_offset(t: ci.Type, name: str) -> int | None:
    """Byte offset of base subobject ``name`` (``__base0``) of ``t``, or None for a member."""
    if not name.startswith(PREFIX):
        return None
    for b in bases(t):
        if b.name == name:
            return b.offset
    return None


def same_class(a: ci.Type, b: ci.Type) -> bool:
    return _decl(a) == _decl(b)


def base_path(derived: ci.Type, target: ci.Type) -> list[str] | None:
    """The base subobject names from a ``derived`` object to its ``target`` subobject (``[]``
    when they are one class), or None when ``target`` is not ``derived`` nor one of its bases."""
    if same_class(derived, target):
        return []
    for b in bases(derived):
        rest = base_path(b.type, target)
        if rest is not None:
            return [b.name] + rest
    return None

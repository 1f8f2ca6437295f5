"""Non-virtual base classes of C++ records (``struct D : B1, protected B2 { ... }``).

A base subobject is seen as a member of the derived record with a reserved name, ``__base0``,
``__base1``... (in declaration order; names starting with ``__`` are reserved to the
implementation in C++, so no user member can clash): a derived object's flat layout is its
bases' leaves first (``.__base0.end``), then its own members, as C++ lays them out. Clang has
already resolved names (hiding, qualification), so a member expression names the class that
declares the member: the frontend walks from the object's static type down ``base_path`` to
that class's subobject.

The bases of an implicit class template instance (``Loader<float, true>`` deriving from
``IO<const T, CHECKED>``) are not listed by libclang (it shows no children of an implicit
instance). ``learn`` finds them where the kernel's code converts such an object to a base
(clang's implicit derived-to-base conversions, written for every use of a base member or base
member function): the base instance of each of the template's base specifiers is the one
converted-to type that is an instance of the specifier's template. The layout that results is
checked against clang's offsets of the own members and size.

What is not exact is refused: virtual bases, classes with virtual member functions other than
single inheritance from a polymorphic base (its primary base at offset 0, sharing its vtable
pointer: frontend.lower.virtual_calls), and an instance's base that its code never converts to.
"""
from __future__ import annotations

import dataclasses

import clang.cindex as ci

from polypy.errors import UserError

from frontend.function_scan import scan
from frontend.unit_cache import PerUnit

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


# Per translation unit, the USR of a class template instance -> the base instances its code
# converts it to (see ``learn``), for the last few units only (``frontend.unit_cache``).
_SEEN_BASES: PerUnit = PerUnit(kept=16)


def learn(fn: ci.Cursor) -> None:
    """Record the derived-to-base conversions of instances of class templates in the code that
    function ``fn`` reaches (its body and the definitions of the functions it calls)."""
    tu = fn.translation_unit
    seen = _SEEN_BASES.of(tu)
    visited: set[str] = set()
    todo = [fn]
    while todo:
        f = todo.pop()
        key = f.get_usr() + "@" + str(f.hash)
        if key in visited:
            continue
        visited.add(key)
        facts = scan(f)  # (one walk of f's cursors for every such question: frontend.function_scan)
        todo.extend(facts.callees)
        for to, source in facts.conversions:
            if _pattern(source.get_declaration()) is None:
                continue
            found = seen.setdefault(source.get_declaration().get_usr(), [])
            if not any(b.get_declaration() == to.get_declaration() for b in found):
                found.append(to)


def _seen_base(decl: ci.Cursor, spec: ci.Cursor) -> ci.Type | None:
    """The base instance of ``decl`` (an implicit instance) for the template's base specifier
    ``spec``: the one converted-to instance of the specifier's template (``learn``)."""
    template = next((ch.referenced for ch in spec.get_children() if ch.kind == CK.TEMPLATE_REF), None)
    if template is None:
        return None
    found = _SEEN_BASES.of(decl.translation_unit).get(decl.get_usr(), [])
    matches = [t for t in found if _pattern(t.get_declaration()) == template]
    return matches[0] if len(matches) == 1 else None


def is_polymorphic(decl: ci.Cursor) -> bool:
    return any(ch.kind in (CK.CXX_METHOD, CK.DESTRUCTOR) and ch.is_virtual_method() for ch in decl.get_children())


def is_dynamic(t: ci.Type) -> bool:
    """Whether objects of record ``t`` hold a vtable pointer: it or a base has virtual functions."""
    c = t.get_canonical()
    if c.kind != TK.RECORD:
        return False
    decl = c.get_declaration()
    return is_polymorphic(decl) or any(is_dynamic(s.type) for s in _specifiers(decl))


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
    types = [s.type.get_canonical() for s in specs]
    if not specs:
        pattern = _pattern(decl)
        if pattern is None or not _specifiers(pattern):
            return []
        specs = _specifiers(pattern)
        types = []
        for s in specs:
            bt = s.type.get_canonical()
            if bt.kind != TK.RECORD:  # a base depending on the template's parameters
                seen = _seen_base(decl, s)
                if seen is None:
                    raise UserError(f"base class '{s.type.spelling}' of the class template instance '{t.spelling}' "
                                    "is not supported in device code: libclang does not show an implicit instance's "
                                    "bases, and its code converts it to no instance of that template polypy could "
                                    "take for it", where)
                bt = seen
            types.append(bt)
    out: list[Base] = []
    end = 0
    for i, (s, bt) in enumerate(zip(specs, types)):
        if ci.conf.lib.clang_isVirtualBase(s):
            raise UserError(f"virtual base class '{s.type.spelling}' of '{t.spelling}' is not supported in device "
                            "code", where)
        if bt.kind != TK.RECORD:
            raise UserError(f"base class '{s.type.spelling}' of '{t.spelling}' is not supported in device code",
                            where)
        if (is_dynamic(c) or is_dynamic(bt)) and not (len(specs) == 1 and is_dynamic(bt)):
            # A class with a vtable is supported with its vtable pointer shared with its first base's
            # (single inheritance from a polymorphic base: that base at offset 0; docs/function_pointers.md).
            raise UserError(f"'{t.spelling}' or its base '{s.type.spelling}' has virtual member functions: "
                            "classes with a vtable are supported in device code only with single inheritance from a "
                            "polymorphic base", where)
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
    if out and is_dynamic(c):
        # One polymorphic base: the primary base, at offset 0 (the Itanium C++ ABI; the own
        # members, at clang's offsets, may lie in its tail padding).
        return out
    # The bases' layout checked against clang's: the own members follow them (the first at the
    # first offset its alignment allows), or, without own members, the size is theirs.
    own = sorted((c.get_offset(f.spelling) // 8, f.type.get_canonical().get_align())
                 for f in c.get_fields() if f.spelling and c.get_offset(f.spelling) >= 0)
    align = max([b.type.get_align() for b in out] + [1])
    expected_end = -(-end // own[0][1]) * own[0][1] if own else -(-end // align) * align
    if (own and own[0][0] != expected_end) or (not own and out and c.get_size() != max(expected_end, 1)):
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

"""Local arrays of records whose construction does something (``Vec3 pts[4];`` with a user
default constructor, ``Acc acc[8];``) and their brace initializers (``V v[2] = {{1, 2, 3},
{4, 5, 6}}``, ``{V(1, 2, 3), V(4, 5, 6)}``).

C++ constructs the elements in order of increasing address: element by element, each from its
initializer when the list gives one, else by the default constructor (value-initialized: an
element the list leaves out of a class whose default constructor is implicit is zeroed first,
then its default member initializers run). An array with no initializer runs the default
constructor on every element: one loop per dimension around the inlined constructor.

Libclang shows an element spelled as a nested list (``{1, 2, 3}``) of a class with constructors
as that list, without the constructor clang chose: that constructor is the one whose parameter
count admits the list's length when only one does (clang accepted the program, so it is the one
overload resolution picked); otherwise the element is refused."""
from __future__ import annotations

from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import I32

from frontend import ctypes_map as tm
from frontend.lower import members
from frontend.lower.context import CK
from frontend.lower.helpers import strip, zero_of
from frontend.values import ArrayBinding, LValue

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


def element_constructor(kb: KernelBuilder, elem: ci.Type, c: ci.Cursor) -> ci.Cursor | None:
    """The default constructor of record type ``elem`` when it does something, else None. For
    a declaration ``c`` without initializer, clang's call of the elements' constructor (libclang
    shows it as a child; the one way to reach a class template instance's constructor)."""
    if not tm.is_record(tm.canonical(elem)):
        return None
    call = next((strip(ch) for ch in c.get_children() if strip(ch).kind == CK.CALL_EXPR), None)
    if call is not None and call.referenced is not None and call.referenced.kind == CK.CONSTRUCTOR and \
            tm.canonical(call.referenced.semantic_parent.type).spelling == tm.canonical(elem).spelling:
        return call.referenced if members.is_user_construction(kb, call.referenced, c) else None
    return members.default_constructor(kb, elem, c)


def construct_all(kb: KernelBuilder, binding: ArrayBinding, dims: tuple[int, ...], ctor: ci.Cursor,
                  element_lv, d: ci.Cursor) -> None:
    """``T a[N][M];``: ``ctor`` run on every element, in order (nested loops)."""
    where = kb.loc(d)
    names = [kb.names.fresh("e") for _ in dims]
    with kb.sub_block() as body:
        index = tuple(n.Var(v, I32) for v in names)
        members.construct(kb, element_lv(kb, binding, index, d), ctor, [], d)
    stmts: tuple[n.Stmt, ...] = tuple(body)
    for v, size in reversed(list(zip(names, dims))):
        stmts = (n.For(v, I32, n.Const(0, I32), n.Const(size, I32), n.Const(1, I32), stmts, loc=where),)
    for s in stmts:
        kb.emit(s)


def initialize_element(kb: KernelBuilder, lv: LValue, elem: ci.Type, item: ci.Cursor | None,
                       d: ci.Cursor) -> bool:
    """Element ``lv`` of record type ``elem`` initialized from brace-list item ``item`` (None:
    left out of the list) when its class has constructors that matter; False when it has none
    (an aggregate: the caller copies the item's value)."""
    if item is None:
        ctor = element_constructor(kb, elem, d)
        if ctor is None:
            return False
        kb.assign(lv, zero_of(lv), d)  # value-initialized (see the module's docstring)
        members.construct(kb, lv, ctor, [], d)
        return True
    inner = strip(item)
    if inner.kind == CK.CALL_EXPR and inner.referenced is not None and inner.referenced.kind == CK.CONSTRUCTOR:
        if not members.is_user_construction(kb, inner.referenced, inner):
            return False
        members.construct(kb, lv, inner.referenced, [a for a in inner.get_children() if a.kind.is_expression()],
                          inner)
        return True
    if inner.kind != CK.INIT_LIST_EXPR or not _constructors(elem):
        return False
    items = list(inner.get_children())
    # (`{}`, and `{x}` of the class's own type, may name the implicit default, copy or move
    # constructors, which libclang does not list)
    own = len(items) == 1 and tm.canonical(strip(items[0]).type).spelling == tm.canonical(elem).spelling
    ctor = _by_arity(elem, len(items)) if items and not own else None
    if ctor is None:
        raise kb.error(f"this list initializes a '{tm.canonical(elem).spelling}' by a constructor polypy cannot "
                       "tell (several take this many arguments): write the constructor call", item)
    if members.is_user_construction(kb, ctor, item):
        members.construct(kb, lv, ctor, items, item)
    elif len(items) == 1:  # the implicit copy
        kb.assign(lv, kb.record_value(items[0], elem), item)
    else:
        kb.assign(lv, zero_of(lv), item)
    return True


def _constructors(t: ci.Type) -> list[ci.Cursor]:
    """The constructors declared in the class of ``t`` (libclang lists the user-declared ones)."""
    decl = tm.canonical(t).get_declaration()
    return [m for m in decl.get_children() if m.kind in (CK.CONSTRUCTOR, CK.FUNCTION_TEMPLATE)
            and m.spelling == decl.spelling]


def _by_arity(t: ci.Type, count: int) -> ci.Cursor | None:
    """The one constructor of ``t`` a list of ``count`` items can call, or None (a template
    constructor, a variadic one, several of them, or an `std::initializer_list` one)."""
    found = []
    for m in _constructors(t):
        if m.kind != CK.CONSTRUCTOR or m.type.is_function_variadic():
            return None
        params = list(m.get_arguments())
        if any("initializer_list" in tm.canonical(tm.strip_reference(p.type)).spelling for p in params):
            return None
        required = sum(1 for p in params if not any(ch.kind.is_expression() for ch in p.get_children()))
        if required <= count <= len(params):
            found.append(m)
    return found[0] if len(found) == 1 else None

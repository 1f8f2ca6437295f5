"""``std::initializer_list`` made from a brace list in device code: the items of the list as a
local array (a range-based ``for`` over ``{a, b, c}``, ``range_for.py``) and a parameter of that
type bound to a brace list (``std::max({a, b, c})``, ``inlining.py``)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import I32

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.lower.context import CK
from frontend.values import Aggregate, ArrayBinding, Pointer

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


def list_items(range_c: ci.Cursor) -> ci.Cursor | None:
    """The brace list (its array, ``const T[N]``) a ``std::initializer_list`` range is made of."""
    if not is_initializer_list(tm.strip_reference(range_c.type)):
        return None
    x = range_c
    while x.kind in (CK.UNEXPOSED_EXPR, CK.PAREN_EXPR) and len(list(x.get_children())) == 1:
        x = next(iter(x.get_children()))
    if x.kind == CK.INIT_LIST_EXPR and tm.canonical(x.type).kind == ci.TypeKind.CONSTANTARRAY:
        return x
    return None


def list_array(kb: KernelBuilder, items: ci.Cursor, c: ci.Cursor) -> Pointer:
    """A local array holding the items of brace list ``items`` (of scalars), converted to its
    element type: a pointer to its first element."""
    elem = tm.canonical(items.type).element_type
    st = tm.scalar_type(elem)
    if st is None:
        raise kb.error(f"a range-based for statement over a list of '{elem.spelling}' is not supported in device "
                       "code", c)
    values = list(items.get_children())
    where = kb.loc(c)
    name = kb.names.fresh("init_list")
    kb.buffers[name] = n.Buffer(name, st, (n.Const(len(values), I32),), "local", loc=where)
    binding = ArrayBinding(name, (len(values),), tm.local_layout(elem, where))
    for i, item in enumerate(values):
        kb.assign(kb.element_lv(binding, (n.Const(i, I32),), item), convert(kb.scalar(item), st), item)
    return binding.pointer((), None)


def initializer_list_value(kb: KernelBuilder, a: ci.Cursor, t: ci.Type) -> Aggregate | None:
    """A ``std::initializer_list<T>`` parameter's argument made from a brace list
    (``std::max({a, b, c})``): the list object, a pointer to a local array of the items and their
    count (its two members, in declaration order); None for any other argument."""
    if not is_initializer_list(t):
        return None
    items = list_items(a)
    fields = list(tm.canonical(tm.strip_reference(t)).get_fields())
    if items is None or len(fields) != 2 or not tm.is_pointer(fields[0].type) or \
            tm.scalar_type(fields[1].type) is None:
        return None
    count = len(list(items.get_children()))
    length = tm.scalar_type(fields[1].type)
    return Aggregate({"." + fields[0].spelling: list_array(kb, items, a),
                      "." + fields[1].spelling: n.Const(count, length)}, tm.canonical(tm.strip_reference(t)).spelling)


def is_initializer_list(t: ci.Type) -> bool:
    return tm.canonical(t).spelling.startswith("std::initializer_list<")

"""Small values and cursor helpers shared by the parts of ``KernelBuilder``."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.types import ScalarType

from frontend import bases as cxx_bases
from frontend.lower.context import CK
from frontend.values import (
    Aggregate, AggLV, ArrayBinding, LValue, MemLV, Pointer, PointerChoice, Value, VarAddress, VarLV,
)

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


class Default:
    """Placeholder for an argument clang fills in from a default (no cursor children)."""

    def __repr__(self) -> str:
        return "<default>"


DEFAULT = Default()


@dataclasses.dataclass(frozen=True)
class ScalarArray:
    """A scalar (or record) variable that lives in a one-element buffer (``__shared__ float s;``)."""

    binding: ArrayBinding


@dataclasses.dataclass(frozen=True)
class ArrayRef:
    """A C array, possibly partly indexed (``tile`` or ``tile[ty]`` of ``float tile[16][16]``)."""

    binding: ArrayBinding
    prefix: tuple[n.Expr, ...]

    def index(self, builder: KernelBuilder, i: n.Expr, c: ci.Cursor) -> LValue | "ArrayRef":
        prefix = self.prefix + (i,)
        if len(prefix) < len(self.binding.dims):
            return ArrayRef(self.binding, prefix)
        return builder.element_lv(self.binding, prefix, c)

    def decay(self, builder: KernelBuilder, c: ci.Cursor | None = None) -> Pointer:
        """The pointer the array decays to: to its first element, only for the last dimension
        (``tile[ty]`` of ``float tile[16][16]``, ``v`` of ``float v[8]``). ``c``: where."""
        left = len(self.binding.dims) - len(self.prefix)
        if left != 1:
            dims = "".join(f"[{d}]" for d in self.binding.dims[len(self.prefix):])
            raise builder.error(f"'{self.binding.buffer}' used here is an array of arrays (dimensions {dims}): a "
                                "pointer to its rows is not supported (pass a pointer to the first element, "
                                "&a[0][0], and index it as a flat array)", c)
        return self.binding.pointer(self.prefix, None)


def select_member(fields: dict, member: str, c: ci.Cursor, make, builder: KernelBuilder):
    if not member.isidentifier():
        # An anonymous struct or union member (clang's implicit step towards `r->node`): its
        # members' paths have no part of their own (ctypes_map.byte_leaves, overlay_layout).
        return make(fields, c.type.spelling)
    key = "." + member
    if key in fields:
        return fields[key]
    sub = {k[len(key):]: v for k, v in fields.items() if k.startswith(key + ".") or k.startswith(key + "[")}
    if not sub and member.startswith(cxx_bases.PREFIX):
        # A base subobject without leaves is an empty base (a policy or CRTP base holding only
        # member functions): a record of no members, the ``this`` of its member functions.
        return make({}, c.type.spelling)
    if not sub:
        raise builder.error(f"no member '{member}'", c)
    return make(sub, c.type.spelling)


def is_trivial_construction(init: ci.Cursor) -> bool:
    """``T t;`` of a record: clang shows a call of the default constructor; C leaves t unset."""
    init = strip(init)
    return init.kind == CK.CALL_EXPR and init.referenced is not None and \
        init.referenced.kind == CK.CONSTRUCTOR and not any(ch.kind.is_expression() for ch in init.get_children())


def zero_of(lv: LValue) -> Value:
    if isinstance(lv, AggLV):
        return Aggregate({k: zero_of(v) for k, v in lv.fields.items()}, lv.spelling)
    t = getattr(lv, "type", None)  # a variable, an element of memory, a view of one
    if not isinstance(t, ScalarType):
        raise UserError("value-initializing this kind of place is not supported")
    return n.Const(0, t)


def describe(v: object) -> str:
    if isinstance(v, Aggregate):
        return "record"
    if isinstance(v, (Pointer, PointerChoice, ArrayRef)):
        return "pointer"
    if isinstance(v, VarAddress):
        return "address of a local variable"
    if v is None:
        return "void value"
    return "value"


def strip(c: ci.Cursor) -> ci.Cursor:
    while c.kind in (CK.UNEXPOSED_EXPR, CK.PAREN_EXPR):
        children = list(c.get_children())
        if len(children) != 1:
            break
        c = children[0]
    return c


def strip_parens(c: ci.Cursor) -> ci.Cursor:
    while c.kind == CK.PAREN_EXPR:
        c = next(iter(c.get_children()))
    return c

"""What lowering an expression can produce, and what a name can be bound to.

C values are richer than IR values: besides scalars there are aggregates (records, seen through
their flat layout), pointers into buffers, and lvalues. The frontend keeps these shapes while it
lowers one function and only emits scalar IR.
"""
from __future__ import annotations

import dataclasses

from polypy.ir import nodes as n
from polypy.ir.types import ScalarType

from frontend.ctypes_map import ElemLayout

# --------------------------------------------------------------------------- values


@dataclasses.dataclass(frozen=True)
class Aggregate:
    """A record value: member path → scalar expression or ``Pointer`` (flat, e.g. ".x", ".a.b")."""

    fields: dict[str, "Value"]
    spelling: str


@dataclasses.dataclass(frozen=True)
class Pointer:
    """A pointer into a buffer.

    Element ``j`` (in units of the pointee type) is at ``prefix + ((offset + j) * stride + slot,)``
    of ``buffer``: ``prefix`` holds the leading indices of a multi-dimensional array (a row
    pointer such as ``tile[ty]``), ``offset`` is None for the start of the buffer/row.
    """

    buffer: str
    prefix: tuple[n.Expr, ...]
    offset: n.Expr | None
    layout: ElemLayout


@dataclasses.dataclass(frozen=True)
class VarAddress:
    """``&x`` of a local scalar or record (only usable as ``*p``, ``p[0]`` or ``p->field``)."""

    target: "LValue"


Value = n.Expr | Aggregate | Pointer | VarAddress

# --------------------------------------------------------------------------- lvalues


@dataclasses.dataclass(frozen=True)
class VarLV:
    name: str
    type: ScalarType


@dataclasses.dataclass(frozen=True)
class MemLV:
    buffer: str
    index: tuple[n.Expr, ...]
    type: ScalarType


@dataclasses.dataclass(frozen=True)
class AggLV:
    """A record lvalue: member path → leaf lvalue."""

    fields: dict[str, "LValue"]
    spelling: str


@dataclasses.dataclass(frozen=True)
class PtrVarLV:
    """A pointer variable: fixed target buffer, offset held in an integer local (None: immutable)."""

    base: Pointer
    offset_var: VarLV | None


LValue = VarLV | MemLV | AggLV | PtrVarLV

# --------------------------------------------------------------------------- bindings of names


@dataclasses.dataclass(frozen=True)
class ArrayBinding:
    """A C array (shared, local, constant or device): its IR buffer and C dimensions."""

    buffer: str
    dims: tuple[int | None, ...]
    layout: ElemLayout


@dataclasses.dataclass(frozen=True)
class RefBinding:
    """A reference parameter of an inlined function, bound to the caller's lvalue."""

    target: LValue


@dataclasses.dataclass(frozen=True)
class ConstBinding:
    """A name whose value is a compile-time constant (``const int N = 64;`` at namespace scope)."""

    value: n.Expr


Binding = LValue | ArrayBinding | RefBinding | ConstBinding | VarAddress


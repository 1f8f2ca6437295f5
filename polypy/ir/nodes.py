"""Nodes of the polypy IR.

Frozen dataclasses with ``slots``; children are tuples, never lists. Every node carries a
``loc`` that does not take part in equality, so two structurally equal trees from different
places compare equal (which is what golden tests and common-subexpression checks want).

Two hierarchies:

* ``Expr`` — side-effect free values, each with a ``type``. Loads are expressions;
  everything that writes or synchronizes is a statement.
* ``Stmt`` — declarations, assignments, stores, atomics, barriers, warp operations and
  structured control flow. There is no ``goto``; loops have ``break``/``continue``.

Names of locals are unique inside a kernel (the frontend renames shadowed variables), so a
name identifies one variable everywhere in the kernel and passes need no scope tracking.

A kernel has a ``stage``: ``"gpu"`` (implicit threads: ``ThreadIdx`` expressions, ``Barrier``
statements) or ``"cpu"`` (one block's work with explicit thread loops; see gpu2cpu).

The classes live in ``polypy.ir.node_base``, ``exprs``, ``stmts`` and ``kernels``, cut by what
they are; this module is the one namespace passes use (``from polypy.ir import nodes as n``).
"""
from __future__ import annotations

# The names the nodes' annotations use, so that ``typing.get_type_hints(cls, vars(nodes))`` resolves them.
from typing import ClassVar, Union  # noqa: F401

from polypy.errors import Loc, UserError  # noqa: F401
from polypy.ir.types import BOOL, U32, PointerType, ScalarType, normalize_value  # noqa: F401
from polypy.ir.node_base import (  # noqa: F401
    Node,
)
from polypy.ir.exprs import (  # noqa: F401
    ARITH_OPS,
    BINARY_OPS,
    BIT_OPS,
    Binary,
    BlockDim,
    BlockIdx,
    COMPARE_OPS,
    Call,
    Cast,
    Const,
    Expr,
    GpuIndex,
    GridDim,
    LOGIC_OPS,
    Load,
    Select,
    ThreadIdx,
    UNARY_OPS,
    Unary,
    Var,
)
from polypy.ir.stmts import (  # noqa: F401
    ATOMIC_OPS,
    HEAP_OPS,
    AssertFail,
    Assign,
    AtomicRMW,
    Barrier,
    Break,
    Continue,
    Decl,
    FENCE_SCOPES,
    FOR_KINDS,
    Fence,
    For,
    If,
    LAUNCH_STREAMS,
    Launch,
    Prefetch,
    Print,
    Return,
    SHUFFLE_MODES,
    Shuffle,
    Stmt,
    Store,
    VOTE_MODES,
    Vote,
    WarpSync,
    While,
)
from polypy.ir.kernels import (  # noqa: F401
    Buffer,
    Kernel,
    Module,
    NONNULL,
    HEAP,
    Param,
    SPACES,
    STAGES,
    HeldPointerSlots,
    SourceParam,
    TABLE_BASE,
    TABLE_POOL,
    UnknownKernel,
)

Block = tuple[Stmt, ...]
AnyNode = Union[Expr, Stmt, Param, Buffer, Kernel, Module]

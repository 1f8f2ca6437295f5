"""specialize-unit-strides: a kernel for launches whose tensor accessors have rows of contiguous
elements (their last stride 1).

A PyTorch accessor parameter (``packed_accessor32<float, 2>``, ``frontend/lower/accessors.py``)
is its data pointer and its sizes and strides as scalar parameters (``x``, ``x_size0``, ...,
``x_stride1``), and ``x[i][j]`` reads element ``i * x_stride0 + j * x_stride1`` of ``x``. The
last stride is a run-time value, so a C compiler vectorizes a thread loop over ``j`` with strided
loads and stores (an element at a time: the classic LLTM's forward, ``docs/torch_extensions.md``),
although it is 1 for every tensor of contiguous rows. GCC's own loop versioning for strides
(``-fversion-loops-for-strides``) skips loops with calls in them, and a written-out ``exp`` has one.

This pass is that version made by polypy: each of ``strides`` (default: every accessor's last
stride the kernel reads, ``last_strides``) replaced by the constant 1, then folded, so that
``x[i * x_stride0 + (u64)j * x_stride1]`` becomes ``x[i * x_stride0 + (u64)j]``.

Requires: a verified kernel (either form: a plain substitution). Guarantees: for launches whose
arguments ``strides`` are all 1 the result computes exactly what ``kernel`` computes; for any
other launch it is wrong, so it runs only behind the guard ``UnitStrides`` (``version-unit-strides``,
``polypy.passes.versions``), evaluated at the launch from the arguments' values.
"""
from __future__ import annotations

from typing import Sequence

from polypy.ir import nodes as n
from polypy.ir.queries import written_names
from polypy.ir.types import ScalarType
from polypy.ir.visitor import substitute, walk
from polypy.passes.fold_constants import fold_constants
from polypy.stack import on_big_stack

# The member path of an accessor's stride ``d`` in its ``SourceParam`` (``frontend/lower/accessors.py``).
STRIDE_PATH = ".stride("


def _stride_dim(path: str) -> int | None:
    """``d`` of the member path ``.stride(d)``, or None for another member."""
    if not (path.startswith(STRIDE_PATH) and path.endswith(")")):
        return None
    digits = path[len(STRIDE_PATH):-1]
    return int(digits) if digits.isdigit() else None


def last_strides(kernel: n.Kernel) -> tuple[tuple[str, ScalarType], ...]:
    """The last stride of each accessor parameter of ``kernel`` (IR parameter name, type) that
    the kernel reads and never writes, in parameter order."""
    used = {x.name for x in walk(kernel) if isinstance(x, n.Var)}
    written = written_names(kernel.body)
    out: list[tuple[str, ScalarType]] = []
    for sp in kernel.source_params:
        strides = [(d, name) for path, name in sp.members if (d := _stride_dim(path)) is not None]
        if not strides:
            continue
        name = max(strides)[1]
        p = kernel.param(name)
        if (p is not None and isinstance(p.ptype, ScalarType) and p.ptype.is_int and name in used
                and name not in written):
            out.append((name, p.ptype))
    return tuple(out)


@on_big_stack
def specialize_unit_strides(kernel: n.Kernel, *, strides: Sequence[str] | None = None) -> n.Kernel:
    """``kernel`` for launches whose arguments ``strides`` (IR names; None: ``last_strides``) are
    all 1 (see the module docstring)."""
    found = dict(last_strides(kernel))
    names = tuple(found) if strides is None else tuple(strides)
    mapping: dict[n.Expr, n.Expr] = {}
    for name in names:
        p = kernel.param(name)
        if p is None or not isinstance(p.ptype, ScalarType):
            continue
        mapping[n.Var(name, p.ptype)] = n.Const(1, p.ptype)
    if not mapping:
        return kernel
    return fold_constants(substitute(kernel, mapping))

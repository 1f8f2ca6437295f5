"""The largest value an integer expression takes over the threads of one launch (with isl).

A loop whose trip count depends on the thread (``for (j = threadIdx.x; j < n; j += 32)``) gets a
tape as long as its longest run in the launch: ``max_over_threads(count, grid, block, scalars)``
maximizes the (quasi-affine) count over ``0 <= threadIdx < blockDim``, ``0 <= blockIdx <
gridDim``, with the launch's shape and integer arguments as constants. Plain Python in, plain
Python out; the isl objects stay here.
"""
from __future__ import annotations

from typing import Mapping

import islpy as isl

from polypy.ir import nodes as n
from polypy.ir.types import ScalarType
from polypy.poly.affine import Converter
from polypy.poly.space import BLOCK_IDX, CTX, THREAD_IDX


class _LaunchScope:
    """A ``Scope`` of one concrete launch: the thread and block indices are the set dimensions."""

    def __init__(self, grid: tuple[int, int, int], block: tuple[int, int, int], scalars: Mapping[str, object],
                 types: Mapping[str, ScalarType]):
        self.grid, self.block = grid, block
        self.scalars = scalars
        self.types = types
        self.space = isl.Space.create_from_names(CTX, set=list(BLOCK_IDX) + list(THREAD_IDX))
        self.affs = isl.affs_from_space(self.space)
        self.conv = Converter(self)

    def variable(self, name: str) -> isl.PwAff | None:
        ty = self.types.get(name)
        value = self.scalars.get(name)
        if ty is None or value is None or ty.is_float:
            return None
        return self.conv.const(int(value))  # type: ignore[call-overload]

    def gpu_index(self, e: n.GpuIndex) -> isl.PwAff:
        if isinstance(e, n.ThreadIdx):
            return self.affs[THREAD_IDX[e.dim]]
        if isinstance(e, n.BlockIdx):
            return self.affs[BLOCK_IDX[e.dim]]
        if isinstance(e, n.BlockDim):
            return self.conv.const(self.block[e.dim])
        return self.conv.const(self.grid[e.dim])

    def uniform_value(self, e: n.Expr) -> isl.PwAff | None:
        return None

    def wrapped_operand(self, e: n.Expr, wrapped: bool) -> isl.PwAff | None:
        return None  # a concrete launch: the value itself, exact

    def domain(self) -> isl.Set:
        dom = isl.Set.universe(self.space)
        for names, extents in ((THREAD_IDX, self.block), (BLOCK_IDX, self.grid)):
            for name, extent in zip(names, extents):
                x = self.affs[name]
                dom &= x.ge_set(self.affs[0]) & x.lt_set(self.conv.const(extent))
        return dom


def max_over_threads(e: n.Expr, grid: tuple[int, ...], block: tuple[int, ...], scalars: Mapping[str, object],
                     types: Mapping[str, ScalarType]) -> int | None:
    """max of ``e`` over every thread of the launch, or None if isl cannot bound it (not
    quasi-affine in the indices once the arguments are known)."""
    g = tuple(grid) + (1,) * (3 - len(grid))
    bl = tuple(block) + (1,) * (3 - len(block))
    scope = _LaunchScope(g, bl, scalars, types)  # type: ignore[arg-type]
    dom = scope.domain()
    pa = scope.conv.int_expr(e, dom)
    if pa is None:
        return None
    pa = pa.intersect_domain(dom)
    if pa.domain().is_empty():
        return None
    v = pa.max_val()
    if v.is_infty() or v.is_neginfty() or v.is_nan():
        return None
    return int(v.to_python())

"""The base domain of a kernel's polyhedral model (see ``polypy.poly.builder``)."""
from __future__ import annotations

import islpy as isl

from polypy.ir.types import ScalarType
from polypy.poly.affine import _val, int_range
from polypy.poly.space import BLOCK_DIM, BLOCK_IDX, GRID_DIM, INDEX_LIMIT, MAX_BLOCK_DIM, MAX_GRID_DIM, THREAD_IDX


def base_domain(builder) -> isl.Set:
    """The instance space's bounds that hold for every statement of the kernel ``builder`` (a
    ``builder._Builder``) models: block and thread indices within the launch (or CUDA's limits),
    scalar parameters within their types, block values (``BlockValue``) within theirs."""
    c = builder.conv.const
    dom = builder.universe
    for d in range(3):
        b, t = builder.affs[BLOCK_IDX[d]], builder.affs[THREAD_IDX[d]]
        dom &= b.ge_set(c(0)) & b.lt_set(builder._extent("grid", d))
        dom &= t.ge_set(c(0)) & t.lt_set(builder._extent("block", d))
        if builder.launch is None:
            if builder.thread_used[d]:
                bd = builder.affs[BLOCK_DIM[d]]
                dom &= bd.ge_set(c(1)) & bd.le_set(c(MAX_BLOCK_DIM[d]))
            if builder.block_used[d]:
                gd = builder.affs[GRID_DIM[d]]
                dom &= gd.ge_set(c(1)) & gd.le_set(c(MAX_GRID_DIM[d]))
    for p in builder.kernel.params:
        if p.name in builder.affs and isinstance(p.ptype, ScalarType):
            lo, hi = int_range(p.ptype)
            dom &= builder.affs[p.name].ge_set(c(lo)) & builder.affs[p.name].le_set(c(hi))
    for bv in builder.block_value_list:
        u = builder.affs[bv.name]
        if bv.linear is not None:
            # c * blockDim[e] * (a block's row-major index): at least 0, and the block's last
            # thread's index below 2**31 (the model's assumption, as for strides below)
            _, _, e, k = bv.linear
            step = builder._extent("block", e) * _val(k)
            dom &= u.ge_set(c(0)) & (u + step).le_set(c(INDEX_LIMIT))
            continue
        if bv.stride is None:
            lo, hi = int_range(bv.vtype)
            dom &= u.ge_set(c(lo)) & u.le_set(c(hi))
            continue
        # blockIdx[d] * step with step >= 1; grid-wide questions add the pairwise facts.
        d, e, k = bv.stride
        step = builder._extent("block", e) * _val(k)
        dom &= u.ge_set(builder.affs[BLOCK_IDX[d]]) & (u + step).le_set(c(INDEX_LIMIT))
    for dim in builder.loop_dim.values():
        dom &= builder.affs[dim].eq_set(c(0))
    return dom

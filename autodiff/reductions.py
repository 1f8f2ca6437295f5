"""Block-level reductions: many threads' contributions to one shadow element, one atomic per block.

The adjoint of a scalar parameter (every thread uses it) and of a read-only element that every
thread of a block reads (``x[blockIdx.x]``) are summed in a register per thread during the
reverse sweep; at the end of the kernel, where every thread of the block is present, the
registers are summed over the block in shared memory and one thread adds the total with a
single atomic. The tree uses sequential addressing (the active threads and the slots they read
are contiguous: no bank conflicts on a GPU, a contiguous loop on a CPU after the thread loop's
guard becomes its bound) and works for any block size::

    red[tid] = d_a_sum; barrier
    span = smallest power of two >= nthreads
    for (s = span / 2; s > 0; s /= 2) { if (tid < s && tid + s < nthreads) red[tid] += red[tid + s]; barrier }
    if (tid == 0) atomicAdd(&d_a[0], red[0])
"""
from __future__ import annotations

import dataclasses

from autodiff import build as b
from autodiff.names import Names
from autodiff.shadows import block_threads, linear_tid
from polypy.ir import nodes as n
from polypy.ir.types import I32, ScalarType

SLOTS = 1024  # threads per block at most


@dataclasses.dataclass(frozen=True)
class Reduction:
    register: str  # the per-thread sum
    type: ScalarType
    target: str  # the shadow buffer
    index: tuple[n.Expr, ...]  # the element (valid at the end of the kernel)


def block_reductions(items: list[Reduction], names: Names) -> tuple[list[n.Stmt], list[n.Buffer]]:
    """Statements for the end of the kernel, and the shared buffers they use."""
    if not items:
        return [], []
    out: list[n.Stmt] = []
    buffers: list[n.Buffer] = []
    tid = names.fresh("tid")
    nthreads = names.fresh("nthreads")
    out.append(n.Decl(tid, I32, b.cast(I32, linear_tid())))
    out.append(n.Decl(nthreads, I32, b.cast(I32, block_threads())))
    by_type: dict[ScalarType, str] = {}
    t = n.Var(tid, I32)
    nt = n.Var(nthreads, I32)
    for item in items:
        ty = item.type
        red = by_type.get(ty)
        if red is None:
            red = names.fresh(f"red_{ty.name}")
            by_type[ty] = red
            buffers.append(n.Buffer(red, ty, (b.const(SLOTS, I32),), "shared"))
        span = names.fresh("span")
        stride = names.fresh("stride")
        pv, sv = n.Var(span, I32), n.Var(stride, I32)
        step_cond = b.land(b.cmp("lt", t, sv), b.cmp("lt", n.Binary("add", t, sv), nt))
        combine = n.Store(red, (t,), n.Binary("add", n.Load(red, (t,), ty),
                                              n.Load(red, (n.Binary("add", t, sv),), ty)))
        out += [
            n.Store(red, (t,), n.Var(item.register, ty)),
            n.Barrier(),
            n.Decl(span, I32, b.const(1, I32)),
            n.While(b.cmp("lt", pv, nt), (n.Assign(span, n.Binary("shl", pv, b.const(1, I32))),)),
            n.Decl(stride, I32, n.Binary("shr", pv, b.const(1, I32))),
            n.While(b.cmp("gt", sv, b.const(0, I32)), (n.If(step_cond, (combine,)), n.Barrier(),
                                                        n.Assign(stride, n.Binary("shr", sv, b.const(1, I32))))),
            n.If(b.cmp("eq", t, b.const(0, I32)),
                 (n.AtomicRMW("add", item.target, item.index, n.Load(red, (b.const(0, I32),), ty)),)),
            n.Barrier(),  # red is reused by the next reduction
        ]
    return out, buffers

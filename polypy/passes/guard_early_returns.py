"""guard_early_returns: an early ``return`` that only some threads may take, before a
``__syncthreads()``, checked at run time instead of refused.

Requires: GPU form as the frontend builds it (returns still there). Guarantees: a top-level
``if (c) return;`` whose condition differs between threads, followed (anywhere later) by a block
barrier, becomes a test every thread of the block makes together::

    if (id > len) return;           quit = id > len
    ...                      ==>    stop = block_any(quit)          (every thread the same value)
    __syncthreads();                if (stop) <stop the launch: a barrier some threads would skip>
                                    ...
                                    __syncthreads();

When no thread of the block takes the return (what a correct program does whenever a barrier
follows: CUDA leaves a ``__syncthreads()`` that some threads of the block do not reach
undefined), the kernel runs as written. When one does, the block stops the launch with an error
naming the ``return`` (the device-side assert's machinery: ``cudaErrorAssert``), as the emulator
reports a barrier reached by part of a block. Returns in loops or branches are left to
``check_barriers``' refusal.

``block_any`` is shared with ``gpu2cpu.uniform_warp_loops``.
"""
from __future__ import annotations

from polypy.analysis.uniformity import thread_dependent_names, thread_uniform
from polypy.errors import Loc
from polypy.ir import nodes as n
from polypy.ir.names import NameSupply, kernel_names
from polypy.ir.types import BOOL, I32, U32
from polypy.ir.visitor import has_kind, rebuild


def linear_tid() -> n.Expr:
    """The thread's linear index in its block (x fastest)."""
    tx, ty, tz = (n.ThreadIdx(d) for d in range(3))
    return n.Binary("add", tx, n.Binary("mul", n.BlockDim(0), n.Binary("add", ty, n.Binary("mul", n.BlockDim(1), tz))))


def block_any(dest: str, flag: n.Expr, scratch: str, loc: Loc | None) -> tuple[n.Stmt, ...]:
    """``dest = whether flag holds in any thread of the block``: every thread gets the same value.
    ``scratch`` is a shared ``u32[1]``; every thread of the block must run these statements::

        barrier; if (t == 0) s = 0; barrier; if (flag) atomicMax(&s, 1); barrier; dest = s != 0
    """
    zero = n.Const(0, I32, loc=loc)
    return (
        n.Barrier(loc=loc),
        n.If(n.Binary("eq", linear_tid(), n.Const(0, U32), loc=loc),
             (n.Store(scratch, (zero,), n.Const(0, U32), loc=loc),), loc=loc),
        n.Barrier(loc=loc),
        n.If(flag, (n.AtomicRMW("max", scratch, (zero,), n.Const(1, U32), loc=loc),), loc=loc),
        n.Barrier(loc=loc),
        n.Assign(dest, n.Binary("ne", n.Load(scratch, (zero,), U32, loc=loc), n.Const(0, U32), loc=loc), loc=loc),
    )


def guard_early_returns(kernel: n.Kernel) -> n.Kernel:
    body = kernel.body
    local = {b.name for b in kernel.buffers if b.space == "local"}
    divergent = None
    for pos, s in enumerate(body):
        if has_kind(s, n.Return, n.Break, n.Continue, n.Barrier) and \
                not _is_early_return(s):
            return kernel  # something else comes first: the ordinary rules apply
        if not _is_early_return(s):
            continue
        if not has_kind(body[pos + 1:], n.Barrier):
            return kernel
        divergent = thread_dependent_names(kernel) if divergent is None else divergent
        assert isinstance(s, n.If)
        if thread_uniform(s.cond, divergent, local):
            return kernel  # every thread or none returns: nothing to check
        names = NameSupply(kernel_names(kernel))
        quit_, stop, scratch = names.fresh("quits"), names.fresh("some_quit"), names.fresh("quit_count")
        loc = s.loc
        stopped = n.AssertFail("every thread of the block reaches the __syncthreads() after this return (undefined "
                               "in CUDA otherwise)", loc.file if loc else "", loc.line if loc else 0, kernel.name,
                               tuple(n.BlockIdx(d) for d in range(3)) + tuple(n.ThreadIdx(d) for d in range(3)),
                               loc=loc)
        check = (n.Decl(quit_, BOOL, s.cond, loc=loc), n.Decl(stop, BOOL, None, loc=loc)) + \
            block_any(stop, n.Var(quit_, BOOL, loc=loc), scratch, loc) + \
            (n.If(n.Var(stop, BOOL, loc=loc), (stopped,), loc=loc),)
        buffer = n.Buffer(scratch, U32, (n.Const(1, I32),), "shared", loc=loc)
        return rebuild(kernel, body=body[:pos] + check + body[pos + 1:], buffers=kernel.buffers + (buffer,))
    return kernel


def _is_early_return(s: n.Stmt) -> bool:
    return isinstance(s, n.If) and len(s.then) == 1 and isinstance(s.then[0], n.Return) and not s.orelse

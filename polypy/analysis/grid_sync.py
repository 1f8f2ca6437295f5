"""Grid barriers (``cooperative_groups::this_grid().sync()``, ``Barrier`` of scope ``grid``).

CUDA's grid barrier waits until every thread of every block of the launch has reached it, and
only a cooperative launch (``cudaLaunchCooperativeKernel``), whose blocks are all resident at
once, may run a kernel that has one. polypy runs such a launch with every block on its own CPU
thread (the occupancy API reports one resident block per core, so the grid the launch accepts
never has more blocks than there are cores): the threads of a block are the CPU form's loops,
cut at the grid barrier as at ``__syncthreads()``, and between the cuts the block's CPU thread
waits at a barrier of the whole team (docs/cooperative_groups.md).

That is exact when every block reaches the same grid barriers in the same order. ``check_grid_syncs``
refuses a grid barrier under control that may differ between threads (``check_barriers`` already
refuses it within a block) or between blocks: a condition or a loop bound computed from
``blockIdx`` or from memory at a block-dependent address. What static analysis cannot see (a
loop bound read from memory that blocks see differently) the run-time barrier detects: a block
that reaches another grid barrier, or leaves the kernel, while others wait is reported as an error
instead of hanging.
"""
from __future__ import annotations

import dataclasses

from polypy.analysis.uniformity import _run
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.types import BOOL
from polypy.ir.visitor import Mutator, walk, walk_only


def is_grid_sync(s: n.Node) -> bool:
    return isinstance(s, n.Barrier) and s.scope == "grid"


def has_grid_sync(node: n.Node) -> bool:
    """Whether ``node`` (a kernel, a statement) contains a grid barrier."""
    return any(x.scope == "grid" for x in walk_only(node, n.Barrier))


class _BlocksAsThreads(Mutator):
    """``blockIdx.d`` -> ``threadIdx.d + blockIdx.d``: a value that may differ between blocks
    becomes one that differs between threads, so the block-uniformity analysis finds it."""

    def visit_BlockIdx(self, e: n.BlockIdx) -> n.Expr:
        return n.Binary("add", n.ThreadIdx(e.dim, loc=e.loc), e, loc=e.loc)


class _AssertsHold(Mutator):
    """A failed device ``assert`` aborts the whole launch (CUDA), whatever barriers follow, so the
    analysis assumes every assert holds: an ``if`` whose branch fails an assert keeps its other
    branch, and a flag that then is never set (the frontend's ``assert_failed``, the ``done`` it
    sets) keeps its initial value, so the code it guards runs unconditionally."""

    def __init__(self, never_set: frozenset[str] = frozenset()):
        super().__init__()
        self.never_set = never_set

    def visit_If(self, s: n.If):
        if any(isinstance(x, n.AssertFail) for x in walk(n.If(s.cond, s.then, (), loc=s.loc))):
            return self.visit_block(s.orelse)
        cond = s.cond
        negated = isinstance(cond, n.Unary) and cond.op == "not"
        flag = cond.x if negated else cond
        if isinstance(flag, n.Var) and flag.name in self.never_set:
            return self.visit_block(s.orelse if not negated else s.then)
        return self.generic_visit(s)


def _assume_asserts_hold(body: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
    body = _AssertsHold().visit_block(body)
    while True:
        false_flags = {x.name for s in body for x in walk_only(s, n.Decl) if isinstance(x.init, n.Const)
                       and x.init.type == BOOL and not x.init.value}
        assigned = {x.name for s in body for x in walk_only(s, n.Assign)}
        never_set = frozenset(false_flags - assigned)
        new = _AssertsHold(never_set).visit_block(body)
        if new == body:
            return body
        body = new


def check_grid_syncs(kernel: n.Kernel) -> None:
    """Refuse (``UserError``, located) a grid barrier that some blocks may not reach."""
    if not has_grid_sync(kernel):
        return
    body = _BlocksAsThreads().visit_block(_assume_asserts_hold(kernel.body))
    widened = dataclasses.replace(kernel, body=body)
    for barrier, why in _run(widened).barrier_problems:
        if is_grid_sync(barrier):
            raise UserError(
                "grid.sync() under control that depends on the block or the thread: every thread of every block "
                "of the launch must reach it (polypy refuses a grid barrier under a condition or in a loop computed "
                "from threadIdx, blockIdx or memory read at a block-dependent address)",
                barrier.loc,
                notes=((f"control may differ between blocks because of "
                        f"{why.what.replace('thread-dependent', 'block- or thread-dependent')} here", why.loc),))


def refuse_plain_launches(launches, kernels) -> None:
    """Refuse a ``<<<...>>>`` launch (``launches``: the host program's ``LaunchSite``s) of a kernel
    with a grid barrier: CUDA runs such a kernel only through ``cudaLaunchCooperativeKernel`` (a
    grid barrier in another launch is undefined: its blocks need not be resident together)."""
    with_sync = {k.name for k in kernels if has_grid_sync(k)}
    for site in launches:
        if site.kernel in with_sync:
            raise UserError(f"kernel '{site.kernel}' uses grid.sync() and is launched with <<<...>>>: a grid barrier "
                            "needs a cooperative launch (cudaLaunchCooperativeKernel)", site.loc)

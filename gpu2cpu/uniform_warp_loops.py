"""uniform_warp_loops: a loop whose trips differ between threads, with warp operations inside,
runs as long as any thread of the block still runs it, each thread's trips guarded.

Requires: GPU form, returns eliminated (before ``lower-warp-syncs``, which needs the loops
around a ``__syncwarp`` to run alike for every thread). Guarantees: each such loop at
block-uniform control becomes a loop whose condition every thread of the block computes alike
(whether any thread's own loop still runs), its body run by a thread only while its own
condition holds; its warp operations then sit under a thread-dependent ``if``, which polypy runs
exactly (the lanes whose loop has ended are the inactive lanes of the branch, as in CUDA)::

    for (i = S; i < E; i += D) {         i = S; live = i < E
      ... coalesced_threads() ...        go = block_any(live)
    }                             ==>    while (go) {
    (a while (c) { body; update }          if (live) { ...; i += D; live = i < E }
     the same with live = c)               go = block_any(live)
                                         }

    block_any(x):  barrier; if (t == 0) any = 0; barrier; if (x) atomicMax(&any, 1); barrier; any

Each thread evaluates its condition, body and update in the order and as many times as it would
(a loop that never ends for some thread still never ends). The barriers order the block more
than CUDA does: one legal schedule, since every thread of the block reaches them (the loop is
at block-uniform control); each trip ends at one, which is also what ``lower-warp-syncs`` needs
of a loop around a ``__syncwarp``.

Rewritten only where that is exact: a ``for`` or ``while`` with no ``break``/``continue`` out of
its body and no barrier in it, at block-uniform control, whose shuffles and votes take their
lanes from a computed mask (a constant mask names lanes that may have left the loop, undefined
in CUDA); other loops are left to the refusals downstream (``gpu2cpu.regions``,
``lower-warp-syncs``). A mask computed from ``__activemask()`` (a coalesced group's or a
partition's) is the lanes that make the call. A ``__syncwarp`` of a constant mask inside (a
tile's ``sync()``), and a shuffle or vote whose mask is computed otherwise (a tile smaller than a
warp: its lanes from the thread index), are preceded by a check that every lane of the mask in
the block arrives (``__ballot_sync(mask, 1)``): a lane whose loop has ended does not, which CUDA
leaves undefined, and the launch then stops with an error naming the operation (before, such a
tile's ``cg::reduce`` combined the lanes still in the loop).
"""
from __future__ import annotations

from polypy.analysis.uniformity import thread_dependent_names, thread_uniform
from polypy.ir import nodes as n
from polypy.ir.jumps import jumps_out
from polypy.passes.guard_early_returns import block_any, linear_tid
from polypy.ir.types import BOOL, I32, U32
from polypy.ir.visitor import has_kind, rebuild, walk, walk_block

from gpu2cpu.names import NameSupply
from gpu2cpu.report import LoweringDecision

_WARP_OPS = (n.Shuffle, n.Vote, n.WarpSync)


def uniform_warp_loops(kernel: n.Kernel, *, report: list[LoweringDecision] | None = None) -> n.Kernel:
    """``report`` receives one ``LoweringDecision`` per loop rewritten."""
    if not has_kind(kernel.body, _WARP_OPS) or has_kind(kernel.body, n.Return):
        return kernel
    r = _Rewrite(kernel)
    body = r.block(kernel.body, True)
    if not r.buffers:
        return kernel
    if report is not None:
        report.extend(LoweringDecision(kernel.name, loc, "warp operations in a loop whose trips differ between "
                                       "threads: it runs while any thread of the block runs it, each thread's trips "
                                       "guarded by its own condition") for loc in r.rewritten)
    return rebuild(kernel, body=body, buffers=kernel.buffers + tuple(r.buffers))


class _Rewrite:
    def __init__(self, kernel: n.Kernel):
        self.kernel_name = kernel.name
        self.divergent = thread_dependent_names(kernel)
        self.local = {b.name for b in kernel.buffers if b.space == "local"}
        self.names = NameSupply(kernel)
        self.buffers: list[n.Buffer] = []
        self.rewritten: list = []
        self.active = _active_names(kernel.body)

    def from_active(self, mask: n.Expr) -> bool:
        """Whether ``mask`` is computed from an ``__activemask()`` (a coalesced group's or a
        partition's lanes: those that make the call). A tile's mask is computed too, from the
        thread index, but it names every lane of the tile, some of which may have left the loop."""
        reads = {v.name for v in walk(mask) if isinstance(v, n.Var)}
        return bool(reads & self.active)

    def uniform(self, e: n.Expr) -> bool:
        return thread_uniform(e, self.divergent, self.local)

    def block(self, stmts: tuple[n.Stmt, ...], uniform: bool) -> tuple[n.Stmt, ...]:
        """``uniform``: every thread of the block runs ``stmts`` (until a jump leaves them)."""
        out: list[n.Stmt] = []
        for s in stmts:
            out.extend(self.stmt(s, uniform))
            if jumps_out(s, n.Break, n.Continue):
                uniform = False  # what follows may run in some threads only
        return tuple(out)

    def stmt(self, s: n.Stmt, uniform: bool) -> tuple[n.Stmt, ...]:
        if isinstance(s, n.If):
            inner = uniform and self.uniform(s.cond)
            return (rebuild(s, then=self.block(s.then, inner), orelse=self.block(s.orelse, inner)),)
        if isinstance(s, n.For):
            alike = s.var not in self.divergent and all(self.uniform(e) for e in (s.start, s.stop, s.step))
            if uniform and not alike and self.rewritable(s):
                return self.rewrite(s)
            return (rebuild(s, body=self.block(s.body, uniform and alike)),)
        if isinstance(s, n.While):
            inner = uniform and self.uniform(s.cond)
            if uniform and not inner and self.rewritable(s):
                return self.rewrite(s)
            return (rebuild(s, body=self.block(s.body, inner), update=self.block(s.update, inner)),)
        return (s,)

    def rewritable(self, s: n.For | n.While) -> bool:
        inside = list(walk_block(s.body + (s.update if isinstance(s, n.While) else ())))
        # A shuffle or vote with a constant mask names lanes that may have left the loop (undefined
        # in CUDA): such a loop stays refused. The masks of coalesced groups and partitions are the
        # lanes that run the call (computed, from __activemask()).
        fixed = any(isinstance(x, (n.Shuffle, n.Vote)) and x.mode != "activemask" and isinstance(x.mask, n.Const)
                    for x in inside)
        return (any(isinstance(x, _WARP_OPS) for x in inside) and not fixed
                and not any(isinstance(x, n.Barrier) for x in inside) and not jumps_out(s.body, n.Break, n.Continue))

    def checked(self, stmts: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        """``stmts`` with each ``__syncwarp`` of a constant mask (a tile's ``sync()``), and each
        shuffle or vote over a tile's lanes (a mask computed from the thread index, not from
        ``__activemask()``: ``cg::reduce`` of a ``thread_block_tile<16>``), preceded by a check
        that every lane of its mask in the block arrives: a lane whose loop has ended does not,
        which CUDA leaves undefined; the launch then stops with an error naming it."""
        out: list[n.Stmt] = []
        for s in stmts:
            if isinstance(s, n.WarpSync) and isinstance(s.mask, n.Const) or \
                    isinstance(s, (n.Shuffle, n.Vote)) and s.mode != "activemask" and not self.from_active(s.mask):
                out.extend(self.arrival_check(s))
            elif isinstance(s, n.If):
                out.append(rebuild(s, then=self.checked(s.then), orelse=self.checked(s.orelse)))
            elif isinstance(s, n.For):
                out.append(rebuild(s, body=self.checked(s.body)))
            elif isinstance(s, n.While):
                out.append(rebuild(s, body=self.checked(s.body), update=self.checked(s.update)))
            else:
                out.append(s)
        return tuple(out)

    def arrival_check(self, s: n.WarpSync | n.Shuffle | n.Vote) -> tuple[n.Stmt, ...]:
        loc = s.loc
        arrived = self.names.fresh("arrived")
        base = n.Binary("band", linear_tid(), n.Const(~31 & 0xFFFFFFFF, U32))
        left = n.Binary("sub", n.Binary("mul", n.Binary("mul", n.BlockDim(0), n.BlockDim(1)), n.BlockDim(2)), base)
        existing = n.Select(n.Binary("ge", left, n.Const(32, U32)), n.Const(0xFFFFFFFF, U32),
                            n.Binary("sub", n.Binary("shl", n.Const(1, U32), left), n.Const(1, U32)))
        expected = n.Binary("band", s.mask, existing)
        where = tuple(n.BlockIdx(d) for d in range(3)) + tuple(n.ThreadIdx(d) for d in range(3))
        what = "__syncwarp" if isinstance(s, n.WarpSync) else "warp operation"
        stop = n.AssertFail(f"every lane of this {what}'s mask reaches it (in a loop whose trips differ between "
                            "threads; undefined in CUDA otherwise)", loc.file if loc else "", loc.line if loc else 0,
                            self.kernel_name, where, loc=loc)
        return (n.Decl(arrived, U32, None, loc=loc),
                n.Vote(arrived, "ballot", n.Const(True, BOOL), s.mask, loc=loc),
                n.If(n.Binary("ne", n.Var(arrived, U32, loc=loc), expected, loc=loc), (stop,), loc=loc),
                s)

    def rewrite(self, s: n.For | n.While) -> tuple[n.Stmt, ...]:
        loc = s.loc
        self.rewritten.append(loc)
        live, go, anyone = self.names.fresh("live"), self.names.fresh("go"), self.names.fresh("any_live")
        self.buffers.append(n.Buffer(anyone, U32, (n.Const(1, I32),), "shared", loc=loc))
        body = s.body
        if isinstance(s, n.For):
            # The counter lives outside the loop; each trip declares the loop's variable from it
            # (a local of the branch, as the lowering of the threads wants the values it tests).
            outer = self.names.fresh(f"{s.var}_next")
            counter = n.Var(outer, s.vtype, loc=loc)
            cond: n.Expr = n.Binary("lt", counter, s.stop, loc=loc)
            enter: tuple[n.Stmt, ...] = (n.Decl(outer, s.vtype, s.start, loc=loc),)
            body = (n.Decl(s.var, s.vtype, counter, loc=loc),) + body
            step: tuple[n.Stmt, ...] = (n.Assign(outer, n.Binary("add", counter, s.step, loc=loc), loc=loc),)
        else:
            cond, enter, step = s.cond, (), s.update
        lv = n.Var(live, BOOL, loc=loc)
        trip = n.If(lv, self.checked(body) + step + (n.Assign(live, cond, loc=loc),), loc=loc)
        return enter + (n.Decl(live, BOOL, cond, loc=loc), n.Decl(go, BOOL, None, loc=loc)) + \
            block_any(go, lv, anyone, loc) + \
            (n.While(n.Var(go, BOOL, loc=loc), (trip,) + block_any(go, lv, anyone, loc), loc=loc),)


def _active_names(body: tuple[n.Stmt, ...]) -> set[str]:
    """The locals computed from an ``__activemask()``: its results, and (to a fixed point) the
    locals assigned from them and the results of warp operations over lanes named by them (a
    partition's ``__ballot_sync(active, ...)``)."""
    active: set[str] = set()

    def reads_active(*es: n.Expr) -> bool:
        return any(isinstance(v, n.Var) and v.name in active for e in es for v in walk(e))

    stmts = list(walk_block(body))
    grown = True
    while grown:
        grown = False
        for x in stmts:
            name = None
            if isinstance(x, n.Vote) and (x.mode == "activemask" or reads_active(x.mask)):
                name = x.dest
            elif isinstance(x, n.Shuffle) and reads_active(x.mask):
                name = x.dest
            elif isinstance(x, n.Decl) and x.init is not None and reads_active(x.init):
                name = x.name
            elif isinstance(x, n.Assign) and reads_active(x.value):
                name = x.name
            if name is not None and name not in active:
                active.add(name)
                grown = True
    return active

"""Split a GPU-form kernel body into thread-loop groups and block-level code.

This is the structural half of ``serialize_threads``. A GPU-form body is run by every thread of
a block; the CPU form runs it once per block with explicit loops over the threads. Every
``__syncthreads()`` and every warp operation is a point where all threads must have finished
what comes before before any thread goes on, so the statements between two such points become
one *group* (later one thread-loop nest), and control flow that contains such points moves
outside the thread loops (Polygeist's fission and interchange)::

    s[tid] = x[i]                 for threads { s[tid] = x[i] }
    barrier                       var k: i32 = 1                    (block-uniform: once)
    var k: i32 = 1          ==>   while (k < n) {
    while (k < n) {                 for threads { if (tid >= k) {...} }
      if (tid >= k) {...}           k = k * 2
      barrier                     }
    } update { k = k * 2 }

What stays at block level:

* control flow containing a barrier or a warp operation, or a ``break``/``continue`` of such a
  loop (its conditions are block-uniform: the frontend checked it for barriers);
* statements that only compute block-uniform scalars (``k`` above): every thread would compute
  the same value, so it is computed once per block (``block_vars``: uniform locals written only
  by such statements; found by a fixed point, since a variable also written inside a group
  cannot be a block-level variable).

Warp operations under a condition that is thread-dependent but (as CUDA requires for a full
mask) warp-uniform, like ``if (warp == 0) { ... __shfl_down_sync ... }``, are *predicated*: the
condition is stored per thread in a mask buffer, the branch's groups run ``if (mask[t])``, and
its block-level parts (loops of shuffles) run when at least one thread is active. Code in the
branch that is uniform among the threads that take it (``offset`` in a shuffle loop) is
block-level code of that region. A warp operation in a loop whose trip count depends on the
thread is refused.

A shuffle becomes a store of the value into a per-thread exchange buffer at the end of one
group and a read of the source lane's slot at the start of the next; a vote reads the
predicates of the 32 lanes of the thread's warp the same way (``gpu2cpu.warps``).
"""
from __future__ import annotations

import dataclasses
from typing import Union

from polypy.analysis.uniformity import thread_dependent_names, thread_uniform
from polypy.errors import InternalError, Loc, UserError
from polypy.ir import nodes as n
from polypy.ir.jumps import first_escaping_jump, jumps_out
from polypy.ir.queries import declared_names, written_names
from polypy.ir.types import BOOL, U32, PointerType
from polypy.ir.visitor import has_kind, walk, walk_only

from gpu2cpu import warps
from gpu2cpu.names import NameSupply


# --------------------------------------------------------------------------- the structure


@dataclasses.dataclass
class Group:
    """Statements every (active) thread runs: one thread-loop nest in the CPU form.

    ``mask``: the 1-D mask buffer (by linear thread id) of a predicated region, or None when
    every thread runs the group; ``otherwise`` runs for the inactive threads (it clears the
    masks the group computes).
    """

    stmts: list[n.Stmt]
    mask: str | None = None
    otherwise: list[n.Stmt] = dataclasses.field(default_factory=list)

    @property
    def loc(self) -> Loc | None:
        for s in self.stmts:
            if s.loc is not None:
                return s.loc
        return None


@dataclasses.dataclass
class BlockStmt:
    """A statement run once per block (block-uniform scalars, jumps, mask reductions)."""

    stmt: n.Stmt


@dataclasses.dataclass
class SIf:
    cond: n.Expr
    then: list["Item"]
    orelse: list["Item"]
    loc: Loc | None = None


@dataclasses.dataclass
class SFor:
    loop: n.For  # the header; its body is ``body``
    body: list["Item"]


@dataclasses.dataclass
class SWhile:
    loop: n.While  # the header; its body and update are ``body`` and ``update``
    body: list["Item"]
    update: list["Item"]


Item = Union[Group, BlockStmt, SIf, SFor, SWhile]


@dataclasses.dataclass
class Structure:
    """What ``split_body`` found: the items and the facts the rest of the lowering needs."""

    items: list[Item]
    block_vars: frozenset[str]  # locals computed at block level
    thread_vars: frozenset[str]  # locals declared or written inside groups
    block_reads: frozenset[str]  # thread variables read at block level (uniform: thread 0's copy)
    buffers: tuple[n.Buffer, ...]  # mask and exchange buffers the split introduced
    names: NameSupply
    notes: tuple[tuple[Loc | None, str], ...]  # decisions worth reporting


# --------------------------------------------------------------------------- helpers


def has_sync(node: n.Node) -> bool:
    """Whether ``node`` contains a barrier or a warp operation."""
    return has_kind(node, n.Barrier, n.Shuffle, n.Vote)


def linear_tid() -> n.Expr:
    """``(threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x`` (GPU form)."""
    z = n.Binary("mul", n.Binary("add", n.Binary("mul", n.ThreadIdx(2), n.BlockDim(1)), n.ThreadIdx(1)), n.BlockDim(0))
    return n.Binary("add", z, n.ThreadIdx(0))


def thread_count() -> n.Expr:
    return n.Binary("mul", n.Binary("mul", n.BlockDim(0), n.BlockDim(1)), n.BlockDim(2))


_BARRIER_UNDER_DIVERGENCE = "__syncthreads() under thread-dependent control: every thread of the block must reach it"


@dataclasses.dataclass(frozen=True)
class _Ctx:
    mask: str | None  # mask buffer of the predicated region (None: every thread of the block)
    divergent: frozenset[str]  # names thread-dependent relative to this region
    in_loop: bool  # directly inside a block-level loop: break/continue are block-level jumps


# --------------------------------------------------------------------------- the builder


class _Builder:
    """Builds the ``Item`` tree of one body. Not a ``Mutator``: it translates IR into another
    structure, and recurses only into control flow that contains synchronization (``region`` ->
    ``structural``/``predicated_branches`` -> ``region``), with the region's context passed
    down; everything else is handed whole to a group or to block level."""

    def __init__(self, kernel: n.Kernel, block_vars: frozenset[str], top_divergent: frozenset[str]):
        self.kernel = kernel
        self.names = NameSupply(kernel)
        self.block_vars = block_vars
        written = written_names(kernel.body)
        self.readonly_params = {p.name for p in kernel.params
                                if not isinstance(p.ptype, PointerType) and p.name not in written}
        self.local_arrays = {b.name for b in kernel.buffers if b.space == "local"}
        self.thread_vars: set[str] = set()
        self.block_reads: set[str] = set()
        self.buffers: list[n.Buffer] = []
        self.notes: list[tuple[Loc | None, str]] = []
        self.top = _Ctx(None, top_divergent, False)

    # -- questions
    def is_block_var(self, name: str) -> bool:
        return name in self.block_vars or name in self.readonly_params

    def uniform(self, e: n.Expr, ctx: _Ctx) -> bool:
        return thread_uniform(e, ctx.divergent, self.local_arrays)

    def hoistable(self, s: n.Stmt, ctx: _Ctx) -> bool:
        """Whether ``s`` only computes block-uniform scalars (and may run once per block)."""
        for x in walk(s):
            if isinstance(x, (n.Store, n.AtomicRMW, n.Shuffle, n.Vote, n.Barrier, n.Return, n.ThreadIdx, n.Print, n.Launch)):
                return False
            if isinstance(x, n.Load) and x.buffer in self.local_arrays:
                return False
            if isinstance(x, n.Var) and not self.is_block_var(x.name):
                return False
            if isinstance(x, (n.Decl, n.Assign)) and (x.name not in self.block_vars or x.name in ctx.divergent):
                return False
            if isinstance(x, n.For) and (x.var not in self.block_vars or x.var in ctx.divergent):
                return False
        return True

    def block_expr(self, e: n.Expr, ctx: _Ctx, what: str, loc: Loc | None) -> n.Expr:
        """A block-uniform condition or bound, evaluated once per block.

        A uniform variable that is also written inside a group lives per thread; at top level
        every thread holds the same value, so thread 0's copy is read (``block_reads``).
        """
        for x in walk(e):
            if isinstance(x, n.Var) and not self.is_block_var(x.name):
                if ctx.mask is not None:
                    raise UserError(f"cannot lower {what}: it reads '{x.name}', which is only known per thread inside "
                                    "a branch that some threads skip", loc)
                self.block_reads.add(x.name)
        return e

    # -- statement sequences
    def region(self, stmts: tuple[n.Stmt, ...], ctx: _Ctx) -> list[Item]:
        out: list[Item] = []
        cur: Group | None = None

        def close() -> None:
            nonlocal cur
            if cur is not None and (cur.stmts or cur.otherwise):
                out.append(cur)
            cur = None

        def group() -> Group:
            nonlocal cur
            if cur is None:
                cur = Group([], ctx.mask)
            return cur

        for s in stmts:
            if isinstance(s, n.Return):
                raise InternalError("return in a kernel given to serialize_threads (run eliminate_returns first)", s.loc)
            if isinstance(s, n.Barrier):
                if ctx.mask is not None:  # the frontend refuses this already (check_barriers)
                    raise UserError(_BARRIER_UNDER_DIVERGENCE, s.loc)
                close()
                if s.scope == "grid":  # stays between the thread loops: the block waits for the grid
                    out.append(BlockStmt(s))
            elif isinstance(s, (n.Shuffle, n.Vote)):
                before, after = self.exchange(s, ctx)
                group().stmts.extend(before)
                close()
                cur = Group(list(after), ctx.mask)
                self.thread_vars |= _declared_or_written(after)
            elif isinstance(s, (n.Break, n.Continue)):
                if not ctx.in_loop:
                    raise UserError(f"{type(s).__name__.lower()} leaves a branch that only some threads take, inside "
                                    "a loop with warp operations; this is not supported", s.loc)
                close()
                out.append(BlockStmt(s))
            elif has_sync(s) or jumps_out(s, n.Break, n.Continue):
                if isinstance(s, n.If) and not self.uniform(s.cond, ctx):
                    masks = self.predicate(s, ctx, group())
                    close()
                    out.extend(self.predicated_branches(s, ctx, masks))
                else:
                    close()
                    out.append(self.structural(s, ctx))
            elif self.hoistable(s, ctx):
                if cur is not None and not _commutes(s, cur):
                    close()
                # Before the open group when it may run first: no needless split of the group.
                out.append(BlockStmt(s))
            else:
                group().stmts.append(s)
                self.thread_vars |= _declared_or_written((s,))
        close()
        return out

    def structural(self, s: n.Stmt, ctx: _Ctx) -> Item:
        """Control flow with barriers/warp operations inside, moved outside the thread loops."""
        if isinstance(s, n.If):
            cond = self.block_expr(s.cond, ctx, "the condition of this if", s.loc)
            return SIf(cond, self.region(s.then, ctx), self.region(s.orelse, ctx), s.loc)
        loop_ctx = dataclasses.replace(ctx, in_loop=True)
        if isinstance(s, n.For):
            if s.var in ctx.divergent or not all(self.uniform(e, ctx) for e in (s.start, s.stop, s.step)):
                raise self.divergent_loop(s)
            bounds = [self.block_expr(e, ctx, "the bounds of this loop", s.loc) for e in (s.start, s.stop, s.step)]
            header = n.For(s.var, s.vtype, bounds[0], bounds[1], bounds[2], (), loc=s.loc)
            return SFor(header, self.region(s.body, loop_ctx))
        if isinstance(s, n.While):
            if not self.uniform(s.cond, ctx):
                raise self.divergent_loop(s)
            cond = self.block_expr(s.cond, ctx, "the condition of this loop", s.loc)
            return SWhile(n.While(cond, (), (), loc=s.loc), self.region(s.body, loop_ctx),
                          self.region(s.update, loop_ctx))
        raise InternalError(f"unexpected {type(s).__name__} with synchronization inside", s.loc)

    def divergent_loop(self, s: n.Stmt) -> UserError:
        if any(isinstance(x, n.Barrier) for x in walk(s)):  # the frontend refuses this already
            return UserError(_BARRIER_UNDER_DIVERGENCE + " (this loop's trip count depends on the thread)", s.loc)
        return UserError("warp operation inside a loop whose trip count depends on the thread: polypy needs the "
                         "loops around __shfl*/__ballot*/__any*/__all* to run the same number of times in every "
                         "thread of the block (or of the branch that contains them)", s.loc)

    # -- predication (warp operations under a thread-dependent condition)
    def predicate(self, s: n.If, ctx: _Ctx, g: Group) -> list[str]:
        """Store the branch conditions per thread at the end of the current group."""
        jump = first_escaping_jump(s, n.Break, n.Continue)
        if jump is not None:
            raise UserError("break/continue under a thread-dependent condition in a loop with warp operations is not "
                            "supported", jump.loc)
        lin = linear_tid()
        then_mask = self.mask_buffer(s.loc)
        g.stmts.append(n.Store(then_mask, (lin,), s.cond, loc=s.loc))
        masks = [then_mask]
        if s.orelse:
            else_mask = self.mask_buffer(s.loc)
            g.stmts.append(n.Store(else_mask, (lin,), n.Unary("not", s.cond), loc=s.loc))
            masks.append(else_mask)
        if ctx.mask is not None:  # threads outside the enclosing region take neither branch
            g.otherwise.extend(n.Store(m, (lin,), n.Const(False, BOOL), loc=s.loc) for m in masks)
        self.notes.append((s.loc, f"warp operations under a thread-dependent condition: predicated per thread "
                                  f"(mask {', '.join(masks)})"))
        return masks

    def predicated_branches(self, s: n.If, ctx: _Ctx, masks: list[str]) -> list[Item]:
        out: list[Item] = []
        for branch, mask in zip((s.then, s.orelse), masks):
            sub = _Ctx(mask, self.region_divergent(branch, ctx), False)
            items = self.region(branch, sub)
            if all(isinstance(i, Group) for i in items):
                out.extend(items)
            else:
                out.extend(self.any_guard(mask, items, s.loc))
        return out

    def region_divergent(self, stmts: tuple[n.Stmt, ...], ctx: _Ctx) -> frozenset[str]:
        """Names thread-dependent *among the threads that run* ``stmts`` (entry is uniform).

        The uniformity analysis is run on the branch alone, with the variables that are already
        thread-dependent outside it seeded as such.
        """
        # Not declared in the branch: a value from outside it (also when the branch assigns it
        # later, as a loop's counter stepped at the end of its guarded trip).
        outer = {x.name for s in stmts for x in walk_only(s, n.Var)} - declared_names(tuple(stmts))
        seeds = tuple(n.Assign(v, n.ThreadIdx(0)) for v in sorted(outer & ctx.divergent))
        fake = dataclasses.replace(self.kernel, body=seeds + tuple(stmts))
        return thread_dependent_names(fake) | (ctx.divergent & outer)

    def any_guard(self, mask: str, items: list[Item], loc: Loc | None) -> list[Item]:
        """``if (some thread has mask set) { items }``: block-level code of a predicated branch."""
        flag = self.names.fresh(f"{mask}_any")
        i = self.names.fresh("t")
        scan = n.For(i, U32, n.Const(0, U32), thread_count(), n.Const(1, U32),
                     (n.If(n.Load(mask, (n.Var(i, U32),), BOOL), (n.Assign(flag, n.Const(True, BOOL)),)),), loc=loc)
        return [BlockStmt(n.Decl(flag, BOOL, n.Const(False, BOOL), loc=loc)), BlockStmt(scan),
                SIf(n.Var(flag, BOOL), items, [], loc)]

    def mask_buffer(self, loc: Loc | None) -> str:
        name = self.names.fresh("active")
        self.buffers.append(n.Buffer(name, BOOL, (thread_count(),), "local", loc=loc))
        return name

    # -- warp operations
    def exchange(self, s: n.Shuffle | n.Vote, ctx: _Ctx) -> tuple[list[n.Stmt], list[n.Stmt]]:
        """(stores at the end of the group before, statements that start the group after)."""
        lin = linear_tid()
        if isinstance(s, n.Shuffle):
            elem = s.value.type
            buf = self.names.fresh(f"{s.dest}_xchg")
            self.buffers.append(n.Buffer(buf, elem, (thread_count(),), "local", loc=s.loc))
            self.notes.append((s.loc, f"shuffle: values exchanged through per-thread buffer {buf}"))
            return ([n.Store(buf, (lin,), s.value, loc=s.loc)],
                    warps.shuffle_statements(s, buf, lin, thread_count(), self.names))
        buf = self.names.fresh(f"{s.dest}_xchg")
        self.buffers.append(n.Buffer(buf, BOOL, (thread_count(),), "local", loc=s.loc))
        self.notes.append((s.loc, f"vote: predicates exchanged through per-thread buffer {buf}"))
        return ([n.Store(buf, (lin,), s.pred, loc=s.loc)],
                warps.vote_statements(s, buf, ctx.mask, lin, thread_count(), self.names))


def _commutes(s: n.Stmt, g: Group) -> bool:
    """Whether block-level statement ``s`` may run before the statements already in ``g``.

    ``s`` only writes block-level scalars, which groups never write; it must not write one the
    group reads, nor read memory the group writes (all pointer parameters may alias).
    """
    group_reads = {x.name for t in g.stmts for x in walk_only(t, n.Var)}
    if _declared_or_written((s,)) & group_reads:
        return False
    loads = {x.buffer for x in walk_only(s, n.Load)}
    if not loads:
        return True
    stores = {x.buffer for t in g.stmts for x in walk_only(t, n.Store, n.AtomicRMW)}
    return not stores


def _declared_or_written(stmts) -> set[str]:
    return written_names(tuple(stmts)) | declared_names(tuple(stmts))


def split_body(kernel: n.Kernel) -> Structure:
    """The groups and block-level code of a GPU-form kernel (see the module docstring)."""
    top_divergent = thread_dependent_names(kernel)
    candidates = frozenset(x.name for x in walk_only(kernel, n.Decl)) | \
        frozenset(x.var for x in walk_only(kernel, n.For))
    while True:
        b = _Builder(kernel, candidates, top_divergent)
        items = b.region(kernel.body, b.top)
        demoted = candidates & b.thread_vars
        if not demoted:
            return Structure(items, candidates, frozenset(b.thread_vars), frozenset(b.block_reads),
                             tuple(b.buffers), b.names, tuple(b.notes))
        candidates = candidates - demoted

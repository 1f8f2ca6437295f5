"""serialize_threads: GPU form -> CPU form (the work of one block, threads as explicit loops).

Requires: a GPU-form kernel after ``polypy.driver.pipelines.GPU_PIPELINE`` (no ``return``; barriers only
under block-uniform control, which the frontend checks). Guarantees: a CPU-form kernel
(``docs/ir.md``) computing, for every block, what the block's threads compute in CUDA, for
every kernel that is race-free under CUDA's rules.

Steps (each in its own module):

1. ``gpu2cpu.regions`` splits the body at barriers and warp operations into *groups* and
   block-level code: control flow containing barriers moves outside the thread loops, and
   block-uniform scalars are computed once per block.
2. ``gpu2cpu.liveness`` finds the thread variables live from one group into another.
3. ``gpu2cpu.store_or_recompute`` chooses, by a minimum cut over their definitions, which of
   those values to keep in per-thread buffers; the others are *recomputed* (pure, cheap
   expressions of the thread index, constants, unchanging block-level values and stored values).
4. Here: each group becomes a thread-loop nest ``for tz { for ty { for tx { ... } } }`` (u32
   counters from 0 to blockDim, ``threadIdx`` replaced by them); a stored value lives in a
   ``local`` buffer ``v_buf[blockDim.z][blockDim.y][blockDim.x]``, loaded into a local at the
   start of a group and stored back at its end; per-thread ``local`` arrays get the thread
   dimensions behind their own (``a[j][tz][ty][tx]``: one element of consecutive threads is
   contiguous, so a loop over ``tx`` reads it with vector loads, as it reads ``v_buf``).

::

    var acc: f32 = 0.0f                   for threads tz, ty, tx { var acc = 0.0f; acc_buf[..] = acc }
    for t = 0 to n {                      for t = 0 to n {
      As[ty][tx] = A[...]                   for threads tz, ty, tx { As[ty][tx] = A[...] }
      barrier                      ==>      for threads tz, ty, tx {
      acc = acc + As[ty][0]                   var acc_1 = acc_buf[tz][ty][tx]
      barrier                                 acc_1 = acc_1 + As[ty][0]; acc_buf[tz][ty][tx] = acc_1
    }                                       }
    C[i] = acc                            }
                                          for threads tz, ty, tx { var acc_2 = acc_buf[..]; C[i] = acc_2 }

``report``, if given, receives one ``LoweringDecision`` per decision: the number of thread
loops, each value kept in a buffer or recomputed, block-uniform values, predicated branches.
"""
from __future__ import annotations

import dataclasses

from polypy.errors import InternalError, Loc
from polypy.ir import nodes as n
from polypy.ir.queries import local_types, written_names
from polypy.ir.rewrite import rename_locals
from polypy.ir.types import BOOL, I32, U32, PointerType
from polypy.ir.visitor import Mutator, iter_children, walk, walk_only

from gpu2cpu.liveness import analyze
from gpu2cpu.names import NameSupply
from gpu2cpu.regions import BlockStmt, Group, Item, SFor, SIf, Structure, SWhile, linear_tid, split_body
from gpu2cpu.report import LoweringDecision
from gpu2cpu.store_or_recompute import choose_stored
from gpu2cpu.thread_loops import CHEAP_CALLS, RECOMPUTE_LIMIT


def serialize_threads(kernel: n.Kernel, *, recompute: bool = True,
                      report: list[LoweringDecision] | None = None) -> n.Kernel:
    """Lower a GPU-form kernel to the CPU form (see the module docstring).

    ``recompute=False`` keeps every value that crosses a thread-loop boundary in a buffer.
    """
    if kernel.stage != "gpu":
        raise InternalError(f"serialize_threads expects a GPU-form kernel, got stage {kernel.stage!r}", kernel.loc)
    kernel = _copy_written_params(kernel)
    structure = split_body(kernel)
    lowering = _Lowering(kernel, structure, recompute)
    body = lowering.items(structure.items)
    buffers, widened = _widen_flags(lowering.buffers(), set(lowering.value_buffers.values()))
    result = dataclasses.replace(kernel, body=_WidenFlags(widened).visit_block(body), buffers=buffers, stage="cpu")
    if report is not None:
        report.extend(lowering.decisions())
    return result


def _widen_flags(buffers: tuple[n.Buffer, ...], kept: set[str]) -> tuple[tuple[n.Buffer, ...], set[str]]:
    """The per-thread buffers of ``bool`` values kept across thread loops (``kept``) hold 32-bit
    ints, 0 or 1: a thread loop that loads a flag and then loads or stores 32- or 64-bit data
    under it is vectorized by GCC (a byte mask beside wider data is not, GCC 12: Rodinia
    pathfinder's ``if (computed) prev[tx] = result[tx]``: its kernel 230 -> 122 ms of samples).
    Branch masks and vote exchanges stay bytes: they are scanned 32 lanes at a time by the warp
    operations, which measured slower on ints (a gradient of warp_reduce 1.9x -> 3.5x its
    forward). The kernel's own arrays keep their layout."""
    out, widened = [], set()
    for b in buffers:
        if b.elem == BOOL and b.name in kept:
            b = dataclasses.replace(b, elem=I32)
            widened.add(b.name)
        out.append(b)
    return tuple(out), widened


class _WidenFlags(Mutator):
    """Stores to a widened flag buffer convert the ``bool`` to ``i32``; loads convert back."""

    def __init__(self, widened: set[str]):
        self.widened = widened

    def visit_Load(self, e: n.Load) -> n.Expr:
        e = self.generic_visit(e)
        if e.buffer in self.widened:
            return n.Cast(BOOL, dataclasses.replace(e, etype=I32))
        return e

    def visit_Store(self, s: n.Store) -> n.Stmt:
        s = self.generic_visit(s)
        if s.buffer in self.widened:
            return dataclasses.replace(s, value=n.Cast(I32, s.value))
        return s


def _copy_written_params(kernel: n.Kernel) -> n.Kernel:
    """Each thread has its own copy of the scalar parameters: work on locals where one is assigned."""
    written = written_names(kernel.body)
    params = [p for p in kernel.params if not isinstance(p.ptype, PointerType) and p.name in written]
    if not params:
        return kernel
    names = NameSupply(kernel)
    mapping = {p.name: names.fresh(p.name + "_local") for p in params}
    body = rename_locals(kernel.body, mapping)
    copies = tuple(n.Decl(mapping[p.name], p.ptype, n.Var(p.name, p.ptype), loc=p.loc) for p in params)
    return dataclasses.replace(kernel, body=copies + body)


@dataclasses.dataclass
class _Writes:
    """How a local is written across the whole kernel (for the recomputation decision)."""

    count: int = 0
    decl: n.Decl | None = None
    other: bool = False  # assigned, loop variable, or destination of an atomic/warp operation


def _writes(kernel: n.Kernel) -> dict[str, _Writes]:
    out: dict[str, _Writes] = {}
    for x in walk_only(kernel, n.Stmt):
        if isinstance(x, n.Decl):
            w = out.setdefault(x.name, _Writes())
            w.count += 1
            w.decl = x
        elif isinstance(x, n.For):
            w = out.setdefault(x.var, _Writes())
            w.count += 1
            w.other = True
        elif isinstance(x, n.Assign):
            w = out.setdefault(x.name, _Writes())
            w.count += 1
            w.other = True
        elif isinstance(x, (n.AtomicRMW, n.Shuffle, n.Vote)) and x.dest is not None:
            w = out.setdefault(x.dest, _Writes())
            w.count += 1
            w.other = True
    return out


@dataclasses.dataclass
class _GroupState:
    """One group being emitted: its counters and the local that stands for each thread variable."""

    counters: tuple[str, str, str]  # x, y, z
    rename: dict[str, str]
    prologue: list[n.Stmt]


class _Lowering:
    def __init__(self, kernel: n.Kernel, st: Structure, recompute: bool):
        self.kernel = kernel
        self.st = st
        self.names = st.names
        self.types = local_types(kernel)
        self.writes = _writes(kernel)
        # Walked once here, not once per local (kernels with many inlined locals, cuda_fp16.h's).
        self._assign_counts: dict[str, int] = {}
        self._loop_vars: set[str] = set()
        for x in walk_only(kernel, n.Assign, n.For):
            if isinstance(x, n.Assign):
                self._assign_counts[x.name] = self._assign_counts.get(x.name, 0) + 1
            elif isinstance(x, n.For):
                self._loop_vars.add(x.var)
        self._blocks_of: dict[int, tuple[n.Stmt, ...]] = {}
        for block in _statement_lists(kernel):
            for stmt in block:
                self._blocks_of.setdefault(id(stmt), block)
        self.local_arrays = {b.name: b for b in kernel.buffers if b.space == "local"}
        self.readonly_params = {p.name for p in kernel.params if not isinstance(p.ptype, PointerType)}
        self.facts = analyze(st.items, st.thread_vars, st.block_reads)
        self.thread_loops = 0
        self.recompute_enabled = recompute
        self._definitions: dict[str, n.Expr | None] = {}
        self.recomputed_in: dict[str, int] = {}
        self.value_buffers: dict[str, str] = {}
        self.loads: dict[str, int] = {}
        self._decide()

    # ------------------------------------------------------------------ decisions
    def _decide(self) -> None:
        """Which values live across thread loops get a per-thread buffer; the rest are recomputed.

        The values some thread loop needs from an earlier one (and those block-level code reads)
        go to ``choose_stored``, a minimum cut over their definitions.
        """
        needed: set[str] = set(self.st.block_reads)
        for f in self.facts.values():
            for v in (f.live_in & f.refs) - f.declared:
                self.loads[v] = self.loads.get(v, 0) + 1
                needed.add(v)
        if self.recompute_enabled:
            operands = {v: self._operands(v) for v in self.st.thread_vars}
            for v in self.st.block_reads:
                operands[v] = None  # block-level code reads thread 0's slot: it must be stored
            stored = choose_stored(needed, operands)
        else:
            stored = needed
        for v in sorted(stored):
            self.value_buffers[v] = self.names.fresh(f"{v}_buf")

    def definition(self, v: str) -> n.Expr | None:
        """``v``'s final value as an expression if ``v`` can be recomputed from it (its operands
        being available).

        ``v`` must be written once, by its declaration, or by its declaration and assignments
        that follow it in the same statement list with no barrier or jump in between (a clamp:
        ``W = tx - 1; W = W < lo ? lo : W``, whose final value is the assignments composed), with
        cheap pure expressions (no loads, no expensive calls, no division by a variable) of
        constants, the thread and block indices, parameters, unchanging block-level values and
        other thread values that never change. Cheap: at most ``RECOMPUTE_LIMIT`` nodes that
        vary with the thread (block-uniform subexpressions are loop invariants of the thread
        loops, computed once by the compiler, and count as one).
        """
        if v in self._definitions:
            return self._definitions[v]
        init = self.writes[v].decl.init if self._written_once(v) else self._composed(v)  # type: ignore[union-attr]
        if init is not None and self._thread_cost(init) <= RECOMPUTE_LIMIT:
            for x in walk(init):
                if isinstance(x, n.Load) or (isinstance(x, n.Call) and x.fn not in CHEAP_CALLS) or \
                        (isinstance(x, n.Binary) and x.op in ("div", "rem") and not isinstance(x.b, n.Const)):
                    init = None
                elif isinstance(x, n.Var) and x.name in self.st.thread_vars:
                    if x.name != v and not self._written_once(x.name):
                        init = None  # its value where v is computed may not be its final value
                elif isinstance(x, n.Var):
                    bw = self.writes.get(x.name)
                    if x.name in self.st.block_vars:
                        if bw is not None and (bw.count > 1 or (bw.other and not self._is_loop_var(x.name))):
                            init = None  # the block-level value may change between the two places
                    elif x.name not in self.readonly_params:
                        init = None
                if init is None:
                    break
        else:
            init = None
        self._definitions[v] = init
        return init

    def _thread_cost(self, e: n.Expr) -> int:
        """Nodes of ``e`` that vary with the thread; a block-uniform subexpression counts as one.
        One bottom-up pass (``walk`` lists parents before children, so its reverse has every
        node after its operands): asking each level whether its subtree varies walked a long
        chain once per level (a 6,000-term ``&&`` took minutes)."""
        thread_vars = self.st.thread_vars
        cost: dict[int, tuple[bool, int]] = {}  # id(node): (varies with the thread, cost)
        for x in reversed(list(walk(e))):
            varies = isinstance(x, (n.ThreadIdx, n.Load)) or (isinstance(x, n.Var) and x.name in thread_vars)
            total = 1
            for c in iter_children(x):
                c_varies, c_cost = cost[id(c)]
                varies |= c_varies
                if isinstance(c, n.Expr):
                    total += c_cost
            cost[id(x)] = (varies, total if varies else 1)
        return cost[id(e)][1]

    def _composed(self, v: str) -> n.Expr | None:
        """``v``'s final value where it is declared (with or without a value) and then only
        assigned in the same statement list, with nothing between that splits thread loops or
        jumps: the assigned values with each read of ``v`` replaced by its value before (None
        where ``v`` is written otherwise)."""
        w = self.writes.get(v)
        if w is None or w.decl is None:
            return None
        assigns = self._assign_counts.get(v, 0)
        if assigns + 1 != w.count:
            return None  # a loop variable, an atomic's or a warp operation's destination
        for block in (self._blocks_of[id(w.decl)],) if id(w.decl) in self._blocks_of else ():
            start = next(i for i, s in enumerate(block) if s is w.decl)
            mine = [i for i, s in enumerate(block) if isinstance(s, n.Assign) and s.name == v]
            if len(mine) != assigns or any(i < start for i in mine):
                return None
            value = w.decl.init
            for s in block[start + 1:(mine[-1] + 1) if mine else start + 1]:
                if any(isinstance(x, (n.Barrier, n.Shuffle, n.Vote, n.Break, n.Continue, n.Return)) for x in walk(s)):
                    return None
                if isinstance(s, n.Assign) and s.name == v:
                    if value is None:  # declared without a value: the first assignment gives it one
                        if any(isinstance(x, n.Var) and x.name == v for x in walk(s.value)):
                            return None
                        value = s.value
                    else:
                        value = rename_locals(s.value, {}, {n.Var(v, self.types[v]): value})
            return value
        return None

    def _operands(self, v: str) -> tuple[str, ...] | None:
        init = self.definition(v)
        if init is None:
            return None
        return tuple(sorted({x.name for x in walk_only(init, n.Var) if x.name in self.st.thread_vars}))

    def _written_once(self, v: str) -> bool:
        """Whether ``v``'s initialized declaration is its only write (its value never changes)."""
        w = self.writes.get(v)
        return w is not None and w.count == 1 and not w.other and w.decl is not None and w.decl.init is not None

    def _is_loop_var(self, name: str) -> bool:
        return name in self._loop_vars

    # ------------------------------------------------------------------ block level
    def items(self, items: list[Item]) -> tuple[n.Stmt, ...]:
        out: list[n.Stmt] = []
        for item in items:
            if isinstance(item, Group):
                out.append(self.group(item))
            elif isinstance(item, BlockStmt):
                out.append(self.block_level(item.stmt))
            elif isinstance(item, SIf):
                out.append(n.If(self.block_level(item.cond), self.items(item.then), self.items(item.orelse),
                                loc=item.loc))
            elif isinstance(item, SFor):
                h = item.loop
                out.append(n.For(h.var, h.vtype, self.block_level(h.start), self.block_level(h.stop),
                                 self.block_level(h.step), self.items(item.body), loc=h.loc))
            elif isinstance(item, SWhile):
                out.append(n.While(self.block_level(item.loop.cond), self.items(item.body), self.items(item.update),
                                   loc=item.loop.loc))
            else:
                raise InternalError(f"unexpected item {type(item).__name__}")
        return tuple(out)

    def block_level(self, node):
        """Block-level code; a uniform thread variable is read from thread (0, 0, 0)'s slot."""
        if not self.st.block_reads:
            return node
        lowering = self

        class ThreadZero(Mutator):
            def visit_Var(self, e: n.Var) -> n.Expr:
                if e.name in lowering.st.block_reads:
                    zero = n.Const(0, U32)
                    return n.Load(lowering.value_buffers[e.name], (zero, zero, zero), e.vtype, loc=e.loc)
                return e

        return ThreadZero().visit(node)

    # ------------------------------------------------------------------ groups
    def group(self, g: Group) -> n.Stmt:
        f = self.facts[id(g)]
        self.thread_loops += 1
        counters = (self.names.fresh("tx"), self.names.fresh("ty"), self.names.fresh("tz"))
        state = _GroupState(counters, {}, [])
        declared_inside = {x.name for s in g.stmts for x in walk_only(s, n.Decl)}
        declared_inside |= {x.var for s in g.stmts for x in walk_only(s, n.For)}
        live_in = f.live_in & f.refs
        for v in sorted(f.refs - declared_inside):
            self.materialize(v, state, with_value=v in live_in)
        body_mutator = _ThreadBody(state, self.local_arrays)
        body = list(state.prologue) + list(body_mutator.visit_block(tuple(g.stmts)))
        # Stored values: where they are written and still needed, and (values stored only to
        # recompute others) where they are declared.
        for v in sorted((f.written & f.live_out) | {v for v in f.declared & self.value_buffers.keys()
                                                     if self._written_once(v)}):
            buf = self.value_buffers.get(v)
            if buf is not None:
                body.append(n.Store(buf, self.thread_index(state), n.Var(state.rename.get(v, v), self.types[v]),
                                    loc=g.loc))
        inner: tuple[n.Stmt, ...] = tuple(body)
        if g.mask is not None:
            active = n.Load(g.mask, (body_mutator.visit(linear_tid()),), BOOL)
            inner = (n.If(active, inner, body_mutator.visit_block(tuple(g.otherwise)), loc=g.loc),)
        return self.thread_nest(state, inner, g.loc)

    def thread_index(self, state: _GroupState) -> tuple[n.Expr, n.Expr, n.Expr]:
        x, y, z = state.counters
        return (n.Var(z, U32), n.Var(y, U32), n.Var(x, U32))

    def thread_nest(self, state: _GroupState, body: tuple[n.Stmt, ...], loc: Loc | None) -> n.Stmt:
        zero, one = n.Const(0, U32), n.Const(1, U32)
        x, y, z = state.counters
        loop_x = n.For(x, U32, zero, n.BlockDim(0), one, body, kind="threads", loc=loc)
        loop_y = n.For(y, U32, zero, n.BlockDim(1), one, (loop_x,), kind="threads", loc=loc)
        return n.For(z, U32, zero, n.BlockDim(2), one, (loop_y,), kind="threads", loc=loc)

    def materialize(self, v: str, state: _GroupState, *, with_value: bool) -> str:
        """The local standing for thread variable ``v`` in this group, declared in its prologue."""
        existing = state.rename.get(v)
        if existing is not None:
            return existing
        ty = self.types[v]
        init: n.Expr | None = None
        if with_value:
            buf = self.value_buffers.get(v)
            if buf is not None:
                init = n.Load(buf, self.thread_index(state), ty)
            else:
                expr = self.definition(v)
                if expr is None:
                    raise InternalError(f"no buffer and no recomputation for {v!r}")
                for x in walk(expr):  # operands first, so they are declared before use
                    if isinstance(x, n.Var) and x.name in self.st.thread_vars:
                        self.materialize(x.name, state, with_value=True)
                init = _ThreadBody(state, self.local_arrays).visit(expr)
                self.recomputed_in[v] = self.recomputed_in.get(v, 0) + 1
        name = self.names.fresh(v)
        state.rename[v] = name
        decl = self.writes.get(v)
        loc = decl.decl.loc if decl is not None and decl.decl is not None else None
        let = init is not None and decl is not None and decl.decl is not None and decl.decl.let  # a let's copy is one
        state.prologue.append(n.Decl(name, ty, init, let=let, loc=loc))
        return name

    # ------------------------------------------------------------------ results
    def buffers(self) -> tuple[n.Buffer, ...]:
        dims = (n.BlockDim(2), n.BlockDim(1), n.BlockDim(0))
        out: list[n.Buffer] = []
        for b in self.kernel.buffers:
            if b.space == "local":
                assert b.shape is not None
                b = dataclasses.replace(b, shape=b.shape + dims)
            out.append(b)
        out.extend(self.st.buffers)
        for v, buf in self.value_buffers.items():
            out.append(n.Buffer(buf, self.types[v], dims, "local", loc=self._decl_loc(v)))
        return tuple(out)

    def _decl_loc(self, v: str) -> Loc | None:
        w = self.writes.get(v)
        return w.decl.loc if w is not None and w.decl is not None else None

    def decisions(self) -> list[LoweringDecision]:
        k = self.kernel.name
        out = [LoweringDecision(k, self.kernel.loc, f"{self.thread_loops} thread loop(s) over the threads of a block")]
        for loc, message in self.st.notes:
            out.append(LoweringDecision(k, loc, message))
        hoisted = sorted(v for v in self.st.block_vars if v in self.writes and self.writes[v].decl is not None)
        for v in hoisted:
            out.append(LoweringDecision(k, self._decl_loc(v), f"'{v}' is block-uniform: computed once per block"))
        for v, buf in self.value_buffers.items():
            where = f"kept in per-thread buffer {buf}[blockDim.z][blockDim.y][blockDim.x]"
            if v in self.st.block_reads:
                message = f"'{v}' is read by block-level control flow: {where}"
            elif v in self.loads:
                message = f"'{v}' is live across thread loops: {where}"
            else:
                users = sorted(u for u in self.recomputed_in if v in (self._operands(u) or ()))
                message = f"'{v}' is {where}, to recompute {', '.join(repr(u) for u in users)} from it " \
                          f"(fewer buffers than storing them)"
            out.append(LoweringDecision(k, self._decl_loc(v), message))
        for v, count in sorted(self.recomputed_in.items()):
            out.append(LoweringDecision(k, self._decl_loc(v), f"'{v}' is live across thread loops: recomputed in "
                                                              f"{count} thread loop(s) instead of stored"))
        for b in self.kernel.buffers:
            if b.space == "local":
                out.append(LoweringDecision(k, b.loc, f"per-thread array '{b.name}' gets one copy per thread "
                                                      f"([blockDim.z][blockDim.y][blockDim.x] behind its own "
                                                      f"dimensions: consecutive threads' elements are adjacent)"))
        return out


def _statement_lists(kernel: n.Kernel):
    """Every statement list of ``kernel``: its body and the blocks of its statements."""
    for x in walk_only(kernel, n.Stmt, n.Kernel):
        for field in getattr(x, "BLOCKS", ()):
            yield getattr(x, field)


class _ThreadBody(Mutator):
    """GPU-form statements of a group -> the body of its thread loop."""

    def __init__(self, state: _GroupState, local_arrays: dict[str, n.Buffer]):
        self.state = state
        self.local_arrays = local_arrays

    def visit_ThreadIdx(self, e: n.ThreadIdx) -> n.Expr:
        return n.Var(self.state.counters[e.dim], U32, loc=e.loc)

    def visit_Var(self, e: n.Var) -> n.Expr:
        name = self.state.rename.get(e.name)
        return e if name is None else n.Var(name, e.vtype, loc=e.loc)

    def _name(self, name: str) -> str:
        return self.state.rename.get(name, name)

    def _index(self, buffer: str, index: tuple[n.Expr, ...]) -> tuple[n.Expr, ...]:
        if buffer in self.local_arrays:
            x, y, z = self.state.counters
            return index + (n.Var(z, U32), n.Var(y, U32), n.Var(x, U32))
        return index

    def visit_Decl(self, s: n.Decl) -> n.Stmt:
        s = self.generic_visit(s)
        return dataclasses.replace(s, name=self._name(s.name))

    def visit_Assign(self, s: n.Assign) -> n.Stmt:
        s = self.generic_visit(s)
        return dataclasses.replace(s, name=self._name(s.name))

    def visit_Load(self, e: n.Load) -> n.Expr:
        e = self.generic_visit(e)
        return dataclasses.replace(e, index=self._index(e.buffer, e.index))

    def visit_Store(self, s: n.Store) -> n.Stmt:
        s = self.generic_visit(s)
        return dataclasses.replace(s, index=self._index(s.buffer, s.index))

    def visit_AtomicRMW(self, s: n.AtomicRMW) -> n.Stmt:
        s = self.generic_visit(s)
        dest = self._name(s.dest) if s.dest is not None else None
        return dataclasses.replace(s, index=self._index(s.buffer, s.index), dest=dest)

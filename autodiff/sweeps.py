"""The two sweeps of ``K_grad``: the forward sweep (K's body plus tape stores and counters) and
the reverse sweep (K's statements backwards, each replaced by its adjoint).

Reverse sweep, per statement (``d_x`` is the adjoint of ``x``):

* ``v = e``: ``ct = d_v; d_v = 0``, then ``ct`` flows into ``e``'s active operands through the
  rules table (``autodiff.rules``: linear operations by their transpose, others by partials);
* ``X[i] = e``: ``ct = d_X[i]; d_X[i] = 0`` (the element's seed is consumed), then into ``e``;
* a load ``X[i]`` receiving ``ct``: accumulated (``autodiff.accumulation``);
* ``atomicAdd(X[i], e)``: ``ct = d_X[i]`` (the seed stays), into ``e``;
* ``__syncthreads()`` stays where it is, mirrored; warp shuffles are transposed;
* ``if``: the same condition (recomputed or recorded); loops run backwards: ``for`` loops by
  their trip count, ``while`` loops by an iteration count recorded in the forward sweep.

``Sweeps`` is one part of ``autodiff.reverse.ReverseBuilder`` (which owns the state).
"""
from __future__ import annotations

from typing import Callable

from autodiff import build as b
from autodiff import rules
from autodiff.availability import LoopCtx
from autodiff.loops import affine_value, loop_base, trip_count_expr
from autodiff.program import point_after
from autodiff.shuffles import transpose_shuffle
from polypy.errors import InternalError, UserError
from polypy.ir import nodes as n
from polypy.ir.types import I32, I64
from polypy.ir.visitor import Mutator, substitute, walk
from polypy.poly.paths import StmtPath

Point = StmtPath


class Sweeps:
    """Propagation through expressions, statements backwards, the forward sweep (part of ``ReverseBuilder``)."""

    # ================================================================== propagation through expressions
    def _result_hint(self, v: str, path: StmtPath) -> n.Expr | None:
        """``v`` itself as the value of the expression just assigned to it, if still available."""
        after = point_after(path)
        if self.prog.overwritten_after(v, after):
            return None
        self._hoist(v)
        return n.Var(v, self._var_type(v))

    def propagate(self, e: n.Expr, ct: n.Expr, p: Point, *, result: n.Expr | None = None) -> list[n.Stmt]:
        if not self.act.expr(e):
            return []
        if isinstance(e, n.Var):
            return self.accumulate_var(e, ct)
        if isinstance(e, n.Load):
            return self.accumulate_load(e, ct, p)
        linear = rules.linear_rule(e)
        if linear is not None:
            return self._transpose(linear, e, ct, p)
        args = rules.float_args(e)
        if not args:
            rules.rule_for(e)  # no rule for this kind of expression: a UserError naming it
            raise InternalError(f"propagate: unexpected {type(e).__name__}", e.loc)
        active = tuple(self.act.expr(a) for a in args)
        if isinstance(e, n.Binary) and e.op == "mul" and e.a == e.b:
            # x * x: one contribution 2 x ct instead of two
            twice = b.mul(b.const(2.0, e.type), self.avail(e.a, p))
            return self.propagate(e.a, b.mul(ct, twice), p)
        # General rule: partials built on placeholders, then only the needed values made available.
        holders = tuple(n.Var(f"\0arg{i}", a.type) for i, a in enumerate(args))
        result_holder = n.Var("\0result", e.type)
        parts = rules.partials(e, holders, result_holder)
        needed = [(i, part) for i, part in enumerate(parts) if active[i] and part is not None]
        if not needed:
            return []
        used = {x.name for _, part in needed for x in walk(part) if isinstance(x, n.Var)}
        out: list[n.Stmt] = []
        mapping: dict[n.Expr, n.Expr] = {}
        avail_args: dict[int, n.Expr] = {}

        def arg(i: int) -> n.Expr:
            if i not in avail_args:
                avail_args[i] = self.avail(args[i], p)
            return avail_args[i]

        for i, holder in enumerate(holders):
            if holder.name in used:
                mapping[holder] = arg(i)
        if result_holder.name in used:
            mapping[result_holder] = result if result is not None else \
                rules.rebuild(e, tuple(arg(i) for i in range(len(args))))
        # Bind values used more than once (or expensive) to locals.
        counts: dict[str, int] = {}
        for _, part in needed:
            for x in walk(part):
                if isinstance(x, n.Var) and x.name.startswith("\0"):
                    counts[x.name] = counts.get(x.name, 0) + 1
        results: dict[int, n.Expr] = {}
        for holder, value in list(mapping.items()):
            if isinstance(value, (n.Var, n.Const, n.GpuIndex)):
                continue
            i = holders.index(holder) if holder is not result_holder else -1
            reused = i >= 0 and active[i] and any(isinstance(x, n.Call) for x in walk(value))
            if counts.get(holder.name, 0) > 1 or reused:
                name = self.names.fresh("r" if holder is result_holder else "a")
                out.append(n.Decl(name, value.type, value))
                mapping[holder] = n.Var(name, value.type)
                if reused:
                    results[i] = mapping[holder]
        pre, ct = self._bind(ct, "ct", both=len(needed) > 1)
        out = list(pre) + out
        for i, part in needed:
            child_ct = b.cast(args[i].type, b.mul(ct, substitute(part, mapping)))
            out.extend(self.propagate(args[i], child_ct, p, result=results.get(i)))
        return out

    def _transpose(self, linear: rules.LinearRule, e: n.Expr, ct: n.Expr, p: Point) -> list[n.Stmt]:
        """A linear operation: its transpose sends ``ct`` to the operands (bound once if shared)."""
        operands = linear.operands(e)
        pre, ct = self._bind(ct, "ct", both=sum(self.act.expr(x) for x in operands) > 1)
        cts = linear.transpose(e, ct)
        if linear.branch is None:
            out = list(pre)
            for x, x_ct in zip(operands, cts):
                out += self.propagate(x, x_ct, p)
            return out
        # select: the first operand's cotangent flows where the condition holds, the second's elsewhere
        cond = self.avail(linear.branch(e), p)
        then, pre_then = self._collect(lambda: self.propagate(operands[0], cts[0], p))
        orelse, pre_else = self._collect(lambda: self.propagate(operands[1], cts[1], p))
        then, orelse = pre_then + then, pre_else + orelse
        if not then and not orelse:
            return pre
        if not then:
            return pre + [n.If(b.lnot(cond), tuple(orelse))]
        return pre + [n.If(cond, tuple(then), tuple(orelse))]

    def _bind(self, ct: n.Expr, base: str, *, both: bool) -> tuple[list[n.Stmt], n.Expr]:
        if not both or isinstance(ct, (n.Var, n.Const)):
            return [], ct
        name = self.names.fresh(base)
        return [n.Decl(name, ct.type, ct)], n.Var(name, ct.type)

    # ================================================================== statements, backwards
    def rev_block(self, parent: StmtPath, field: str) -> list[n.Stmt]:
        block = self.prog.block(parent, field)
        out: list[n.Stmt] = []
        self.replays.append({})
        try:
            for j in range(len(block) - 1, -1, -1):
                out.extend(self.rev_stmt(block[j], parent + ((field, j),)))
        finally:
            self.replays.pop()
        return out

    def rev_stmt(self, s: n.Stmt, path: StmtPath) -> list[n.Stmt]:
        out, pre = self._collect(lambda: self._rev_stmt(s, path))
        return pre + out

    def _collect(self, fn):
        """Run ``fn``; also return the recomputation statements it asked for (to put before)."""
        saved = self.pending
        self.pending = []
        self.replays.append({})
        try:
            out = fn()
            return out, self.pending
        finally:
            self.pending = saved
            self.replays.pop()

    def _rev_stmt(self, s: n.Stmt, path: StmtPath) -> list[n.Stmt]:
        act = self.act
        if isinstance(s, (n.Decl, n.Assign)):
            ty = s.vtype if isinstance(s, n.Decl) else s.value.type
            value = s.init if isinstance(s, n.Decl) else s.value
            if s.name not in act.variables:
                return []
            if value is not None and isinstance(s, n.Assign):
                rest = _increment(value, lambda x: isinstance(x, n.Var) and x.name == s.name)
                if rest is not None:
                    # v = v + e: the adjoint of v passes through unchanged; e receives it.
                    adj = n.Var(self._adj(s.name, ty), ty)
                    pre, ct = self._bind(adj, "ct", both=True)
                    return pre + self.propagate(rest[0], ct if rest[1] > 0 else b.neg(ct), path)
            if (value is None or not act.expr(value)) and isinstance(s, n.Decl) and not self.prog.loops_around(path):
                return []  # nothing reads this adjoint afterwards
            out, ct = self.take_adjoint(s.name, ty, s.loc)
            if value is not None:
                out += self.propagate(value, ct, path, result=self._result_hint(s.name, path))
            return out
        if isinstance(s, n.Store):
            return self._rev_store(s, path)
        if isinstance(s, n.AtomicRMW):
            return self._rev_atomic(s, path)
        if isinstance(s, n.Barrier):
            return [n.Barrier(loc=s.loc)]
        if isinstance(s, n.Shuffle):
            return self._rev_shuffle(s, path)
        if isinstance(s, (n.Vote, n.Print, n.Launch, n.AssertFail)):
            return []  # printf and assert act in the forward sweep (K's effects), once
        if isinstance(s, n.If):
            then = self.rev_block(path, "then")
            orelse = self.rev_block(path, "orelse")
            if not then and not orelse:
                return []
            if _only_barriers(then) and _only_barriers(orelse):
                return [n.Barrier(loc=s.loc)]  # a block-uniform branch that only synchronizes
            cond = self.avail(s.cond, path)
            if not then:
                return [n.If(b.lnot(cond), tuple(orelse), loc=s.loc)]
            return [n.If(cond, tuple(then), tuple(orelse), loc=s.loc)]
        if isinstance(s, (n.For, n.While)):
            return self._rev_loop(s, path)
        raise UserError(f"polypy grad cannot reverse a {type(s).__name__} statement", s.loc)

    def _rev_store(self, s: n.Store, path: StmtPath) -> list[n.Stmt]:
        value_active = self.act.expr(s.value)
        shadow = self.shadow.get(s.buffer)
        if shadow is None:
            rules.check_module_array(s, value_active, self.k.space(s.buffer))
            return []
        index = tuple(self.avail(i, path) for i in s.index)
        elem = self.k.elem_type(s.buffer)
        rest = _increment(s.value, lambda x: isinstance(x, n.Load) and x.buffer == s.buffer and x.index == s.index)
        if rest is not None:
            # X[i] = X[i] + e: the element's adjoint stays (as for atomicAdd); e receives it.
            ct = self.names.fresh(s.buffer + "_ct")
            out = [n.Decl(ct, elem, n.Load(shadow, index, elem), loc=s.loc)]
            seed: n.Expr = n.Var(ct, elem)
            return out + self.propagate(rest[0], seed if rest[1] > 0 else b.neg(seed), path)
        zero = n.Store(shadow, index, b.zero(elem), loc=s.loc)
        if not value_active:
            return [zero]
        ct = self.names.fresh(s.buffer + "_ct")
        out: list[n.Stmt] = [n.Decl(ct, elem, n.Load(shadow, index, elem), loc=s.loc), zero]
        return out + self.propagate(s.value, n.Var(ct, elem), path)

    def _rev_atomic(self, s: n.AtomicRMW, path: StmtPath) -> list[n.Stmt]:
        shadow = self.shadow.get(s.buffer)
        value_active = self.act.expr(s.value)
        if shadow is None:
            rules.check_module_array(s, value_active, self.k.space(s.buffer))
            return []
        elem = self.k.elem_type(s.buffer)
        rules.check_atomic(s, self.act.variables)
        if not value_active:
            return []
        index = tuple(self.avail(i, path) for i in s.index)
        ct = self.names.fresh(s.buffer + "_ct")
        seed: n.Expr = n.Var(ct, elem)
        out: list[n.Stmt] = [n.Decl(ct, elem, n.Load(shadow, index, elem), loc=s.loc)]
        return out + self.propagate(s.value, seed if s.op == "add" else b.neg(seed), path)

    def _rev_shuffle(self, s: n.Shuffle, path: StmtPath) -> list[n.Stmt]:
        if s.dest not in self.act.variables:
            return []
        ty = s.value.type
        out, ct = self.take_adjoint(s.dest, ty, s.loc)
        if not self.act.expr(s.value):
            return out
        lane_arg = self.avail(s.lane, path)
        width = self.avail(s.width, path)
        mask = self.avail(s.mask, path)
        stmts, got = transpose_shuffle(s.mode, ct, lane_arg, width, mask, self.names, s.loc)
        return out + stmts + self.propagate(s.value, got, path)

    def _rev_loop(self, s: n.For | n.While, path: StmtPath) -> list[n.Stmt]:
        base = loop_base(s)
        index = self.names.fresh(base + "_i")
        start = step = value = None
        var = None
        if isinstance(s, n.For):
            start = self.avail(s.start, path)
            stop = self.avail(s.stop, path)
            step = self.avail(s.step, path)
            value = affine_value(start, n.Var(index, I32), step, s.vtype)
            var = value.name if isinstance(value, n.Var) else self.names.fresh(s.var)
        ctx = LoopCtx(path, index, var)
        self.ctx[path] = ctx
        body = self.rev_block(path, "body")
        if not body:
            return []
        if _only_barriers(body) and not ctx.shared and not ctx.carried:
            # Nothing to reverse but synchronization: one barrier orders what comes before and after
            # (the loop contains barriers, so every thread of the block reaches this point).
            return [n.Barrier(loc=s.loc)]
        trips = _trips(start, stop, step) if isinstance(s, n.For) else self._while_trips(path)
        prologue, pre = self._collect(lambda: self._shared_replay_code(ctx))
        prologue = pre + prologue
        head: list[n.Stmt] = []
        if ctx.carried:
            (init, carried), pre = self._collect(lambda: self._carried_replay_code(ctx, start, step))
            if init:  # checkpointed: values at the loop entry are read once, before the reversed loop
                head += pre + init
                prologue = carried + prologue
            else:
                prologue = pre + carried + prologue
        if ctx.shared:
            head.append(n.Barrier(loc=s.loc))  # every thread has finished the forward loop
        count_name = self.names.fresh(base + "_n")
        head.append(n.Decl(count_name, I32, trips, loc=s.loc))
        r = self.names.fresh(base + "_r")
        count = n.Var(count_name, I32)
        inner: list[n.Stmt] = [n.Decl(index, I32, n.Binary("sub", n.Binary("sub", count, b.const(1, I32)),
                                                           n.Var(r, I32)))]
        if isinstance(s, n.For) and var != index:
            assert var is not None and value is not None
            inner.append(n.Decl(var, s.vtype, value))
        inner += ctx.values
        loop = n.For(r, I32, b.const(0, I32), count, b.const(1, I32), tuple(_dedup_barriers(inner + prologue + body)),
                     loc=s.loc)
        chunked = self.windows.chunked(path)
        if chunked:
            assert isinstance(s, n.For) and start is not None and step is not None
            loop = self._chunked_loop(loop, chunked, base, start, step, count)
        return head + [loop]

    def _chunked_loop(self, loop: n.For, items, base: str, start: n.Expr, step: n.Expr, count: n.Expr) -> n.For:
        """The reversed loop ``loop`` (``r`` from 0 to ``count``) run a chunk of iterations at a
        time, each chunk's windows zeroed before and flushed after it (``autodiff.chunks``).

        Every thread of the block runs the chunk loop (its loop was launch-uniform and at the top
        level), so the barriers are reached by all. Chunk ``rc`` runs the forward iterations
        ``count - rc - T .. count - rc - 1``, whose loop-variable values lie in ``[first, first +
        T * step)`` with ``first = start + step * (count - rc - T)``: the chunk isl bounded.
        A thread zeroes the slots it flushed in the previous chunk, so no barrier is needed
        between a flush and the next zeroing."""
        trips = items[0].chunk.trips
        first = items[0].chunk.first
        assert all(p.chunk.first == first and p.chunk.trips == trips for p in items)
        rc = self.names.fresh(base + "_c")
        rcv = n.Var(rc, I32)
        step_t = b.const(trips, I32)
        before = n.Binary("sub", n.Binary("sub", b.cast(I64, count), b.cast(I64, rcv)), b.const(trips, I64))
        first_value = n.Binary("add", b.cast(I64, start), n.Binary("mul", before, b.cast(I64, step)))
        end = b.select(b.cmp("gt", n.Binary("sub", count, rcv), step_t), n.Binary("add", rcv, step_t), count)
        inner = n.For(loop.var, I32, rcv, end, b.const(1, I32), loop.body, loc=loop.loc)
        body: list[n.Stmt] = [n.Decl(first, I64, first_value)]
        body += self.windows.declarations(items) + self.windows.zero(items) + [n.Barrier(loc=loop.loc), inner]
        body += self.windows.flush(items)
        return n.For(rc, I32, b.const(0, I32), count, step_t, tuple(body), loc=loop.loc)

    # ================================================================== the forward sweep
    def forward_sweep(self) -> tuple[n.Stmt, ...]:
        """K's body with what the reverse sweep asked of the forward sweep (tapes, counters)."""
        return _ForwardSweep(self.before, self.loop_prologue, self.hoist, self.dynamic, self.k).visit_block(self.k.body)


class _ForwardSweep(Mutator):
    """K's body as the forward sweep of ``K_grad`` runs it.

    * ``before[point]`` (tape stores, counter resets) is inserted at its point, and
      ``prologue[loop]`` (counter increments) at the top of the loop's body;
    * declarations hoisted to the top of the kernel become assignments;
    * the shadow of extern shared memory is zeroed where its primal element is written.

    Statement paths (``body[2].then[0]``) are tracked with the field hooks: the path of the
    statement being visited and, per statement list, its parent and field.
    """

    def __init__(self, before: dict[Point, list[n.Stmt]], prologue: dict[StmtPath, list[n.Stmt]], hoist: set[str],
                 dynamic: dict[str, str], kernel: n.Kernel):
        self.before = before
        self.prologue = prologue
        self.hoist = hoist
        self.dynamic = dynamic
        self.k = kernel
        self.paths: list[StmtPath] = []  # the statements being visited, outermost first
        self.blocks: list[tuple[StmtPath, str]] = [((), "body")]  # (parent, field) of each open list

    def visit_Expr(self, e: n.Expr) -> n.Expr:
        return e

    def enter_field(self, node: n.Node, name: str) -> None:
        self.blocks.append((self.paths[-1], name))

    def exit_field(self, node: n.Node, name: str) -> None:
        self.blocks.pop()

    def visit_block(self, block: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        parent, field = self.blocks[-1]
        out: list[n.Stmt] = list(self.prologue.get(parent, ())) if parent and field == "body" else []
        for j, s in enumerate(block):
            path = parent + ((field, j),)
            out += self.before.get(path, ())
            self.paths.append(path)
            try:
                new = self.visit(s)
            finally:
                self.paths.pop()
            if isinstance(new, tuple):
                out += new
            elif new is not None:
                out.append(new)
        out += self.before.get(parent + ((field, len(block)),), ())
        return block if len(out) == len(block) and all(a is c for a, c in zip(out, block)) else tuple(out)

    def visit_Decl(self, s: n.Decl) -> n.Stmt | None:
        if s.name not in self.hoist:
            return s
        return n.Assign(s.name, s.init, loc=s.loc) if s.init is not None else None

    def visit_Store(self, s: n.Store) -> n.Stmt | tuple[n.Stmt, ...]:
        shadow = self.dynamic.get(s.buffer)
        if shadow is None:
            return s
        # Shadow of extern shared memory: zeroed where the primal element is written.
        return n.Store(shadow, s.index, b.zero(self.k.elem_type(s.buffer)), loc=s.loc), s


# ---------------------------------------------------------------------- helpers


def _increment(e: n.Expr, is_self: Callable[[n.Expr], bool]) -> tuple[n.Expr, int] | None:
    """``self + rest`` / ``rest + self`` / ``self - rest`` -> (rest, +1/-1) when ``rest`` does not read self."""
    if not (isinstance(e, n.Binary) and e.op in ("add", "sub") and e.type.is_float):
        return None
    candidates = [(e.a, e.b, 1 if e.op == "add" else -1)]
    if e.op == "add":
        candidates.append((e.b, e.a, 1))
    for this, rest, sign in candidates:
        if is_self(this) and not any(is_self(x) for x in walk(rest) if isinstance(x, n.Expr)):
            return rest, sign
    return None


class _BarrierRuns(Mutator):
    """Two barriers in a row are one barrier."""

    def visit_tuple(self, items):  # type: ignore[override]
        items = super().visit_tuple(items)
        if not any(isinstance(a, n.Barrier) and isinstance(c, n.Barrier) for a, c in zip(items, items[1:])):
            return items
        return tuple(_dedup_barriers(list(items)))


def merge_barrier_runs(block: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
    """``block`` with every run of consecutive barriers (at any depth) merged into one."""
    return _BarrierRuns().visit_block(block)


def _only_barriers(stmts: list[n.Stmt]) -> bool:
    return all(isinstance(s, n.Barrier) for s in stmts)


def _dedup_barriers(stmts: list[n.Stmt]) -> list[n.Stmt]:
    out: list[n.Stmt] = []
    for s in stmts:
        if isinstance(s, n.Barrier) and out and isinstance(out[-1], n.Barrier):
            continue
        out.append(s)
    return out


def _trips(start: n.Expr, stop: n.Expr, step: n.Expr) -> n.Expr:
    if all(isinstance(x, n.Const) for x in (start, stop, step)) and step.value > 0:  # type: ignore[union-attr]
        count = max(0, -(-(int(stop.value) - int(start.value)) // int(step.value)))  # type: ignore[union-attr]
        return b.const(count, I32)
    if b.is_const(step, 1) and start.type == I32:
        span = stop if b.is_const(start, 0) else n.Binary("sub", stop, start)
        return b.select(b.cmp("lt", start, stop), span, b.const(0, I32))
    return b.cast(I32, trip_count_expr(start, stop, step))

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

The functions take the state of reverse mode (``autodiff.reverse_state.ReverseState``); the
reverse sweep is built first, and what it asked of the forward sweep (``st.before``,
``st.loop_prologue``, ``st.hoist``) is put in by ``forward_sweep`` after.
"""
from __future__ import annotations

from typing import Callable

from autodiff import build as b
from autodiff import rules, tapes
from autodiff.accumulation import accumulate_load, accumulate_var, adjoint_name, take_adjoint
from autodiff.availability import avail, carried_replay_code, dear_in_launch_sized_loop, hoist, shared_replay_code
from autodiff.loops import affine_value, counted_while, exact_trips, loop_base, trip_count_expr
from autodiff.program import point_after
from autodiff.reverse_state import CannotTape, LoopCtx, ReverseState, var_type
from autodiff.shuffles import transpose_shuffle
from polypy.errors import InternalError, UserError
from polypy.ir import nodes as n
from polypy.ir.types import I32, I64
from polypy.ir.visitor import Mutator, has_kind, substitute, walk
from polypy.poly.paths import StmtPath

Point = StmtPath


# ================================================================== propagation through expressions
def _result_hint(st: ReverseState, v: str, path: StmtPath) -> n.Expr | None:
    """``v`` itself as the value of the expression just assigned to it, if still available."""
    after = point_after(path)
    if st.prog.overwritten_after(v, after):
        return None
    hoist(st, v)
    return n.Var(v, var_type(st, v))


def propagate(st: ReverseState, e: n.Expr, ct: n.Expr, p: Point, *, result: n.Expr | None = None) -> list[n.Stmt]:
    """Statements that send cotangent ``ct`` of ``e`` (evaluated at ``p``) to its active operands;
    ``result``: ``e``'s value, where already available."""
    if not st.act.expr(e):
        return []
    if isinstance(e, n.Var):
        return accumulate_var(st, e, ct)
    if isinstance(e, n.Load):
        return accumulate_load(st, e, ct, p)
    linear = rules.linear_rule(e)
    if linear is not None:
        return _transpose(st, linear, e, ct, p)
    args = rules.float_args(e)
    if not args:
        rules.rule_for(e)  # no rule for this kind of expression: a UserError naming it
        raise InternalError(f"propagate: unexpected {type(e).__name__}", e.loc)
    active = tuple(st.act.expr(a) for a in args)
    if isinstance(e, n.Binary) and e.op == "mul" and e.a == e.b:
        # x * x: one contribution 2 x ct instead of two
        twice = b.mul(b.const(2.0, e.type), avail(st, e.a, p))
        return propagate(st, e.a, b.mul(ct, twice), p)
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
            avail_args[i] = avail(st, args[i], p)
        return avail_args[i]

    for i, holder in enumerate(holders):
        if holder.name in used:
            mapping[holder] = arg(i)
    if result_holder.name in used:
        if result is not None:
            mapping[result_holder] = result
        elif dear_in_launch_sized_loop(st, e, p):
            mapping[result_holder] = avail(st, e, p)  # taped where that is cheaper (availability)
        else:
            mapping[result_holder] = rules.rebuild(e, tuple(arg(i) for i in range(len(args))))
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
        reused = i >= 0 and active[i] and has_kind(value, n.Call)  # (remembered per node: a long product asks at every level)
        if counts.get(holder.name, 0) > 1 or reused:
            name = st.names.fresh("r" if holder is result_holder else "a")
            out.append(n.Decl(name, value.type, value))
            mapping[holder] = n.Var(name, value.type)
            if reused:
                results[i] = mapping[holder]
    pre, ct = _bind(st, ct, "ct", both=len(needed) > 1)
    out = list(pre) + out
    for i, part in needed:
        child_ct = b.cast(args[i].type, b.mul(ct, substitute(part, mapping)))
        out.extend(propagate(st, args[i], child_ct, p, result=results.get(i)))
    return out


def _transpose(st: ReverseState, linear: rules.LinearRule, e: n.Expr, ct: n.Expr, p: Point) -> list[n.Stmt]:
    """A linear operation: its transpose sends ``ct`` to the operands (bound once if shared)."""
    operands = linear.operands(e)
    pre, ct = _bind(st, ct, "ct", both=sum(st.act.expr(x) for x in operands) > 1)
    cts = linear.transpose(e, ct)
    if linear.branch is None:
        out = list(pre)
        for x, x_ct in zip(operands, cts):
            out += propagate(st, x, x_ct, p)
        return out
    # select: the first operand's cotangent flows where the condition holds, the second's elsewhere
    cond = avail(st, linear.branch(e), p)
    then, pre_then = _collect(st, lambda: propagate(st, operands[0], cts[0], p))
    orelse, pre_else = _collect(st, lambda: propagate(st, operands[1], cts[1], p))
    then, orelse = pre_then + then, pre_else + orelse
    if not then and not orelse:
        return pre
    if not then:
        return pre + [n.If(b.lnot(cond), tuple(orelse))]
    return pre + [n.If(cond, tuple(then), tuple(orelse))]


def _bind(st: ReverseState, ct: n.Expr, base: str, *, both: bool) -> tuple[list[n.Stmt], n.Expr]:
    if not both or isinstance(ct, (n.Var, n.Const)):
        return [], ct
    name = st.names.fresh(base)
    return [n.Decl(name, ct.type, ct)], n.Var(name, ct.type)


# ================================================================== statements, backwards
def rev_block(st: ReverseState, parent: StmtPath, field: str) -> list[n.Stmt]:
    """The adjoints of the statements of the list ``parent.field``, the last statement first."""
    block = st.prog.block(parent, field)
    out: list[n.Stmt] = []
    st.replays.append({})
    try:
        for j in range(len(block) - 1, -1, -1):
            out.extend(rev_stmt(st, block[j], parent + ((field, j),)))
    finally:
        st.replays.pop()
    return out


def rev_stmt(st: ReverseState, s: n.Stmt, path: StmtPath) -> list[n.Stmt]:
    """The adjoint of ``s`` (at ``path``), after the recomputations it needs."""
    out, pre = _collect(st, lambda: _rev_stmt(st, s, path))
    return pre + out


def _collect(st: ReverseState, fn):
    """Run ``fn``; also return the recomputation statements it asked for (to put before)."""
    saved = st.pending
    st.pending = []
    st.replays.append({})
    try:
        out = fn()
        return out, st.pending
    finally:
        st.pending = saved
        st.replays.pop()


def _rev_stmt(st: ReverseState, s: n.Stmt, path: StmtPath) -> list[n.Stmt]:
    act = st.act
    if isinstance(s, (n.Decl, n.Assign)):
        ty = s.vtype if isinstance(s, n.Decl) else s.value.type
        value = s.init if isinstance(s, n.Decl) else s.value
        if s.name not in act.variables:
            return []
        if value is not None and isinstance(s, n.Assign):
            rest = _increment(value, lambda x: isinstance(x, n.Var) and x.name == s.name)
            if rest is not None:
                # v = v + e: the adjoint of v passes through unchanged; e receives it.
                adj = n.Var(adjoint_name(st, s.name, ty), ty)
                pre, ct = _bind(st, adj, "ct", both=True)
                return pre + propagate(st, rest[0], ct if rest[1] > 0 else b.neg(ct), path)
        if (value is None or not act.expr(value)) and isinstance(s, n.Decl) and not st.prog.loops_around(path):
            return []  # nothing reads this adjoint afterwards
        out, ct = take_adjoint(st, s.name, ty, s.loc)
        if value is not None:
            out += propagate(st, value, ct, path, result=_result_hint(st, s.name, path))
        return out
    if isinstance(s, n.Store):
        return _rev_store(st, s, path)
    if isinstance(s, n.AtomicRMW):
        return _rev_atomic(st, s, path)
    if isinstance(s, n.Barrier):
        return [n.Barrier(loc=s.loc)]
    if isinstance(s, n.Shuffle):
        return _rev_shuffle(st, s, path)
    if isinstance(s, (n.Vote, n.Print, n.Launch, n.AssertFail)):
        return []  # printf and assert act in the forward sweep (K's effects), once
    if isinstance(s, n.If):
        then = rev_block(st, path, "then")
        orelse = rev_block(st, path, "orelse")
        if not then and not orelse:
            return []
        if _only_barriers(then) and _only_barriers(orelse):
            return [n.Barrier(loc=s.loc)]  # a block-uniform branch that only synchronizes
        cond = avail(st, s.cond, path)
        if not then:
            return [n.If(b.lnot(cond), tuple(orelse), loc=s.loc)]
        return [n.If(cond, tuple(then), tuple(orelse), loc=s.loc)]
    if isinstance(s, (n.For, n.While)):
        return _rev_loop(st, s, path)
    raise UserError(f"polypy grad cannot reverse a {type(s).__name__} statement", s.loc)


def _rev_store(st: ReverseState, s: n.Store, path: StmtPath) -> list[n.Stmt]:
    value_active = st.act.expr(s.value)
    shadow = st.shadow.get(s.buffer)
    if shadow is None:
        rules.check_module_array(s, value_active, st.kernel.space(s.buffer))
        return []
    index = tuple(avail(st, i, path) for i in s.index)
    elem = st.kernel.elem_type(s.buffer)
    rest = _increment(s.value, lambda x: isinstance(x, n.Load) and x.buffer == s.buffer and x.index == s.index)
    if rest is not None:
        # X[i] = X[i] + e: the element's adjoint stays (as for atomicAdd); e receives it.
        ct = st.names.fresh(s.buffer + "_ct")
        out = [n.Decl(ct, elem, n.Load(shadow, index, elem), loc=s.loc)]
        seed: n.Expr = n.Var(ct, elem)
        return out + propagate(st, rest[0], seed if rest[1] > 0 else b.neg(seed), path)
    zero = n.Store(shadow, index, b.zero(elem), loc=s.loc)
    if not value_active:
        return [zero]
    ct = st.names.fresh(s.buffer + "_ct")
    out: list[n.Stmt] = [n.Decl(ct, elem, n.Load(shadow, index, elem), loc=s.loc), zero]
    return out + propagate(st, s.value, n.Var(ct, elem), path)


def _rev_atomic(st: ReverseState, s: n.AtomicRMW, path: StmtPath) -> list[n.Stmt]:
    shadow = st.shadow.get(s.buffer)
    value_active = st.act.expr(s.value)
    if shadow is None:
        rules.check_module_array(s, value_active, st.kernel.space(s.buffer))
        return []
    elem = st.kernel.elem_type(s.buffer)
    rules.check_atomic(s, st.act.variables)
    if not value_active:
        return []
    index = tuple(avail(st, i, path) for i in s.index)
    ct = st.names.fresh(s.buffer + "_ct")
    seed: n.Expr = n.Var(ct, elem)
    out: list[n.Stmt] = [n.Decl(ct, elem, n.Load(shadow, index, elem), loc=s.loc)]
    return out + propagate(st, s.value, seed if s.op == "add" else b.neg(seed), path)


def _rev_shuffle(st: ReverseState, s: n.Shuffle, path: StmtPath) -> list[n.Stmt]:
    if s.dest not in st.act.variables:
        return []
    ty = s.value.type
    out, ct = take_adjoint(st, s.dest, ty, s.loc)
    if not st.act.expr(s.value):
        return out
    lane_arg = avail(st, s.lane, path)
    width = avail(st, s.width, path)
    mask = avail(st, s.mask, path)
    stmts, got = transpose_shuffle(s.mode, ct, lane_arg, width, mask, st.names, s.loc)
    return out + stmts + propagate(st, s.value, got, path)


def _rev_loop(st: ReverseState, s: n.For | n.While, path: StmtPath) -> list[n.Stmt]:
    base = loop_base(s)
    index = st.names.fresh(base + "_i")
    start = step = value = None
    var = None
    if isinstance(s, n.For):
        start = avail(st, s.start, path)
        stop = avail(st, s.stop, path)
        step = avail(st, s.step, path)
        value = affine_value(start, n.Var(index, I32), step, s.vtype)
        var = value.name if isinstance(value, n.Var) else st.names.fresh(s.var)
    ctx = LoopCtx(path, index, var)
    st.ctx[path] = ctx
    body = rev_block(st, path, "body")
    if not body:
        return []
    if _only_barriers(body) and not ctx.shared and not ctx.carried:
        # Nothing to reverse but synchronization: one barrier orders what comes before and after
        # (the loop contains barriers, so every thread of the block reaches this point).
        return [n.Barrier(loc=s.loc)]
    trips = _trips(start, stop, step) if isinstance(s, n.For) else _while_trips(st, path)
    prologue, pre = _collect(st, lambda: shared_replay_code(st, ctx))
    prologue = pre + prologue
    head: list[n.Stmt] = []
    if ctx.carried:
        (init, carried), pre = _collect(st, lambda: carried_replay_code(st, ctx, start, step))
        if init:  # checkpointed: values at the loop entry are read once, before the reversed loop
            head += pre + init
            prologue = carried + prologue
        else:
            prologue = pre + carried + prologue
    if ctx.shared:
        head.append(n.Barrier(loc=s.loc))  # every thread has finished the forward loop
    count_name = st.names.fresh(base + "_n")
    head.append(n.Decl(count_name, I32, trips, loc=s.loc))
    r = st.names.fresh(base + "_r")
    count = n.Var(count_name, I32)
    inner: list[n.Stmt] = [n.Decl(index, I32, n.Binary("sub", n.Binary("sub", count, b.const(1, I32)),
                                                       n.Var(r, I32)))]
    if isinstance(s, n.For) and var != index:
        assert var is not None and value is not None
        inner.append(n.Decl(var, s.vtype, value))
    inner += ctx.values
    loop = n.For(r, I32, b.const(0, I32), count, b.const(1, I32), tuple(_dedup_barriers(inner + prologue + body)),
                 loc=s.loc)
    chunked = st.windows.chunked(path)
    if chunked:
        assert isinstance(s, n.For) and start is not None and step is not None
        loop = _chunked_loop(st, loop, chunked, base, start, step, count)
    return head + [loop]


def _chunked_loop(st: ReverseState, loop: n.For, items, base: str, start: n.Expr, step: n.Expr, count: n.Expr) -> n.For:
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
    rc = st.names.fresh(base + "_c")
    rcv = n.Var(rc, I32)
    step_t = b.const(trips, I32)
    before = n.Binary("sub", n.Binary("sub", b.cast(I64, count), b.cast(I64, rcv)), b.const(trips, I64))
    first_value = n.Binary("add", b.cast(I64, start), n.Binary("mul", before, b.cast(I64, step)))
    end = b.select(b.cmp("gt", n.Binary("sub", count, rcv), step_t), n.Binary("add", rcv, step_t), count)
    inner = n.For(loop.var, I32, rcv, end, b.const(1, I32), loop.body, loc=loop.loc)
    body: list[n.Stmt] = [n.Decl(first, I64, first_value)]
    body += st.windows.declarations(items) + st.windows.zero(items) + [n.Barrier(loc=loop.loc), inner]
    body += st.windows.flush(items)
    return n.For(rc, I32, b.const(0, I32), count, step_t, tuple(body), loc=loop.loc)


def _while_trips(st: ReverseState, loop: StmtPath) -> n.Expr:
    """The trip count of the ``while`` loop ``loop`` in the reverse sweep: exact, counted (like a
    ``for`` loop), or the iteration count the forward sweep recorded."""
    exact = exact_trips(st.prog, loop)
    if exact is not None:
        return b.const(exact, I32)
    counted = counted_while(st.prog, loop)
    if counted is not None:
        # while (v < stop) { ... v += c }: as many iterations as the equivalent for loop
        ind = counted.induction
        v0 = b.cast(counted.ctype, avail(st, n.Var(ind.var, ind.vtype), loop))
        stop = avail(st, counted.stop, loop)
        return b.cast(I32, trip_count_expr(v0, stop, b.const(ind.amount, counted.ctype)))
    count = n.Var(tapes.counter(st, loop), I32)
    if not st.prog.loops_around(loop):
        return count
    try:
        return tapes.tape(st, count, point_after(loop), tape=True, what="iteration count")
    except CannotTape as exc:
        raise UserError(f"cannot record the iteration count of this loop for the reverse sweep: {exc.reason}",
                        st.prog.stmt(loop).loc) from None


# ================================================================== the forward sweep
def forward_sweep(st: ReverseState) -> tuple[n.Stmt, ...]:
    """K's body with what the reverse sweep asked of the forward sweep (tapes, counters)."""
    return _ForwardSweep(st.before, st.loop_prologue, st.hoist, st.dynamic, st.kernel).visit_block(st.kernel.body)


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
    """Two barriers in a row are one barrier. Only statement lists are looked at (``visit_block``:
    the Mutator then skips expressions; with ``visit_tuple`` it walked every node of every
    expression, a 20,000-factor product's adjoint once per statement list)."""

    def visit_block(self, block):  # type: ignore[override]
        block = super().visit_block(block)
        if not any(isinstance(a, n.Barrier) and isinstance(c, n.Barrier) for a, c in zip(block, block[1:])):
            return block
        return tuple(_dedup_barriers(list(block)))


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

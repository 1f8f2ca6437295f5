"""Values the reverse sweep needs, made available at a point of the forward sweep.

``avail(e, p)`` is ``e`` as it was at point ``p`` of the forward sweep, as an expression the
reverse sweep can evaluate: a variable not assigned after ``p`` is read directly; a value the
forward sweep overwrites is recomputed from its unique reaching definition when cheap,
computed in closed form for induction variables, or stored in a tape (``autodiff.tapes``).
For loops with unknown trip counts there are two recomputation schemes instead of tapes:
shared arrays filled at the top of the iteration are filled again at the top of the reversed
iteration, and loop-carried scalars are recomputed from the loop entry (quadratic in the trip
count; reported).

The functions take the state of reverse mode (``autodiff.reverse_state.ReverseState``): values
made available are memoized in ``st.memo``, recomputations are put in ``st.pending`` (the reverse
sweep puts them before the statement being reversed), loops' per-iteration values in
``st.ctx``.
"""
from __future__ import annotations

from autodiff import build as b
from autodiff import rules, tapes
from autodiff.checkpoint import advance_code, make_snapshots, snapshot_init
from autodiff.loops import affine_value, closed_form, induction, loop_base, trip_bound
from autodiff.program import Ambiguous, Def, Entry, IterStart, body_start, point_after
from autodiff.report import Caching
from autodiff.reverse_state import CannotTape, LoopCtx, NeedTape, ReverseState, loc_at, note, var_type
from polypy.errors import InternalError, UserError
from polypy.ir import nodes as n
from polypy.ir.printer import format_expr
from polypy.ir.queries import declared_names, read_names
from polypy.ir.rewrite import rename_locals
from polypy.ir.types import I32
from polypy.ir.visitor import Mutator, rebuild, walk
from polypy.poly.paths import StmtPath

Point = StmtPath

# Calls cheap enough to recompute in the reverse sweep under the "auto" caching policy.
CHEAP_CALLS = frozenset({"fabs", "fmin", "fmax", "floor", "ceil", "trunc", "round", "rint", "min", "max", "abs",
                         "copysign", "fdim", "saturate", "isnan", "isinf", "isfinite", "signbit", "fma"})
CHEAP_NODES = 24
RECOMPUTE_LIMIT = 24  # nodes of a recomputed value with every definition expanded (x = x * x chains double)


# ================================================================== values in the reverse sweep
def avail(st: ReverseState, e: n.Expr, p: Point, *, tape: bool = True) -> n.Expr:
    """``e`` as it was at point ``p`` of the forward sweep, evaluable in the reverse sweep
    (memoized unless it needed statements); ``tape``: whether a tape may be made for it."""
    key = (e, p, tape)
    got = st.memo.get(key)
    if got is None:
        emitted, reused = len(st.pending), st.replay_uses
        got = _avail(st, e, p, tape)
        # Results that need statements are scoped: not reused. So are those that read a copy a
        # replay made in the current scope (``st.replays``): outside it, the copy is undeclared.
        if len(st.pending) == emitted and st.replay_uses == reused:
            st.memo[key] = got
    return got


def _avail(st: ReverseState, e: n.Expr, p: Point, tape: bool) -> n.Expr:
    if isinstance(e, (n.Const, n.GpuIndex)):
        return e
    if isinstance(e, n.Var):
        return _avail_var(st, e, p, tape)
    if isinstance(e, n.Load):
        index = tuple(avail(st, i, p, tape=tape) for i in e.index)
        if e.buffer not in st.prog.written_buffers:
            return rebuild(e, index=index)
        loop = _shared_replay_loop(st, e.buffer, p)
        if loop is not None:
            ctx = st.ctx[loop]
            if e.buffer not in ctx.shared:
                ctx.shared.append(e.buffer)
                note(st, ("replay-shared", e.buffer, loop), Caching(
                    e.buffer, st.prog.stmt(loop).loc, "replay-shared",
                    f"the stores to {e.buffer} at the top of the loop run again at the top of each reversed "
                    f"iteration"))
            return rebuild(e, index=index)
        return _tape_or_fail(st, e, p, tape, why=f"{e.buffer} is written by the kernel")
    if isinstance(e, n.Select):
        cond = avail(st, e.cond, p, tape=tape)
        try:
            return rebuild(e, cond=cond, a=avail(st, e.a, p, tape=False),
                                       b=avail(st, e.b, p, tape=False))
        except NeedTape:
            return _tape_or_fail(st, e, p, tape, why="operand of a conditional expression")
    if isinstance(e, n.Binary) and e.op in ("land", "lor"):
        a = avail(st, e.a, p, tape=tape)
        try:
            return rebuild(e, a=a, b=avail(st, e.b, p, tape=False))
        except NeedTape:
            return _tape_or_fail(st, e, p, tape, why="operand of && / ||")
    if isinstance(e, n.Cast):
        return rebuild(e, x=avail(st, e.x, p, tape=tape))
    if isinstance(e, n.Call) and dear_in_launch_sized_loop(st, e, p):
        try:  # stored once by the forward sweep, instead of evaluated again per reversed iteration
            return tapes.tape(st, e, p, tape=tape, what=format_expr(e))
        except (CannotTape, NeedTape):
            pass
    if isinstance(e, (n.Unary, n.Binary, n.Call)):
        args = tuple(avail(st, a, p, tape=tape) for a in rules.float_args(e))
        return rules.rebuild(e, args)
    raise InternalError(f"avail: unexpected {type(e).__name__}", e.loc)


def dear_in_launch_sized_loop(st: ReverseState, e: n.Expr, p: Point) -> bool:
    """Whether ``e`` is a call that is not cheap to evaluate (``exp``, ``log``...: tens of
    operations) inside a loop whose tapes are sized at launch, in a gradient built with such
    tapes: there a tape entry (one store, one load) costs less than the evaluation in the reverse
    sweep, and the tape's extent is already paid for by the loop's other tapes."""
    if not (isinstance(e, n.Call) and e.type.is_float and e.fn not in CHEAP_CALLS):
        return False
    if st.opt.cache == "recompute" or not st.opt.runtime_tapes:
        return False
    if not any(trip_bound(st.prog, loop) is None for loop in st.prog.loops_around(p)):
        return False
    # The tape's store evaluates the call before the statement: only where the statement itself
    # always evaluates it (not in a branch of ?: or the right of && / ||, which may not run:
    # ``c + 1 < m ? exp(x[c + 1]) : 0`` must not read x[m]).
    s = st.prog.stmts.get(p)
    if s is None or isinstance(s, (n.For, n.While)):  # a loop's bounds or condition: not stored once before it
        return False
    return any(_always_evaluates(x, e) for name in s.CHILDREN if name not in s.BLOCKS
                                 for x in _as_tuple(getattr(s, name)) if isinstance(x, n.Expr))


def _as_tuple(value: object) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def _always_evaluates(x: n.Expr, e: n.Expr) -> bool:
    """Whether evaluating ``x`` always evaluates ``e``."""
    if x == e:
        return True
    if isinstance(x, n.Select):
        return _always_evaluates(x.cond, e)
    if isinstance(x, n.Binary) and x.op in ("land", "lor"):
        return _always_evaluates(x.a, e)
    return any(_always_evaluates(c, e) for name in x.CHILDREN for c in _as_tuple(getattr(x, name))
               if isinstance(c, n.Expr))


def _avail_var(st: ReverseState, e: n.Var, p: Point, tape: bool) -> n.Expr:
    v = e.name
    prog = st.prog
    for loop in reversed(prog.loops_around(p)):
        s = prog.stmt(loop)
        if isinstance(s, n.For) and s.var == v:
            ctx = st.ctx.get(loop)
            if ctx is None or ctx.var is None:
                raise InternalError(f"loop variable {v} needed outside its reversed loop")
            return n.Var(ctx.var, e.vtype)
    if v not in prog.writers:
        if v in prog.params:
            return e
        raise InternalError(f"variable {v!r} has no declaration", e.loc)
    if not prog.overwritten_after(v, p):
        hoist(st, v)
        return e
    rd = prog.reaching_def(v, p)
    if isinstance(rd, Def):
        if _recompute_ok(st, rd.value):
            got = avail(st, rd.value, rd.path, tape=tape)
            if _size(got) <= RECOMPUTE_LIMIT or st.opt.cache == "recompute":
                note(st, ("recompute", v, rd.path), Caching(v, prog.stmt(rd.path).loc, "recompute",
                                                              f"{v} = {format_expr(rd.value)}"))
                return got
        try:
            return tapes.tape(st, e, point_after(rd.path), tape=tape, what=v)
        except CannotTape:
            return avail(st, rd.value, rd.path, tape=tape)
    if isinstance(rd, IterStart):
        return _iter_start(st, e, rd.loop, p, tape)
    if isinstance(rd, Entry):
        if v in prog.params:
            return _entry_copy(st, e)
        hoist(st, v)
        return e  # an uninitialized local: any value is as good as the forward's
    assert isinstance(rd, Ambiguous)
    try:
        return tapes.tape(st, e, p, tape=tape, what=v, runtime=False)
    except CannotTape as exc:
        reason = exc.reason
    # No tape of static size: run the assigning statement again if it can be (cheaper than a
    # tape sized at launch: no memory that grows with the trip count), else such a tape.
    try:
        return _replay_statement(st, e, rd.path, p, tape, reason)
    except UserError:
        if not st.opt.runtime_tapes:
            raise
    return tapes.tape(st, e, p, tape=tape, what=v)


def _replay_statement(st: ReverseState, e: n.Var, path: StmtPath, p: Point, tape: bool, why: str) -> n.Expr:
    """Recompute ``e`` by running a copy of the (pure, local) statement that last assigned it."""
    if not tape:
        raise NeedTape()
    # Stores and barriers do not change registers: the copy leaves them out (hotspot's
    # ``computed = false; if (in range) { computed = true; temp_t[ty][tx] = ... }``).
    s = _registers_only(st.prog.stmt(path))
    for x in walk(s):
        bad = None
        if isinstance(x, (n.Store, n.AtomicRMW, n.Barrier, n.Shuffle, n.Vote)):
            bad = "it has side effects"
        elif isinstance(x, n.Load) and x.buffer in st.prog.written_buffers:
            bad = f"it reads {x.buffer}, which the kernel writes"
        if bad is not None:
            raise _cannot(st, e, p, f"{e.name} is assigned by the statement at line "
                                     f"{s.loc.line if s.loc else '?'}, which cannot run again because {bad}; "
                                     f"and it cannot be stored: {why}")
    for scope in reversed(st.replays):
        known = scope.get((e.name, path))
        if known is not None:
            st.replay_uses += 1
            return n.Var(known, e.vtype)
    written = st.prog.written_in(path)
    inside = declared_names(s)
    rename = {w: st.names.fresh(w) for w in written}
    before = path  # the point right before the statement
    values: dict[n.Expr, n.Expr] = {}
    init: list[n.Stmt] = []
    for w in sorted(written - inside):
        ty = var_type(st, w)
        # The copy starts from the value before the statement wherever the statement reads it
        # or may leave it unassigned (an ``if`` that assigns on one branch only).
        if w in read_names(s) or not _assigns_on_every_path(s, w):
            init.append(n.Decl(rename[w], ty, avail(st, n.Var(w, ty), before, tape=True)))
        else:
            init.append(n.Decl(rename[w], ty))
    for x in walk(s):
        if isinstance(x, n.Var) and x.name not in written:
            values[x] = avail(st, x, before, tape=True)
    copy = rename_locals((s,), rename, values)
    st.pending += init + list(copy)
    if st.replays:
        for w in written - inside:
            st.replays[-1][(w, path)] = rename[w]
    note(st, ("replay", e.name, path), Caching(e.name, s.loc, "recompute",
                                                 f"the statement at line {s.loc.line if s.loc else '?'} runs "
                                                 f"again in the reverse sweep ({why})"))
    return n.Var(rename[e.name], e.vtype)


def _recompute_ok(st: ReverseState, value: n.Expr) -> bool:
    if st.opt.cache == "recompute":
        return True
    trivial = isinstance(value, (n.Const, n.Var, n.GpuIndex)) or not value.type.is_float
    if st.opt.cache == "store":
        return trivial
    if trivial:
        return True
    nodes = list(walk(value))
    if len(nodes) > CHEAP_NODES:
        return False
    return all(not isinstance(x, n.Call) or x.fn in CHEAP_CALLS for x in nodes)


def _entry_copy(st: ReverseState, e: n.Var) -> n.Expr:
    name = st.entry_copies.get(e.name)
    if name is None:
        name = st.names.fresh(e.name + "_in")
        st.entry_copies[e.name] = name
        st.top_decls.append(n.Decl(name, e.vtype, e))
    return n.Var(name, e.vtype)


def hoist(st: ReverseState, v: str) -> None:
    """Declare local ``v`` at the top of ``K_grad`` (the reverse sweep reads it outside its scope)."""
    if v in st.prog.params or st.prog.is_top_level(v):
        return
    path = st.prog.decl.get(v)
    if path is not None and isinstance(st.prog.stmt(path), n.For):
        raise InternalError(f"loop variable {v!r} read after its loop")
    st.hoist.add(v)


def _iter_start(st: ReverseState, e: n.Var, loop: StmtPath, p: Point, tape: bool) -> n.Expr:
    ind = induction(st.prog, loop, e.name)
    ctx = st.ctx[loop]
    if ind is not None:
        name = ctx.named.get(e.name)
        if name is None:
            v0 = avail(st, e, loop, tape=tape)
            note(st, ("closed-form", e.name, loop), Caching(
                e.name, st.prog.stmt(loop).loc, "closed-form", f"induction variable ({ind.op} {ind.amount})"))
            name = st.names.fresh(e.name)
            ctx.named[e.name] = name
            ctx.values.append(n.Decl(name, e.vtype, closed_form(ind, v0, n.Var(ctx.index, I32))))
        return n.Var(name, e.vtype)
    try:
        return tapes.tape(st, e, body_start(loop), tape=tape, what=e.name)
    except CannotTape:
        pass  # recompute from the loop entry in each reversed iteration instead
    name = ctx.carried.get(e.name)
    if name is None:
        name = st.names.fresh(e.name + "_rp")
        ctx.carried[e.name] = name
    return n.Var(name, e.vtype)


def _tape_or_fail(st: ReverseState, e: n.Expr, p: Point, tape: bool, *, why: str) -> n.Expr:
    try:
        return tapes.tape(st, e, p, tape=tape, what=format_expr(e))
    except CannotTape as exc:
        raise _cannot(st, e, p, f"{why}; {exc.reason}") from None


def _cannot(st: ReverseState, e: n.Expr, p: Point, reason: str) -> UserError:
    loc = e.loc or loc_at(st, p)
    return UserError(f"cannot recover the value of {format_expr(e)} for the reverse sweep: {reason}", loc)


# ------------------------------------------------------------------ shared arrays refilled per iteration
def _shared_replay_loop(st: ReverseState, buffer: str, p: Point) -> StmtPath | None:
    if st.kernel.space(buffer) != "shared" or st.opt.cache == "store":
        return None
    writers = [path for path, s in st.prog.stmts.items()
               if isinstance(s, (n.Store, n.AtomicRMW)) and s.buffer == buffer]
    if not writers or any(not isinstance(st.prog.stmt(w), n.Store) for w in writers):
        return None
    loop = writers[0][:-1]
    if not loop or any(w[:-1] != loop or w[-1][0] != "body" for w in writers):
        return None
    if not isinstance(st.prog.stmt(loop), (n.For, n.While)) or loop not in st.prog.loops_around(p):
        return None
    bound_known = all(trip_bound(st.prog, lp) is not None for lp in st.prog.loops_around(p))
    if bound_known and st.opt.cache != "recompute":
        return None  # a tape is simpler when it can be sized
    written = st.prog.written_in(loop)
    for w in writers:
        store = st.prog.stmt(w)
        for i in store.index:  # type: ignore[union-attr]
            for x in walk(i):
                if isinstance(x, n.Var) and x.name in written:
                    return None
                if isinstance(x, n.Load) and x.buffer in st.prog.written_buffers:
                    return None
    last_store = max(w[-1][1] for w in writers)
    use = st.prog.top_index(loop, p)
    body = st.prog.block(loop, "body")
    if not any(isinstance(body[j], n.Barrier) for j in range(last_store + 1, use)):
        return None
    return loop


def shared_replay_code(st: ReverseState, ctx: LoopCtx) -> list[n.Stmt]:
    """The stores that refill ``ctx``'s shared arrays at the top of a reversed iteration."""
    out: list[n.Stmt] = []
    for buffer in ctx.shared:
        for path, s in st.prog.stmts.items():
            if isinstance(s, n.Store) and s.buffer == buffer and path[:-1] == ctx.path:
                index = tuple(avail(st, i, path) for i in s.index)
                value = avail(st, s.value, path)
                out.append(n.Store(buffer, index, value, loc=s.loc))
    if out:
        out.append(n.Barrier())
    return out


# ------------------------------------------------------------------ loop-carried values from the loop entry
def carried_replay_code(st: ReverseState, ctx: LoopCtx, start: n.Expr | None,
                         step: n.Expr | None) -> tuple[list[n.Stmt], list[n.Stmt]]:
    """(before the reversed loop, at the top of each reversed iteration): the loop-carried values
    of the reversed iteration, replayed from the loop entry or, with a checkpoint budget, from
    the nearest snapshot (``autodiff.checkpoint``)."""
    loop = ctx.path
    prog = st.prog
    body = prog.block(loop, "body")
    written = prog.written_in(loop)
    closure = set(ctx.carried)
    chosen: set[int] = set()
    changed = True
    while changed:
        changed = False
        for j, s in enumerate(body):
            if j in chosen:
                continue
            path = loop + (("body", j),)
            if prog.written_in(path) & closure:
                _check_replayable(st, s, path, closure)
                chosen.add(j)
                closure |= set(prog.written_in(path)) & written
                closure |= read_names(s) & written
                changed = True
    declared_inside = {v for j in chosen for v in declared_names(body[j])}
    loop_stmt = prog.stmt(loop)
    loop_var = loop_stmt.var if isinstance(loop_stmt, n.For) else None
    out: list[n.Stmt] = []
    rename: dict[str, str] = {}
    for v in sorted(closure - declared_inside - ({loop_var} if loop_var else set())):
        name = ctx.carried.get(v)
        if name is None:
            name = st.names.fresh(v + "_rp")
            ctx.carried[v] = name
        rename[v] = name
        ty = var_type(st, v)
        out.append(n.Decl(name, ty, avail(st, n.Var(v, ty), loop, tape=True)))
        if st.opt.checkpoint_budget is None:
            note(st, ("replay-loop", v, loop), Caching(
                v, loop_stmt.loc, "replay-loop", "recomputed from the loop entry in each reversed iteration "
                "(quadratic in the trip count: the trip count is not known statically)"))
    state = dict(rename)
    for v in declared_inside:
        rename[v] = st.names.fresh(v)
    q = st.names.fresh("q")
    values: dict[n.Expr, n.Expr] = {}
    for j in sorted(chosen):
        for x in walk(body[j]):
            if isinstance(x, n.Var) and x.name not in rename and x.name != loop_var and x.name not in written:
                values[x] = avail(st, x, loop, tape=True)
    replay: list[n.Stmt] = []
    if loop_var is not None:
        assert start is not None and step is not None
        vtype = loop_stmt.vtype  # type: ignore[union-attr]
        rename[loop_var] = st.names.fresh(loop_var)
        replay.append(n.Decl(rename[loop_var], vtype, affine_value(start, n.Var(q, I32), step, vtype)))
    for j in sorted(chosen):
        replay.extend(rename_locals((body[j],), rename, values))
    budget = st.opt.checkpoint_budget
    if budget is not None and state:
        # binomial checkpointing: the state at the loop entry is snapshot 0, the rest on the way
        snaps = make_snapshots(budget, {v: var_type(st, v) for v in state}, st.names, loop_base(loop_stmt))
        st.tapes.extend(snaps.buffers())
        entry = {v: init.init for init in out for v in state if isinstance(init, n.Decl)
                 and init.name == state[v] and init.init is not None}
        note(st, ("checkpoint", loop), Caching(
            ", ".join(sorted(state)), loop_stmt.loc, "checkpoint",
            f"binomial checkpointing: {budget} snapshots of {len(state)} values "
            f"({snaps.elements()} elements per thread, whatever the trip count)"))
        return snapshot_init(snaps, entry), advance_code(snaps, n.Var(ctx.index, I32), state, replay, q,
                                                        st.names)
    out.append(n.For(q, I32, b.const(0, I32), n.Var(ctx.index, I32), b.const(1, I32), tuple(replay)))
    return [], out


def _check_replayable(st: ReverseState, s: n.Stmt, path: StmtPath, closure: set[str]) -> None:
    for x in walk(s):
        bad = None
        if isinstance(x, (n.Store, n.AtomicRMW)):
            bad = "it writes memory"
        elif isinstance(x, (n.Barrier, n.Shuffle, n.Vote)):
            bad = "it synchronizes threads"
        elif isinstance(x, n.Load) and x.buffer in st.prog.written_buffers:
            bad = f"it reads {x.buffer}, which the kernel writes"
        if bad is not None:
            loop = st.prog.stmt(path[:-1])
            line = f" at line {loop.loc.line}" if loop.loc is not None else ""
            names = ", ".join(sorted(closure))
            raise UserError(f"cannot differentiate: the loop{line} has no static trip count and its "
                            f"loop-carried values ({names}) cannot be recomputed from the loop entry because "
                            f"{bad}", s.loc)


def _assigns_on_every_path(s: n.Stmt, v: str) -> bool:
    """Whether every execution of ``s`` that completes assigns ``v`` (conservative: False when unsure)."""
    if isinstance(s, n.Assign):
        return s.name == v
    if isinstance(s, n.If):
        return (any(_assigns_on_every_path(t, v) for t in s.then)
                and any(_assigns_on_every_path(t, v) for t in s.orelse))
    return False


def _size(e: n.Expr) -> int:
    return sum(1 for _ in walk(e))


class _DropMemoryWrites(Mutator):
    """Statements without their stores and barriers (they change no register)."""

    def visit_Expr(self, e: n.Expr) -> n.Expr:
        return e

    def visit_Store(self, s: n.Store) -> None:
        return None

    def visit_Barrier(self, s: n.Barrier) -> None:
        return None


def _registers_only(s: n.Stmt) -> n.Stmt:
    if isinstance(s, (n.Store, n.Barrier)):
        return s  # nothing to replay: the caller refuses it
    return _DropMemoryWrites().visit(s)


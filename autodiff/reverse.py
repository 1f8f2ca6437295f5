"""Reverse mode: a GPU-form kernel ``K`` -> ``K_grad`` (forward sweep, then reverse sweep, per thread).

::

    kernel K_grad(<K's parameters with shadows>) {
      <zero the shadows of shared/local arrays>; barrier
      <forward sweep: K's body, plus tape stores and loop counters>
      <adjoint variables = 0>
      <reverse sweep: K's statements backwards, each replaced by its adjoint>
      <block reductions of scalar-parameter adjoints; one atomic per block>
    }

Reverse sweep, per statement (``d_x`` is the adjoint of ``x``):

* ``v = e``: ``ct = d_v; d_v = 0``, then ``ct`` flows into ``e``'s active operands through the
  rules table (``autodiff.rules``);
* ``X[i] = e``: ``ct = d_X[i]; d_X[i] = 0`` (the element's seed is consumed), then into ``e``;
* a load ``X[i]`` receiving ``ct``: ``d_X[i] += ct`` -- plain where the buffer's elements are
  proved private to a thread (``polypy.poly.sharing``), summed per block where every thread
  of a block reads one element of a read-only buffer, atomic otherwise;
* ``atomicAdd(X[i], e)``: ``ct = d_X[i]`` (the seed stays), into ``e``;
* ``__syncthreads()`` stays where it is, mirrored; warp shuffles are transposed;
* ``if``: the same condition (recomputed or recorded); loops run backwards: ``for`` loops by
  their trip count, ``while`` loops by an iteration count recorded in the forward sweep.

Values the reverse sweep needs (operands of partials, indices, conditions, trip counts) are
made available by ``avail``: a variable not assigned after the point where it is needed is
read directly; a value the forward sweep overwrites is recomputed from its unique reaching
definition when cheap, computed in closed form for induction variables, or stored in a tape
indexed by the enclosing loop counters (sized by static trip bounds). For loops with unknown
trip counts there are two recomputation schemes instead of tapes: shared arrays filled at the
top of the iteration are filled again at the top of the reversed iteration, and loop-carried
scalars are recomputed from the loop entry (quadratic in the trip count; reported).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from autodiff import build as b
from autodiff import rules
from autodiff.activity import Activity, ActiveParams
from autodiff.loops import closed_form, counted_while, exact_trips, induction, trip_bound, trip_count_expr
from autodiff.names import Names
from autodiff.program import Ambiguous, Def, Entry, IterStart, Program, body_start, point_after
from autodiff.reductions import Reduction, block_reductions
from autodiff.report import Accumulation, Caching, Decision
from autodiff.shuffles import transpose_shuffle
from autodiff.shadows import interleave_dynamic_shared, shadow_buffers, shadow_params, zero_local, zero_shared
from autodiff.windows import Privatized, Windows
from polypy.errors import InternalError, UserError
from polypy.ir import nodes as n
from polypy.ir.printer import format_expr
from polypy.ir.queries import declared_names, read_names
from polypy.ir.rewrite import rename_locals
from polypy.ir.types import I32, I64, PointerType, ScalarType
from polypy.ir.visitor import Mutator, substitute, walk
from polypy.poly.paths import StmtPath, format_path

Point = StmtPath

# Calls cheap enough to recompute in the reverse sweep under the "auto" caching policy.
CHEAP_CALLS = frozenset({"fabs", "fmin", "fmax", "floor", "ceil", "trunc", "round", "rint", "min", "max", "abs",
                         "copysign", "fdim", "saturate", "isnan", "isinf", "isfinite", "signbit", "fma"})
CHEAP_NODES = 24
RECOMPUTE_LIMIT = 24  # nodes of a recomputed value with every definition expanded (x = x * x chains double)


@dataclasses.dataclass(frozen=True)
class ReverseOptions:
    """Switches for the benchmark (each off = the simple, always-correct choice)."""

    cache: str = "auto"  # auto | recompute | store: how overwritten values are recovered
    privacy: bool = True  # use isl proofs of thread privacy (else: atomics for shared shadows)
    block_reductions: bool = True  # register + block reduction for block-uniform reads and scalars
    windows: bool = True  # block windows in shared memory for read-only inputs read by several threads
    max_tape: int = 1 << 16  # elements per tape array


class NeedTape(Exception):
    """A value is not recomputable without a tape (raised where tapes are not allowed)."""


class CannotTape(Exception):
    def __init__(self, loop: StmtPath | None, reason: str):
        super().__init__(reason)
        self.loop = loop
        self.reason = reason


@dataclasses.dataclass
class LoopCtx:
    path: StmtPath
    index: str  # forward iteration number of the current reverse iteration (i32)
    var: str | None  # reconstructed loop variable of a for loop
    carried: dict[str, str] = dataclasses.field(default_factory=dict)  # loop-carried var -> replay copy
    values: list[n.Stmt] = dataclasses.field(default_factory=list)  # per-iteration values (closed forms)
    named: dict[str, str] = dataclasses.field(default_factory=dict)  # var -> its per-iteration value
    shared: list[str] = dataclasses.field(default_factory=list)  # shared arrays refilled per iteration


class ReverseBuilder:
    def __init__(self, kernel: n.Kernel, original: n.Kernel, active: ActiveParams, activity: Activity,
                 names: Names, options: ReverseOptions, report: list[Decision] | None,
                 privacy: Callable[[str], tuple[bool, str]], windows: Callable[[str], object] | None = None):
        self.k = kernel
        self.original = original
        self.prog = Program(kernel)
        self.active = active
        self.act = activity
        self.names = names
        self.opt = options
        self.report = report
        self.privacy = privacy
        self.before: dict[Point, list[n.Stmt]] = {}
        self.loop_prologue: dict[StmtPath, list[n.Stmt]] = {}
        self.top_decls: list[n.Stmt] = []
        self.hoist: set[str] = set()
        self.tapes: list[n.Buffer] = []
        self.ctx: dict[StmtPath, LoopCtx] = {}
        self.memo: dict[tuple, n.Expr] = {}
        self.counters: dict[StmtPath, str] = {}
        self.adjoint: dict[str, str] = {}
        self.adjoint_type: dict[str, ScalarType] = {}
        self.deferred: dict[tuple[str, tuple[n.Expr, ...]], str] = {}
        self.entry_copies: dict[str, str] = {}
        self.pending: list[n.Stmt] = []
        self.replays: list[dict[tuple[str, StmtPath], str]] = []  # per reverse block: recomputed values
        self._private: dict[str, tuple[bool, str]] = {}
        self._reported: set[tuple] = set()
        self.window_oracle = windows
        self.windows = Windows(names)
        self._windowed: dict[str, tuple[Privatized | None, str]] = {}
        self.params, self.param_shadow = shadow_params(original, active, names, mode="reverse")
        extra, self.buffer_shadow = shadow_buffers(kernel, activity.buffers, names)
        self.shadow_buffers = extra
        self.shadow = {**self.param_shadow, **self.buffer_shadow}
        self.dynamic = {buf.name: self.shadow[buf.name] for buf in kernel.buffers
                        if buf.name in self.buffer_shadow and buf.shape is None}
        for p in kernel.params:
            if p.name in active.scalars:
                self.adjoint[p.name] = names.fresh(f"d_{p.name}_sum")
                self.adjoint_type[p.name] = p.ptype  # type: ignore[assignment]

    # ================================================================== values in the reverse sweep
    def avail(self, e: n.Expr, p: Point, *, tape: bool = True) -> n.Expr:
        key = (e, p, tape)
        got = self.memo.get(key)
        if got is None:
            emitted = len(self.pending)
            got = self._avail(e, p, tape)
            if len(self.pending) == emitted:  # results that need statements are scoped: not reused
                self.memo[key] = got
        return got

    def _avail(self, e: n.Expr, p: Point, tape: bool) -> n.Expr:
        if isinstance(e, (n.Const, n.GpuIndex)):
            return e
        if isinstance(e, n.Var):
            return self._avail_var(e, p, tape)
        if isinstance(e, n.Load):
            index = tuple(self.avail(i, p, tape=tape) for i in e.index)
            if e.buffer not in self.prog.written_buffers:
                return dataclasses.replace(e, index=index)
            loop = self._shared_replay_loop(e.buffer, p)
            if loop is not None:
                ctx = self.ctx[loop]
                if e.buffer not in ctx.shared:
                    ctx.shared.append(e.buffer)
                    self._note(("replay-shared", e.buffer, loop), Caching(
                        e.buffer, self.prog.stmt(loop).loc, "replay-shared",
                        f"the stores to {e.buffer} at the top of the loop run again at the top of each reversed "
                        f"iteration"))
                return dataclasses.replace(e, index=index)
            return self._tape_or_fail(e, p, tape, why=f"{e.buffer} is written by the kernel")
        if isinstance(e, n.Select):
            cond = self.avail(e.cond, p, tape=tape)
            try:
                return dataclasses.replace(e, cond=cond, a=self.avail(e.a, p, tape=False),
                                           b=self.avail(e.b, p, tape=False))
            except NeedTape:
                return self._tape_or_fail(e, p, tape, why="operand of a conditional expression")
        if isinstance(e, n.Binary) and e.op in ("land", "lor"):
            a = self.avail(e.a, p, tape=tape)
            try:
                return dataclasses.replace(e, a=a, b=self.avail(e.b, p, tape=False))
            except NeedTape:
                return self._tape_or_fail(e, p, tape, why="operand of && / ||")
        if isinstance(e, n.Cast):
            return dataclasses.replace(e, x=self.avail(e.x, p, tape=tape))
        if isinstance(e, (n.Unary, n.Binary, n.Call)):
            args = tuple(self.avail(a, p, tape=tape) for a in rules.float_args(e))
            return rules.rebuild(e, args)
        raise InternalError(f"avail: unexpected {type(e).__name__}", e.loc)

    def _avail_var(self, e: n.Var, p: Point, tape: bool) -> n.Expr:
        v = e.name
        prog = self.prog
        for loop in reversed(prog.loops_around(p)):
            s = prog.stmt(loop)
            if isinstance(s, n.For) and s.var == v:
                ctx = self.ctx.get(loop)
                if ctx is None or ctx.var is None:
                    raise InternalError(f"loop variable {v} needed outside its reversed loop")
                return n.Var(ctx.var, e.vtype)
        if v not in prog.writers:
            if v in prog.params:
                return e
            raise InternalError(f"variable {v!r} has no declaration", e.loc)
        if not prog.overwritten_after(v, p):
            self._hoist(v)
            return e
        rd = prog.reaching_def(v, p)
        if isinstance(rd, Def):
            if self._recompute_ok(rd.value):
                got = self.avail(rd.value, rd.path, tape=tape)
                if _size(got) <= RECOMPUTE_LIMIT or self.opt.cache == "recompute":
                    self._note(("recompute", v, rd.path), Caching(v, prog.stmt(rd.path).loc, "recompute",
                                                                  f"{v} = {format_expr(rd.value)}"))
                    return got
            try:
                return self.tape(e, point_after(rd.path), tape=tape, what=v)
            except CannotTape:
                return self.avail(rd.value, rd.path, tape=tape)
        if isinstance(rd, IterStart):
            return self._iter_start(e, rd.loop, p, tape)
        if isinstance(rd, Entry):
            if v in prog.params:
                return self._entry_copy(e)
            self._hoist(v)
            return e  # an uninitialized local: any value is as good as the forward's
        assert isinstance(rd, Ambiguous)
        try:
            return self.tape(e, p, tape=tape, what=v)
        except CannotTape as exc:
            return self._replay_statement(e, rd.path, p, tape, exc.reason)

    def _replay_statement(self, e: n.Var, path: StmtPath, p: Point, tape: bool, why: str) -> n.Expr:
        """Recompute ``e`` by running a copy of the (pure, local) statement that last assigned it."""
        if not tape:
            raise NeedTape()
        s = self.prog.stmt(path)
        for x in walk(s):
            bad = None
            if isinstance(x, (n.Store, n.AtomicRMW, n.Barrier, n.Shuffle, n.Vote)):
                bad = "it has side effects"
            elif isinstance(x, n.Load) and x.buffer in self.prog.written_buffers:
                bad = f"it reads {x.buffer}, which the kernel writes"
            if bad is not None:
                raise self._cannot(e, p, f"{e.name} is assigned by the statement at line "
                                         f"{s.loc.line if s.loc else '?'}, which cannot run again because {bad}; "
                                         f"and it cannot be stored: {why}")
        for scope in reversed(self.replays):
            known = scope.get((e.name, path))
            if known is not None:
                return n.Var(known, e.vtype)
        written = self.prog.written_in(path)
        inside = declared_names(s)
        rename = {w: self.names.fresh(w) for w in written}
        before = path  # the point right before the statement
        values: dict[n.Expr, n.Expr] = {}
        init: list[n.Stmt] = []
        for w in sorted(written - inside):
            ty = self._var_type(w)
            if w in read_names(s):
                init.append(n.Decl(rename[w], ty, self.avail(n.Var(w, ty), before, tape=True)))
            else:
                init.append(n.Decl(rename[w], ty))
        for x in walk(s):
            if isinstance(x, n.Var) and x.name not in written:
                values[x] = self.avail(x, before, tape=True)
        copy = rename_locals((s,), rename, values)
        self.pending += init + list(copy)
        if self.replays:
            for w in written - inside:
                self.replays[-1][(w, path)] = rename[w]
        self._note(("replay", e.name, path), Caching(e.name, s.loc, "recompute",
                                                     f"the statement at line {s.loc.line if s.loc else '?'} runs "
                                                     f"again in the reverse sweep ({why})"))
        return n.Var(rename[e.name], e.vtype)

    def _recompute_ok(self, value: n.Expr) -> bool:
        if self.opt.cache == "recompute":
            return True
        trivial = isinstance(value, (n.Const, n.Var, n.GpuIndex)) or not value.type.is_float
        if self.opt.cache == "store":
            return trivial
        if trivial:
            return True
        nodes = list(walk(value))
        if len(nodes) > CHEAP_NODES:
            return False
        return all(not isinstance(x, n.Call) or x.fn in CHEAP_CALLS for x in nodes)

    def _entry_copy(self, e: n.Var) -> n.Expr:
        name = self.entry_copies.get(e.name)
        if name is None:
            name = self.names.fresh(e.name + "_in")
            self.entry_copies[e.name] = name
            self.top_decls.append(n.Decl(name, e.vtype, e))
        return n.Var(name, e.vtype)

    def _hoist(self, v: str) -> None:
        if v in self.prog.params or self.prog.is_top_level(v):
            return
        path = self.prog.decl.get(v)
        if path is not None and isinstance(self.prog.stmt(path), n.For):
            raise InternalError(f"loop variable {v!r} read after its loop")
        self.hoist.add(v)

    def _iter_start(self, e: n.Var, loop: StmtPath, p: Point, tape: bool) -> n.Expr:
        ind = induction(self.prog, loop, e.name)
        ctx = self.ctx[loop]
        if ind is not None:
            name = ctx.named.get(e.name)
            if name is None:
                v0 = self.avail(e, loop, tape=tape)
                self._note(("closed-form", e.name, loop), Caching(
                    e.name, self.prog.stmt(loop).loc, "closed-form", f"induction variable ({ind.op} {ind.amount})"))
                name = self.names.fresh(e.name)
                ctx.named[e.name] = name
                ctx.values.append(n.Decl(name, e.vtype, closed_form(ind, v0, n.Var(ctx.index, I32))))
            return n.Var(name, e.vtype)
        try:
            return self.tape(e, body_start(loop), tape=tape, what=e.name)
        except CannotTape:
            pass  # recompute from the loop entry in each reversed iteration instead
        name = ctx.carried.get(e.name)
        if name is None:
            name = self.names.fresh(e.name + "_rp")
            ctx.carried[e.name] = name
        return n.Var(name, e.vtype)

    def _tape_or_fail(self, e: n.Expr, p: Point, tape: bool, *, why: str) -> n.Expr:
        try:
            return self.tape(e, p, tape=tape, what=format_expr(e))
        except CannotTape as exc:
            raise self._cannot(e, p, f"{why}; {exc.reason}") from None

    def _cannot(self, e: n.Expr, p: Point, reason: str) -> UserError:
        loc = e.loc or self._loc_at(p)
        return UserError(f"cannot recover the value of {format_expr(e)} for the reverse sweep: {reason}", loc)

    def _loc_at(self, p: Point):
        for k in range(len(p), 0, -1):
            s = self.prog.stmts.get(p[:k])
            if s is not None and s.loc is not None:
                return s.loc
        return self.k.loc

    # ------------------------------------------------------------------ tapes
    def tape(self, e: n.Expr, p: Point, *, tape: bool, what: str) -> n.Expr:
        """Store ``e`` (valid at ``p`` in the forward sweep) at ``p``; read it back in reverse."""
        if not tape:
            raise NeedTape()
        loops = self.prog.loops_around(p)
        bounds = []
        for loop in loops:
            bound = trip_bound(self.prog, loop)
            if bound is None:
                s = self.prog.stmt(loop)
                line = f" at line {s.loc.line}" if s.loc is not None else f" {format_path(loop)}"
                raise CannotTape(loop, f"the trip count of the loop{line} is not known statically, so a tape "
                                       f"cannot be sized")
            bounds.append(max(bound, 1))
        size = 1
        for bound in bounds:
            size *= bound
        if size > self.opt.max_tape:
            raise CannotTape(loops[-1], f"a tape of {size} elements is larger than the limit of {self.opt.max_tape}")
        base = _tape_name(e)
        if not loops:
            name = self.names.fresh(base + "_saved")
            self.top_decls.append(n.Decl(name, e.type))
            self.before.setdefault(p, []).append(n.Assign(name, e, loc=e.loc))
            self._note(("tape", name), Caching(what, e.loc or self._loc_at(p), "tape", "one register"))
            return n.Var(name, e.type)
        name = self.names.fresh(base + "_tape")
        shape = tuple(b.const(bound, I32) for bound in bounds)
        self.tapes.append(n.Buffer(name, e.type, shape, "local"))
        fwd = tuple(self._forward_index(loop) for loop in loops)
        self.before.setdefault(p, []).append(n.Store(name, fwd, e, loc=e.loc))
        self._note(("tape", name), Caching(what, e.loc or self._loc_at(p), "tape",
                                           f"{size} elements per thread ({name}{''.join(f'[{x}]' for x in bounds)})"))
        return n.Load(name, tuple(n.Var(self.ctx[loop].index, I32) for loop in loops), e.type)

    def _forward_index(self, loop: StmtPath) -> n.Expr:
        """The iteration number inside ``loop`` in the forward sweep (i32)."""
        s = self.prog.stmt(loop)
        if isinstance(s, n.For) and isinstance(s.start, n.Const) and isinstance(s.step, n.Const):
            e: n.Expr = b.sub(n.Var(s.var, s.vtype), s.start)
            e = b.div(e, s.step)
            return b.cast(I32, e)
        return n.Binary("sub", n.Var(self._counter(loop), I32), b.const(1, I32))

    def _counter(self, loop: StmtPath) -> str:
        """An iteration counter for ``loop`` in the forward sweep (incremented at the body start)."""
        name = self.counters.get(loop)
        if name is None:
            name = self.names.fresh(_loop_base(self.prog.stmt(loop)) + "_count")
            self.counters[loop] = name
            self.top_decls.append(n.Decl(name, I32))
            self.before.setdefault(loop, []).append(n.Assign(name, b.const(0, I32)))
            self.loop_prologue.setdefault(loop, []).insert(
                0, n.Assign(name, n.Binary("add", n.Var(name, I32), b.const(1, I32))))
        return name

    def _while_trips(self, loop: StmtPath) -> n.Expr:
        exact = exact_trips(self.prog, loop)
        if exact is not None:
            return b.const(exact, I32)
        counted = counted_while(self.prog, loop)
        if counted is not None:
            # while (v < stop) { ... v += c }: as many iterations as the equivalent for loop
            ind = counted.induction
            v0 = b.cast(counted.ctype, self.avail(n.Var(ind.var, ind.vtype), loop))
            stop = self.avail(counted.stop, loop)
            return b.cast(I32, trip_count_expr(v0, stop, b.const(ind.amount, counted.ctype)))
        counter = n.Var(self._counter(loop), I32)
        if not self.prog.loops_around(loop):
            return counter
        try:
            return self.tape(counter, point_after(loop), tape=True, what="iteration count")
        except CannotTape as exc:
            raise UserError(f"cannot record the iteration count of this loop for the reverse sweep: {exc.reason}",
                            self.prog.stmt(loop).loc) from None

    # ------------------------------------------------------------------ shared arrays refilled per iteration
    def _shared_replay_loop(self, buffer: str, p: Point) -> StmtPath | None:
        if self.k.space(buffer) != "shared" or self.opt.cache == "store":
            return None
        writers = [path for path, s in self.prog.stmts.items()
                   if isinstance(s, (n.Store, n.AtomicRMW)) and s.buffer == buffer]
        if not writers or any(not isinstance(self.prog.stmt(w), n.Store) for w in writers):
            return None
        loop = writers[0][:-1]
        if not loop or any(w[:-1] != loop or w[-1][0] != "body" for w in writers):
            return None
        if not isinstance(self.prog.stmt(loop), (n.For, n.While)) or loop not in self.prog.loops_around(p):
            return None
        bound_known = all(trip_bound(self.prog, lp) is not None for lp in self.prog.loops_around(p))
        if bound_known and self.opt.cache != "recompute":
            return None  # a tape is simpler when it can be sized
        written = self.prog.written_in(loop)
        for w in writers:
            store = self.prog.stmt(w)
            for i in store.index:  # type: ignore[union-attr]
                for x in walk(i):
                    if isinstance(x, n.Var) and x.name in written:
                        return None
                    if isinstance(x, n.Load) and x.buffer in self.prog.written_buffers:
                        return None
        last_store = max(w[-1][1] for w in writers)
        use = self.prog.top_index(loop, p)
        body = self.prog.block(loop, "body")
        if not any(isinstance(body[j], n.Barrier) for j in range(last_store + 1, use)):
            return None
        return loop

    def _shared_replay_code(self, ctx: LoopCtx) -> list[n.Stmt]:
        out: list[n.Stmt] = []
        for buffer in ctx.shared:
            for path, s in self.prog.stmts.items():
                if isinstance(s, n.Store) and s.buffer == buffer and path[:-1] == ctx.path:
                    index = tuple(self.avail(i, path) for i in s.index)
                    value = self.avail(s.value, path)
                    out.append(n.Store(buffer, index, value, loc=s.loc))
        if out:
            out.append(n.Barrier())
        return out

    # ------------------------------------------------------------------ loop-carried values from the loop entry
    def _carried_replay_code(self, ctx: LoopCtx, start: n.Expr | None, step: n.Expr | None) -> list[n.Stmt]:
        loop = ctx.path
        prog = self.prog
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
                    self._check_replayable(s, path, closure)
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
                name = self.names.fresh(v + "_rp")
                ctx.carried[v] = name
            rename[v] = name
            ty = self._var_type(v)
            out.append(n.Decl(name, ty, self.avail(n.Var(v, ty), loop, tape=True)))
            self._note(("replay-loop", v, loop), Caching(v, loop_stmt.loc, "replay-loop",
                                                         "recomputed from the loop entry in each reversed iteration "
                                                         "(quadratic in the trip count: the trip count is not known "
                                                         "statically)"))
        for v in declared_inside:
            rename[v] = self.names.fresh(v)
        q = self.names.fresh("q")
        values: dict[n.Expr, n.Expr] = {}
        for j in sorted(chosen):
            for x in walk(body[j]):
                if isinstance(x, n.Var) and x.name not in rename and x.name != loop_var and x.name not in written:
                    values[x] = self.avail(x, loop, tape=True)
        replay: list[n.Stmt] = []
        if loop_var is not None:
            assert start is not None and step is not None
            vtype = loop_stmt.vtype  # type: ignore[union-attr]
            rename[loop_var] = self.names.fresh(loop_var)
            replay.append(n.Decl(rename[loop_var], vtype, _affine(start, n.Var(q, I32), step, vtype)))
        for j in sorted(chosen):
            replay.extend(rename_locals((body[j],), rename, values))
        out.append(n.For(q, I32, b.const(0, I32), n.Var(ctx.index, I32), b.const(1, I32), tuple(replay)))
        return out

    def _check_replayable(self, s: n.Stmt, path: StmtPath, closure: set[str]) -> None:
        for x in walk(s):
            bad = None
            if isinstance(x, (n.Store, n.AtomicRMW)):
                bad = "it writes memory"
            elif isinstance(x, (n.Barrier, n.Shuffle, n.Vote)):
                bad = "it synchronizes threads"
            elif isinstance(x, n.Load) and x.buffer in self.prog.written_buffers:
                bad = f"it reads {x.buffer}, which the kernel writes"
            if bad is not None:
                loop = self.prog.stmt(path[:-1])
                line = f" at line {loop.loc.line}" if loop.loc is not None else ""
                names = ", ".join(sorted(closure))
                raise UserError(f"cannot differentiate: the loop{line} has no static trip count and its "
                                f"loop-carried values ({names}) cannot be recomputed from the loop entry because "
                                f"{bad}", s.loc)

    def _var_type(self, v: str) -> ScalarType:
        path = self.prog.decl.get(v)
        if path is not None:
            s = self.prog.stmt(path)
            return s.vtype  # type: ignore[union-attr]
        p = self.k.param(v)
        assert p is not None and not isinstance(p.ptype, PointerType)
        return p.ptype

    # ================================================================== adjoint accumulation
    def _adj(self, v: str, ty: ScalarType) -> str:
        name = self.adjoint.get(v)
        if name is None:
            name = self.names.fresh("d_" + v)
            self.adjoint[v] = name
            self.adjoint_type[v] = ty
        return name

    def accumulate_var(self, v: n.Var, ct: n.Expr) -> list[n.Stmt]:
        name = self._adj(v.name, v.vtype)
        return [n.Assign(name, b.add(n.Var(name, v.vtype), ct))]

    def take_adjoint(self, v: str, ty: ScalarType, loc) -> tuple[list[n.Stmt], n.Var]:
        """``ct = d_v; d_v = 0``: the adjoint of an assignment's result, consumed."""
        name = self._adj(v, ty)
        ct = self.names.fresh(v + "_ct")
        return [n.Decl(ct, ty, n.Var(name, ty), loc=loc), n.Assign(name, b.zero(ty), loc=loc)], n.Var(ct, ty)

    def accumulate_load(self, e: n.Load, ct: n.Expr, p: Point) -> list[n.Stmt]:
        shadow = self.shadow[e.buffer]
        index = tuple(self.avail(i, p) for i in e.index)
        strategy, reason = self._strategy(e)
        self._note(("acc", e.buffer, e), Accumulation(e.buffer, format_expr(e), e.loc or self._loc_at(p),
                                                       strategy, reason))
        if strategy == "plain":
            return [n.Store(shadow, index, b.add(n.Load(shadow, index, e.etype), ct), loc=e.loc)]
        if strategy == "window":
            privatized = self._window(e.buffer)[0]
            assert privatized is not None
            coords = tuple(self.avail(c, p) for c in privatized.window.coordinates(e.index))
            return self.windows.accumulate(privatized, coords, index, ct, e.loc)
        if strategy == "block-reduction":
            key = (e.buffer, index)
            reg = self.deferred.get(key)
            if reg is None:
                reg = self.names.fresh(f"d_{e.buffer}_sum")
                self.deferred[key] = reg
                self.adjoint_type[reg] = e.etype
            return [n.Assign(reg, b.add(n.Var(reg, e.etype), ct), loc=e.loc)]
        return [n.AtomicRMW("add", shadow, index, ct, loc=e.loc)]

    def _strategy(self, e: n.Load) -> tuple[str, str]:
        strategy, why = self._base_strategy(e)
        if strategy in ("atomic", "block-reduction"):
            privatized, reason = self._window(e.buffer)
            if privatized is not None:
                return "window", reason
            if strategy == "atomic" and reason:
                why = f"{why}; {reason}"
        return strategy, why

    def _base_strategy(self, e: n.Load) -> tuple[str, str]:
        space = self.k.space(e.buffer)
        if space == "local":
            return "plain", "local array: one per thread"
        private, why = self._is_private(e.buffer)
        if private:
            return "plain", why
        if (self.opt.block_reductions and space == "global" and e.buffer not in self.prog.written_buffers
                and self._block_invariant(e.index)):
            return "block-reduction", "every thread of a block reads this one element of a read-only buffer"
        return "atomic", why

    def _window(self, buffer: str) -> tuple[Privatized | None, str]:
        """The block window ``buffer``'s adjoints go through, if any (with the reason either way).

        Only for read-only global buffers with at least one access that would be atomic, and
        only where the window saves atomics: several contributions of a block to one element,
        or elements that no other block touches (flushed with plain adds).
        """
        got = self._windowed.get(buffer)
        if got is not None:
            return got
        got = (None, "")
        if (self.opt.windows and self.window_oracle is not None and self.k.space(buffer) == "global"
                and buffer not in self.prog.written_buffers and buffer in self.shadow):
            loads = [x for x in walk(self.k) if isinstance(x, n.Load) and x.buffer == buffer]
            if any(self._base_strategy(x)[0] == "atomic" for x in loads):
                window = self.window_oracle(buffer)
                if isinstance(window, str):
                    got = (None, f"no block window: {window}")
                elif not (window.exclusive or window.repeats):  # type: ignore[attr-defined]
                    got = (None, "no block window: each element is read once per block and may be read by "
                                 "other blocks, so a window would save no atomic")
                elif not self.windows.fits(window, self.k.elem_type(buffer),  # type: ignore[arg-type]
                                           tuple(self.k.buffers) + tuple(self.shadow_buffers)):
                    got = (None, "no block window: it would take the kernel's static shared memory past "
                                 "CUDA's 48 KiB")
                else:
                    privatized = self.windows.add(buffer, window, self.shadow[buffer],  # type: ignore[arg-type]
                                                  self.k.elem_type(buffer))
                    got = (privatized, _describe_window(privatized))
        self._windowed[buffer] = got
        return got

    def _is_private(self, buffer: str) -> tuple[bool, str]:
        if buffer not in self._private:
            if not self.opt.privacy:
                self._private[buffer] = (False, "privacy proofs disabled")
            else:
                self._private[buffer] = self.privacy(buffer)
        return self._private[buffer]

    def _block_invariant(self, index: tuple[n.Expr, ...]) -> bool:
        """Same value in every thread of a block and every loop iteration, and valid at the end."""
        def ok(e: n.Expr, depth: int = 0) -> bool:
            for x in walk(e):
                if isinstance(x, (n.ThreadIdx, n.Load)):
                    return False
                if isinstance(x, n.Var):
                    if x.name in self.prog.params and x.name not in self.prog.writers:
                        continue
                    writers = self.prog.writers.get(x.name, [])
                    if len(writers) != 1 or len(writers[0]) != 1 or depth > 8:
                        return False
                    s = self.prog.stmt(writers[0])
                    if not (isinstance(s, n.Decl) and s.init is not None and ok(s.init, depth + 1)):
                        return False
            return True
        return all(ok(i) for i in index)

    def _note(self, key: tuple, decision: Decision) -> None:
        if self.report is None or key in self._reported:
            return
        self._reported.add(key)
        self.report.append(decision)

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
        if isinstance(s, n.Vote):
            return []
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
            if value_active and self.k.space(s.buffer) in ("device", "constant"):
                raise UserError(f"cannot differentiate through the module array '{s.buffer}': an active value is "
                                f"stored in it, and module arrays have no shadow", s.loc)
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
            if value_active and self.k.space(s.buffer) in ("device", "constant"):
                raise UserError(f"cannot differentiate through the module array '{s.buffer}': an active value is "
                                f"added to it, and module arrays have no shadow", s.loc)
            return []
        elem = self.k.elem_type(s.buffer)
        if s.op not in ("add", "sub"):
            raise UserError(f"no derivative rule for atomic.{s.op} on the active buffer '{s.buffer}' (only "
                            f"atomicAdd/atomicSub are differentiable)", s.loc)
        if s.dest is not None and s.dest in self.act.variables:
            raise UserError(f"cannot differentiate the value returned by atomic.{s.op} on '{s.buffer}': it depends on "
                            f"the order in which threads update the element", s.loc)
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
        base = _loop_base(s)
        index = self.names.fresh(base + "_i")
        start = step = value = None
        var = None
        if isinstance(s, n.For):
            start = self.avail(s.start, path)
            stop = self.avail(s.stop, path)
            step = self.avail(s.step, path)
            value = _affine(start, n.Var(index, I32), step, s.vtype)
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
        if ctx.carried:
            carried, pre = self._collect(lambda: self._carried_replay_code(ctx, start, step))
            prologue = pre + carried + prologue
        head: list[n.Stmt] = []
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
        return head + [loop]

    # ================================================================== the whole kernel
    def build(self, name: str) -> n.Kernel:
        reverse = self.rev_block((), "body")
        forward = self._emit_forward((), "body", self.k.body)
        body: list[n.Stmt] = []
        hoisted = []
        for v in sorted(self.hoist):
            hoisted.append(n.Decl(v, self._var_type(v)))
        body += hoisted + self.top_decls + self.windows.declarations()
        body += self._zero_shadows()
        body += forward
        for v, adj in self.adjoint.items():
            body.append(n.Decl(adj, self.adjoint_type[v], b.zero(self.adjoint_type[v])))
        for reg in self.deferred.values():
            body.append(n.Decl(reg, self.adjoint_type[reg], b.zero(self.adjoint_type[reg])))
        body += reverse
        body += self.windows.flush()
        body += self._reductions()
        buffers = tuple(self.k.buffers) + tuple(self.shadow_buffers) + tuple(self.tapes) + tuple(self._red_buffers)
        buffers += tuple(self.windows.buffers)
        body = _BarrierRuns().visit_block(tuple(body))
        while body and isinstance(body[-1], n.Barrier):
            body = body[:-1]  # nothing after it to order
        kernel = n.Kernel(name, self.params, buffers, tuple(body), "gpu", loc=self.k.loc)
        return interleave_dynamic_shared(kernel, self.dynamic)

    def _zero_shadows(self) -> list[n.Stmt]:
        out: list[n.Stmt] = []
        shared = False
        for buf in self.shadow_buffers:
            if buf.space == "shared" and buf.shape is not None:
                out.append(zero_shared(buf, self.names))
                shared = True
            elif buf.space == "local":
                out.append(zero_local(buf, self.names))
        windows = self.windows.zero()
        out += windows
        if shared or windows:
            out.append(n.Barrier())
        return out

    def _emit_forward(self, parent: StmtPath, field: str, block: tuple[n.Stmt, ...]) -> list[n.Stmt]:
        out: list[n.Stmt] = []
        for j, s in enumerate(block):
            path = parent + ((field, j),)
            out += self.before.get(path, [])
            out += self._forward_stmt(s, path)
        out += self.before.get(parent + ((field, len(block)),), [])
        return out

    def _forward_stmt(self, s: n.Stmt, path: StmtPath) -> list[n.Stmt]:
        if isinstance(s, n.Decl) and s.name in self.hoist:
            return [n.Assign(s.name, s.init, loc=s.loc)] if s.init is not None else []
        if isinstance(s, n.Store) and s.buffer in self.dynamic:
            # Shadow of extern shared memory: zeroed where the primal element is written.
            zero = n.Store(self.dynamic[s.buffer], s.index, b.zero(self.k.elem_type(s.buffer)), loc=s.loc)
            return [zero, s]
        if isinstance(s, n.If):
            return [dataclasses.replace(s, then=tuple(self._emit_forward(path, "then", s.then)),
                                        orelse=tuple(self._emit_forward(path, "orelse", s.orelse)))]
        if isinstance(s, (n.For, n.While)):
            body = self.loop_prologue.get(path, []) + self._emit_forward(path, "body", s.body)
            return [dataclasses.replace(s, body=tuple(body))]
        return [s]

    def _reductions(self) -> list[n.Stmt]:
        items: list[Reduction] = []
        for p in self.k.params:
            if p.name in self.active.scalars:
                reg = self.adjoint[p.name]
                items.append(Reduction(reg, p.ptype, self.param_shadow[p.name], (b.const(0, I32),)))  # type: ignore[arg-type]
                self._note(("acc", p.name), Accumulation(p.name, f"scalar parameter {p.name}", p.loc,
                                                         "block-reduction",
                                                         "every thread contributes: summed in a register, reduced "
                                                         "over the block, one atomic per block"))
        for (buffer, index), reg in self.deferred.items():
            items.append(Reduction(reg, self.adjoint_type[reg], self.shadow[buffer], index))
        stmts, self._red_buffers = block_reductions(items, self.names)
        return stmts


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


def _size(e: n.Expr) -> int:
    return sum(1 for _ in walk(e))


def _only_barriers(stmts: list[n.Stmt]) -> bool:
    return all(isinstance(s, n.Barrier) for s in stmts)


def _dedup_barriers(stmts: list[n.Stmt]) -> list[n.Stmt]:
    out: list[n.Stmt] = []
    for s in stmts:
        if isinstance(s, n.Barrier) and out and isinstance(out[-1], n.Barrier):
            continue
        out.append(s)
    return out


def _tape_name(e: n.Expr) -> str:
    if isinstance(e, n.Var):
        return e.name
    if isinstance(e, n.Load):
        return e.buffer
    return "value"


def _loop_base(s: n.Stmt) -> str:
    if isinstance(s, n.For):
        return s.var
    if isinstance(s, n.While):
        for x in walk(s.cond):
            if isinstance(x, n.Var):
                return x.name
    return "loop"


def _trips(start: n.Expr, stop: n.Expr, step: n.Expr) -> n.Expr:
    if all(isinstance(x, n.Const) for x in (start, stop, step)) and step.value > 0:  # type: ignore[union-attr]
        count = max(0, -(-(int(stop.value) - int(start.value)) // int(step.value)))  # type: ignore[union-attr]
        return b.const(count, I32)
    if b.is_const(step, 1) and start.type == I32:
        span = stop if b.is_const(start, 0) else n.Binary("sub", stop, start)
        return b.select(b.cmp("lt", start, stop), span, b.const(0, I32))
    return b.cast(I32, trip_count_expr(start, stop, step))


def _affine(start: n.Expr, i: n.Expr, step: n.Expr, ty: ScalarType) -> n.Expr:
    """``start + i * step`` in type ``ty`` (computed in 64 bits unless everything is small and constant)."""
    if isinstance(start, n.Const) and isinstance(step, n.Const) and ty.bits <= 32:
        return b.add(start, b.mul(b.cast(ty, i), step)) if not b.is_const(start, 0) else b.mul(b.cast(ty, i), step)
    wide = I64
    value = n.Binary("add", b.cast(wide, start), b.mul(b.cast(wide, i), b.cast(wide, step)))
    return b.cast(ty, value)


def _describe_window(p: Privatized) -> str:
    w = p.window
    shape = " x ".join(format_expr(d.extent) for d in w.dims)
    flush = ("plain adds for the elements isl proves no other block reads, atomics for the rest" if w.exclusive
             else "one atomic per nonzero element")
    where = "a block-dependent" if any(d.step is not None or not isinstance(d.base, n.Const) for d in w.dims) \
        else "a fixed"
    return (f"isl: a block reads a window of {shape} elements at {where} position; its contributions "
            f"are summed in shared memory, then flushed: {flush}")


def reverse_kernel(kernel: n.Kernel, original: n.Kernel, active: ActiveParams, activity: Activity, names: Names,
                   options: ReverseOptions, report: list[Decision] | None,
                   privacy: Callable[[str], tuple[bool, str]], name: str,
                   windows: Callable[[str], object] | None = None) -> n.Kernel:
    return ReverseBuilder(kernel, original, active, activity, names, options, report, privacy, windows).build(name)

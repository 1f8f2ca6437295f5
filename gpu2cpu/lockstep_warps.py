"""lockstep_warps: implicit warp-synchronous code, run with its lockstep meaning.

Requires: GPU form. Guarantees: where two threads of one warp race on a shared array, or may
where isl cannot read an index (``s[t ^ 1]``; ``polypy.poly.block_races``), the statements that touch those arrays run as the lanes of a
warp ran them before Volta: every lane finishes a statement's reads before any lane stores,
and every lane finishes a statement before any lane starts the next. Block barriers make that
order explicit; elsewhere (and where the code cannot be lowered) the kernel is unchanged, and
``refuse-warp-synchronous`` refuses what is left::

    if (t < 32) {                        lane_on = t < 32                 (every thread)
      v[t] += v[t + 16];          ==>    barrier
      v[t] += v[t + 8];                  if (lane_on) { x = v[t] + v[t + 16]; i = t }
    }                                    barrier
                                         if (lane_on) v[i] = x
                                         barrier
                                         ...

Each statement that touches a racing array becomes a phase of its own (a store two: its reads
into temporaries, then the store), the condition of an ``if`` around such statements is kept
in a temporary and guards each phase, and a loop around them keeps running for every thread
with the phases of its body guarded, with a barrier closing each trip. That is the exact
lockstep order inside each warp, and one legal interleaving of the warps of the block (they
are not ordered by CUDA at all), so the result is the one a pre-Volta GPU computes. Barriers
that order nothing are removed afterwards by ``eliminate-barriers``.

Lowered only where it is exact (else left to the refusal):
* a loop around racing statements either holds a ``__syncthreads()`` at its top level (CUDA
  then requires every thread to run the same trips) or is controlled by locals every thread
  computes alike: a ``for`` with bounds of parameters and launch dimensions, or a ``while``
  whose condition reads locals declared just before it with such values and stepped only in
  its update (``for (int k = 16; k > 0; k >>= 1)``);
* no ``break``/``continue`` leaves a lowered ``if`` or loop, no barrier sits under a lowered
  ``if``'s condition unless between its phases, and a loop condition reads no racing array.

Where that fails, the statements lowered are only those whose own accesses may race with an
access of another thread of the block (``polypy.poly.block_races.racing_statements``: isl, at
every launch; an index it cannot read races with everything). The others touch the arrays only
where a barrier of both threads orders every other thread's access of the element against
theirs (or both read), so where they run among the lanes changes nothing they read or leave;
they stay as written, in each thread's order, barriers included. Harris's reduction #5/#6: the
grid-stride ``while (i < n) sdata[tid] += ...`` (its trips differ between threads) runs before a
``__syncthreads()``, and only the unrolled last warp is lowered. Racing statements inside such a
loop still leave the kernel to the refusal. (Tried second: the first try lowers every statement
touching the arrays and asks isl nothing more.)
"""
from __future__ import annotations

from collections import Counter

from polypy.ir import nodes as n
from polypy.ir.queries import definition_counts, read_counts
from polypy.ir.types import BOOL
from polypy.ir.visitor import rebuild, walk
from polypy.poly.block_races import may_warp_race_arrays, racing_statements, warp_races
from polypy.poly.paths import iter_statements

from gpu2cpu.names import NameSupply
from gpu2cpu.report import LoweringDecision

Phase = list[n.Stmt]
_UNIFORM_LEAVES = (n.Const, n.BlockIdx, n.BlockDim, n.GridDim)


class _Unsupported(Exception):
    """The racing statements sit in control flow this pass does not lower exactly."""


def lockstep_warps(kernel: n.Kernel, *, report: list[LoweringDecision] | None = None) -> n.Kernel:
    """``report`` receives one ``LoweringDecision`` when the kernel is lowered."""
    races = warp_races(kernel)
    racing = sorted({r.buffer for r in races} | may_warp_race_arrays(kernel))
    if not racing:
        return kernel
    try:
        body = _Lowering(kernel, frozenset(racing)).region(kernel.body)
    except _Unsupported:
        # Only the statements that may race, then (the isl questions cost: asked only here).
        hot = _hot_statements(kernel, frozenset(racing))
        if hot is None:
            return kernel
        try:
            body = _Lowering(kernel, frozenset(racing), hot=hot).region(kernel.body)
        except _Unsupported:
            return kernel
    if report is not None:
        where = races[0].loc if races else kernel.loc
        report.append(LoweringDecision(kernel.name, where, f"threads of one warp {'race' if races else 'may race'} on shared "
                                       f"{', '.join(racing)} with no barrier (implicit warp-synchronous code): its "
                                       "statements run in lockstep order, every lane's reads of a statement before "
                                       "any lane's store, barriers between statements"))
    return rebuild(kernel, body=body)


class _Lowering:
    def __init__(self, kernel: n.Kernel, racing: frozenset[str], *, syncs: bool = False,
                 hot: frozenset[int] | None = None):
        self.racing = racing
        self.hot = hot  # ids of the statements that may race (None: every one touching ``racing``)
        self.syncs = syncs  # lower_warp_syncs: every __syncwarp is a phase break too
        self.names = NameSupply(kernel)
        self.params = frozenset(p.name for p in kernel.params)
        self.decls: list[n.Stmt] = []  # hoisted to the start of the kernel (names are unique)
        self.unguarded: set[str] = set()  # loop-control locals every thread computes alike
        self.mentions = _mentions(kernel.body)  # names are unique: where a local's uses all are

    # ------------------------------------------------------------------ structure
    def region(self, body: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        phases = self.phases(body, None)
        return tuple(self.decls) + _join(phases)

    def phases(self, stmts: tuple[n.Stmt, ...], guard: n.Expr | None) -> list[Phase]:
        out: list[Phase] = []
        current: list[n.Stmt] = []
        self._mark_loop_controls(stmts)
        for s in stmts:
            if isinstance(s, n.Barrier) or (self.syncs and isinstance(s, n.WarpSync)):
                out.append(self.guarded(current, guard))
                current = []
                continue
            if not self.touches(s):
                if guard is not None and any(isinstance(x, n.Barrier) for x in walk(s)):
                    raise _Unsupported
                current.append(s)
                continue
            out.append(self.guarded(current, guard))
            current = []
            out.extend(self.lower(s, guard))
        out.append(self.guarded(current, guard))
        return [p for p in out if p]

    def lower(self, s: n.Stmt, guard: n.Expr | None) -> list[Phase]:
        if isinstance(s, n.Store):
            temps = [self.temp(s.value, "v", s)] + [self.temp(i, "i", s) for i in s.index]
            reads = [n.Assign(name, e, loc=s.loc) for name, e in temps]
            store = rebuild(s, value=n.Var(temps[0][0], s.value.type, loc=s.loc),
                            index=tuple(n.Var(name, e.type, loc=s.loc) for name, e in temps[1:]))
            return [self.guarded(reads, guard), self.guarded([store], guard)]
        if isinstance(s, (n.Decl, n.Assign, n.AtomicRMW)):
            return [self.guarded([s], guard)]
        if isinstance(s, n.If):
            _no_jumps(s.then + s.orelse)
            on, off = self.flag("lane_on", s), self.flag("lane_off", s)
            cond = [n.Assign(on, s.cond, loc=s.loc), n.Assign(off, n.Unary("not", n.Var(on, BOOL), loc=s.loc), loc=s.loc)]
            first = [n.Assign(on, n.Const(False, BOOL), loc=s.loc), n.Assign(off, n.Const(False, BOOL), loc=s.loc)]
            return [first + self.guarded(cond, guard)] + self.phases(s.then, n.Var(on, BOOL)) + \
                self.phases(s.orelse, n.Var(off, BOOL))
        if isinstance(s, (n.For, n.While)):
            return [[self.loop(s, guard)]]
        raise _Unsupported

    def loop(self, s: n.For | n.While, guard: n.Expr | None) -> n.Stmt:
        _no_jumps(s.body)
        holds_barrier = any(isinstance(x, n.Barrier) for x in s.body)
        control = (s.cond,) if isinstance(s, n.While) else (s.start, s.stop, s.step)
        if any(isinstance(x, n.Load) and x.buffer in self.racing for e in control for x in walk(e)):
            raise _Unsupported
        update = s.update if isinstance(s, n.While) else ()
        if self.touches_all(update):
            raise _Unsupported
        if holds_barrier:  # CUDA: every thread runs the same trips
            if guard is not None:
                raise _Unsupported
        else:  # every thread computes the control alike, and the update steps nothing else
            if not all(self.uniform(e, loop_vars=(s.var,) if isinstance(s, n.For) else ()) for e in control):
                raise _Unsupported
            if any(not (isinstance(u, n.Assign) and u.name in self.unguarded and self.uniform(u.value))
                   for u in update):
                raise _Unsupported
        body = _join(self.phases(s.body, guard)) + (n.Barrier(loc=s.loc),)
        return rebuild(s, body=body)

    # ------------------------------------------------------------------ phases
    def guarded(self, stmts: list[n.Stmt], guard: n.Expr | None) -> Phase:
        """``stmts`` run where ``guard`` holds, their declarations hoisted (a phase's scope ends
        at its barrier); loop controls every thread computes run unguarded."""
        if guard is None or not stmts:
            return list(stmts)
        free: list[n.Stmt] = []
        kept: list[n.Stmt] = []
        here = _mentions(stmts)
        # Declared and used only in these statements (`for (int k = 16; k > 0; k /= 2)` around
        # shuffles, under the guard): the declaration stays with its uses, all under the guard,
        # so that the lowering of the threads sees a local of the branch.
        local = {s.name for s in stmts if isinstance(s, n.Decl) and here[s.name] == self.mentions[s.name]}
        for s in stmts:
            if isinstance(s, n.Decl) and s.name in local:
                kept.append(s)
                continue
            if isinstance(s, n.Decl):
                self.decls.append(n.Decl(s.name, s.vtype, None, loc=s.loc))
                if s.init is None:
                    continue
                s = n.Assign(s.name, s.init, loc=s.loc)
            alike = isinstance(s, n.Assign) and s.name in self.unguarded and self.uniform(s.value) and \
                not (_mentions([s]).keys() & local)
            (free if alike else kept).append(s)
        return free + ([n.If(guard, tuple(kept), (), loc=kept[0].loc)] if kept else [])

    def temp(self, e: n.Expr, base: str, where: n.Stmt) -> tuple[str, n.Expr]:
        name = self.names.fresh(f"lockstep_{base}")
        self.decls.append(n.Decl(name, e.type, None, loc=where.loc))
        return name, e

    def flag(self, base: str, where: n.Stmt) -> str:
        name = self.names.fresh(base)
        self.decls.append(n.Decl(name, BOOL, None, loc=where.loc))
        return name

    # ------------------------------------------------------------------ questions
    def touches(self, s: n.Stmt) -> bool:
        if self.hot is not None:
            return any(id(x) in self.hot for x in walk(s))
        return any((isinstance(x, (n.Load, n.Store, n.AtomicRMW)) and x.buffer in self.racing) or
                   (self.syncs and isinstance(x, n.WarpSync)) for x in walk(s))

    def touches_all(self, stmts: tuple[n.Stmt, ...]) -> bool:
        return any(self.touches(s) for s in stmts)

    def uniform(self, e: n.Expr, *, loop_vars: tuple[str, ...] = ()) -> bool:
        """Every thread computes ``e`` alike: launch dimensions, parameters, block indices and
        the loop-control locals of ``_mark_loop_controls``."""
        for x in walk(e):
            if isinstance(x, n.Var):
                if x.name not in self.params and x.name not in self.unguarded and x.name not in loop_vars:
                    return False
            elif isinstance(x, (n.ThreadIdx, n.Load)) or \
                    (not isinstance(x, _UNIFORM_LEAVES) and not x.CHILDREN and not isinstance(x, n.Var)):
                return False
        return True

    def _mark_loop_controls(self, stmts: tuple[n.Stmt, ...]) -> None:
        """``var k = 16; while (k > 0) {...} update { k = k >> 1 }``: ``k`` is a loop control every
        thread computes alike when it is declared with a uniform value right before the loop (no
        statement between) and assigned nowhere but in the loop's update, from uniform values."""
        for decl, loop in zip(stmts, stmts[1:]):
            if not (isinstance(decl, n.Decl) and decl.init is not None and isinstance(loop, n.While)):
                continue
            if not any(isinstance(x, n.Var) and x.name == decl.name for x in walk(loop.cond)):
                continue
            inside = [x for x in walk(loop) if _assigns(x, decl.name)]
            updates = [s for s in loop.update if isinstance(s, n.Assign) and s.name == decl.name]
            if len(inside) != len(updates):
                continue
            self.unguarded.add(decl.name)  # tentatively, so that `k = k >> 1` reads a uniform k
            if not (self.uniform(decl.init) and all(self.uniform(u.value) for u in updates)):
                self.unguarded.discard(decl.name)


def _hot_statements(kernel: n.Kernel, racing: frozenset[str]) -> frozenset[int] | None:
    """The ids of the statements whose own accesses to ``racing`` may race with another thread's
    (``racing_statements``); None: every statement touching those arrays counts."""
    paths = racing_statements(kernel, racing)
    if paths is None:
        return None
    return frozenset(id(stmt) for path, stmt in iter_statements(kernel.body) if path in paths)


def _mentions(stmts) -> Counter[str]:
    """How often each local is read or defined in ``stmts``."""
    return read_counts(stmts) + definition_counts(stmts)


def _assigns(x: n.Node, name: str) -> bool:
    if isinstance(x, (n.Assign, n.Decl)):
        return x.name == name
    return isinstance(x, (n.AtomicRMW, n.Shuffle, n.Vote)) and x.dest == name


def _no_jumps(stmts: tuple[n.Stmt, ...]) -> None:
    """A ``break``/``continue``/``return`` that would leave a lowered statement: not lowered."""
    stack = list(stmts)
    while stack:
        s = stack.pop()
        if isinstance(s, (n.Break, n.Continue, n.Return)):
            raise _Unsupported
        if isinstance(s, n.If):
            stack.extend(s.then + s.orelse)
        elif isinstance(s, (n.For, n.While)):
            stack.extend(x for x in walk(s) if isinstance(x, n.Return))


def _join(phases: list[Phase]) -> tuple[n.Stmt, ...]:
    out: list[n.Stmt] = []
    for i, p in enumerate(phases):
        if i:
            out.append(n.Barrier(loc=p[0].loc))
        out.extend(p)
    return tuple(out)

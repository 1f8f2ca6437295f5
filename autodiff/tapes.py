"""Tapes: values the forward sweep stores for the reverse sweep, indexed by loop iteration.

A value valid at a point inside loops is stored in a per-thread local array with one dimension
per enclosing loop (sized by static trip bounds, ``autodiff.loops.trip_bound``), at the
forward iteration numbers, and read back at the reverse sweep's iteration numbers. Loops
without a constant-start, constant-step ``for`` shape get an iteration counter; ``while`` loops
also have their iteration count recorded (or computed, when counted or exact).

``Tapes`` is one part of ``autodiff.reverse.ReverseBuilder`` (which owns the state).
"""
from __future__ import annotations

from autodiff import build as b
from autodiff.availability import CannotTape, NeedTape
from autodiff.loops import counted_while, exact_trips, loop_base, trip_bound, trip_count_expr
from autodiff.program import point_after
from autodiff.report import Caching
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.types import I32
from polypy.poly.paths import StmtPath, format_path

Point = StmtPath


class Tapes:
    """``tape`` and the loop counters it needs (part of ``ReverseBuilder``)."""

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
            name = self.names.fresh(loop_base(self.prog.stmt(loop)) + "_count")
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


def _tape_name(e: n.Expr) -> str:
    if isinstance(e, n.Var):
        return e.name
    if isinstance(e, n.Load):
        return e.buffer
    return "value"

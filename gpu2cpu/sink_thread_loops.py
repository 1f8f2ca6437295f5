"""sink_thread_loops: the thread loop goes innermost (CPU form -> CPU form).

Requires: a CPU-form kernel (thread counters named ``tx``/``ty``/``tz``, see
``gpu2cpu.thread_affine``). Guarantees: the same results; a loop over ``tx`` that contains a
serial loop whose trip count does not depend on ``tx`` (a stencil's taps, matmul's ``k``,
n-body's ``j``, a row loop) is distributed over that loop's body, so the loop over ``tx`` is
innermost and its accesses, stride-1 or uniform in ``tx``, vectorize::

    for threads tx {                       acc_x[tx] = 0          (for threads tx)
      var acc = 0                          for k = 0 to 16 {
      for k = 0 to 16 {              ==>     for threads tx { acc_x[tx] = acc_x[tx] + As[ty][k] * Bs[k][tx] }
        acc = acc + As[ty][k] * Bs[k][tx]  }
      }                                    C[...] = acc_x[tx]     (for threads tx)
      C[...] = acc
    }

Legality: the iterations of a thread loop are threads of one barrier interval of a race-free
kernel; any interleaving that keeps each thread's own order computes the same
(``gpu2cpu.thread_loops``). Distribution keeps each thread's order; it needs the loop's header
to be the same for every thread (no ``tx``-dependent bounds, condition or exits: ``break`` and
``continue`` only under ``tx``-uniform conditions), and is not done when the order between
threads matters (``order_sensitive`` atomics; float atomic adds do not count: CUDA orders no
atomics, so a sum rounded in another order is one a GPU may give too).

Per-thread locals that live from one part of the distributed body to another are

* *hoisted* when ``tx``-uniform and needed by a header (a ``while`` loop's counter);
* *recomputed* in each part when defined once by a cheap expression of ``tx``, values from
  outside the loop and memory the loop does not write (``x = blockIdx.x * 16 + tx``);
* otherwise *expanded* into a per-thread array ``v_x[blockDim.x]`` (or, for a value loaded from
  and stored back to its own slot of a per-thread buffer, into that slot).

**Grid-stride and block-stride loops** ``for (i = S + tx; i < E; i += D)`` (``D`` uniform and
positive) are first given a uniform iteration space (``gpu2cpu.normalize_grid_stride``), so that
consecutive threads touch consecutive elements in the inner loop::

    for threads tx {                       for b: i64 = S to E step D {
      for i = S + tx to E step D {   ==>     for threads tx { if (b + tx < E) { var i = (i32)b + (i32)tx; body } }
        body                               }
      }
    }

(``tighten_thread_bounds`` then turns the guard into bounds). The normalization is kept only
where the loop over ``tx`` is then interchanged; what it needs beyond the interval analysis
(``D >= 1``, no wrap-around) is checked at run time, the original loop running otherwise.

Cost model: a serial loop is sunk when, among the memory accesses in its body, those that are
uniform or stride-1 in ``tx`` are at least as many as the others (and there is one), and it is
not a short loop of constant trip count (at most ``SHORT_LOOP``, the loops inside it constant
too: compilers unroll those and vectorize the loop over ``tx`` with the per-thread values in
registers, which beats going through memory; a triangular ``for j < i`` inside is not unrolled
whole, and the loop over ``tx`` around it stays scalar), unless it contains a guard affine in ``tx`` that depends on its iteration,
an atomic add to one element the same for every thread, or a read down a column of a block array (``tile[tx][ty + j]``): unrolled, those
keep the loop over ``tx`` from vectorizing (sunk, an atomic add to one element the same for every
thread becomes a sum, ``gpu2cpu.sum_uniform_atomics``; a column read becomes a gather). Atomic
adds to an element per thread do not count: they stay atomic either way.
``report`` receives one ``LoweringDecision`` per loop changed.

A loop over tx whose body nests loops deeper than ``MAX_SUNK_DEPTH`` stays as it is (exact; the
report says why): the cost model asks each loop of a nest about its whole body, which is
quadratic in the depth (machine-generated nests of hundreds of loops).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

from polypy.analysis.loop_order import OrderChoice, barrier_order, choose_order
from gpu2cpu.normalize_grid_stride import normalize_strided_loops
from gpu2cpu.report import LoweringDecision
from gpu2cpu.sink_parts import SunkNest
from gpu2cpu.thread_affine import (
    CounterAnalysis,
    Ranges,
    counter_dim,
    need_exprs,
    split_conjuncts,
)
from gpu2cpu.thread_loops import (
    ThreadLoopStep,
    copy_loop,
    let_definitions,
    order_sensitive,
    rewrite_cpu_body,
)
from polypy.analysis.uniformity import thread_dependent_names
from polypy.ir import nodes as n
from polypy.ir.jumps import jumps_out
from polypy.ir.printer import format_expr
from polypy.ir.queries import conjunction, declared_names, loop_depth
from polypy.ir.types import U32
from polypy.ir.visitor import Visitor, has_kind, substitute, walk, walk_only

# Loops with at most this many iterations (a constant) are left to the compiler to unroll.
SHORT_LOOP = 16
# A loop over tx around loops nested deeper than this is left as it is.
MAX_SUNK_DEPTH = 32


def sink_thread_loops(kernel: n.Kernel, *, report: list[LoweringDecision] | None = None) -> n.Kernel:
    """Interchange thread loops inwards; see the module docstring."""
    return rewrite_cpu_body(kernel, _Sink, what="sink_thread_loops", report=report)


class _Sink(ThreadLoopStep):
    def __init__(self, kernel: n.Kernel):
        super().__init__(kernel)
        self.ranges = Ranges.of_kernel(kernel.body)
        self.buffers: list[n.Buffer] = []
        self.enclosing: list[n.For] = []  # thread loops around the current statement

    def kernel_fields(self) -> dict:
        return {"buffers": self.kernel.buffers + tuple(self.buffers)}

    # ------------------------------------------------------------------ walking the kernel
    def visit_Expr(self, e: n.Expr) -> n.Expr:
        return e  # expressions hold no loops

    def enter_For(self, s: n.For) -> None:
        if s.kind == "threads" and counter_dim(s.var) != 0:
            self.enclosing.append(s)

    def exit_For(self, s: n.For) -> None:
        if s.kind == "threads" and counter_dim(s.var) != 0:
            self.enclosing.pop()

    def visit_For(self, s: n.For) -> n.Stmt | tuple[n.Stmt, ...]:
        if s.kind == "threads" and counter_dim(s.var) == 0:
            return self.loop(s)
        if s.kind == "serial":
            self.barrier_loop(s)
        return self.generic_visit(s)

    def barrier_loop(self, s: n.For) -> None:
        """Report a serial loop that holds loops over tx (a barrier in it kept it outside them)
        where the cost model would have run each thread's whole loop innermost: refused."""
        inner = _thread_loops_in(s.body)
        choice = barrier_order(s, inner) if inner else None
        if choice is not None and not choice.threads_inner:
            self.note(s, f"the serial loop '{s.var}' stays outside the loops over the threads, tx innermost: a "
                         f"barrier inside it (kept by eliminate-barriers) orders every thread's step before the "
                         f"next, so '{s.var}' cannot go innermost although {choice.reason()}")

    # ------------------------------------------------------------------ one loop over tx
    def loop(self, loop: n.For) -> n.Stmt | tuple[n.Stmt, ...]:
        """What replaces the loop over tx ``loop`` (itself when it stays: also an ``ordered`` one,
        whose iterations an interchange would interleave)."""
        if not has_kind(loop.body, n.For, n.While):
            # Nothing to sink (the only candidates are loops): the plan below substitutes and
            # walks the whole body (a 100,000-term sum: 6 s) to decide nothing.
            return loop
        if loop.ordered or order_sensitive(self.kernel, loop.body, rounding=False):
            return loop
        depth = loop_depth(loop.body)
        if depth > MAX_SUNK_DEPTH:
            self.note(loop, f"thread loop over {loop.var}: left as it is, no loop interchanged (loops nested "
                            f"{depth} deep inside it; polypy interchanges up to {MAX_SUNK_DEPTH})")
            return loop
        normalized, needs, notes = normalize_strided_loops(loop, kernel_name=self.kernel.name, names=self.names,
                                                           ranges=self.ranges)
        plan = _Plan(self, normalized)
        for inner, choice in plan.orders.values():
            if not choice.threads_inner:
                self.note(inner, f"thread loop over {loop.var}: the serial loop '{inner.var}' stays inside it, "
                                 f"'{inner.var}' innermost (each thread walks its own row): {choice.reason()}")
        if not plan.sunk:
            return loop
        self.decisions.extend(notes)
        out = SunkNest(plan).emit()
        if needs:
            checks = need_exprs(needs)
            fallback = copy_loop(loop, self.names)
            self.note(loop, f"thread loop over {loop.var}: run-time check {format_expr(conjunction(checks))} for the "
                            f"interchanged loops; the original loop runs otherwise")
            out = [n.If(conjunction(checks), tuple(out), (fallback,), loc=loop.loc)]
        return tuple(out)


# --------------------------------------------------------------------------- the plan
class _Plan:
    """Which serial loops of ``loop``'s body go outside the loops over tx (``sunk``) and which
    locals are computed once outside them (``hoisted``); ``gpu2cpu.sink_parts.SunkNest``
    builds the new statements from it."""

    def __init__(self, sink: _Sink, loop: n.For):
        self.sink = sink
        self.loop = loop
        self.t = loop.var
        self.kernel = sink.kernel
        self.full_range = loop.start == n.Const(0, U32) and loop.stop == n.BlockDim(0)
        self.declared = declared_names(loop.body)
        fake = dataclasses.replace(self.kernel, stage="gpu",
                                   body=substitute(loop.body, {n.Var(self.t, U32): n.ThreadIdx(0)}))
        self.dep = thread_dependent_names(fake) & self.declared
        self.written_buffers = {x.buffer for s in loop.body for x in walk_only(s, n.Store, n.AtomicRMW)}
        self.sunk: set[int] = set()
        self.hoisted: set[str] = set()
        # The cost model's choice for each serial loop it looked at (``polypy.analysis.loop_order``).
        self.orders: dict[int, tuple[n.For, OrderChoice]] = {}
        self.decide()

    # ------------------------------------------------------------------ deciding
    def uniform(self, e: n.Expr) -> bool:
        for x in walk(e):
            if isinstance(x, n.Var) and (x.name == self.t or x.name in self.dep):
                return False
            if isinstance(x, n.Load):
                if not self.full_range or any(isinstance(v, n.Var) and (v.name == self.t or v.name in self.dep)
                                              for i in x.index for v in walk(i)):
                    return False
                if self.kernel.space(x.buffer) == "local":
                    return False
        return True

    def decide(self) -> None:
        candidates = _Nest(self, self.candidate)
        candidates.visit_block(self.loop.body)
        chosen = {id(c) for c in candidates.found
                  if self.worth(c)
                  and (not self.short(c) or self.exposes_guards(c) or self.adds_atomically(c)
                       or self.reads_columns(c))
                  and self.threads_inner(c)}
        for c in candidates.found:
            if id(c) not in chosen and isinstance(c, n.For) and self.short(c) and \
                    any(isinstance(x, n.AtomicRMW) and x.op == "add" for x in walk(c)):
                self.sink.note(c, f"thread loop over {self.t}: the short loop '{c.var}' stays inside it: its atomic "
                                  f"adds are to an element per thread (none to one element for all threads, which "
                                  f"would become a sum), atomic either way")
        # A loop inside a loop that is not sunk stays inside that loop's part.
        sunk = _Nest(self, lambda c: id(c) in chosen)
        sunk.visit_block(self.loop.body)
        self.sunk = {id(c) for c in sunk.found}
        if not self.sunk:
            return
        self.hoisted = self.header_vars()
        if not self.hoisted_writes_ok():
            self.sunk = set()

    def candidate(self, s: n.Stmt) -> bool:
        """A serial loop whose header is the same for every thread (it may go outside the loop over tx)."""
        if isinstance(s, n.For):
            return s.kind == "serial" and all(self.uniform(e) for e in (s.start, s.stop, s.step)) \
                and s.var not in self.dep and self.jumps_uniform(s.body)
        if isinstance(s, n.While):
            return self.uniform(s.cond) and self.jumps_uniform(s.body) and all(
                isinstance(u, n.Assign) and u.name not in self.dep and self.uniform(u.value)
                and not any(isinstance(x, n.Load) for x in walk(u.value)) for u in s.update)
        return False

    def jumps_uniform(self, body: tuple[n.Stmt, ...]) -> bool:
        """Whether every break/continue of the loop with this body is under tx-uniform ifs only.
        (Enters ``if`` s only, stopping at the first non-uniform one: a query, not a rewrite.)"""
        for s in body:
            if isinstance(s, n.If):
                if jumps_out(s.then + s.orelse, n.Break, n.Continue):
                    if not self.uniform(s.cond) or not self.jumps_uniform(s.then) or not self.jumps_uniform(s.orelse):
                        return False
        return True

    def worth(self, loop: n.Stmt) -> bool:
        analysis = CounterAnalysis(self.t, 0, lets=let_definitions(self.loop.body, len(self.loop.body)),
                                   available=lambda name: True, ranges=self.sink.ranges, free_atoms=True)
        good = bad = 0
        for x in walk(loop):
            if not isinstance(x, (n.Load, n.Store, n.AtomicRMW)):
                continue
            coefs = []
            for i in x.index:
                lin = analysis.linear(i)
                coefs.append(None if lin is None else lin[0].coef)
            if all(c == 0 for c in coefs[:-1]) and coefs[-1] in (0, 1, -1):
                good += 1
            else:
                bad += 1
        return good >= 1 and good >= bad

    def threads_inner(self, loop: n.Stmt) -> bool:
        """Whether the loop over tx should go inside ``loop`` by the access strides
        (``polypy.analysis.loop_order``): not where each thread walks its own row in ``loop``. The choice
        is kept for the report (``orders``)."""
        if not isinstance(loop, n.For):
            return True
        lets = let_definitions(self.loop.body, len(self.loop.body))
        choice = choose_order(loop, self.t, thread_lets=lets, thread_variant=self.dep - set(lets))
        if choice is None:
            return True
        self.orders[id(loop)] = (loop, choice)
        return choice.threads_inner

    def short(self, loop: n.Stmt) -> bool:
        """A loop with a small constant trip count: compilers unroll it and vectorize the loop
        over tx with the per-thread values in registers, better than an interchange would."""
        if not isinstance(loop, n.For):
            return False
        a, b, c = (_const_value(e) for e in (loop.start, loop.stop, loop.step))
        if not (a is not None and b is not None and c is not None and c > 0 and (b - a + c - 1) // c <= SHORT_LOOP):
            return False
        # Only a nest the compiler can unroll whole: a loop inside whose trip count varies (a
        # triangular solve's `for j < i`) keeps the loop over tx around it scalar.
        return all(isinstance(x, n.For) and all(_const_value(e) is not None for e in (x.start, x.stop, x.step))
                   for x in walk_only(loop.body, n.For, n.While))

    def adds_atomically(self, loop: n.Stmt) -> bool:
        """Whether the loop holds an atomic add to an element the same for every thread (its index
        built from no load and no value of the thread): unrolled inside the loop over tx it keeps
        that loop from vectorizing (one read-modify-write per thread and iteration, all to one
        element); sunk, it runs in a loop over tx of its own and becomes a sum
        (``sum_uniform_atomics``). Atomic adds to an element per thread (``d_x[tx]``, or scattered
        through loaded indices, cfd's ``d_variables[nb]``) stay atomic either way: for them the
        interchange buys nothing and costs an array per value live across its parts (cfd's
        ``compute_flux`` gradient: about 80, 7.3x -> 4.6x its forward without them)."""
        return any(isinstance(x, n.AtomicRMW) and x.op == "add" and self.same_element(x.index) for x in walk(loop))

    def same_element(self, index: tuple[n.Expr, ...]) -> bool:
        """Whether ``index`` names one element for every thread of the loop over tx: no load
        (what it reads may differ per thread), no thread counter, no local the threads differ in."""
        return not any(isinstance(v, n.Load) or (isinstance(v, n.Var) and (v.name == self.t or v.name in self.dep))
                       for i in index for v in walk(i))

    def reads_columns(self, loop: n.Stmt) -> bool:
        """Whether the loop reads a block array of several dimensions down a column, tx in an
        index other than the last (a transpose's ``tile[tx][ty + j]``): unrolled inside the loop
        over tx, GCC does not vectorize that loop (outer-loop vectorization gives up on the
        column read); sunk, the loop over tx vectorizes with a gather and stride-1 stores
        (transpose_tiled through C: 8.1 -> 4.9 ms)."""
        analysis = CounterAnalysis(self.t, 0, lets=let_definitions(self.loop.body, len(self.loop.body)),
                                   available=lambda name: True, ranges=self.sink.ranges, free_atoms=True)
        for x in walk(loop):
            if isinstance(x, n.Load) and len(x.index) > 1 and self.kernel.space(x.buffer) in ("shared", "local"):
                for i in x.index[:-1]:
                    lin = analysis.linear(i)
                    if lin is not None and lin[0].coef != 0:
                        return True
        return False

    def exposes_guards(self, loop: n.Stmt) -> bool:
        """Whether the loop contains a guard affine in tx that depends on the loop's iteration
        (only the interchange lets it become the bounds of a loop over tx)."""
        assert isinstance(loop, n.For)
        inner_vars = declared_names(loop.body) | {loop.var}
        analysis = CounterAnalysis(self.t, 0, lets=let_definitions(self.loop.body, len(self.loop.body)),
                                   available=lambda name: name not in self.declared or name in inner_vars,
                                   ranges=self.sink.ranges)
        for x in walk(loop):
            if isinstance(x, n.If):
                for atom in split_conjuncts(x.cond):
                    if analysis.interval(atom) is not None and \
                            any(isinstance(v, n.Var) and v.name in inner_vars for v in walk(analysis.expand(atom))):
                        return True
        return False

    def structural_if(self, s: n.If, in_sunk_loop: bool) -> bool:
        """A uniform if that contains sunk loops, or jumps of the sunk loop it is in."""
        if not self.uniform(s.cond):
            return False
        inner = s.then + s.orelse
        if any(id(x) in self.sunk for st in inner for x in walk(st)):
            return True
        return in_sunk_loop and jumps_out(inner, n.Break, n.Continue)

    def header_vars(self) -> set[str]:
        """Locals of the loop body read by the headers of sunk loops or by structural ifs."""
        out: set[str] = set()

        def see(s: n.Stmt, in_loop: bool) -> None:
            if id(s) in self.sunk:
                exprs = [s.start, s.stop, s.step] if isinstance(s, n.For) else [s.cond, *s.update]  # type: ignore[union-attr]
                out.update(x.name for e in exprs for x in walk_only(e, n.Var))
            elif isinstance(s, n.If) and self.structural_if(s, in_loop):
                out.update(x.name for x in walk_only(s.cond, n.Var))

        _Skeleton(self, see).visit_block(self.loop.body)
        # What a hoisted local is computed from is hoisted with it (``dy_1 = -2 + dy_i``: ``dy_i`` too).
        definitions = [x for x in walk_only(self.loop.body, n.Decl, n.Assign)]
        while True:
            more = {y.name for x in definitions if x.name in out
                    for y in walk((x.init if isinstance(x, n.Decl) else x.value) or n.Const(0, U32))
                    if isinstance(y, n.Var)} - out
            if not more:
                break
            out |= more
        return {v for v in out if v in self.declared and not self.is_sunk_loop_var(v)}

    def is_sunk_loop_var(self, name: str) -> bool:
        return any(isinstance(x, n.For) and x.var == name and id(x) in self.sunk for x in walk(self.loop))

    def hoisted_writes_ok(self) -> bool:
        """Hoisted locals are written only by statements that stay outside the loops over tx."""
        ok_writes: set[int] = set()

        def see(s: n.Stmt, in_loop: bool) -> None:
            if isinstance(s, (n.Decl, n.Assign)) and s.name in self.hoisted:
                ok_writes.add(id(s))
            elif isinstance(s, n.While) and id(s) in self.sunk:
                ok_writes.update(id(u) for u in s.update)

        _Skeleton(self, see).visit_block(self.loop.body)
        for x in walk(self.loop):
            if isinstance(x, (n.Decl, n.Assign)) and x.name in self.hoisted:
                value = x.init if isinstance(x, n.Decl) else x.value
                if id(x) not in ok_writes:
                    return False
                if value is not None and (not self.uniform(value) or any(isinstance(y, n.Load) for y in walk(value))):
                    return False
            elif isinstance(x, n.AtomicRMW) and x.dest in self.hoisted:
                return False
        return True


class _Nest(Visitor):
    """The loops of a loop body that satisfy ``take``, outer first, reached through tx-uniform
    ifs and loops taken only (a loop inside one that is not taken stays inside it)."""

    def __init__(self, plan: _Plan, take: Callable[[n.Stmt], bool]):
        self.plan = plan
        self.take = take
        self.found: list[n.Stmt] = []

    def visit_Stmt(self, s: n.Stmt) -> None:
        if isinstance(s, (n.For, n.While)) and self.take(s):
            self.found.append(s)
            self.visit_block(s.body)

    def visit_If(self, s: n.If) -> None:
        if self.plan.uniform(s.cond):
            self.visit_block(s.then)
            self.visit_block(s.orelse)


class _Skeleton(Visitor):
    """The statements of a loop body that stay outside the loops over tx (as ``sink_parts.SunkNest.tree``
    cuts it): ``see(s, in_loop)`` gets each statement of the body's top level, of the bodies of
    sunk loops (``in_loop``) and of the branches of structural ifs; other statements are not
    entered."""

    def __init__(self, plan: _Plan, see: Callable[[n.Stmt, bool], None]):
        self.plan = plan
        self.see = see
        self.in_loop = [False]

    def visit_Stmt(self, s: n.Stmt) -> None:
        self.see(s, self.in_loop[-1])

    def visit_For(self, s: n.For) -> None:
        self.loop(s)

    def visit_While(self, s: n.While) -> None:
        self.loop(s)

    def loop(self, s: n.For | n.While) -> None:
        self.see(s, self.in_loop[-1])
        if id(s) in self.plan.sunk:
            self.in_loop.append(True)
            self.visit_block(s.body)
            self.in_loop.pop()

    def visit_If(self, s: n.If) -> None:
        self.see(s, self.in_loop[-1])
        if self.plan.structural_if(s, self.in_loop[-1]):
            self.visit_block(s.then)
            self.visit_block(s.orelse)


def _thread_loops_in(body: tuple[n.Stmt, ...]) -> list[n.For]:
    """The loops over tx in ``body``, not inside another serial loop."""
    out: list[n.For] = []
    for s in body:
        if isinstance(s, n.For) and s.kind == "threads" and counter_dim(s.var) == 0:
            out.append(s)
        elif isinstance(s, n.For) and s.kind == "threads":
            out.extend(_thread_loops_in(s.body))
        elif isinstance(s, n.If):
            out.extend(_thread_loops_in(s.then) + _thread_loops_in(s.orelse))
    return out


def _const_value(e: n.Expr) -> int | None:
    return int(e.value) if isinstance(e, n.Const) and e.type.is_int else None



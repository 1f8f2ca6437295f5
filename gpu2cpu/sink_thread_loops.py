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
an atomic add, or a read down a column of a block array (``tile[tx][ty + j]``): unrolled, those
keep the loop over ``tx`` from vectorizing (sunk, an atomic add to one element the same for every
thread becomes a sum, ``gpu2cpu.sum_uniform_atomics``; a column read becomes a gather).
``report`` receives one ``LoweringDecision`` per loop changed.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Union

from polypy.analysis.loop_order import OrderChoice, barrier_order, choose_order
from gpu2cpu.normalize_grid_stride import normalize_strided_loops
from gpu2cpu.report import LoweringDecision
from gpu2cpu.thread_affine import (
    CounterAnalysis,
    Ranges,
    counter_dim,
    need_exprs,
    split_conjuncts,
)
from gpu2cpu.thread_loops import (
    CHEAP_CALLS,
    RECOMPUTE_LIMIT,
    ThreadLoopStep,
    copy_loop,
    let_definitions,
    order_sensitive,
    rewrite_cpu_body,
    stem_of,
    thread_loop,
)
from polypy.analysis.uniformity import thread_dependent_names
from polypy.ir import nodes as n
from polypy.ir.jumps import jumps_out
from polypy.ir.printer import format_expr
from polypy.ir.queries import conjunction, declared_names
from polypy.ir.rewrite import rename_locals
from polypy.ir.types import U32
from polypy.ir.visitor import Visitor, iter_children, substitute, walk, walk_block

# Loops with at most this many iterations (a constant) are left to the compiler to unroll.
SHORT_LOOP = 16


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
        if loop.ordered or order_sensitive(self.kernel, loop.body, rounding=False):
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
        out = plan.emit()
        if needs:
            checks = need_exprs(needs)
            fallback = copy_loop(loop, self.names)
            self.note(loop, f"thread loop over {loop.var}: run-time check {format_expr(conjunction(checks))} for the "
                            f"interchanged loops; the original loop runs otherwise")
            out = [n.If(conjunction(checks), tuple(out), (fallback,), loc=loop.loc)]
        return tuple(out)


# --------------------------------------------------------------------------- the plan


@dataclasses.dataclass
class _Piece:
    """A run of statements that becomes one loop over tx."""

    stmts: list[n.Stmt]
    loops: tuple[int, ...]  # ids of the sunk loops around it (for recomputation rules)


@dataclasses.dataclass
class _Structure:
    """A statement kept outside the loops over tx: a sunk loop, a uniform if, a jump, a hoisted write."""

    stmt: n.Stmt
    children: list[list[_Node]]  # sunk loop: [body] or [body, update]; if: [then, else]


_Node = Union[_Piece, _Structure]


class _Plan:
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
        self.written_buffers = {x.buffer for s in loop.body for x in walk(s) if isinstance(x, (n.Store, n.AtomicRMW))}
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
        """Whether every break/continue of the loop with this body is under tx-uniform ifs only."""
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
                   for x in walk_block(loop.body) if isinstance(x, (n.For, n.While)))

    def adds_atomically(self, loop: n.Stmt) -> bool:
        """Whether the loop holds atomic adds: unrolled inside the loop over tx they keep it from
        vectorizing (one read-modify-write per thread and iteration, colliding between threads);
        sunk, each runs in a loop over tx of its own, where one to an element the same for every
        thread becomes a sum (``sum_uniform_atomics``) and others touch an element per thread."""
        return any(isinstance(x, n.AtomicRMW) and x.op == "add" for x in walk(loop))

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
                out.update(x.name for e in exprs for x in walk(e) if isinstance(x, n.Var))
            elif isinstance(s, n.If) and self.structural_if(s, in_loop):
                out.update(x.name for x in walk(s.cond) if isinstance(x, n.Var))

        _Skeleton(self, see).visit_block(self.loop.body)
        # What a hoisted local is computed from is hoisted with it (``dy_1 = -2 + dy_i``: ``dy_i`` too).
        definitions = [x for x in walk_block(self.loop.body) if isinstance(x, (n.Decl, n.Assign))]
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

    # ------------------------------------------------------------------ building
    def tree(self, stmts: tuple[n.Stmt, ...], loops: tuple[int, ...], in_loop: bool) -> list[_Node]:
        out: list[_Node] = []
        run: list[n.Stmt] = []

        def flush() -> None:
            if run:
                out.append(_Piece(list(run), loops))
                run.clear()

        for s in stmts:
            if id(s) in self.sunk:
                flush()
                inner = loops + (id(s),)
                if isinstance(s, n.For):
                    out.append(_Structure(s, [self.tree(s.body, inner, True)]))
                else:
                    assert isinstance(s, n.While)
                    out.append(_Structure(s, [self.tree(s.body, inner, True), [_Structure(u, []) for u in s.update]]))
            elif isinstance(s, n.If) and self.structural_if(s, in_loop):
                flush()
                out.append(_Structure(s, [self.tree(s.then, loops, in_loop), self.tree(s.orelse, loops, in_loop)]))
            elif isinstance(s, (n.Break, n.Continue)) and in_loop or isinstance(s, (n.Decl, n.Assign)) and s.name in self.hoisted:
                flush()
                out.append(_Structure(s, []))
            else:
                run.append(s)
        flush()
        return out

    def emit(self) -> list[n.Stmt]:
        root = self.tree(self.loop.body, (), False)
        pieces: list[_Piece] = []
        _collect(root, pieces)
        self.classify(root, pieces)
        body = self.render(root)
        loops = [s for s in walk(self.loop) if id(s) in self.sunk]
        described = ", ".join(f"'{getattr(s, 'var', 'while')}'" for s in loops)
        expanded = ", ".join(f"'{v}'" for v in sorted(self.expanded))
        recomputed = ", ".join(f"'{v}'" for v in sorted(self.recomputed))
        message = f"thread loop over {self.t}: interchanged with the serial loop(s) {described}, {self.t} innermost " \
                  f"({len(pieces)} loop(s) over {self.t})"
        orders = [choice for loop, choice in self.orders.values() if id(loop) in self.sunk]
        if orders:
            message += "; " + "; ".join(f"{self.t} innermost in '{c.loop_var}': {c.reason()}" for c in orders)
        if self.hoisted:
            message += f"; {', '.join(repr(v) for v in sorted(self.hoisted))} computed once (the same in every thread)"
        if recomputed:
            message += f"; {recomputed} recomputed in each part"
        if expanded:
            message += f"; {expanded} kept per thread in " + ", ".join(
                f"{self.storage[v][0]}[...]" for v in sorted(self.expanded))
        self.sink.note(self.loop, message)
        if not self.full_range:  # hoisted code must not run when no thread does
            cond = n.Binary("lt", self.loop.start, self.loop.stop)
            return [n.If(cond, tuple(body), loc=self.loop.loc)]
        return body

    # -- locals across parts
    def classify(self, root: list[_Node], pieces: list[_Piece]) -> None:
        users: dict[str, set[int]] = {}
        for k, p in enumerate(pieces):
            for s in p.stmts:
                for x in walk(s):
                    name = _name_of(x)
                    if name is not None and name in self.declared and name not in self.hoisted:
                        users.setdefault(name, set()).add(k)
        decl_piece: dict[str, int] = {}
        for k, p in enumerate(pieces):
            for s in p.stmts:
                for x in walk(s):
                    if isinstance(x, n.Decl):
                        decl_piece.setdefault(x.name, k)
                    elif isinstance(x, n.For):
                        decl_piece.setdefault(x.var, k)
        types = {x.name: x.vtype for x in walk(self.loop) if isinstance(x, n.Decl)}
        self.types = types
        sunk_vars = {x.var for x in walk(self.loop) if isinstance(x, n.For) and id(x) in self.sunk}
        self.cross = {v for v, ks in users.items()
                      if (len(ks) > 1 or decl_piece.get(v) not in ks) and v not in sunk_vars}
        lets = self.stable_lets(pieces)

        def operands(v: str) -> set[str]:
            return {x.name for x in walk(lets[v]) if isinstance(x, n.Var) and (x.name in lets or x.name in self.cross)}

        def closure(roots: set[str]) -> set[str]:
            out, todo = set(), list(roots)
            while todo:
                v = todo.pop()
                if v not in out:
                    out.add(v)
                    todo.extend(operands(v) & set(lets))
            return out

        # A local that crosses parts and is a stable let is recomputed in each part that uses it,
        # and so are the stable lets it reads (they may be declared in one part only) ...
        recomputed = closure({v for v in lets if v in self.cross})
        # ... unless it reads a value kept per thread: then it is kept per thread too.
        changed = True
        while changed:
            changed = False
            for v in sorted(recomputed):
                if operands(v) - recomputed:
                    recomputed.discard(v)
                    changed = True
        recomputed = closure({v for v in recomputed if v in self.cross})
        # In definition order (``lets`` is in program order): each part declares them in this
        # order, operands first, the same on every run.
        self.recomputed = {v: e for v, e in lets.items() if v in recomputed}
        self.expanded = self.cross - set(self.recomputed)
        self.storage: dict[str, tuple[str, tuple[n.Expr, ...]]] = {}
        self.slot_stmts: set[int] = set()  # the slot's initial load and final store: not needed twice
        for v in sorted(self.expanded):
            self.storage[v] = self.slot_storage(v) or self.new_storage(v)

    def stable_lets(self, pieces: list[_Piece]) -> dict[str, n.Expr]:
        """Locals written once, at the top of a part, by a cheap expression of values that do not
        change while the loop runs (tx, names from outside, sunk loop variables, memory the loop
        does not write, other such locals)."""
        writes: dict[str, int] = {}
        for x in walk(self.loop):
            name = None
            if isinstance(x, n.Decl):
                name = x.name if x.init is not None else None
            elif isinstance(x, n.Assign):
                name = x.name
            elif isinstance(x, n.AtomicRMW):
                name = x.dest
            elif isinstance(x, n.For) and x is not self.loop:
                name = x.var
            if name is not None:
                writes[name] = writes.get(name, 0) + 1
        sunk_vars = {x.var for x in walk(self.loop) if isinstance(x, n.For) and id(x) in self.sunk}
        out: dict[str, n.Expr] = {}
        for p in pieces:
            for s in p.stmts:
                if not (isinstance(s, n.Decl) and s.init is not None and writes.get(s.name) == 1):
                    continue
                if self.thread_cost(s.init) > RECOMPUTE_LIMIT:
                    continue
                ok = True
                for x in walk(s.init):
                    if isinstance(x, n.Var):
                        if not (x.name == self.t or x.name not in self.declared or x.name in out
                                or x.name in sunk_vars):
                            ok = False
                    elif isinstance(x, n.Load) and x.buffer in self.written_buffers or isinstance(x, n.Call) and x.fn not in CHEAP_CALLS or isinstance(x, n.Binary) and x.op in ("div", "rem") and not isinstance(x.b, n.Const):
                        ok = False
                if ok:
                    out[s.name] = s.init
        return out

    def thread_cost(self, e: n.Expr) -> int:
        """What recomputing ``e`` in every part costs: its distinct subexpressions that vary with
        the thread (the compiler computes a repeated one once), an invariant one counting as one
        node (the compiler computes it once, outside the thread loop)."""
        seen: set[n.Expr] = set()

        def cost(x: n.Expr) -> int:
            if x in seen:
                return 0
            seen.add(x)
            if not any(isinstance(y, n.Var) and (y.name == self.t or y.name in self.declared) for y in walk(x)):
                return 1
            return 1 + sum(cost(c) for c in iter_children(x) if isinstance(c, n.Expr))

        return cost(e)

    def slot_storage(self, v: str) -> tuple[str, tuple[n.Expr, ...]] | None:
        """``v`` starts as this thread's slot of a per-thread buffer and goes back there at the end,
        the buffer being used for nothing else here: that slot holds ``v`` between the parts."""
        body = self.loop.body
        decl = next((s for s in body if isinstance(s, n.Decl) and s.name == v), None)
        if decl is None or not isinstance(decl.init, n.Load):
            return None
        load = decl.init
        if self.kernel.space(load.buffer) != "local" or len(load.index) != 3:
            return None
        counters = [e.var for e in self.sink.enclosing[-2:]]
        if [i for i in load.index] != [n.Var(c, U32) for c in counters] + [n.Var(self.t, U32)]:
            return None
        store_ok = False
        stores: list[n.Stmt] = []
        for x in walk(self.loop):
            if x is load:
                continue
            if isinstance(x, n.Load) and x.buffer == load.buffer:
                return None
            if isinstance(x, (n.Store, n.AtomicRMW)) and x.buffer == load.buffer:
                if not (isinstance(x, n.Store) and x.index == load.index and x.value == n.Var(v, decl.vtype)
                        and x in body):
                    return None
                later = body[body.index(x) + 1:]
                if any(isinstance(y, (n.Assign, n.Decl)) and y.name == v for s in later for y in walk(s)):
                    return None
                store_ok = True
                stores.append(x)
        if not store_ok:
            return None
        self.slot_stmts.update(id(x) for x in stores)
        self.slot_stmts.add(id(decl))
        return load.buffer, load.index

    def new_storage(self, v: str) -> tuple[str, tuple[n.Expr, ...]]:
        name = self.sink.names.fresh(f"{v}_x")
        self.sink.buffers.append(n.Buffer(name, self.types[v], (n.BlockDim(0),), "local", loc=self.loop.loc))
        return name, (n.Var(self.t, U32),)

    # -- rendering
    def render(self, nodes: list[_Node]) -> list[n.Stmt]:
        out: list[n.Stmt] = []
        for node in nodes:
            if isinstance(node, _Piece):
                loop = self.piece(node)
                if loop is not None:
                    out.append(loop)
                continue
            s = node.stmt
            if isinstance(s, n.For) and id(s) in self.sunk:
                out.append(dataclasses.replace(s, body=tuple(self.render(node.children[0]))))
            elif isinstance(s, n.While):
                out.append(dataclasses.replace(s, body=tuple(self.render(node.children[0])),
                                               update=tuple(self.render(node.children[1]))))
            elif isinstance(s, n.If):
                out.append(dataclasses.replace(s, then=tuple(self.render(node.children[0])),
                                               orelse=tuple(self.render(node.children[1]))))
            else:
                out.append(s)
        return out

    def piece(self, p: _Piece) -> n.Stmt | None:
        """The loop over tx of one part (None when nothing is left to run in it)."""
        names = self.sink.names
        counter = names.fresh("tx")
        # The final store of a value kept in its own slot writes what the slot already holds.
        stmts = tuple(s for s in p.stmts if not (isinstance(s, n.Store) and id(s) in self.slot_stmts))
        if not stmts:
            return None
        mentioned = {x for s in stmts for x in _names(s)}
        declared_here = declared_names(stmts)
        mapping = {self.t: counter}
        prologue: list[n.Stmt] = []
        epilogue: list[n.Stmt] = []
        # Recomputed values, in definition order (operands first).
        needed = {v for v in self.recomputed if v in mentioned and v not in declared_here}
        closure = set(needed)
        while True:
            more = {x.name for v in closure for x in walk(self.recomputed[v])
                    if isinstance(x, n.Var) and x.name in self.recomputed} - closure
            if not more:
                break
            closure |= more
        for v in self.recomputed:
            if v in closure:
                local = names.fresh(stem_of(v))
                mapping[v] = local
                prologue.append(n.Decl(local, self.types[v], self.recomputed[v], loc=self.loop.loc))
        for v in sorted(self.expanded & mentioned):
            buf, index = self.storage[v]
            ty = self.types[v]
            if v not in declared_here:
                local = names.fresh(stem_of(v))
                mapping[v] = local
                read_first, certainly_written = _first_access(stmts, v)
                # Loaded when the part may read it first, or may store it back without having
                # written it (a write under an if: the other threads' paths keep the old value).
                stored_back = _writes(stmts, v, skip=self.slot_stmts)
                init = n.Load(buf, index, ty) if read_first or (stored_back and not certainly_written) else None
                prologue.append(n.Decl(local, ty, init, loc=self.loop.loc))
            if _writes(stmts, v, skip=self.slot_stmts):
                epilogue.append(n.Store(buf, index, n.Var(v, ty), loc=self.loop.loc))
        if (prologue or epilogue) and len(stmts) == 1 and isinstance(stmts[0], n.If) and not stmts[0].orelse \
                and not (_names_of_expr(stmts[0].cond) & (self.expanded | set(self.recomputed))):
            # A guarded part: move the copies in and out under the guard (threads that skip it
            # change nothing, and the guard can become the loop's bounds).
            guard = stmts[0]
            body = (dataclasses.replace(guard, then=tuple(prologue) + guard.then + tuple(epilogue)),)
        else:
            body = tuple(prologue) + stmts + tuple(epilogue)
        # Locals declared in this part keep their names; the others' copies get fresh ones.
        body = rename_locals(body, mapping)
        return thread_loop(counter, self.loop.start, self.loop.stop, body, self.loop.loc)


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
    """The statements of a loop body that stay outside the loops over tx (as ``_Plan.tree``
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


def _collect(nodes: list[_Node], out: list[_Piece]) -> None:
    for node in nodes:
        if isinstance(node, _Piece):
            out.append(node)
        else:
            for child in node.children:
                _collect(child, out)


def _name_of(x: n.Node) -> str | None:
    if isinstance(x, n.Var):
        return x.name
    if isinstance(x, (n.Decl, n.Assign)):
        return x.name
    if isinstance(x, n.AtomicRMW):
        return x.dest
    return None


def _names_of_expr(e: n.Expr) -> set[str]:
    return {x.name for x in walk(e) if isinstance(x, n.Var)}


def _names(s: n.Stmt) -> set[str]:
    return {name for x in walk(s) if (name := _name_of(x)) is not None}


def _writes(stmts: tuple[n.Stmt, ...], v: str, skip: set[int] = frozenset()) -> bool:  # type: ignore[assignment]
    for s in stmts:
        for x in walk(s):
            if isinstance(x, (n.Decl, n.Assign)) and x.name == v and id(x) not in skip:
                return True
            if isinstance(x, n.AtomicRMW) and x.dest == v:
                return True
    return False


def _first_access(stmts: tuple[n.Stmt, ...], v: str) -> tuple[bool, bool]:
    """Whether ``v`` may be read in ``stmts`` before it is certainly written, and whether
    ``stmts`` certainly write it (on every path, before any read)."""
    def reads(node: n.Node | None) -> bool:
        return node is not None and any(isinstance(x, n.Var) and x.name == v for x in walk(node))

    def seq(ss: tuple[n.Stmt, ...]) -> tuple[bool, bool]:  # (read first, certainly written)
        for s in ss:
            if isinstance(s, n.Decl):
                if reads(s.init):
                    return True, False
                if s.name == v and s.init is not None:
                    return False, True
            elif isinstance(s, n.Assign):
                if reads(s.value):
                    return True, False
                if s.name == v:
                    return False, True
            elif isinstance(s, n.If):
                if reads(s.cond):
                    return True, False
                r1, w1 = seq(s.then)
                r2, w2 = seq(s.orelse)
                if r1 or r2:
                    return True, False
                if w1 and w2:
                    return False, True
            elif isinstance(s, (n.For, n.While)):
                if reads(s):
                    return True, False
            elif reads(s):
                return True, False
        return False, False

    return seq(stmts)

"""sum_uniform_atomics: atomic adds of every thread to one element become a sum in a register.

Requires: a CPU-form kernel. Guarantees: the same sum, added in another order (see below);
afterwards an innermost thread loop holds no atomic add to an element that is the same for all
of its threads.

A gradient adds each thread's contribution to a weight's adjoint with an atomic: after the loop
over ``k`` is interchanged with the loop over threads (``sink_thread_loops``), the loop over
``tx`` adds to ``win_w[k]`` once per thread. Through memory that is a loop-carried dependence
(and, on a CPU, one read-modify-write per thread); the loop does not vectorize. Here, per
innermost loop over threads::

    for threads tx {                             var win_w_sum: f32 = 0.0f
      ...                                        for threads tx {
      atomic.add win_w[k], d * t[tx]     ==>       ...
      ...                                          win_w_sum = win_w_sum + d * t[tx]
    }                                            }
                                                 atomic.add win_w[k], win_w_sum

for every ``atomic.add`` with unused old value whose index the loop does not change (built from
values declared outside it and not assigned in it, no loads) on a buffer that the loop, through it
or any buffer that may share its storage (``polypy.poly.alias``: two pointer parameters may),
writes in no other way (no store, no other operation) and reads only before the add in each
thread's order (vecnorm's gradient reads ``in[j]`` and adds to ``d_in[j]``: every thread reading
first and adding afterwards is an order the GPU may pick). Atomics under ifs are summed under the
same ifs; atomics inside serial loops nested in the thread loop are left alone.

Order: CUDA gives atomics of different threads no order, so the sum may be formed in any order;
``Kernel.order_free_sums`` names the new locals, and the backends let the compiler reassociate
their additions (``#pragma omp simd reduction(+:...)`` in C, ``reassoc`` on the LLVM ``fadd``),
which is what lets the loop vectorize. Integer sums are exact in any order; float sums round
differently from the emulator's thread order, as they would on a GPU. ``report`` receives one
``LoweringDecision`` per loop changed.
"""
from __future__ import annotations

import dataclasses

from polypy.ir import nodes as n
from polypy.ir.queries import declared_names, written_names
from polypy.ir.visitor import Mutator, substitute, walk, walk_block, walk_only
from polypy.passes.fold_constants import fold_expr
from polypy.poly.alias import alias_kind

from gpu2cpu.report import LoweringDecision
from gpu2cpu.thread_loops import ThreadLoopStep, rewrite_cpu_body


def sum_uniform_atomics(kernel: n.Kernel, *, report: list[LoweringDecision] | None = None) -> n.Kernel:
    """Sum uniform atomic adds of innermost thread loops in registers; see the module docstring."""
    return rewrite_cpu_body(kernel, _Sum, what="sum_uniform_atomics", report=report)


class _Sum(ThreadLoopStep):
    def __init__(self, kernel: n.Kernel):
        super().__init__(kernel)
        self.sums: list[str] = []

    def kernel_fields(self) -> dict:
        return {"order_free_sums": self.kernel.order_free_sums + tuple(self.sums)}

    def visit_Expr(self, e: n.Expr) -> n.Expr:
        return e

    def visit_For(self, s: n.For) -> n.Stmt | tuple[n.Stmt, ...]:
        s = self.generic_visit(s)
        if s.kind != "threads" or any(x.kind == "threads" for x in walk_only(s.body, n.For)) \
                or single_iteration(s):
            return s
        return self.loop(s)

    def loop(self, s: n.For) -> n.Stmt | tuple[n.Stmt, ...]:
        changed = declared_names(s.body) | written_names(s.body) | {s.var}
        # Not summed: adds to a buffer that may share storage (pointer parameters may point into
        # each other) with one the loop writes otherwise, or reads after an add to it in a thread's
        # order -- the thread would no longer see its own adds there. Reads before the adds are
        # fine: every thread reading first and adding afterwards is an order the GPU may pick.
        written = {x.buffer for x in walk_only(s.body, n.Store, n.AtomicRMW)
                   if isinstance(x, n.Store) or x.op != "add" or x.dest}
        adds = {x.buffer for x in walk_only(s.body, n.AtomicRMW)}
        other = {b for b in adds if any(alias_kind(self.kernel, b, t) is not None for t in written)}
        other |= {b for b in adds - other if self._read_after_add(s.body, b)}
        found: dict[tuple[str, tuple[n.Expr, ...]], str] = {}
        # Locals the loop declares at its top level from values it does not change, never assigned
        # (``var k_1: i32 = -3 + k_i``, recomputed in each part by the interchange): their values.
        lets: dict[n.Expr, n.Expr] = {}
        assigned = written_names(s.body)
        for st in s.body:
            if isinstance(st, n.Decl) and st.init is not None and st.name not in assigned:
                init = substitute(st.init, lets)
                if invariant(init, changed):
                    lets[n.Var(st.name, st.vtype)] = init

        def uniform(index: tuple[n.Expr, ...]) -> tuple[n.Expr, ...] | None:
            index = tuple(substitute(i, lets) for i in index)
            return index if all(invariant(i, changed) for i in index) else None

        rewrite = _SumAdds(self, other, uniform, n.Var(s.var, s.vtype), found)
        body = rewrite.visit_block(s.body)
        if not found:
            return s
        before: list[n.Stmt] = []
        after: list[n.Stmt] = []
        for (buffer, index), name in found.items():
            ty = self.kernel.elem_type(buffer)
            before.append(n.Decl(name, ty, n.Const(0, ty), loc=s.loc))
            after.append(n.AtomicRMW("add", buffer, index, n.Var(name, ty), loc=s.loc))
            self.sums.append(name)
        where = ", ".join(sorted({b for b, _ in found}))
        self.note(s, f"thread loop over {s.var}: atomic adds to one element of {where} summed in registers, "
                     f"one add after the loop")
        return (*before, dataclasses.replace(s, body=body), *after)

    def _read_after_add(self, body: tuple[n.Stmt, ...], buffer: str) -> bool:
        return _read_after_add_in(body, buffer, self.kernel)


class _SumAdds(Mutator):
    """The statements of a thread loop's body with each atomic add to an element the same for
    every thread (``uniform``) made an addition to a local, named in ``found``. Only the body's
    top level and the branches of its ``if`` s are rewritten: not ``if`` s that one thread runs
    (a sum over the loop would only cost), not nested loops (their adds run a number of times
    per thread the sum after the loop would not repeat)."""

    def __init__(self, step: _Sum, other: set[str], uniform, counter: n.Var,
                 found: dict[tuple[str, tuple[n.Expr, ...]], str]):
        self.step = step
        self.other = other
        self.uniform = uniform
        self.counter = counter
        self.found = found

    def visit_Expr(self, e: n.Expr) -> n.Expr:
        return e

    def visit_Stmt(self, s: n.Stmt) -> n.Stmt:
        return s

    def visit_If(self, s: n.If) -> n.Stmt:
        if one_thread(s.cond, self.counter):
            return s  # one thread adds (``if (tx == 0)``): a sum over the loop would only cost
        return self.generic_visit(s)

    def visit_AtomicRMW(self, st: n.AtomicRMW) -> n.Stmt:
        kernel = self.step.kernel
        if not (st.op == "add" and st.dest is None and st.buffer not in self.other
                and kernel.space(st.buffer) != "local" and (index := self.uniform(st.index)) is not None):
            return st
        key = (st.buffer, index)
        if key not in self.found:
            self.found[key] = self.step.names.fresh(f"{st.buffer}_sum")
        name = self.found[key]
        ty = kernel.elem_type(st.buffer)
        return n.Assign(name, n.Binary("add", n.Var(name, ty), st.value), loc=st.loc)


def _read_after_add_in(body: tuple[n.Stmt, ...], buffer: str, kernel: n.Kernel) -> bool:
    """Whether a load that may read ``buffer``'s storage follows (in program order, outside the
    add's own operands) an atomic add to ``buffer`` in ``body``."""
    order = list(walk_block(body))
    for k, x in enumerate(order):
        if isinstance(x, n.AtomicRMW) and x.buffer == buffer:
            own = {id(y) for y in walk(x)}
            return any(isinstance(y, n.Load) and id(y) not in own and alias_kind(kernel, buffer, y.buffer) is not None
                       for y in order[k + 1:])
    return False


def single_iteration(loop: n.For) -> bool:
    """The loop runs at most once (``for tx = 0 to 1``, what a guard ``tx == 0`` leaves): nothing to sum."""
    start, stop = fold_expr(loop.start), fold_expr(loop.stop)
    return isinstance(start, n.Const) and isinstance(stop, n.Const) and stop.value - start.value <= 1


def one_thread(cond: n.Expr, counter: n.Var) -> bool:
    """``cond`` holds for one value of the counter at most (a conjunct ``tx == e``)."""
    if isinstance(cond, n.Binary) and cond.op == "land":
        return one_thread(cond.a, counter) or one_thread(cond.b, counter)
    return isinstance(cond, n.Binary) and cond.op == "eq" and counter in (cond.a, cond.b)


def invariant(e: n.Expr, changed: set[str]) -> bool:
    """``e`` has the same value in every iteration of a loop that changes the locals ``changed``
    (and no loads: the loop may store to memory)."""
    return not any(isinstance(y, n.Load) or (isinstance(y, n.Var) and y.name in changed) for y in walk(e))

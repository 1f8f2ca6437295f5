"""fuse_thread_loops: adjacent thread-loop nests become one when no thread needs another's results,
or needs only those of threads before it (or only after it) in the loop's order.

Requires: a CPU-form kernel as ``serialize_threads`` builds it (nests ``for tz { for ty { for tx
{...} } }`` over the whole block). Guarantees: the same results, fewer thread loops.

The lowering cuts a kernel into one nest per barrier interval, and also at warp operations and
block-level statements; after barrier elimination and forwarding some neighbouring nests no
longer depend on each other. Two adjacent nests ``N1; N2`` can run as one, ``for t { N1(t);
N2(t) }``, iff no access of ``N2`` by one thread conflicts (same storage, one of them a write)
with an access of ``N1`` by another thread: exactly the question "is a barrier between them
needed?", which ``polypy.poly.BarrierAnalysis`` answers with isl. The pass asks it about a
GPU-form kernel made of the two bodies with a barrier between (counters back to ``threadIdx``,
per-thread buffers as shared arrays so that reads of other threads' slots count, block-level
values as parameters, every thread dimension in use)::

    for threads t { warp_sums[t / 32] = v (t % 32 == 0) }      for threads t {
    for threads t { active[t] = t / 32 == 0 }             ==>    warp_sums[...] = ...; active[t] = ...
                                                               }

**In an order of the threads.** Where threads do conflict across the barrier, the nests may
still run as one if every conflicting pair has the thread of ``N1`` before the thread of ``N2``
in the loop's order ``(tz, ty, tx)`` (``"ascending"``), or always after it (``"descending"``:
the fused nest counts every dimension backwards, ``tx`` standing for ``blockDim.x - 1 - tx``);
``BarrierAnalysis.crossing_order`` decides it with isl. Running thread by thread in that order
puts each such access of ``N1`` before the access of ``N2`` it conflicts with, as the barrier
did. A scan step (``t = s[tid - offset]; barrier; s[tid] += t``) reads what a later thread
writes: descending, one loop instead of two and no per-thread buffer::

    for threads t { v[t] = t >= o ? s[t - o] : 0 }         for threads(ordered) r {   (t = bdx-1-r)
    for threads t { s[t] = s[t] + v[t] }            ==>      s[t] = s[t] + (t >= o ? s[t - o] : 0)
                                                           }

The fused loop is ``ordered`` (``polypy.ir.nodes.For``): later passes keep its iterations in
order (no fission, interchange or ``omp simd``; ranges split in order). Not for nests with
atomics, nor twice on one nest, nor -- over more than one thread dimension -- where the second
nest reads what every thread of the first writes: run one by one, the fused loop's inner loop
no longer vectorizes, where the two nests' inner loops do (Rodinia srad_v2's ``srad_cuda_2``,
whose second nest reads the south and east neighbours' shared values: fused in descending order
it took 315 perf samples, as two nests 257). What one thread of each row stages for its row
(``if (tx == 0) node[ty] = ...``) still fuses: that statement then runs before a loop over the
row whose iterations are disjoint, and that loop vectorizes. Nor in descending order where the
second nest runs only for one thread of each row (each of its statements under ``tx == c``:
Rodinia b+tree's ``if (thid == 0) currKnodeD[bid] = offsetD[bid]`` after each level's search):
fused, every thread would run backwards, one by one, for one statement; apart, the first loop
keeps its threads in any order and the second shrinks to that thread (findRangeK, one thread:
18.2 -> 15.7 ms, the OpenMP loop 17.1).

Where the order holds only for blocks one thread wide in the dimensions the bodies do not use
(their threads would race otherwise) and for the integers the bodies take from around them at
least 1 (a scan's ``offset``, which the model does not bound), the fused nest runs under that
run-time test, the two nests as they were otherwise (a
specialized block shape and an unrolled loop fold it away); its per-thread buffer stores that
only passed values to the second nest are dropped.

After fusion a value stored to this thread's slot of a per-thread buffer by the first body and
loaded back by the second is forwarded; a buffer nobody loads any more is removed. Not done when
both loops have atomics whose order between threads matters
(``gpu2cpu.thread_loops.order_sensitive``). ``report`` receives one ``LoweringDecision`` per
fusion. Measured (bench/, prefix_scan, C backend, one harness): 5.15 -> 4.1 ms per 2^24-element
scan in blocks of 512, against 3.8 ms for the OpenMP port.
"""
from __future__ import annotations

import dataclasses

from gpu2cpu.names import NameSupply
from gpu2cpu.report import LoweringDecision
from gpu2cpu.thread_loops import freshen, order_sensitive
from polypy.errors import InternalError
from polypy.ir import nodes as n
from polypy.ir.queries import conjunction, conjuncts, declared_names
from polypy.ir.rewrite import rename_locals
from polypy.ir.printer import format_expr
from polypy.ir.types import U32, ScalarType
from polypy.ir.visitor import Mutator, iter_children, substitute, walk
from polypy.poly import MODEL_ERRORS, BarrierAnalysis


def fuse_thread_loops(kernel: n.Kernel, *, report: list[LoweringDecision] | None = None) -> n.Kernel:
    """Fuse adjacent independent thread-loop nests; see the module docstring."""
    if kernel.stage != "cpu":
        raise InternalError("fuse_thread_loops expects a CPU-form kernel", kernel.loc)
    f = _Fuse(kernel)
    body = f.visit_block(kernel.body)
    if report is not None:
        report.extend(f.decisions)
    if body is kernel.body:
        return kernel
    out = dataclasses.replace(kernel, body=body)
    return _drop_unread_buffers(out, f.forwarded)


def nest_counters(s: n.Stmt) -> tuple[n.For, n.For, n.For] | None:
    """``(z, y, x)`` loops of a whole-block thread-loop nest as the lowering builds it."""
    loops = []
    cur = s
    for dim in (2, 1, 0):
        if not (isinstance(cur, n.For) and cur.kind == "threads" and cur.start == n.Const(0, U32)
                and cur.stop == n.BlockDim(dim) and cur.step == n.Const(1, U32)):
            return None
        loops.append(cur)
        if dim:
            if len(cur.body) != 1:
                return None
            cur = cur.body[0]
    return loops[0], loops[1], loops[2]


class _Fuse(Mutator):
    """Fuses in every statement list outside the thread loops (block-level code)."""

    def __init__(self, kernel: n.Kernel):
        self.kernel = kernel
        self.names = NameSupply(kernel)
        self.decisions: list[LoweringDecision] = []
        self.forwarded: set[str] = set()

    def visit_Expr(self, e: n.Expr) -> n.Expr:
        return e

    def visit_For(self, s: n.For) -> n.Stmt:
        return s if s.kind == "threads" else self.generic_visit(s)  # nests are fused whole

    def visit_block(self, stmts: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        out: list[n.Stmt] = []
        changed = False
        for s in stmts:
            new = self.visit(s)
            changed = changed or new is not s
            if out and nest_counters(out[-1]) is not None and nest_counters(new) is not None:
                fused = self.fuse(out[-1], new)
                if fused is not None:
                    out[-1] = fused
                    changed = True
                    continue
            out.append(new)
        return tuple(out) if changed else stmts

    def fuse(self, first: n.Stmt, second: n.Stmt) -> n.Stmt | None:
        a, b = nest_counters(first), nest_counters(second)
        assert a is not None and b is not None
        body1, body2 = a[2].body, b[2].body
        # Fusion keeps the order of each loop's own statements across threads; it interleaves the
        # two loops' atomics, which matters only if both have some and their order does.
        if _has_atomics(body1) and _has_atomics(body2) and order_sensitive(self.kernel, body1 + body2):
            return None
        # An order of the threads only for nests without atomics, neither fused in an order before.
        in_order = not (a[2].ordered or b[2].ordered or _has_atomics(body1) or _has_atomics(body2))
        order, assumed = self.crossing_order(a, b, in_order=in_order)
        if order is None or (order != "any" and not in_order):
            return None
        rename = {b[d].var: a[d].var for d in range(3)}
        renamed = rename_locals(body2, rename)
        if order != "any":
            used = [k for k in range(3) if _uses_counters(body1 + body2, {a[k].var, b[k].var}, self.kernel)]
            if len(used) > 1 and not _staged_by_one_x_thread(body1, renamed, a[2].var):
                # An ordered nest runs its threads one by one: over rows of threads its inner
                # loop would no longer vectorize, where the two nests' inner loops can.
                return self._not_fused(first, second, f"they could run as one only with the threads in {order} "
                                       f"order, one by one, over more than one thread dimension, and the second "
                                       f"reads what every thread of the first writes (the loops as they are "
                                       f"vectorize along x)")
        if order == "descending" and _one_x_thread(renamed, a[2].var):
            # Fused, every thread would run backwards for the sake of one statement that runs once
            # per row: as two loops, the first runs its threads in any order (ascending, vectorizable).
            return self._not_fused(first, second, f"they could run as one only with the threads in descending "
                                   f"order, and the second runs only for one thread of each row (its statements "
                                   f"under a test of {a[2].var} against a constant): the first loop keeps its "
                                   f"threads in any order")
        body = body1 + renamed
        counters = tuple(n.Var(a[d].var, U32) for d in range(3))  # z, y, x
        slot: tuple[n.Expr, ...] = counters
        if order == "descending":
            # Threads from the last to the first: each counter runs over the block backwards.
            slot = tuple(n.Binary("sub", n.Binary("sub", n.BlockDim(2 - d), n.Const(1, U32)), counters[d])
                         for d in range(3))
            body = substitute(body, dict(zip(counters, slot)))
        body, forwarded = _forward_slots(body, slot, self.kernel)
        self.forwarded |= forwarded
        if assumed:
            body = _drop_passed_values(body, forwarded, first, second, self.kernel)
        ordered = order != "any" or a[2].ordered or b[2].ordered
        x = dataclasses.replace(a[2], body=body, ordered=ordered)
        y = dataclasses.replace(a[1], body=(x,), ordered=ordered)
        lines = [str(s.loc.line) for s in (first, second) if s.loc is not None]
        where = f" at lines {' and '.join(lines)}" if len(lines) == 2 else ""
        if order == "any":
            message = f"thread loops{where} fused: no thread of the block touches what another thread wrote in " \
                      f"the other loop (isl)"
        else:
            message = f"thread loops{where} fused, threads in {order} order: a thread of the second loop reads or " \
                      f"writes only what threads {'before' if order == 'ascending' else 'after'} it (or itself) " \
                      f"touched in the first (isl); the loop runs its threads in that order"
        if forwarded:
            message += f"; per-thread values passed through {', '.join(sorted(forwarded))} directly"
        fused = dataclasses.replace(a[0], body=(y,), ordered=ordered)
        if not assumed:
            self.decisions.append(LoweringDecision(self.kernel.name, first.loc, message))
            return fused
        test = conjunction(list(assumed))
        message += f", where {format_expr(test)} (tested at run time; the loops as they were run otherwise)"
        self.decisions.append(LoweringDecision(self.kernel.name, first.loc, message))
        # The fused nest next to the loops as they were: fresh names.
        return n.If(test, freshen((fused,), self.names), (first, second), loc=first.loc)

    def _not_fused(self, first: n.Stmt, second: n.Stmt, why: str) -> None:
        """No fusion of ``first`` and ``second``, and ``why`` in the report."""
        lines = [str(s.loc.line) for s in (first, second) if s.loc is not None]
        where = f" at lines {' and '.join(lines)}" if len(lines) == 2 else ""
        self.decisions.append(LoweringDecision(self.kernel.name, first.loc, f"thread loops{where} not fused: {why}"))
        return None

    def crossing_order(self, a: tuple[n.For, n.For, n.For], b: tuple[n.For, n.For, n.For], *, in_order: bool = True
                       ) -> tuple[str | None, tuple[n.Expr, ...]]:
        """In which order of the threads the two bodies may run as one loop (isl, exact; see
        ``BarrierAnalysis.crossing_order``): ``"any"`` when a barrier between them would order
        nothing, ``"ascending"``/``"descending"``, or None; with the conditions that order
        assumes (empty: none).

        Where the bodies use only ``tx``, an order that holds for every block shape and value
        may still hold for one row of threads (``blockDim.y == blockDim.z == 1``) and the
        integers the bodies take from around them at least 1 (a scan's ``offset``, the loop
        variable of ``for (offset = 1; offset < blockDim.x; offset *= 2)``, which the model
        does not bound): then those are the conditions. Without ``in_order``, only ``"any"`` or
        None (the nests cannot run in an order: no second question)."""
        fake = _as_gpu_kernel(self.kernel, a, b)
        if fake is None:
            return None, ()
        order = _thread_order(fake)
        if order is not None or not in_order:
            return order, ()
        # The dimensions (z, y: nests are (z, y, x)) whose counters the bodies do not use.
        flat = [2 - k for k in (0, 1) if not _uses_counters(a[2].body + b[2].body, {a[k].var, b[k].var}, self.kernel)]
        if not flat:
            return None, ()
        taken = {p.name for p in self.kernel.params}
        around = [p for p in fake.params if p.name not in taken and isinstance(p.ptype, ScalarType) and p.ptype.is_int]
        positive = [n.Binary("ge", n.Var(p.name, p.ptype), n.Const(1, p.ptype)) for p in around]
        # Those dimensions one thread wide: their threadIdx 0, their blockDim 1 (and without the
        # declaration that puts every thread dimension in use).
        one = {n.ThreadIdx(d): n.Const(0, U32) for d in flat} | {n.BlockDim(d): n.Const(1, U32) for d in flat}
        body = substitute(fake.body[1:], one)
        narrow = dataclasses.replace(fake, buffers=tuple(substitute(x, one) for x in fake.buffers),
                                     body=(n.If(conjunction(positive), body),) if positive else body)
        order = _thread_order(narrow)
        if order not in ("ascending", "descending"):
            return None, ()
        return order, (*(n.Binary("eq", n.BlockDim(d), n.Const(1, U32)) for d in sorted(flat)), *positive)


def _fixes_x(cond: n.Expr, x: str) -> bool:
    """Whether one of ``cond``'s conjuncts is ``x == c`` (casts aside) for a constant ``c``."""
    for c in conjuncts(cond):
        if isinstance(c, n.Binary) and c.op == "eq":
            sides = [c.a, c.b]
            while any(isinstance(e, n.Cast) for e in sides):
                sides = [e.x if isinstance(e, n.Cast) else e for e in sides]
            if any(isinstance(e, n.Var) and e.name == x for e in sides) and \
                    any(isinstance(e, n.Const) for e in sides):
                return True
    return False


def _one_x_thread(body: tuple[n.Stmt, ...], x: str) -> bool:
    """Whether every statement of ``body`` is an ``if`` without ``else`` whose test fixes the
    counter ``x`` to a constant: only one thread of each row runs any of it (Rodinia b+tree's
    ``if (thid == 0) currKnodeD[bid] = offsetD[bid]``)."""
    return bool(body) and all(isinstance(s, n.If) and not s.orelse and _fixes_x(s.cond, x) for s in body)


def _staged_by_one_x_thread(body1: tuple[n.Stmt, ...], body2: tuple[n.Stmt, ...], x: str) -> bool:
    """Whether every store of ``body1`` to an element ``body2`` may read at another index (the
    bodies over the same counters) sits under a test ``x == c``: one thread of each row stages a
    value for its row (Rodinia backprop's ``if (tx == 0) input_node[ty] = ...``), where the
    other stores only pass each thread its own slot. Fused, that thread's statement runs before
    a loop whose iterations are disjoint, and which vectorizes although it is ordered
    (``codegen.lanes``)."""
    reads: dict[str, list[tuple[n.Expr, ...]]] = {}
    for s in body2:
        for x_ in walk(s):
            if isinstance(x_, n.Load):
                reads.setdefault(x_.buffer, []).append(x_.index)

    def crossing(st: n.Store | n.AtomicRMW) -> bool:
        return any(index != st.index for index in reads.get(st.buffer, ()))

    def fixes_x(cond: n.Expr) -> bool:
        return _fixes_x(cond, x)

    # A recursion, not a Visitor: whether a store is guarded depends on the conditions of the
    # ifs above it, passed down as ``guarded``, and the answer stops at the first failure.
    def staged(stmts: tuple[n.Stmt, ...], guarded: bool) -> bool:
        for st in stmts:
            if isinstance(st, n.If):
                if not (staged(st.then, guarded or fixes_x(st.cond)) and staged(st.orelse, guarded)):
                    return False
            elif isinstance(st, (n.Store, n.AtomicRMW)):
                if crossing(st) and not guarded:
                    return False
            elif any(isinstance(y, (n.Store, n.AtomicRMW)) and crossing(y) for y in walk(st)):
                return False  # a store under another statement (a loop): not followed
        return True

    return staged(body1, False)


def _uses_counters(stmts: tuple[n.Stmt, ...], counters: set[str], kernel: n.Kernel) -> bool:
    """Whether ``stmts`` use one of ``counters`` other than to pick their thread's slot of a
    per-thread buffer."""
    def uses(node: n.Node) -> bool:
        if isinstance(node, n.Var):
            return node.name in counters
        if isinstance(node, (n.Load, n.Store)) and kernel.space(node.buffer) == "local":
            rest = (node.value,) if isinstance(node, n.Store) else ()
            return any(uses(x) for x in rest)
        return any(uses(c) for c in iter_children(node))
    return any(uses(s) for s in stmts)


def _thread_order(fake: n.Kernel) -> str | None:
    """``BarrierAnalysis.crossing_order`` of the fake kernel's one barrier; None where the
    model cannot be built (``polypy.poly.MODEL_ERRORS``: its construction does not converge, or
    isl gives up on a set). Any other exception is a bug and propagates."""
    try:
        analysis = BarrierAnalysis(fake)
        return analysis.crossing_order(analysis.barriers[0].path)
    except MODEL_ERRORS:  # the loops stay apart, which is always exact
        return None


def _has_atomics(stmts: tuple[n.Stmt, ...]) -> bool:
    return any(isinstance(x, n.AtomicRMW) for s in stmts for x in walk(s))


def _as_gpu_kernel(kernel: n.Kernel, a, b) -> n.Kernel | None:
    """``body(a); barrier; body(b)`` as a GPU-form kernel (see the module docstring)."""
    parts = []
    for nest in (a, b):
        mapping = {n.Var(nest[d].var, U32): n.ThreadIdx(2 - d) for d in range(3)}
        parts.append(substitute(nest[2].body, mapping))
    body = tuple(parts[0]) + (n.Barrier(),) + tuple(parts[1])
    declared = declared_names(body)
    params = list(kernel.params)
    taken = {p.name for p in params} | {x.name for x in kernel.buffers}
    outside: dict[str, n.Var] = {}
    for s in body:
        for x in walk(s):
            if isinstance(x, n.Var) and x.name not in declared and x.name not in taken:
                outside[x.name] = x
    for name, v in sorted(outside.items()):
        params.append(n.Param(name, v.vtype))
    buffers = tuple(dataclasses.replace(x, space="shared") if x.space == "local" else x for x in kernel.buffers)
    # Every thread dimension is in use: the model must not assume a 1-wide block in y or z.
    dims = n.Decl("polypy_dims", U32, n.Binary("add", n.ThreadIdx(1), n.ThreadIdx(2)))
    if "polypy_dims" in declared or "polypy_dims" in taken:
        return None
    return n.Kernel(kernel.name, tuple(params), buffers, (dims,) + body, stage="gpu", loc=kernel.loc)


def _forward_slots(body: tuple[n.Stmt, ...], slot: tuple[n.Expr, ...], kernel: n.Kernel
                   ) -> tuple[tuple[n.Stmt, ...], set[str]]:
    """``buf[slot] = a; ...; var b = buf[slot]`` (top level, nothing writing ``buf`` or ``a``
    between) becomes ``var b = a``: the value this thread just stored."""
    out = list(body)
    forwarded: set[str] = set()
    for i, s in enumerate(out):
        if not (isinstance(s, n.Store) and s.index == slot and isinstance(s.value, n.Var)
                and kernel.space(s.buffer) == "local"):
            continue
        value = s.value
        for j in range(i + 1, len(out)):
            t = out[j]
            if isinstance(t, n.Decl) and t.init == n.Load(s.buffer, slot, value.vtype):
                out[j] = dataclasses.replace(t, init=value)
                forwarded.add(s.buffer)
                continue
            if any(isinstance(x, (n.Store, n.AtomicRMW)) and x.buffer == s.buffer for x in walk(t)):
                break
            if any(isinstance(x, (n.Assign, n.Decl)) and x.name == value.name for x in walk(t)):
                break
            if any(isinstance(x, n.AtomicRMW) and x.dest == value.name for x in walk(t)):
                break
    return tuple(out), forwarded


def _drop_passed_values(body: tuple[n.Stmt, ...], forwarded: set[str], first: n.Stmt, second: n.Stmt,
                        kernel: n.Kernel) -> tuple[n.Stmt, ...]:
    """The fused body of a versioned fusion without its stores to per-thread buffers that only
    passed a value from ``first`` to ``second``: nothing in the fused body loads them any more,
    nothing in the kernel but ``second`` does, and ``first`` stores to every thread's slot at its
    top level (so ``second``, which runs only in the other version, never reads what the fused
    body would have stored)."""
    nest = nest_counters(first)
    assert nest is not None
    own = tuple(n.Var(nest[d].var, U32) for d in range(3))
    dead = set()
    for name in forwarded:
        loads = sum(1 for x in walk(kernel) if isinstance(x, n.Load) and x.buffer == name)
        if any(isinstance(x, n.Load) and x.buffer == name for s in body for x in walk(s)) \
                or loads != sum(1 for x in walk(second) if isinstance(x, n.Load) and x.buffer == name):
            continue
        if any(isinstance(s, n.Store) and s.buffer == name and s.index == own for s in nest[2].body):
            dead.add(name)
    if not dead:
        return body

    class DropStores(Mutator):
        def visit_Store(self, s: n.Store):
            return None if s.buffer in dead else s

    return DropStores().visit_block(body)


def _drop_unread_buffers(kernel: n.Kernel, candidates: set[str]) -> n.Kernel:
    """Per-thread buffers among ``candidates`` that nothing loads any more lose their stores."""
    loaded = {x.buffer for x in walk(kernel) if isinstance(x, (n.Load, n.AtomicRMW))}
    dead = {b for b in candidates if b not in loaded}
    if not dead:
        return kernel

    class DropStores(Mutator):
        def visit_Store(self, s: n.Store):
            return None if s.buffer in dead else s

    body = DropStores().visit_block(kernel.body)
    buffers = tuple(b for b in kernel.buffers if b.name not in dead)
    return dataclasses.replace(kernel, body=body, buffers=buffers)

"""fuse_thread_loops: adjacent thread-loop nests become one when no thread needs another's results.

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

After fusion a value stored to this thread's slot of a per-thread buffer by the first body and
loaded back by the second is forwarded; a buffer nobody loads any more is removed. Not done when
both loops have atomics whose order between threads matters
(``gpu2cpu.thread_loops.order_sensitive``). ``report`` receives one ``LoweringDecision`` per
fusion.
"""
from __future__ import annotations

import dataclasses

from gpu2cpu.report import LoweringDecision
from gpu2cpu.thread_loops import order_sensitive
from polypy.errors import InternalError
from polypy.ir import nodes as n
from polypy.ir.queries import declared_names
from polypy.ir.rewrite import rename_locals
from polypy.ir.types import U32
from polypy.ir.visitor import Mutator, substitute, walk
from polypy.poly import BarrierAnalysis


def fuse_thread_loops(kernel: n.Kernel, *, report: list[LoweringDecision] | None = None) -> n.Kernel:
    """Fuse adjacent independent thread-loop nests; see the module docstring."""
    if kernel.stage != "cpu":
        raise InternalError("fuse_thread_loops expects a CPU-form kernel", kernel.loc)
    f = _Fuse(kernel)
    body = f.visit_block(kernel.body)
    if body is kernel.body:
        return kernel
    out = dataclasses.replace(kernel, body=body)
    out = _drop_unread_buffers(out, f.forwarded)
    if report is not None:
        report.extend(f.decisions)
    return out


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
        if not self.independent(a, b):
            return None
        rename = {b[d].var: a[d].var for d in range(3)}
        body = body1 + rename_locals(body2, rename)
        body, forwarded = _forward_slots(body, (n.Var(a[0].var, U32), n.Var(a[1].var, U32), n.Var(a[2].var, U32)),
                                         self.kernel)
        self.forwarded |= forwarded
        x = dataclasses.replace(a[2], body=body)
        y = dataclasses.replace(a[1], body=(x,))
        lines = [str(s.loc.line) for s in (first, second) if s.loc is not None]
        where = f" at lines {' and '.join(lines)}" if len(lines) == 2 else ""
        message = f"thread loops{where} fused: no thread of the block touches what another thread wrote in the " \
                  f"other loop (isl)"
        if forwarded:
            message += f"; per-thread values passed through {', '.join(sorted(forwarded))} directly"
        self.decisions.append(LoweringDecision(self.kernel.name, first.loc, message))
        return dataclasses.replace(a[0], body=(y,))

    def independent(self, a: tuple[n.For, n.For, n.For], b: tuple[n.For, n.For, n.For]) -> bool:
        """Whether a barrier between the two bodies would order nothing (isl, exact)."""
        fake = _as_gpu_kernel(self.kernel, a, b)
        if fake is None:
            return False
        try:
            analysis = BarrierAnalysis(fake)
            barrier = analysis.barriers[0].path
            return analysis.conflict(barrier, [barrier]) is None
        except Exception:  # noqa: BLE001 - a model the analysis cannot build: keep the loops apart
            return False


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

"""promote_accumulators: an element a serial loop keeps updating lives in a register.

Requires: a CPU-form kernel. Guarantees: same results (for kernels that are race-free under
CUDA's rules); the loads of a promoted element inside its loop are gone, and so are its stores
where nothing else in the loop may read that memory.

A GEMM-style update ``c[i] = c[i] + a[..] * b[..]`` inside a serial loop over ``k`` reloads and
stores ``c[i]`` every iteration: the compiler cannot keep it in a register, since ``a`` and
``b`` may point into ``c``. Here, per serial loop that contains no thread loop::

    while (k < n) {                       if (k < n) {
      c[i] = c[i] + a[k] * b[k]             var c_acc: f32 = c[i]
      k = k + 1                  ==>        while (k < n) {
    }                                         c_acc = c_acc + a[k] * b[k]
                                              c[i] = c_acc        (only while a or b may alias c)
                                              k = k + 1
                                            }
                                            c[i] = c_acc          (only when nothing may alias c)
                                          }

when every access to ``c`` in the loop is to that one element ``c[i]`` (the same index, built
from values the loop does not change, without loads), or to a few elements that certainly
differ (``f[i * 4]``, ``f[i * 4 + 1]``, ...: an array of structs, each element its own
register), the loop stores each at its top level (so
every iteration that runs writes it, and the load before the loop is of an element the loop
touches anyway), and nothing in the loop jumps, synchronizes, runs atomics or stores to memory
that may be ``c``'s (``polypy.poly.alias``). Another thread touching ``c[i]`` during the loop
would race with these stores: undefined in CUDA, so not considered. Loads of memory that may
alias ``c`` keep the store in each iteration: memory then always holds the register's value.
"""
from __future__ import annotations

import dataclasses
from collections import Counter

from polypy.errors import InternalError
from polypy.ir import nodes as n
from polypy.ir.queries import declared_names, written_names
from polypy.ir.visitor import Mutator, walk, walk_block
from polypy.poly.alias import alias_kind

from gpu2cpu.names import NameSupply

_REFUSED = (n.AtomicRMW, n.Barrier, n.Fence, n.Print, n.Launch, n.AssertFail, n.Shuffle, n.Vote, n.Break, n.Continue, n.Return)  # a fence: stores stay before it


def promote_accumulators(kernel: n.Kernel) -> n.Kernel:
    """Keep elements updated in serial loops in registers (see the module docstring)."""
    if kernel.stage != "cpu":
        raise InternalError("promote_accumulators expects a CPU-form kernel", kernel.loc)
    promoter = _Promoter(kernel)
    body = promoter.visit_block(kernel.body)
    return kernel if body is kernel.body else dataclasses.replace(kernel, body=body)


class _Promoter(Mutator):
    def __init__(self, kernel: n.Kernel):
        self.kernel = kernel
        self.names = NameSupply(kernel)

    def visit_For(self, s: n.For):
        s = self.generic_visit(s)
        if s.kind != "serial":
            return s
        return self.promote(s, s.body, (s.start, s.stop, s.step), n.Binary("lt", s.start, s.stop))

    def visit_While(self, s: n.While):
        s = self.generic_visit(s)
        return self.promote(s, s.body + s.update, (s.cond,), s.cond)

    def promote(self, loop: n.For | n.While, body: tuple[n.Stmt, ...], header: tuple[n.Expr, ...],
                runs: n.Expr):
        """``loop`` with the elements of its first promotable buffer in registers, guarded by ``runs`` (the
        loop runs at least once); ``loop`` itself when there is none."""
        stored = {(s.buffer, s.index) for s in body if isinstance(s, n.Store)}
        if not stored:  # asked first: the walks below, at every loop of a nest, were quadratic
            return loop
        everything = [x for e in header for x in walk(e)] + list(walk_block(body))
        if any(isinstance(x, _REFUSED) or (isinstance(x, n.For) and x.kind == "threads") for x in everything):
            return loop
        changed = written_names(body) | declared_names(body)
        if isinstance(loop, n.For):
            changed.add(loop.var)
        for buffer in sorted({b for b, _ in stored}):
            accesses = [x for x in everything if isinstance(x, (n.Load, n.Store)) and x.buffer == buffer]
            elements = sorted({x.index for x in accesses}, key=str)
            if any((buffer, index) not in stored or not self.invariant(index, changed) for index in elements):
                continue
            if not _distinct(elements):
                continue
            others = [x for x in everything if isinstance(x, (n.Load, n.Store)) and x.buffer != buffer
                      and alias_kind(self.kernel, buffer, x.buffer) is not None]
            if any(isinstance(x, n.Store) for x in others):
                continue
            return self.rewrite(loop, buffer, elements, keep_stores=bool(others), runs=runs)
        return loop

    @staticmethod
    def invariant(index: tuple[n.Expr, ...], changed: set[str]) -> bool:
        return not any(isinstance(x, n.Load) or (isinstance(x, n.Var) and x.name in changed)
                       for i in index for x in walk(i))

    def rewrite(self, loop: n.For | n.While, buffer: str, elements: list[tuple[n.Expr, ...]], *,
                keep_stores: bool, runs: n.Expr) -> n.Stmt:
        ty = self.kernel.elem_type(buffer)
        accs = {index: self.names.fresh(f"{buffer}_acc") for index in elements}
        promoted = _Replace(buffer, accs, ty, keep_stores).visit(loop)
        loc = loop.loc
        inner: list[n.Stmt] = [n.Decl(acc, ty, n.Load(buffer, index, ty, loc=loc), loc=loc) for index, acc in accs.items()]
        inner.append(promoted)
        if not keep_stores:
            inner.extend(n.Store(buffer, index, n.Var(acc, ty), loc=loc) for index, acc in accs.items())
        return n.If(runs, tuple(inner), loc=loc)


def _sum(e: n.Expr, sign: int = 1, terms: Counter | None = None) -> tuple[Counter, int]:
    """``e`` as a sum of signed terms and an integer constant (``a + 1 + b * 4``: {+a, +b*4}, 1)."""
    terms = Counter() if terms is None else terms
    if isinstance(e, n.Const) and e.type.is_int:
        return terms, sign * int(e.value)
    if isinstance(e, n.Binary) and e.op in ("add", "sub"):
        terms, a = _sum(e.a, sign, terms)
        terms, b = _sum(e.b, sign if e.op == "add" else -sign, terms)
        return terms, a + b
    terms[(sign, e)] += 1
    return terms, 0


def _distinct(elements: list[tuple[n.Expr, ...]]) -> bool:
    """Whether the index tuples certainly name different elements: every two differ, in some
    dimension, by a nonzero constant on the same terms (an array of structs: ``v[i * 4 + 1]``)."""
    sums = [[_sum(x) for x in index] for index in elements]
    for k, a in enumerate(sums):
        for b in sums[k + 1:]:
            if not any(x[0] == y[0] and x[1] != y[1] for x, y in zip(a, b)):
                return False
    return True


class _Replace(Mutator):
    """Loads of the promoted elements of ``buffer`` read their registers; stores write them (and
    memory, if kept)."""

    def __init__(self, buffer: str, accs: dict[tuple[n.Expr, ...], str], ty, keep_stores: bool):
        self.buffer, self.accs, self.ty, self.keep = buffer, accs, ty, keep_stores

    def visit_Load(self, e: n.Load) -> n.Expr:
        if e.buffer == self.buffer:
            return n.Var(self.accs[e.index], self.ty, loc=e.loc)
        return self.generic_visit(e)

    def visit_Store(self, s: n.Store):
        if s.buffer != self.buffer:
            return self.generic_visit(s)
        value = self.visit(s.value)
        acc = self.accs[s.index]
        assign = n.Assign(acc, value, loc=s.loc)
        if not self.keep:
            return assign
        return (assign, n.Store(s.buffer, s.index, n.Var(acc, self.ty, loc=s.loc), loc=s.loc))

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
from values the loop does not change, without loads), the loop stores it at its top level (so
every iteration that runs writes it, and the load before the loop is of an element the loop
touches anyway), and nothing in the loop jumps, synchronizes, runs atomics or stores to memory
that may be ``c``'s (``polypy.poly.alias``). Another thread touching ``c[i]`` during the loop
would race with these stores: undefined in CUDA, so not considered. Loads of memory that may
alias ``c`` keep the store in each iteration: memory then always holds the register's value.
"""
from __future__ import annotations

import dataclasses

from polypy.errors import InternalError
from polypy.ir import nodes as n
from polypy.ir.queries import declared_names, written_names
from polypy.ir.visitor import Mutator, walk, walk_block
from polypy.poly.alias import alias_kind

from gpu2cpu.names import NameSupply

_REFUSED = (n.AtomicRMW, n.Barrier, n.Shuffle, n.Vote, n.Break, n.Continue, n.Return)


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
        """``loop`` with its first promotable element in a register, guarded by ``runs`` (the
        loop runs at least once); ``loop`` itself when there is none."""
        everything = [x for e in header for x in walk(e)] + list(walk_block(body))
        if any(isinstance(x, _REFUSED) or (isinstance(x, n.For) and x.kind == "threads") for x in everything):
            return loop
        changed = written_names(body) | declared_names(body)
        if isinstance(loop, n.For):
            changed.add(loop.var)
        stored = {(s.buffer, s.index) for s in body if isinstance(s, n.Store)}
        for buffer, index in sorted(stored, key=lambda bi: (bi[0], str(bi[1]))):
            if not self.invariant(index, changed):
                continue
            accesses = [x for x in everything if isinstance(x, (n.Load, n.Store)) and x.buffer == buffer]
            if any(x.index != index for x in accesses):
                continue
            others = [x for x in everything if isinstance(x, (n.Load, n.Store)) and x.buffer != buffer
                      and alias_kind(self.kernel, buffer, x.buffer) is not None]
            if any(isinstance(x, n.Store) for x in others):
                continue
            return self.rewrite(loop, buffer, index, keep_stores=bool(others), runs=runs)
        return loop

    @staticmethod
    def invariant(index: tuple[n.Expr, ...], changed: set[str]) -> bool:
        return not any(isinstance(x, n.Load) or (isinstance(x, n.Var) and x.name in changed)
                       for i in index for x in walk(i))

    def rewrite(self, loop: n.For | n.While, buffer: str, index: tuple[n.Expr, ...], *, keep_stores: bool,
                runs: n.Expr) -> n.Stmt:
        ty = self.kernel.elem_type(buffer)
        acc = self.names.fresh(f"{buffer}_acc")
        promoted = _Replace(buffer, index, acc, ty, keep_stores).visit(loop)
        loc = loop.loc
        inner: list[n.Stmt] = [n.Decl(acc, ty, n.Load(buffer, index, ty, loc=loc), loc=loc), promoted]
        if not keep_stores:
            inner.append(n.Store(buffer, index, n.Var(acc, ty), loc=loc))
        return n.If(runs, tuple(inner), loc=loc)


class _Replace(Mutator):
    """Loads of ``buffer[index]`` read the register; stores write it (and memory, if kept)."""

    def __init__(self, buffer: str, index: tuple[n.Expr, ...], acc: str, ty, keep_stores: bool):
        self.buffer, self.index, self.acc, self.ty, self.keep = buffer, index, acc, ty, keep_stores

    def visit_Load(self, e: n.Load) -> n.Expr:
        if e.buffer == self.buffer:
            return n.Var(self.acc, self.ty, loc=e.loc)
        return self.generic_visit(e)

    def visit_Store(self, s: n.Store):
        if s.buffer != self.buffer:
            return self.generic_visit(s)
        value = self.visit(s.value)
        assign = n.Assign(self.acc, value, loc=s.loc)
        if not self.keep:
            return assign
        return (assign, n.Store(s.buffer, s.index, n.Var(self.acc, self.ty, loc=s.loc), loc=s.loc))

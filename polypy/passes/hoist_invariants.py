"""hoist_invariants: loop-invariant code motion of local computations.

Requires: unique local names. Guarantees: same results (and no new memory access that the
original would not make: hoisted code runs only when the loop runs at least once).

A statement at the top level of a loop body moves out of the loop when

* it only computes locals: no stores, atomics, barriers, warp operations, ``break``/``continue``/
  ``return`` (nested loops and branches of pure local code are fine);
* every variable it reads is either not written in the loop, or written only by statements
  that move out with it;
* every variable it writes is declared by a statement that moves out (so it is local to the
  loop body) and is written by no statement that stays;
* every array it reads is written nowhere in the kernel (by any thread), taking aliasing of
  pointer parameters into account unless ``assume_noalias`` (the gradient pipeline's
  assumption that distinct pointer arguments do not overlap);
* no earlier statement of the body may leave the iteration.

The moved statements run once, before the loop, under the loop's entry condition; their
declarations move in front of it::

    for i = 0 to n {                  var s: f64
      var s: f64 = 0.0                var m: f64
      for j = 0 to n {                if (0 < n) {
        s = s + in[j] * in[j]    ->     s = 0.0
      }                                 for j = 0 to n { s = s + in[j] * in[j] }
      var m: f64 = sqrt(s)              m = sqrt(s)
      out[i] = in[i] / m              }
    }                                 for i = 0 to n { out[i] = in[i] / m }

Inner loops are processed first, so a value moves out of as many loops as it is invariant in.
"""
from __future__ import annotations

import dataclasses

from polypy.ir import nodes as n
from polypy.ir.jumps import jumps_out
from polypy.ir.queries import buffers_written, declared_names, read_names, written_names
from polypy.ir.visitor import Mutator, walk
from polypy.poly.alias import alias_kind

_EFFECTS = (n.Store, n.AtomicRMW, n.Barrier, n.WarpSync, n.Fence, n.Print, n.Launch, n.AssertFail, n.Shuffle, n.Vote, n.Return, n.Break, n.Continue)


def _writes(s: n.Stmt) -> set[str]:
    return written_names(s) | declared_names(s)


class _Hoister(Mutator):
    def __init__(self, kernel: n.Kernel, assume_noalias: bool):
        self.kernel = kernel
        self.guards: set[n.If] = set()
        written = buffers_written(kernel.body)
        self.frozen: set[str] = set()
        names = [p.name for p in kernel.params] + [b.name for b in kernel.buffers]
        for name in names:
            if name in written:
                continue
            if not assume_noalias and any(alias_kind(kernel, name, w) is not None for w in written):
                continue
            self.frozen.add(name)

    def _pure(self, s: n.Stmt) -> bool:
        for x in walk(s):
            if isinstance(x, _EFFECTS):
                return False
            if isinstance(x, n.Load) and x.buffer not in self.frozen:
                return False
        return True

    def visit_For(self, s: n.For):
        s = self.generic_visit(s)
        return self._hoist(s, s.body, n.Binary("lt", s.start, s.stop))

    def visit_While(self, s: n.While):
        s = self.generic_visit(s)
        return self._hoist(s, s.body, s.cond)

    def _hoist(self, loop: n.For | n.While, body: tuple[n.Stmt, ...], entry: n.Expr):
        candidates: list[int] = []
        for j, stmt in enumerate(body):
            if jumps_out(stmt):  # may break/continue the loop whose body it is in (or return)
                break
            if self._pure(stmt):
                candidates.append(j)
        if not candidates:
            return loop
        variant = written_names(loop) | declared_names(loop)
        chosen = list(candidates)
        while True:
            owned = set().union(*(declared_names(body[j]) for j in chosen)) if chosen else set()
            stay = [body[j] for j in range(len(body)) if j not in chosen] + (
                list(loop.update) if isinstance(loop, n.While) else [])
            stay_writes = set().union(*(_writes(st) for st in stay)) if stay else set()
            keep = []
            for j in chosen:
                st = body[j]
                writes = _writes(st)
                reads = read_names(st)
                if not writes <= owned or writes & stay_writes:
                    continue
                if any(r in variant and r not in owned for r in reads):
                    continue
                keep.append(j)
            if keep == chosen:
                break
            chosen = keep
        if not chosen:
            return loop
        decls: list[n.Stmt] = []
        moved: list[n.Stmt] = []
        for j in chosen:
            st = body[j]
            if isinstance(st, n.Decl):
                decls.append(n.Decl(st.name, st.vtype, loc=st.loc))
                if st.init is not None:
                    moved.append(n.Assign(st.name, st.init, loc=st.loc))
            else:
                moved.append(st)
        rest = tuple(st for j, st in enumerate(body) if j not in chosen)
        new_loop = dataclasses.replace(loop, body=rest)
        out: list[n.Stmt] = decls
        for st in moved:
            # One guard per statement, so that an enclosing loop can hoist them one by one;
            # ``_merge_guards`` joins what stays together at the end.
            guard = n.If(entry, (st,), loc=loop.loc)
            self.guards.add(guard)
            out.append(guard)
        return tuple(out) + (new_loop,)


class _MergeGuards(Mutator):
    """``if (c) {A}; if (c) {B}`` -> ``if (c) {A; B}`` for guards this pass made."""

    def __init__(self, guards: set[n.If]):
        self.guards = guards

    def visit_block(self, items):  # type: ignore[override]
        items = super().visit_block(items)
        out: list = []
        changed = False
        for s in items:
            if (isinstance(s, n.If) and out and isinstance(out[-1], n.If) and not s.orelse and not out[-1].orelse
                    and s.cond == out[-1].cond and s in self.guards and out[-1] in self.guards):
                merged = n.If(s.cond, out[-1].then + s.then, loc=out[-1].loc)
                self.guards.add(merged)
                out[-1] = merged
                changed = True
                continue
            out.append(s)
        return tuple(out) if changed else items


def hoist_invariants(kernel: n.Kernel, *, assume_noalias: bool = False) -> n.Kernel:
    """Move loop-invariant local computations out of loops (see module docstring)."""
    hoister = _Hoister(kernel, assume_noalias)
    result = hoister.visit(kernel)
    if result is kernel:
        return kernel
    return _MergeGuards(hoister.guards).visit(result)

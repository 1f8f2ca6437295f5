"""Which values and which control flow may differ between the threads of one block.

A value is *thread-dependent* (divergent) when it is computed from ``threadIdx``, from the result
of an atomic, shuffle or vote, from a per-thread (``local``) array, from memory at a
thread-dependent address, or from a variable assigned under thread-dependent control. Loads at
block-uniform addresses of shared or global memory are uniform: in a race-free kernel every
thread of the block reads the same value there.

Control is thread-dependent inside an ``if``/loop whose condition is, after a thread-dependent
``break``/``continue`` (for the rest of that loop) and after a thread-dependent ``return`` (for
the rest of the kernel).

``check_barriers`` refuses a ``__syncthreads()`` under thread-dependent control: CUDA requires
every thread of the block to reach it, and polypy never guesses.
"""
from __future__ import annotations

import dataclasses
from typing import Container

from polypy.errors import Loc, UserError
from polypy.ir import nodes as n
from polypy.ir.visitor import walk


@dataclasses.dataclass(frozen=True)
class Divergence:
    """Why control is thread-dependent at some point: the condition (or exit) and its location."""

    what: str
    loc: Loc | None


class _Analysis:
    def __init__(self, kernel: n.Kernel):
        self.kernel = kernel
        self.divergent: set[str] = set()
        self.local_buffers = {b.name for b in kernel.buffers if b.space == "local"}
        self.barrier_problems: list[tuple[n.Stmt, Divergence]] = []
        self.divergent_syncs: list[n.WarpSync] = []  # ``__syncwarp``s under thread-dependent control
        self.changed = False
        self.first_returns = _first_returns(kernel.body)

    # -- expressions
    def expr_divergent(self, e: n.Expr) -> bool:
        return not thread_uniform(e, self.divergent, self.local_buffers)

    def mark(self, name: str) -> None:
        if name not in self.divergent:
            self.divergent.add(name)
            self.changed = True

    # -- statements; `why` is the reason control is divergent here (None: uniform)
    def block(self, stmts: tuple[n.Stmt, ...], why: Divergence | None) -> Divergence | None:
        """Analyse ``stmts``; returns the divergence of an exit that leaves this block early
        (a thread-dependent break/continue/return inside it), which makes what follows divergent."""
        exit_why: Divergence | None = None
        for s in stmts:
            current = why or exit_why
            leaving = self.stmt(s, current)
            if leaving is not None and exit_why is None:
                exit_why = leaving
        return exit_why

    def stmt(self, s: n.Stmt, why: Divergence | None) -> Divergence | None:
        if isinstance(s, n.Decl):
            if s.init is not None and (why is not None or self.expr_divergent(s.init)):
                self.mark(s.name)
            return None
        if isinstance(s, n.Assign):
            if why is not None or self.expr_divergent(s.value):
                self.mark(s.name)
            return None
        if isinstance(s, (n.AtomicRMW, n.Shuffle, n.Vote)):
            if s.dest is not None:
                self.mark(s.dest)
            return None
        if isinstance(s, n.Barrier):
            if why is not None:
                self.barrier_problems.append((s, why))
            return None
        if isinstance(s, n.WarpSync):
            if why is not None:
                self.divergent_syncs.append(s)
            return None
        if isinstance(s, (n.Break, n.Continue, n.Return)):
            return why  # an exit taken by only some threads (None: by all or none)
        if isinstance(s, n.If):
            inner = why
            if inner is None and self.expr_divergent(s.cond):
                inner = Divergence("a thread-dependent condition", s.loc)
            a = self.block(s.then, inner)
            b = self.block(s.orelse, inner)
            return a or b
        if isinstance(s, n.For):
            inner = why
            if inner is None and any(self.expr_divergent(e) for e in (s.start, s.stop, s.step)):
                inner = Divergence("a loop with a thread-dependent trip count", s.loc)
                self.mark(s.var)
            if why is not None:
                self.mark(s.var)
            return self.loop(s.body, (), inner, s)
        if isinstance(s, n.While):
            inner = why
            if inner is None and self.expr_divergent(s.cond):
                inner = Divergence("a loop with a thread-dependent trip count", s.loc)
            return self.loop(s.body, s.update, inner, s)
        return None

    def loop(self, body, update, why: Divergence | None, s: n.Stmt) -> Divergence | None:
        # An exit taken by only some threads makes later iterations (and values the loop
        # assigns) thread-dependent; run the body again under that divergence.
        exit_why = self.block(body, why)
        self.block(update, why or exit_why)
        if exit_why is not None and why is None:
            loop_why = Divergence("an early exit taken by only some threads", exit_why.loc)
            self.block(body, loop_why)
            self.block(update, loop_why)
        returns = self.first_returns.get(id(s))
        if returns is not None and (why is not None or exit_why is not None):
            # A divergent return inside the loop leaves the kernel for some threads only.
            return Divergence("a thread-dependent return", returns.loc)
        return None


def thread_uniform(e: n.Expr, divergent: Container[str], local_buffers: Container[str] = ()) -> bool:
    """Whether ``e`` has one value in every thread of a block, given the names that may differ
    between threads (``divergent``) and the per-thread arrays (``local_buffers``): no
    ``threadIdx``, no divergent name, no load of a per-thread array. Loads of shared or global
    memory count as uniform when their indices are (see the module docstring)."""
    for x in walk(e):
        if isinstance(x, n.ThreadIdx):
            return False
        if isinstance(x, n.Var) and x.name in divergent:
            return False
        if isinstance(x, n.Load) and x.buffer in local_buffers:
            return False
    return True


def _first_returns(stmts: tuple[n.Stmt, ...]) -> dict[int, n.Stmt]:
    """For each loop (by id) whose body holds a ``return``, the first one in source order (what
    ``first_escaping_jump(loop.body, n.Return)`` finds), all in one walk: asked of each loop, the
    question walked the loop's whole body, at every level of a nest (1,000 nested loops:
    500,000 statements)."""
    found: dict[int, n.Stmt] = {}
    # the loops around a statement, innermost first, as a chain (loop, (outer loop, ...)) or None
    stack: list[tuple[n.Stmt, tuple | None]] = [(s, None) for s in reversed(stmts)]
    while stack:
        s, loops = stack.pop()
        if isinstance(s, n.Return):
            while loops is not None and id(loops[0]) not in found:  # the outer ones have one once it has
                found[id(loops[0])] = s
                loops = loops[1]
            continue
        inner = (s, loops) if isinstance(s, (n.For, n.While)) else loops
        for name in reversed(s.BLOCKS):  # a while's update is not its body (``loop``'s question)
            stack.extend((c, loops if name == "update" else inner) for c in reversed(getattr(s, name)))
    return found


def _run(kernel: n.Kernel) -> _Analysis:
    a = _Analysis(kernel)
    while True:
        a.changed = False
        a.barrier_problems = []
        a.divergent_syncs = []
        a.block(kernel.body, None)
        if not a.changed:
            return a


def thread_dependent_names(kernel: n.Kernel) -> frozenset[str]:
    """Local names whose value may differ between threads of a block."""
    return frozenset(_run(kernel).divergent)


def is_thread_dependent(kernel: n.Kernel, e: n.Expr, names: frozenset[str] | None = None) -> bool:
    names = thread_dependent_names(kernel) if names is None else names
    local = {b.name for b in kernel.buffers if b.space == "local"}
    return not thread_uniform(e, names, local)


def divergent_warp_syncs(kernel: n.Kernel) -> list[n.WarpSync]:
    """The ``WarpSync`` statements (the nodes themselves) under thread-dependent control: every
    other one is reached by every thread of the block."""
    return _run(kernel).divergent_syncs


def check_barriers(kernel: n.Kernel) -> None:
    """Raise ``UserError`` for a barrier that only some threads of a block may reach."""
    problems = _run(kernel).barrier_problems
    if not problems:
        return
    barrier, why = problems[0]
    raise UserError(
        "__syncthreads() under thread-dependent control: every thread of the block must reach it (polypy runs "
        "the sync() of a cooperative group of more than 32 threads as the block barrier, so it too must be "
        "reached by every thread of the block; so must every arrival on a cuda::barrier, also run as the block "
        "barrier)",
        barrier.loc,
        notes=((f"control depends on the thread because of {why.what} here", why.loc),),
    )

"""Scratch outputs: a gradient variant without the forward's stores to outputs nobody reads.

``K_grad`` repeats the kernel's effect (DESIGN.md's calling convention), so it stores every
output the kernel stores. A caller that passes some outputs as scratch memory and never reads
them afterwards (``polypy.torch``'s backward: the forward already returned ``y``) asks for
``scratch_outputs=(...)``: the stores to such a buffer are dropped where nothing in ``K_grad``
reads it back, which is then exact: a store no load, atomic or other access of the kernel
observes changes only the buffer's final contents, which the caller discards. Whatever only
fed those stores goes with them (``eliminate-dead-code`` after differentiation). A buffer
that ``K_grad`` also reads, updates atomically or uses any other way (a pointer value, a copy)
keeps its stores. Shadows are untouched: the seed is consumed as the convention says.

Where isl proves every element of such an output stored once (``polypy.poly.written_once``),
the caller drops the zeroing of its seed (``drop_seed_zeroing``: nothing reads it back); where it
proves that only under a condition on the launch (``written_once_when``), the zeroing runs only
where the condition fails (``guard_seed_zeroing``), and ``seed_read_when`` tells a caller
(``polypy.torch``) at which launches the seed is only read.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable

from polypy.ir import nodes as n
from polypy.ir.names import NameSupply
from polypy.ir.types import BOOL
from polypy.ir.visitor import Mutator, walk


def droppable(kernel: n.Kernel, buffer: str) -> bool:
    """Whether ``kernel`` touches pointer parameter ``buffer`` through plain stores only."""
    param = kernel.param(buffer)
    if param is None or not isinstance(param.ptype, n.PointerType):
        return False
    stored = False
    for x in walk(kernel):
        if isinstance(x, n.Store) and x.buffer == buffer:
            stored = True
            continue
        if isinstance(x, n.Var) and x.name == buffer:
            return False  # the pointer itself as a value
        for f in dataclasses.fields(x):  # any other node naming the buffer: a load, an atomic, a copy...
            if f.name not in x.CHILDREN and getattr(x, f.name) == buffer and f.name != "name":
                return False
    return stored


class _Drop(Mutator):
    def __init__(self, buffers: frozenset[str]):
        self.buffers = buffers

    def visit_Store(self, s: n.Store) -> n.Stmt | tuple[n.Stmt, ...]:
        return () if s.buffer in self.buffers else s


def drop_scratch_stores(kernel: n.Kernel, scratch: Iterable[str]) -> tuple[n.Kernel, tuple[str, ...]]:
    """``kernel`` without its stores to the buffers of ``scratch`` it only ever stores to, and
    the names of those buffers (in the order of ``scratch``)."""
    dropped = tuple(b for b in dict.fromkeys(scratch) if droppable(kernel, b))
    if not dropped:
        return kernel, ()
    return _Drop(frozenset(dropped)).visit(kernel), dropped


def untouched(kernel: n.Kernel, buffer: str) -> bool:
    """Whether ``buffer`` is a pointer parameter of ``kernel`` that no other node names (a
    scratch output whose stores were all dropped: its memory is neither read nor written). A
    name that is no pointer parameter (the C name of a record or accessor) is not known to be."""
    param = kernel.param(buffer)
    if param is None or not isinstance(param.ptype, n.PointerType):
        return False
    return not any(_names(x, buffer) for x in walk(kernel))


def shadow_after(kernel: n.Kernel, primal: n.Kernel, buffer: str) -> str | None:
    """The name of ``buffer``'s shadow in the gradient ``kernel`` (the parameter right after it,
    in the calling convention), or None when it has none."""
    names = [p.name for p in kernel.params]
    if buffer not in names:
        return None
    at = names.index(buffer) + 1
    if at >= len(names) or primal.param(names[at]) is not None:
        return None
    return names[at]


def _only_zero_stores(kernel: n.Kernel, shadow: str) -> bool:
    """Whether ``kernel`` stores to ``shadow``, stores only zeros, and otherwise only loads it."""
    zero_stores = False
    for x in walk(kernel):
        if isinstance(x, n.Store) and x.buffer == shadow:
            if not (isinstance(x.value, n.Const) and x.value.value == 0):
                return False
            zero_stores = True
        elif not (isinstance(x, n.Load) and x.buffer == shadow) and _names(x, shadow):
            return False
    return zero_stores


def drop_seed_zeroing(kernel: n.Kernel, shadow: str) -> tuple[n.Kernel, bool]:
    """``kernel`` without its stores of zero to ``shadow``, where it only ever loads the shadow
    and stores zeros to it: the consumption of the seed of an output written once per element
    (``polypy.poly.written_once``, which the caller proves), whose zeroing nothing in ``kernel``
    reads back. Whether they were dropped."""
    if not _only_zero_stores(kernel, shadow):
        return kernel, False
    return _Drop(frozenset((shadow,))).visit(kernel), True


def guard_seed_zeroing(kernel: n.Kernel, shadow: str, when: n.Expr) -> tuple[n.Kernel, bool]:
    """``kernel`` with its stores of zero to ``shadow`` run only where the grid-uniform ``when``
    does not hold (tested once, into a flag declared first): ``drop_seed_zeroing`` for an
    output written once per element under a condition (``polypy.poly.written_once_when``,
    which the caller finds). Whether they were guarded; ``seed_read_when`` gives ``when`` back."""
    if not _only_zero_stores(kernel, shadow):
        return kernel, False
    flag = NameSupply.for_kernel(kernel).fresh(shadow + "_read_only")
    body = _Guard(shadow, _unless(flag)).visit_block(kernel.body)
    return dataclasses.replace(kernel, body=(n.Decl(flag, BOOL, when, loc=kernel.loc),) + body), True


def seed_read_when(kernel: n.Kernel, shadow: str) -> n.Expr | None:
    """The condition ``guard_seed_zeroing`` put in ``kernel``, under which it only reads
    ``shadow``; None where ``kernel`` has no such form (``writes`` says whether it writes it)."""
    for s in kernel.body:
        if not (isinstance(s, n.Decl) and s.vtype == BOOL and s.init is not None
                and s.name.startswith(shadow + "_read_only")):
            continue
        if any(isinstance(x, n.Assign) and x.name == s.name for x in walk(kernel)):
            continue
        rest = dataclasses.replace(kernel, body=tuple(x for x in kernel.body if x is not s))
        rest = _Unguard(shadow, _unless(s.name)).visit(rest)
        if not writes(rest, shadow) and not any(isinstance(x, n.Var) and x.name == s.name for x in walk(rest)):
            return s.init
    return None


def _unless(flag: str) -> n.Expr:
    return n.Unary("not", n.Var(flag, BOOL))


class _Guard(Mutator):
    def __init__(self, shadow: str, cond: n.Expr):
        self.shadow, self.cond = shadow, cond

    def visit_Store(self, s: n.Store) -> n.Stmt:
        return n.If(self.cond, (s,), loc=s.loc) if s.buffer == self.shadow else s


class _Unguard(Mutator):
    """Without the guarded zero stores ``_Guard`` made."""

    def __init__(self, shadow: str, cond: n.Expr):
        self.shadow, self.cond = shadow, cond

    def visit_If(self, s: n.If) -> n.Stmt | tuple[n.Stmt, ...]:
        if s.cond == self.cond and not s.orelse and s.then and all(
                isinstance(x, n.Store) and x.buffer == self.shadow and isinstance(x.value, n.Const)
                and x.value.value == 0 for x in s.then):
            return ()
        return self.generic_visit(s)


def writes(kernel: n.Kernel, buffer: str) -> bool:
    """Whether ``kernel`` may write ``buffer`` (a store, an atomic, or any other use of its name)."""
    for x in walk(kernel):
        if isinstance(x, n.Load) and x.buffer == buffer:
            continue
        if _names(x, buffer):
            return True
    return False


def _names(x: n.Node, buffer: str) -> bool:
    """Whether node ``x`` names ``buffer``: a variable of that name, or a field other than its
    children and its own ``name`` that holds it (a store's or an atomic's buffer, ...)."""
    if isinstance(x, n.Var):
        return x.name == buffer
    return any(f.name not in x.CHILDREN and f.name != "name" and getattr(x, f.name) == buffer
               for f in dataclasses.fields(x))

"""eliminate_returns: turn ``return`` into structured control flow.

Requires: unique local names. Guarantees: no ``Return`` is left; same semantics.

Early exits are restructured without flags where possible::

    if (c) { A; return }          if (c) { A }
    B                      ==>    else { B }

and otherwise (a return inside a loop) with a flag that the loops and the code after them test::

    for (...) {                   var done: bool = false
      if (c) { return }    ==>    for (...) { if (c) { done = true; break } ... }
      ...                         if (!done) { B }
    }
    B

The frontend uses ``remove_returns`` on the body of every inlined device function (where
``return`` means "leave this function"); the pass applies it to kernels (where it means "this
thread is done"), which gives the polyhedral model plain guarded code instead of exits.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from polypy.ir import nodes as n
from polypy.ir.queries import contains
from polypy.ir.types import BOOL


def _has_return(s: n.Stmt | tuple[n.Stmt, ...]) -> bool:
    return contains(s if isinstance(s, n.Stmt) else tuple(s), n.Return)


def _strip_tail(block: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
    """Drop returns in tail position: falling off the end does the same."""
    if not block:
        return block
    last = block[-1]
    if isinstance(last, n.Return):
        return _strip_tail(block[:-1])
    if isinstance(last, n.If) and _has_return(last):
        return block[:-1] + (dataclasses.replace(last, then=_strip_tail(last.then), orelse=_strip_tail(last.orelse)),)
    return block


def _ends_with_return(block: tuple[n.Stmt, ...]) -> bool:
    return bool(block) and isinstance(block[-1], n.Return)


def _restructure(block: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
    """``if (c) {A; return} B`` → ``if (c) {A} else {B}`` (and the mirror), recursively."""
    out: list[n.Stmt] = []
    for i, s in enumerate(block):
        if isinstance(s, n.If) and _has_return(s):
            then = _restructure(s.then)
            orelse = _restructure(s.orelse)
            rest = block[i + 1:]
            if _ends_with_return(then) and not _has_return(then[:-1]):
                new = n.If(s.cond, then[:-1], _restructure(orelse + rest), loc=s.loc)
                out.append(new)
                return tuple(out)
            if _ends_with_return(orelse) and not _has_return(orelse[:-1]):
                new = n.If(s.cond, _restructure(then + rest), orelse[:-1], loc=s.loc)
                out.append(new)
                return tuple(out)
            out.append(dataclasses.replace(s, then=then, orelse=orelse))
            continue
        out.append(s)
    return tuple(out)


class _Flagged:
    """Remove the remaining returns with a ``done`` flag and ``break``s out of loops."""

    def __init__(self, flag: str):
        self.flag = flag
        self.used = False

    def block(self, block: tuple[n.Stmt, ...], in_loop: bool) -> tuple[n.Stmt, ...]:
        out: list[n.Stmt] = []
        for i, s in enumerate(block):
            if isinstance(s, n.Return):
                self.used = True
                out.append(n.Assign(self.flag, n.Const(True, BOOL), loc=s.loc))
                if in_loop:
                    out.append(n.Break(loc=s.loc))
                return tuple(out)
            if not _has_return(s):
                out.append(s)
                continue
            out.append(self.stmt(s, in_loop))
            rest = self.block(block[i + 1:], in_loop)
            flag = n.Var(self.flag, BOOL)
            if in_loop:
                # A return directly in `s` already broke out of this loop; one inside a loop
                # nested in `s` only left that loop, so test the flag here.
                if _returns_from_nested_loop(s):
                    out.append(n.If(flag, (n.Break(),)))
                out.extend(rest)
            elif rest:
                out.append(n.If(n.Unary("not", flag), rest))
            return tuple(out)
        return tuple(out)

    def stmt(self, s: n.Stmt, in_loop: bool) -> n.Stmt:
        if isinstance(s, n.If):
            return dataclasses.replace(s, then=self.block(s.then, in_loop), orelse=self.block(s.orelse, in_loop))
        if isinstance(s, n.For):
            return dataclasses.replace(s, body=self.block(s.body, True))
        if isinstance(s, n.While):
            return dataclasses.replace(s, body=self.block(s.body, True))
        raise AssertionError(f"return inside {type(s).__name__}")


def _returns_from_nested_loop(s: n.Stmt) -> bool:
    if isinstance(s, (n.For, n.While)):
        return _has_return(s)
    if isinstance(s, n.If):
        return any(_returns_from_nested_loop(x) for x in s.then + s.orelse)
    return False


def remove_returns(block: tuple[n.Stmt, ...], fresh_name: Callable[[str], str]) -> tuple[n.Stmt, ...]:
    """``block`` with every ``Return`` (meaning: leave ``block``) replaced by structured flow."""
    if not _has_return(block):
        return block
    block = _strip_tail(_restructure(block))
    if not _has_return(block):
        return block
    flagged = _Flagged(fresh_name("done"))
    body = flagged.block(block, in_loop=False)
    return (n.Decl(flagged.flag, BOOL, n.Const(False, BOOL)),) + body


def eliminate_returns(kernel: n.Kernel) -> n.Kernel:
    """Apply ``remove_returns`` to the kernel body."""
    if not _has_return(kernel.body):
        return kernel
    taken = {p.name for p in kernel.params} | {b.name for b in kernel.buffers}
    from polypy.ir.queries import declared_names

    taken |= declared_names(kernel.body)

    def fresh(base: str) -> str:
        name, i = base, 0
        while name in taken:
            i += 1
            name = f"{base}_{i}"
        taken.add(name)
        return name

    return dataclasses.replace(kernel, body=remove_returns(kernel.body, fresh))

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

Why parts of it are not a ``Mutator``: ``_strip_tail``, ``_always_returns`` and ``_Restructure``
ask about the *last* statement of a block and rewrite a block together with what follows an
``if`` in it (its continuation moves into a branch); a Mutator sees one node at a time. The
flag's rewriting, node by node, is one (``_Flagged``).
"""
from __future__ import annotations

from typing import Callable

from polypy.ir import nodes as n
from polypy.ir.jumps import jumps_out
from polypy.ir.queries import declared_names
from polypy.ir.types import BOOL
from polypy.ir.visitor import Mutator, rebuild, walk


def _has_return(s: n.Stmt | tuple[n.Stmt, ...]) -> bool:
    return jumps_out(s, n.Return)


def _strip_tail(block: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
    """Drop returns in tail position: falling off the end does the same."""
    while block and isinstance(block[-1], n.Return):
        block = block[:-1]
    if block and isinstance(block[-1], n.If) and _has_return(block[-1]):
        last = block[-1]
        new = rebuild(last, then=_strip_tail(last.then), orelse=_strip_tail(last.orelse))
        if new is not last:
            block = block[:-1] + (new,)
    return block


def _ends_with_return(block: tuple[n.Stmt, ...]) -> bool:
    return bool(block) and isinstance(block[-1], n.Return)


def _always_returns(block: tuple[n.Stmt, ...]) -> bool:
    """Whether every path through ``block`` ends in a ``return`` (conservatively: a tail return,
    or a tail ``if`` whose two branches always return)."""
    if not block:
        return False
    last = block[-1]
    if isinstance(last, n.Return):
        return True
    return isinstance(last, n.If) and _always_returns(last.then) and _always_returns(last.orelse)


class _Restructure:
    """``if (c) {A; return} B`` → ``if (c) {A} else {B}`` (and the mirror), in the branches of
    ifs at any depth; loops keep their returns (the flag handles those).

    ``visit_block`` rewrites a block whose end leaves the function (the body, or a branch of an
    ``if`` that is the last statement of such a block): only there may a tail ``return`` go. A
    branch that falls through to more code is left to the flag."""

    def visit_block(self, block: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        for i, s in enumerate(block):
            if not (isinstance(s, n.If) and _has_return(s)):
                continue
            rest = block[i + 1:]
            if rest and _always_returns(s.then):
                s, rest = rebuild(s, orelse=s.orelse + rest), ()
            elif rest and _always_returns(s.orelse):
                s, rest = rebuild(s, then=s.then + rest), ()
            if rest:
                # A return nested in a branch that goes on to ``rest``: the flag handles it.
                return block[:i + 1] + self.visit_block(rest)
            then = _strip_tail(self.visit_block(s.then))
            orelse = _strip_tail(self.visit_block(s.orelse))
            return block[:i] + (n.If(s.cond, then, orelse, loc=s.loc),)
        return block


class _Flagged(Mutator):
    """Remove the remaining returns with a ``done`` flag and ``break``s out of loops."""

    def __init__(self, flag: str):
        self.flag = flag
        self.used = False
        self.loops = 0  # loops around the block being rewritten

    def enter_field(self, node: n.Node, name: str) -> None:
        if isinstance(node, (n.For, n.While)):
            self.loops += 1

    def exit_field(self, node: n.Node, name: str) -> None:
        if isinstance(node, (n.For, n.While)):
            self.loops -= 1

    def visit_Expr(self, e: n.Expr) -> n.Expr:
        return e

    def visit_Stmt(self, s: n.Stmt) -> n.Stmt:
        return self.generic_visit(s) if _has_return(s) else s

    def visit_block(self, block: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        in_loop = self.loops > 0
        for i, s in enumerate(block):
            if isinstance(s, n.Return):
                self.used = True
                out: tuple[n.Stmt, ...] = (n.Assign(self.flag, n.Const(True, BOOL), loc=s.loc),)
                if in_loop:
                    out += (n.Break(loc=s.loc),)
                return block[:i] + out
            if not _has_return(s):
                continue
            out = block[:i] + (self.visit(s),)
            rest = self.visit_block(block[i + 1:])
            flag = n.Var(self.flag, BOOL)
            if in_loop:
                # A return directly in `s` already broke out of this loop; one inside a loop
                # nested in `s` only left that loop, so test the flag here.
                if _returns_from_nested_loop(s):
                    out += (n.If(flag, (n.Break(),)),)
                out += rest
            elif rest:
                out += (n.If(n.Unary("not", flag), rest),)
            return out
        return block


def _returns_from_nested_loop(s: n.Stmt) -> bool:
    """Whether a ``return`` in ``s`` is inside a loop (``s`` itself or one nested in it)."""
    return any(isinstance(x, (n.For, n.While)) and _has_return(x) for x in walk(s))


def remove_returns(block: tuple[n.Stmt, ...], fresh_name: Callable[[str], str]) -> tuple[n.Stmt, ...]:
    """``block`` with every ``Return`` (meaning: leave ``block``) replaced by structured flow."""
    if not _has_return(block):
        return block
    block = _strip_tail(_Restructure().visit_block(block))
    if not _has_return(block):
        return block
    flagged = _Flagged(fresh_name("done"))
    body = flagged.visit_block(block)
    return (n.Decl(flagged.flag, BOOL, n.Const(False, BOOL)),) + body


def eliminate_returns(kernel: n.Kernel) -> n.Kernel:
    """Apply ``remove_returns`` to the kernel body."""
    if not _has_return(kernel.body):
        return kernel
    taken = {p.name for p in kernel.params} | {b.name for b in kernel.buffers}
    taken |= declared_names(kernel.body)

    def fresh(base: str) -> str:
        name, i = base, 0
        while name in taken:
            i += 1
            name = f"{base}_{i}"
        taken.add(name)
        return name

    return rebuild(kernel, body=remove_returns(kernel.body, fresh))

"""Which ``break``/``continue``/``return`` statements leave a block of statements.

One answer for every pass that asks "does this block jump out?":

- a ``break`` or ``continue`` leaves a block when it is not inside a loop nested in the block
  (a nested ``for``/``while`` owns the jumps of its body);
- a ``return`` leaves every block it is in, nested loops included.

``block`` is a statement or a tuple of statements. ``kinds`` narrows the question to some of
``n.Break``, ``n.Continue``, ``n.Return`` (all three when omitted). Jumps are found in source
order (``then`` before ``orelse``, a ``while`` body before its update).
"""
from __future__ import annotations

from typing import Iterator

from polypy.ir import nodes as n

JUMPS: tuple[type, ...] = (n.Break, n.Continue, n.Return)


def escaping_jumps(block: n.Stmt | tuple[n.Stmt, ...], *kinds: type) -> Iterator[n.Stmt]:
    """The jumps of the given kinds in ``block`` that leave it, in source order."""
    wanted = kinds or JUMPS
    stack: list[tuple[n.Stmt, bool]] = [(s, False) for s in reversed(_stmts(block))]
    while stack:
        s, in_loop = stack.pop()
        if isinstance(s, JUMPS):
            if isinstance(s, wanted) and (isinstance(s, n.Return) or not in_loop):
                yield s
            continue
        if isinstance(s, n.If):
            children, inner = s.then + s.orelse, in_loop
        elif isinstance(s, n.For):
            children, inner = s.body, True
        elif isinstance(s, n.While):
            children, inner = s.body + s.update, True
        else:
            continue
        if inner and n.Return not in wanted:
            continue  # only returns leave a nested loop
        stack.extend((c, inner) for c in reversed(children))


def first_escaping_jump(block: n.Stmt | tuple[n.Stmt, ...], *kinds: type) -> n.Stmt | None:
    """The first jump of the given kinds that leaves ``block`` (None: there is none)."""
    return next(escaping_jumps(block, *kinds), None)


def jumps_out(block: n.Stmt | tuple[n.Stmt, ...], *kinds: type) -> bool:
    """Whether executing ``block`` may leave it early by a jump of the given kinds."""
    return first_escaping_jump(block, *kinds) is not None


def escape_kinds(block: n.Stmt | tuple[n.Stmt, ...]) -> set[str]:
    """How ``block`` may be left early: a subset of ``{"break", "continue", "return"}``."""
    return {type(s).__name__.lower() for s in escaping_jumps(block)}


def _stmts(block: n.Stmt | tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
    return (block,) if isinstance(block, n.Stmt) else tuple(block)

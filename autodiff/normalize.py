"""normalize_for_ad: the loop shapes the reverse sweep knows how to reverse.

Requires: a GPU-form kernel without ``return`` (after ``eliminate_returns``). Guarantees: same
semantics, and

* no ``continue``: ``if (c) { A; continue } B``  becomes  ``if (c) { A } else { B }``; where the
  ``continue`` is deeper, a flag skips the rest of the iteration;
* no ``break``: a ``for`` with a ``break`` becomes a ``while``; ``break`` sets a flag tested by
  the loop condition, and the rest of the iteration is skipped as for ``continue``;
* no ``while`` update block: after the above, ``update`` is simply the end of the body.

So every loop iteration runs its body from the top to the end of some structured path, which
the reverse sweep replays backwards with recorded or recomputed branch conditions.
"""
from __future__ import annotations

import dataclasses

from autodiff.names import Names
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.jumps import jumps_out
from polypy.ir.types import BOOL


def _exits(stmt: n.Stmt | tuple[n.Stmt, ...], cls: type) -> bool:
    """Whether ``stmt`` contains ``cls`` (Break/Continue) that leaves the loop being processed."""
    return jumps_out(stmt, cls)  # nested loops own their break/continue


class _SkipRest:
    """Rewrites one loop body so that ``cls`` statements end the iteration without jumping."""

    def __init__(self, cls: type, on_exit: tuple[n.Stmt, ...], names: Names):
        self.cls = cls
        self.on_exit = on_exit
        self.names = names
        self.flag: str | None = None

    def run(self, block: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        body = self.block(block)
        if self.flag is not None:
            body = (n.Decl(self.flag, BOOL, n.Const(False, BOOL)),) + body
        return body

    def block(self, block: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        out: list[n.Stmt] = []
        for i, s in enumerate(block):
            if isinstance(s, self.cls):
                return tuple(out) + self._exit(s.loc)
            if not (isinstance(s, n.If) and _exits(s, self.cls)):
                out.append(s)
                continue
            rest = block[i + 1:]
            then, orelse = s.then, s.orelse
            if then and isinstance(then[-1], self.cls) and not _exits(then[:-1], self.cls):
                out.append(n.If(s.cond, then[:-1] + self._exit(s.loc), self.block(orelse + rest), loc=s.loc))
                return tuple(out)
            if orelse and isinstance(orelse[-1], self.cls) and not _exits(orelse[:-1], self.cls):
                out.append(n.If(s.cond, self.block(then + rest), orelse[:-1] + self._exit(s.loc), loc=s.loc))
                return tuple(out)
            # General case: a flag records the exit; the rest of this block runs only without it.
            flag = self._flag()
            out.append(dataclasses.replace(s, then=self.block(s.then), orelse=self.block(s.orelse)))
            remaining = self.block(rest)
            if remaining:
                out.append(n.If(n.Unary("not", n.Var(flag, BOOL)), remaining))
            return tuple(out)
        return tuple(out)

    def _flag(self) -> str:
        if self.flag is None:
            self.flag = self.names.fresh("skip")
        return self.flag

    def _exit(self, loc) -> tuple[n.Stmt, ...]:
        if self.flag is not None:
            return (n.Assign(self.flag, n.Const(True, BOOL), loc=loc),) + self.on_exit
        return self.on_exit


def _normalize_block(block: tuple[n.Stmt, ...], names: Names) -> tuple[n.Stmt, ...]:
    out: list[n.Stmt] = []
    for s in block:
        out.extend(_normalize_stmt(s, names))
    return tuple(out)


def _skip(body: tuple[n.Stmt, ...], cls: type, on_exit: tuple[n.Stmt, ...], names: Names) -> tuple[n.Stmt, ...]:
    if not _exits(body, cls):
        return body
    rewriter = _SkipRest(cls, on_exit, names)
    first = rewriter.run(body)
    if rewriter.flag is None:
        return first
    # The flag appeared part-way: redo with the flag known from the start so every exit sets it.
    again = _SkipRest(cls, on_exit, names)
    again.flag = rewriter.flag
    return again.run(body)


def _normalize_stmt(s: n.Stmt, names: Names) -> tuple[n.Stmt, ...]:
    if isinstance(s, n.If):
        return (dataclasses.replace(s, then=_normalize_block(s.then, names), orelse=_normalize_block(s.orelse, names)),)
    if isinstance(s, n.Return):
        raise UserError("polypy grad needs kernels without early return (run eliminate_returns first)", s.loc)
    if isinstance(s, n.For):
        body = _normalize_block(s.body, names)
        body = _skip(body, n.Continue, (), names)
        if not _exits(body, n.Break):
            return (dataclasses.replace(s, body=body),)
        # for with break -> while with a flag in its condition
        flag = names.fresh("brk")
        body = _skip(body, n.Break, (n.Assign(flag, n.Const(True, BOOL), loc=s.loc),), names)
        v = n.Var(s.var, s.vtype)
        cond = n.Binary("land", n.Unary("not", n.Var(flag, BOOL)), n.Binary("lt", v, s.stop))
        step = n.Assign(s.var, n.Binary("add", v, s.step), loc=s.loc)
        return (n.Decl(s.var, s.vtype, s.start, loc=s.loc), n.Decl(flag, BOOL, n.Const(False, BOOL), loc=s.loc),
                n.While(cond, body + (step,), loc=s.loc))
    if isinstance(s, n.While):
        body = _normalize_block(s.body, names)
        update = _normalize_block(s.update, names)
        # continue jumps to the update: it skips the rest of the body only
        body = _skip(body, n.Continue, (), names) + update
        cond = s.cond
        prefix: tuple[n.Stmt, ...] = ()
        if _exits(body, n.Break):
            # break (in the body or in the update, as a do-while has) skips the rest and ends the loop
            flag = names.fresh("brk")
            body = _skip(body, n.Break, (n.Assign(flag, n.Const(True, BOOL), loc=s.loc),), names)
            prefix = (n.Decl(flag, BOOL, n.Const(False, BOOL), loc=s.loc),)
            cond = n.Binary("land", n.Unary("not", n.Var(flag, BOOL)), cond)
        return prefix + (n.While(cond, body, (), loc=s.loc),)
    return (s,)


def normalize_for_ad(kernel: n.Kernel, names: Names | None = None) -> n.Kernel:
    """Remove ``continue``, ``break`` and while-update blocks (see module docstring)."""
    names = names if names is not None else Names(kernel)
    body = _normalize_block(kernel.body, names)
    return dataclasses.replace(kernel, body=body)

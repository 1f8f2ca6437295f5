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

from autodiff.names import Names
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.jumps import jumps_out
from polypy.ir.types import BOOL
from polypy.ir.visitor import Mutator, rebuild


def _exits(stmt: n.Stmt | tuple[n.Stmt, ...], cls: type) -> bool:
    """Whether ``stmt`` contains ``cls`` (Break/Continue) that leaves the loop being processed."""
    return jumps_out(stmt, cls)  # nested loops own their break/continue


class _SkipRest(Mutator):
    """Rewrites one loop body so that ``cls`` statements end the iteration without jumping.

    A rewrite of statement lists with their siblings (``visit_block``): what follows an ``if``
    that may exit becomes its ``else`` (or is guarded by a flag). Nested loops own their jumps
    and are left alone.
    """

    def __init__(self, cls: type, on_exit: tuple[n.Stmt, ...], names: Names):
        self.cls = cls
        self.on_exit = on_exit
        self.names = names
        self.flag: str | None = None

    def run(self, block: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        body = self.visit_block(block)
        if self.flag is not None:
            body = (n.Decl(self.flag, BOOL, n.Const(False, BOOL)),) + body
        return body

    def visit_Expr(self, e: n.Expr) -> n.Expr:
        return e

    def visit_For(self, s: n.For) -> n.Stmt:
        return s  # its own break/continue

    def visit_While(self, s: n.While) -> n.Stmt:
        return s

    def visit_block(self, block: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
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
                out.append(n.If(s.cond, then[:-1] + self._exit(s.loc), self.visit_block(orelse + rest), loc=s.loc))
                return tuple(out)
            if orelse and isinstance(orelse[-1], self.cls) and not _exits(orelse[:-1], self.cls):
                out.append(n.If(s.cond, self.visit_block(then + rest), orelse[:-1] + self._exit(s.loc), loc=s.loc))
                return tuple(out)
            # General case: a flag records the exit; the rest of this block runs only without it.
            flag = self._flag()
            out.append(self.visit(s))
            remaining = self.visit_block(rest)
            if remaining:
                out.append(n.If(n.Unary("not", n.Var(flag, BOOL)), remaining))
            return tuple(out)
        return block if len(out) == len(block) else tuple(out)

    def _flag(self) -> str:
        if self.flag is None:
            self.flag = self.names.fresh("skip")
        return self.flag

    def _exit(self, loc) -> tuple[n.Stmt, ...]:
        if self.flag is not None:
            return (n.Assign(self.flag, n.Const(True, BOOL), loc=loc),) + self.on_exit
        return self.on_exit


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


class _Normalize(Mutator):
    """Loops inside out: each loop's body is normalized before the loop itself is rewritten."""

    def __init__(self, names: Names):
        self.names = names

    def visit_Expr(self, e: n.Expr) -> n.Expr:
        return e

    def visit_Return(self, s: n.Return) -> n.Stmt:
        raise UserError("polypy grad needs kernels without early return (run eliminate_returns first)", s.loc)

    def visit_For(self, s: n.For) -> n.Stmt | tuple[n.Stmt, ...]:
        names = self.names
        s = self.generic_visit(s)
        body = _skip(s.body, n.Continue, (), names)
        if not _exits(body, n.Break):
            return rebuild(s, body=body)
        # for with break -> while with a flag in its condition
        flag = names.fresh("brk")
        body = _skip(body, n.Break, (n.Assign(flag, n.Const(True, BOOL), loc=s.loc),), names)
        v = n.Var(s.var, s.vtype)
        cond = n.Binary("land", n.Unary("not", n.Var(flag, BOOL)), n.Binary("lt", v, s.stop))
        step = n.Assign(s.var, n.Binary("add", v, s.step), loc=s.loc)
        return (n.Decl(s.var, s.vtype, s.start, loc=s.loc), n.Decl(flag, BOOL, n.Const(False, BOOL), loc=s.loc),
                n.While(cond, body + (step,), loc=s.loc))

    def visit_While(self, s: n.While) -> n.Stmt | tuple[n.Stmt, ...]:
        names = self.names
        s = self.generic_visit(s)
        # continue jumps to the update: it skips the rest of the body only
        body = _skip(s.body, n.Continue, (), names) + s.update
        if not _exits(body, n.Break):
            return rebuild(s, body=body, update=())
        # break (in the body or in the update, as a do-while has) skips the rest and ends the loop
        flag = names.fresh("brk")
        body = _skip(body, n.Break, (n.Assign(flag, n.Const(True, BOOL), loc=s.loc),), names)
        cond = n.Binary("land", n.Unary("not", n.Var(flag, BOOL)), s.cond)
        return n.Decl(flag, BOOL, n.Const(False, BOOL), loc=s.loc), n.While(cond, body, (), loc=s.loc)


def normalize_for_ad(kernel: n.Kernel, names: Names | None = None) -> n.Kernel:
    """Remove ``continue``, ``break`` and while-update blocks (see module docstring)."""
    names = names if names is not None else Names(kernel)
    return rebuild(kernel, body=_Normalize(names).visit_block(kernel.body))

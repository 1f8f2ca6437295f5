"""Forward ``goto``: a jump out of nested statements to a label later in an enclosing block.

Rodinia's mummergpu leaves two loops at once with ``goto RECORD_RESULT;`` and skips a step with
``goto NEXT_SUBSTRING;``. Each label of a block that an earlier statement of the block jumps to
gets a flag, false where the block starts; a ``goto`` sets it and leaves every loop between it
and the block (``break``, and ``if (flag) break;`` after each inner loop); the statements of each
block on the way, up to the label, run only while no such flag is set::

    while (c) {                         while (c) {
      while (d) {                         bool goto_L = false;
        if (r != q) goto L;               while (d) {
        ...                                 if (r != q) { goto_L = true; break; }
      }                                     if (!goto_L) { ... }
      s;                                  }
    L:                                    if (!goto_L) { s; }
      t;                                  t;
    }                                   }

Declarations on the way are made unguarded (C++ forbids jumping over an initialization into
its variable's scope, so only declarations without one can be jumped over). Refused, located: a
``goto`` backwards or into a block (its label not later in a block that holds it), out of a
``switch``, and computed gotos.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import BOOL

from frontend.clang_setup import preorder
from frontend.lower.context import CK, decl_key

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder

LOOPS = (CK.FOR_STMT, CK.WHILE_STMT, CK.DO_STMT)


@dataclasses.dataclass(frozen=True)
class Target:
    """A label some ``goto`` jumps forward to: its flag, and the loops and switches around its block."""

    flag: str
    loop_depth: int
    switches: int
    offset: int  # where the label is in its file


def label_of(goto: ci.Cursor) -> ci.Cursor | None:
    ref = next((ch for ch in goto.get_children() if ch.kind == CK.LABEL_REF), None)
    return ref.referenced if ref is not None else None


def outward_gotos(c: ci.Cursor) -> list[tuple]:
    """The label keys of the ``goto``s inside ``c`` whose label is not inside ``c``."""
    inside: set[tuple] = set()
    jumps: list[tuple] = []
    for x in preorder(c):
        if x.kind == CK.LABEL_STMT:
            inside.add(decl_key(x))
        elif x.kind == CK.GOTO_STMT:
            label = label_of(x)
            if label is not None:
                jumps.append(decl_key(label))
    return [k for k in dict.fromkeys(jumps) if k not in inside]


def compound(kb: KernelBuilder, c: ci.Cursor) -> None:
    """A block ``{ ... }`` whose statements may jump forward (see the module)."""
    children = list(c.get_children())
    if not kb.goto_targets and not any(ch.kind == CK.LABEL_STMT for ch in children):
        for child in children:  # (no label around: nothing to look for)
            kb.statement(child)
        return
    registered = []
    for child in children:
        if child.kind == CK.LABEL_STMT:
            key = decl_key(child)
            flag = kb.names.fresh("goto_" + child.spelling)
            kb.emit(n.Decl(flag, BOOL, n.Const(False, BOOL), loc=kb.loc(child)))
            kb.goto_targets[key] = Target(flag, kb.loop_depth, len(kb.switch_markers), child.extent.start.offset)
            registered.append(key)
    try:
        active: list[str] = []  # flags a statement before this one may have set
        for child in children:
            if child.kind == CK.LABEL_STMT and decl_key(child) in kb.goto_targets:
                flag = kb.goto_targets[decl_key(child)].flag
                active = [f for f in active if f != flag]
            if active and child.kind != CK.DECL_STMT:
                with kb.sub_block() as body:
                    kb.statement(child)
                kb.emit(n.If(n.Unary("not", any_of(active), loc=kb.loc(child)), tuple(body), loc=kb.loc(child)))
            else:
                kb.statement(child)
            for key in outward_gotos(child):
                target = kb.goto_targets.get(key)
                if target is not None and target.flag not in active:
                    active.append(target.flag)
    finally:
        for key in registered:
            del kb.goto_targets[key]


def any_of(flags: list[str]) -> n.Expr:
    out: n.Expr = n.Var(flags[0], BOOL)
    for f in flags[1:]:
        out = n.Binary("lor", out, n.Var(f, BOOL))
    return out


def goto_stmt(kb: KernelBuilder, c: ci.Cursor) -> None:
    label = label_of(c)
    target = kb.goto_targets.get(decl_key(label)) if label is not None else None
    if target is None or target.offset < c.extent.start.offset:
        raise kb.error("goto is supported only forward, to a label later in a block that holds the goto "
                       "(not backwards, not into a block)", c)
    if len(kb.switch_markers) > target.switches:
        raise kb.error("goto out of a switch is not supported", c)
    loc = kb.loc(c)
    kb.emit(n.Assign(target.flag, n.Const(True, BOOL), loc=loc))
    if kb.loop_depth > target.loop_depth:
        kb.emit(n.Break(loc=loc))


def after_loop(kb: KernelBuilder, loop: ci.Cursor) -> None:
    """After a loop that jumped out of itself: leave the loop around it too, up to the label's block."""
    for key in outward_gotos(loop):
        target = kb.goto_targets.get(key)
        if target is not None and kb.loop_depth > target.loop_depth:
            loc = kb.loc(loop)
            kb.emit(n.If(n.Var(target.flag, BOOL), (n.Break(loc=loc),), loc=loc))


def label_stmt(kb: KernelBuilder, c: ci.Cursor) -> None:
    """``L: s``: the statement (the block holding it cleared the label's flag from its guards)."""
    for child in c.get_children():
        if child.kind.is_statement() or child.kind.is_expression():
            kb.statement(child)

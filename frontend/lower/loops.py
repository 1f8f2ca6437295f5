"""Loops: ``while``, ``do``, ``for``; a ``for`` with a counter that provably runs
``start, start + step, ...`` below a fixed bound becomes an IR ``For``, any other loop a ``While``."""
from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import BOOL

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.clang_setup import binary_operator, preorder, unary_operator
from frontend.lower import declarations
from frontend.lower.context import CK, decl_key
from frontend.lower.helpers import strip, strip_parens
from frontend.values import VarLV

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


def loop_body(kb: KernelBuilder, body: ci.Cursor) -> list[n.Stmt]:
    kb.loop_depth += 1
    try:
        with kb.sub_block() as out:
            kb.statement(body)
    finally:
        kb.loop_depth -= 1
    return out


def while_stmt(kb: KernelBuilder, c: ci.Cursor) -> None:
    children = list(c.get_children())
    if children[0].kind == CK.VAR_DECL:
        raise kb.error("declarations in while conditions are not supported", children[0])
    with kb.sub_block() as cond_stmts:
        cond = kb.condition(children[0])
    body = loop_body(kb, children[1])
    kb.emit(make_loop(kb, cond, tuple(cond_stmts), tuple(body), (), c))


def make_loop(kb: KernelBuilder, cond: n.Expr, cond_stmts: tuple[n.Stmt, ...], body: tuple[n.Stmt, ...],
              update: tuple[n.Stmt, ...], c: ci.Cursor) -> n.Stmt:
    loc = kb.loc(c)
    if not cond_stmts:
        return n.While(cond, body, update, loc=loc)
    # The condition needs statements: evaluate it at the top of every iteration.
    test = cond_stmts + (n.If(n.Unary("not", cond, loc=loc), (n.Break(loc=loc),), loc=loc),)
    return n.While(n.Const(True, BOOL), test + body, update, loc=loc)


def do_stmt(kb: KernelBuilder, c: ci.Cursor) -> None:
    body_c, cond_c = list(c.get_children())
    body = loop_body(kb, body_c)
    with kb.sub_block() as update:
        cond = kb.condition(cond_c)
        kb.emit(n.If(n.Unary("not", cond), (n.Break(loc=kb.loc(cond_c)),), loc=kb.loc(cond_c)))
    kb.emit(n.While(n.Const(True, BOOL), tuple(body), tuple(update), loc=kb.loc(c)))


def for_parts(kb: KernelBuilder, c: ci.Cursor) -> tuple[ci.Cursor | None, ci.Cursor | None, ci.Cursor | None,
              ci.Cursor]:
    """(init, cond, inc, body) of a for statement; clang omits the absent parts, so the
    position of each child relative to the header's two semicolons tells which it is."""
    children = list(c.get_children())
    body = children[-1]
    semis: list[int] = []
    depth = 0
    for tok in c.get_tokens():
        if tok.spelling == "(":
            depth += 1
        elif tok.spelling == ")":
            depth -= 1
            if depth == 0:
                break
        elif tok.spelling == ";" and depth == 1:
            semis.append(tok.extent.start.offset)
    if len(semis) != 2:
        raise kb.error("cannot read this for statement (macro in its header?)", c)
    init = cond = inc = None
    for ch in children[:-1]:
        start = ch.extent.start.offset
        if start < semis[0]:
            init = ch
        elif start < semis[1]:
            cond = ch
        else:
            inc = ch
    return init, cond, inc, body


def for_stmt(kb: KernelBuilder, c: ci.Cursor) -> None:
    init, cond_c, inc, body_c = for_parts(kb, c)
    counted = counted_loop(kb, c, init, cond_c, inc, body_c)
    if counted is not None:
        kb.emit(counted)
        return
    if init is not None:
        kb.statement(init)
    with kb.sub_block() as cond_stmts:
        cond = kb.condition(cond_c) if cond_c is not None else n.Const(True, BOOL)
    body = loop_body(kb, body_c)
    with kb.sub_block() as update:
        if inc is not None:
            kb.expr(inc, discard=True)
    kb.emit(make_loop(kb, cond, tuple(cond_stmts), tuple(body), tuple(update), c))


def counted_loop(kb: KernelBuilder, c, init, cond_c, inc, body_c) -> n.For | None:
    """``for (int i = a; i < b; i += s)`` with invariant b, s and i not assigned in the body."""
    if init is None or cond_c is None or inc is None or init.kind != CK.DECL_STMT:
        return None
    decls = list(init.get_children())
    if len(decls) != 1 or decls[0].kind != CK.VAR_DECL:
        return None
    var_decl = decls[0]
    vt = tm.scalar_type(var_decl.type)
    start_c = declarations.initializer(kb, var_decl)
    if vt is None or not vt.is_int or start_c is None:
        return None
    key = decl_key(var_decl)
    cond = strip(cond_c)
    if cond.kind != CK.BINARY_OPERATOR or binary_operator(cond) not in ("<", "<=", ">", ">="):
        return None
    lhs, rhs = (strip(x) for x in cond.get_children())
    op = binary_operator(cond)
    if _is_ref_to(lhs, key) and op in ("<", "<="):
        bound_c = list(cond.get_children())[1]
    elif _is_ref_to(rhs, key) and op in (">", ">="):
        bound_c = list(cond.get_children())[0]
        op = {">": "<", ">=": "<="}[op]
    else:
        return None
    if op == "<=" and not vt.is_signed:
        return None
    step_c = _increment_of(inc, key)
    if step_c is None:
        return None
    # The counter, the bound and the step must not change in the body (checked on the source,
    # before anything is lowered, so that a refusal leaves no trace).
    invariant = [key] + [decl_key(r.referenced) for x in (bound_c, step_c) if not isinstance(x, int)
                         for r in preorder(x) if r.kind == CK.DECL_REF_EXPR and r.referenced is not None]
    if any(kb.assignments.assigns(body_c, k) for k in invariant):
        return None
    # The pieces must be pure and load-free; otherwise this is a while loop.
    with kb.sub_block() as pre:
        bound = kb.scalar(bound_c)
        step = n.Const(1, vt) if isinstance(step_c, int) else kb.scalar(step_c)
        start = convert(kb.scalar(start_c), vt)
    if pre or bound.type != vt:
        return None
    if any(isinstance(x, n.Load) for e in (bound, step) for x in _walk_expr(e)):
        return None
    step = convert(step, vt)
    if op == "<=":
        bound = n.Binary("add", bound, n.Const(1, vt))
    var = kb.names.fresh(var_decl.spelling)
    kb.bind(var_decl, VarLV(var, vt))
    body = loop_body(kb, body_c)
    return n.For(var, vt, start, bound, step, tuple(body), loc=kb.loc(c))


def _is_ref_to(c: ci.Cursor, key: tuple) -> bool:
    return c.kind == CK.DECL_REF_EXPR and c.referenced is not None and decl_key(c.referenced) == key


def _increment_of(inc: ci.Cursor, key: tuple) -> ci.Cursor | int | None:
    """The step of ``i++``, ``++i``, ``i += s``, ``i = i + s``; None for anything else."""
    inc = strip_parens(inc)
    if inc.kind == CK.UNARY_OPERATOR and unary_operator(inc) == "++":
        return 1 if _is_ref_to(strip(next(iter(inc.get_children()))), key) else None
    if inc.kind == CK.COMPOUND_ASSIGNMENT_OPERATOR and binary_operator(inc) == "+=":
        target, step = list(inc.get_children())
        return step if _is_ref_to(strip(target), key) else None
    if inc.kind == CK.BINARY_OPERATOR and binary_operator(inc) == "=":
        target, value = list(inc.get_children())
        value = strip(value)
        if _is_ref_to(strip(target), key) and value.kind == CK.BINARY_OPERATOR and binary_operator(value) == "+":
            a, b = list(value.get_children())
            if _is_ref_to(strip(a), key):
                return b
    return None


class AssignmentIndex:
    """Whether a statement may assign a declaration (``=``, ``+=``..., ``++``/``--``, ``&x``, or
    ``x`` passed by reference), answered for every loop of a nest with one walk of the source:
    the first question about a statement walks it, numbering its cursors in preorder and noting
    the declaration each assignment targets; a question about a statement already walked (a loop
    nested in a loop asked about before) looks its numbers up. Asking each of 1,000 nested loops
    with a walk of its own body took quadratic time."""

    def __init__(self) -> None:
        self.spans: dict[ci.Cursor, tuple[int, int]] = {}  # cursor -> its first and last preorder numbers
        self.sites: dict[tuple, list[int]] = {}  # declaration key -> numbers of the cursors assigning it, ascending
        self.numbered = 0

    def assigns(self, body: ci.Cursor, key: tuple) -> bool:
        span = self.spans.get(body)
        if span is None:
            self._index(body)
            span = self.spans[body]
        sites = self.sites.get(key, ())
        i = bisect.bisect_left(sites, span[0])
        return i < len(sites) and sites[i] <= span[1]

    def _index(self, root: ci.Cursor) -> None:
        stack: list[tuple[ci.Cursor, int | None]] = [(root, None)]
        while stack:
            c, first = stack.pop()
            if first is not None:  # every cursor below c is numbered
                self.spans[c] = (first, self.numbered - 1)
                continue
            number = self.numbered
            self.numbered += 1
            for key in _assigned_keys(c):
                self.sites.setdefault(key, []).append(number)
            stack.append((c, number))
            children = list(c.get_children())
            children.reverse()
            stack.extend((child, None) for child in children)


def _assigned_keys(c: ci.Cursor) -> list[tuple]:
    """The declarations the cursor ``c`` itself may assign."""
    target = None
    if c.kind in (CK.BINARY_OPERATOR, CK.COMPOUND_ASSIGNMENT_OPERATOR):
        op = binary_operator(c)
        if op.endswith("=") and op not in ("==", "!=", "<=", ">="):
            target = next(iter(c.get_children()), None)
    elif c.kind == CK.UNARY_OPERATOR and unary_operator(c) in ("++", "--", "&"):
        target = next(iter(c.get_children()), None)
    elif c.kind == CK.CALL_EXPR:
        # A reference parameter could modify the counter: be conservative.
        return [decl_key(a.referenced) for a in list(c.get_children())[1:]
                if a.kind == CK.DECL_REF_EXPR and a.referenced is not None]
    if target is None:
        return []
    target = strip(target)
    if target.kind == CK.DECL_REF_EXPR and target.referenced is not None:
        return [decl_key(target.referenced)]
    return []


def _walk_expr(e: n.Expr):
    from polypy.ir.visitor import walk

    return walk(e)

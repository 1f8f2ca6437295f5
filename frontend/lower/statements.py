"""Statements: dispatch, blocks, ``if``, ``break``/``continue``/``return``."""
from __future__ import annotations

from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.errors import UserError
from polypy.ir import nodes as n

from frontend import ctypes_map as tm
from frontend.clang_setup import cursor_loc, unary_operator
from frontend.lower import gotos, inlining, place_choice
from frontend.lower.context import CK, has_attr
from frontend.lower.declarations import decl_stmt
from frontend.lower.loops import do_stmt, for_stmt, while_stmt
from frontend.lower.range_for import range_for
from frontend.lower.switch import switch_stmt
from frontend.lower.helpers import ArrayRef, strip
from frontend.values import ChoiceVarLV, Closure, ClosureResult, PendingPtrLV, PtrVarLV, RefResult

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


# ------------------------------------------------------------------ statements
def statement(kb: KernelBuilder, c: ci.Cursor) -> None:
    try:
        _statement(kb, c)
    except UserError as e:
        if e.loc is None:  # raised where no cursor was at hand: the innermost statement's place
            e.loc = cursor_loc(c)
        raise


def _statement(kb: KernelBuilder, c: ci.Cursor) -> None:
    kind = c.kind
    handler = _STMT_HANDLERS.get(kind)
    if handler is not None:
        handler(kb, c)
        if kb.goto_targets and kind in gotos.LOOPS:
            gotos.after_loop(kb, c)  # a goto out of it may leave the loop around it too
        return
    if kind.is_expression():
        kb.expr(c, discard=True)
        return
    if kind == CK.UNEXPOSED_STMT:
        # An attributed statement (`#pragma unroll` before a loop): the hint does not change
        # what the loop computes.
        inner = [ch for ch in c.get_children() if ch.kind.is_statement() or ch.kind.is_expression()]
        if len(inner) == 1:
            statement(kb, inner[0])
            return
    if kind == CK.INDIRECT_GOTO_STMT:
        raise kb.error("computed goto is not supported", c)
    if kind in (CK.ASM_STMT, CK.MS_ASM_STMT):
        raise kb.error("inline assembly is not supported", c)
    raise kb.error(f"unsupported statement ({kind.name.lower()})", c)


def null_stmt(kb: KernelBuilder, c: ci.Cursor) -> None:
    return None


def if_stmt(kb: KernelBuilder, c: ci.Cursor) -> None:
    children = list(c.get_children())
    if children and children[0].kind in (CK.DECL_STMT, CK.VAR_DECL):
        raise kb.error("declarations in if conditions are not supported", children[0])
    cond = kb.condition(children[0])
    if _never(cond) and len(children) == 2 and \
            not any(x.kind == CK.LABEL_STMT for x in children[1].walk_preorder()):
        # `if (false && ...) __builtin_unreachable();` (libstdc++'s constant-evaluation checks in
        # std::clamp...): a branch never taken, no label in it; nothing to lower
        return
    with kb.sub_block() as then:
        statement(kb, children[1])
    orelse: list[n.Stmt] = []
    if len(children) > 2:
        with kb.sub_block() as orelse:
            statement(kb, children[2])
    kb.emit(n.If(cond, tuple(then), tuple(orelse), loc=kb.loc(c)))


def _never(cond: n.Expr) -> bool:
    """Whether ``cond`` is false whatever the values (``false``, ``false && x``)."""
    if isinstance(cond, n.Const):
        return not cond.value
    return isinstance(cond, n.Binary) and cond.op == "land" and (_never(cond.a) or _never(cond.b))


def break_stmt(kb: KernelBuilder, c: ci.Cursor) -> None:
    if kb.loop_depth == 0 and kb.switch_markers:
        # Leaves the innermost switch: a marker the switch lowering replaces (see ``switch``).
        marker = n.Return(loc=kb.loc(c))
        kb.switch_markers[-1][id(marker)] = marker
        kb.emit(marker)
        return
    if kb.loop_depth == 0:
        raise kb.error("break outside a loop is not supported", c)
    kb.emit(n.Break(loc=kb.loc(c)))


def continue_stmt(kb: KernelBuilder, c: ci.Cursor) -> None:
    kb.emit(n.Continue(loc=kb.loc(c)))


def return_stmt(kb: KernelBuilder, c: ci.Cursor) -> None:
    children = list(c.get_children())
    frame = kb.frame
    if children and isinstance(frame.result, RefResult):
        # `return a[i];` of `float& at(int i)`: the place. A `const T&` result of another
        # expression (`return a < b ? b : a;`) is read now: the return is the body's last statement.
        e = strip(children[0])
        target_t = tm.strip_reference(frame.cursor.result_type)
        if e.kind in _PLACES or not target_t.is_const_qualified() or _conditional_place(e):
            # (`return b < a ? b : a;` of `const T& lo(const T& a, const T& b)`: one of the two
            # places, which a `const T&` bound to the result sees change)
            local = next(filter(None, map(_callee_local, _sides(e))), None)
            if local is not None:
                # CUDA's reference would outlive the object it names (undefined behaviour).
                raise kb.error(f"'{frame.cursor.spelling}' returns a reference to '{local}', a local "
                               "variable or by-value parameter of its own, which ends with the call", e)
            if frame.result.choices is not None:  # one of several returns (place_choice.py)
                place_choice.returned_place(kb, frame.result, kb.lvalue(e), e)
            else:
                frame.result.target = kb.lvalue(e)
        elif frame.result.choices is not None:
            raise kb.error(f"'{frame.cursor.spelling}' returns a const reference to a value from one of several "
                           "returns, which is not supported", e)
        else:
            frame.result.target = inlining.copy_to_local(kb, kb.expr(e), target_t, "ret", e)
    elif children and isinstance(frame.result, (PendingPtrLV, PtrVarLV, ChoiceVarLV)):
        # A function returning a pointer: the first `return` fixes the buffer it points into; a
        # return into another makes the result a pointer into one of several (pointer_choice.py).
        value = kb.expr(children[0])
        if isinstance(value, ArrayRef):
            value = value.decay(kb)
        if isinstance(frame.result, PendingPtrLV):
            frame.result = kb.assign_pending(frame.result, value, children[0])
        kb.assign(frame.result, value, children[0])
    elif children and isinstance(frame.result, ClosureResult):
        frame.result.closure = returned_closure(kb, kb.expr(children[0]), children[0])
    elif children and frame.result is not None:
        value = kb.expr(children[0])
        kb.assign(frame.result, value, children[0])
    elif children:
        kb.expr(children[0], discard=True)
    kb.emit(n.Return(loc=kb.loc(c)))


def returned_closure(kb: KernelBuilder, value, e: ci.Cursor) -> Closure:
    """The closure ``return [s](float x) { ... };`` gives the caller; a capture by reference of
    the returning function's own local or by-value parameter would dangle (refused)."""
    if not isinstance(value, Closure):
        raise kb.error(f"'{kb.frame.cursor.spelling}' returns a lambda polypy cannot follow", e)
    fn = kb.frame.cursor
    for decl in value.by_reference:
        if decl is None:
            raise kb.error(f"'{fn.spelling}' returns a lambda with a reference init-capture, which is not "
                           "supported in device code", e)
        parent = decl.semantic_parent
        if not tm.is_reference(decl.type) and parent is not None and parent.get_usr() == fn.get_usr():
            raise kb.error(f"'{fn.spelling}' returns a lambda capturing '{decl.spelling}', its own local or "
                           "by-value parameter, by reference: it would dangle after the call", e)
    return value


def _conditional_place(e: ci.Cursor) -> bool:
    """Whether ``e`` is a conditional whose sides are places (``c ? a : b``, nested too)."""
    return e.kind == CK.CONDITIONAL_OPERATOR and all(
        side.kind in _PLACES or _conditional_place(side) for side in (strip(x) for x in list(e.get_children())[1:]))


def _sides(e: ci.Cursor) -> list[ci.Cursor]:
    """The places a conditional place may name (``e`` itself for any other place)."""
    if e.kind != CK.CONDITIONAL_OPERATOR:
        return [e]
    return [x for side in list(e.get_children())[1:] for x in _sides(strip(side))]


def _callee_local(e: ci.Cursor) -> str | None:
    """The name of the automatic variable (a local or by-value parameter) of the function being
    returned from whose storage the place ``e`` lies in, or None (an element through a pointer, a
    reference, shared or namespace-scope memory, a member of ``*this``)."""
    while True:
        e = strip(e)
        children = list(e.get_children())
        if e.kind == CK.MEMBER_REF_EXPR and children and not tm.is_pointer(children[0].type):
            e = children[0]
        elif e.kind == CK.ARRAY_SUBSCRIPT_EXPR and len(children) == 2 and \
                tm.canonical(strip(children[0]).type).kind == ci.TypeKind.CONSTANTARRAY:
            e = children[0]
        elif e.kind == CK.UNARY_OPERATOR and len(children) == 1 and strip(children[0]).kind == CK.UNARY_OPERATOR \
                and unary_operator(e) == "*" and unary_operator(strip(children[0])) == "&":
            e = next(iter(strip(children[0]).get_children()))
        else:
            break
    r = e.referenced if e.kind == CK.DECL_REF_EXPR else None
    if r is None or r.kind not in (CK.VAR_DECL, CK.PARM_DECL) or tm.is_reference(r.type):
        return None
    if r.kind == CK.VAR_DECL and (has_attr(r, CK.CUDASHARED_ATTR, "polypy_shared") or
                                  r.storage_class in (ci.StorageClass.EXTERN, ci.StorageClass.STATIC) or
                                  r.semantic_parent is None or
                                  r.semantic_parent.kind in (CK.TRANSLATION_UNIT, CK.NAMESPACE, CK.STRUCT_DECL,
                                                             CK.CLASS_DECL, CK.CLASS_TEMPLATE)):
        return None
    return r.spelling


# Expressions whose place ``lvalue`` finds.
_PLACES = (CK.DECL_REF_EXPR, CK.MEMBER_REF_EXPR, CK.ARRAY_SUBSCRIPT_EXPR, CK.UNARY_OPERATOR)

_STMT_HANDLERS = {
    CK.COMPOUND_STMT: gotos.compound,
    CK.GOTO_STMT: gotos.goto_stmt,
    CK.LABEL_STMT: gotos.label_stmt,
    CK.DECL_STMT: decl_stmt,
    CK.IF_STMT: if_stmt,
    CK.FOR_STMT: for_stmt,
    CK.CXX_FOR_RANGE_STMT: range_for,
    CK.WHILE_STMT: while_stmt,
    CK.DO_STMT: do_stmt,
    CK.BREAK_STMT: break_stmt,
    CK.CONTINUE_STMT: continue_stmt,
    CK.RETURN_STMT: return_stmt,
    CK.NULL_STMT: null_stmt,
    CK.SWITCH_STMT: switch_stmt,
}

"""Statements: dispatch, blocks, ``if``, ``break``/``continue``/``return``."""
from __future__ import annotations

import clang.cindex as ci

from polypy.errors import UserError
from polypy.ir import nodes as n

from frontend import ctypes_map as tm
from frontend.clang_setup import cursor_loc, unary_operator
from frontend.lower.context import CK, has_attr
from frontend.lower.helpers import _ArrayRef, _strip
from frontend.values import ChoiceVarLV, PendingPtrLV, PtrVarLV, RefResult


class StatementLowering:
    """Part of ``KernelBuilder`` (see ``frontend.lower``)."""

    # ------------------------------------------------------------------ statements
    def statement(self, c: ci.Cursor) -> None:
        try:
            self._statement(c)
        except UserError as e:
            if e.loc is None:  # raised where no cursor was at hand: the innermost statement's place
                e.loc = cursor_loc(c)
            raise

    def _statement(self, c: ci.Cursor) -> None:
        kind = c.kind
        handler = _STMT_HANDLERS.get(kind)
        if handler is not None:
            getattr(self, handler)(c)
            return
        if kind.is_expression():
            self.expr(c, discard=True)
            return
        if kind == CK.UNEXPOSED_STMT:
            # An attributed statement (`#pragma unroll` before a loop): the hint does not change
            # what the loop computes.
            inner = [ch for ch in c.get_children() if ch.kind.is_statement() or ch.kind.is_expression()]
            if len(inner) == 1:
                self.statement(inner[0])
                return
        if kind in (CK.GOTO_STMT, CK.INDIRECT_GOTO_STMT, CK.LABEL_STMT):
            raise self.error("goto is not supported", c)
        if kind in (CK.ASM_STMT, CK.MS_ASM_STMT):
            raise self.error("inline assembly is not supported", c)
        raise self.error(f"unsupported statement ({kind.name.lower()})", c)

    def compound(self, c: ci.Cursor) -> None:
        for child in c.get_children():
            self.statement(child)

    def null_stmt(self, c: ci.Cursor) -> None:
        return None


    def if_stmt(self, c: ci.Cursor) -> None:
        children = list(c.get_children())
        if children and children[0].kind in (CK.DECL_STMT, CK.VAR_DECL):
            raise self.error("declarations in if conditions are not supported", children[0])
        cond = self.condition(children[0])
        with self.sub_block() as then:
            self.statement(children[1])
        orelse: list[n.Stmt] = []
        if len(children) > 2:
            with self.sub_block() as orelse:
                self.statement(children[2])
        self.emit(n.If(cond, tuple(then), tuple(orelse), loc=self.loc(c)))


    def break_stmt(self, c: ci.Cursor) -> None:
        if self.loop_depth == 0 and self.switch_markers:
            # Leaves the innermost switch: a marker the switch lowering replaces (see ``switch``).
            marker = n.Return(loc=self.loc(c))
            self.switch_markers[-1][id(marker)] = marker
            self.emit(marker)
            return
        if self.loop_depth == 0:
            raise self.error("break outside a loop is not supported", c)
        self.emit(n.Break(loc=self.loc(c)))

    def continue_stmt(self, c: ci.Cursor) -> None:
        self.emit(n.Continue(loc=self.loc(c)))

    def return_stmt(self, c: ci.Cursor) -> None:
        children = list(c.get_children())
        frame = self.frame
        if children and isinstance(frame.result, RefResult):
            # `return a[i];` of `float& at(int i)`: the place. A `const T&` result of another
            # expression (`return a < b ? b : a;`) is read now: the return is the body's last statement.
            e = _strip(children[0])
            target_t = tm.strip_reference(frame.cursor.result_type)
            if e.kind in _PLACES or not target_t.is_const_qualified():
                local = _callee_local(e)
                if local is not None:
                    # CUDA's reference would outlive the object it names (undefined behaviour).
                    raise self.error(f"'{frame.cursor.spelling}' returns a reference to '{local}', a local "
                                     "variable or by-value parameter of its own, which ends with the call", e)
                frame.result.target = self.lvalue(e)
            else:
                frame.result.target = self.copy_to_local(self.expr(e), target_t, "ret", e)
        elif children and isinstance(frame.result, (PendingPtrLV, PtrVarLV, ChoiceVarLV)):
            # A function returning a pointer: the first `return` fixes the buffer it points into; a
            # return into another makes the result a pointer into one of several (pointer_choice.py).
            value = self.expr(children[0])
            if isinstance(value, _ArrayRef):
                value = value.decay(self)
            if isinstance(frame.result, PendingPtrLV):
                frame.result = self.assign_pending(frame.result, value, children[0])
            self.assign(frame.result, value, children[0])
        elif children and frame.result is not None:
            value = self.expr(children[0])
            self.assign(frame.result, value, children[0])
        elif children:
            self.expr(children[0], discard=True)
        self.emit(n.Return(loc=self.loc(c)))


def _callee_local(e: ci.Cursor) -> str | None:
    """The name of the automatic variable (a local or by-value parameter) of the function being
    returned from whose storage the place ``e`` lies in, or None (an element through a pointer, a
    reference, shared or namespace-scope memory, a member of ``*this``)."""
    while True:
        e = _strip(e)
        children = list(e.get_children())
        if e.kind == CK.MEMBER_REF_EXPR and children and not tm.is_pointer(children[0].type):
            e = children[0]
        elif e.kind == CK.ARRAY_SUBSCRIPT_EXPR and len(children) == 2 and \
                tm.canonical(_strip(children[0]).type).kind == ci.TypeKind.CONSTANTARRAY:
            e = children[0]
        elif e.kind == CK.UNARY_OPERATOR and len(children) == 1 and _strip(children[0]).kind == CK.UNARY_OPERATOR \
                and unary_operator(e) == "*" and unary_operator(_strip(children[0])) == "&":
            e = next(iter(_strip(children[0]).get_children()))
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
    CK.COMPOUND_STMT: "compound",
    CK.DECL_STMT: "decl_stmt",
    CK.IF_STMT: "if_stmt",
    CK.FOR_STMT: "for_stmt",
    CK.WHILE_STMT: "while_stmt",
    CK.DO_STMT: "do_stmt",
    CK.BREAK_STMT: "break_stmt",
    CK.CONTINUE_STMT: "continue_stmt",
    CK.RETURN_STMT: "return_stmt",
    CK.NULL_STMT: "null_stmt",
    CK.SWITCH_STMT: "switch_stmt",
}

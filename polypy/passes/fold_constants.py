"""fold_constants: evaluate constant sub-expressions and apply algebraic identities.

Requires: a verified kernel. Guarantees: every rewrite preserves C semantics exactly (integer
identities only where they hold with wrapping; float identities only where they hold for NaN,
infinities and signed zeros), so the result computes the same values bit for bit.

The identities are a table keyed by operator (``RULES``); each rule looks at one node whose
children are already folded and returns a replacement or ``None``.
"""
from __future__ import annotations

from typing import Callable

from polypy.ir import nodes as n
from polypy.ir.semantics import eval_binary, eval_bitcast, eval_cast, eval_unary
from polypy.ir.visitor import Mutator

Rule = Callable[[n.Binary], n.Expr | None]


def _is_const(e: n.Expr, value: int | float | None = None) -> bool:
    if not isinstance(e, n.Const):
        return False
    if value is None:
        return True
    return e.value == value and not isinstance(e.value, bool)


def _int(e: n.Binary) -> bool:
    return e.type.is_int


def _rule_add_zero(e: n.Binary) -> n.Expr | None:
    # x + 0 -> x holds for integers; for floats only x + (-0.0) is exact (x + 0.0 turns -0.0 into 0.0).
    if _int(e) and _is_const(e.b, 0):
        return e.a
    if _int(e) and _is_const(e.a, 0):
        return e.b
    return None


def _rule_sub_zero(e: n.Binary) -> n.Expr | None:
    if _int(e) and _is_const(e.b, 0):
        return e.a
    return None


def _rule_mul_one(e: n.Binary) -> n.Expr | None:
    if _is_const(e.b, 1):
        return e.a
    if _is_const(e.a, 1):
        return e.b
    if _int(e) and (_is_const(e.a, 0) or _is_const(e.b, 0)):
        return n.Const(0, e.type, loc=e.loc)
    return None


def _rule_div_one(e: n.Binary) -> n.Expr | None:
    if _is_const(e.b, 1):
        return e.a
    return None


def _rule_reassociate(e: n.Binary) -> n.Expr | None:
    """(x + c1) + c2 -> x + (c1 + c2), and the same with -, for integers (wrapping is associative)."""
    if not _int(e) or not isinstance(e.b, n.Const):
        return None
    inner = e.a
    if not (isinstance(inner, n.Binary) and inner.op in ("add", "sub") and isinstance(inner.b, n.Const)):
        return None
    c1 = inner.b.value if inner.op == "add" else eval_unary("neg", inner.b.value, e.type)
    c2 = e.b.value if e.op == "add" else eval_unary("neg", e.b.value, e.type)
    total = eval_binary("add", c1, c2, e.type)
    if total is None:
        return None
    if total == 0:
        return inner.a
    return n.Binary("add", inner.a, n.Const(total, e.type), loc=e.loc)


def _rule_land(e: n.Binary) -> n.Expr | None:
    # `x && false` is false too: expressions are pure, and not evaluating `x` (a load) faults nowhere.
    if isinstance(e.a, n.Const):
        return e.b if e.a.value else n.Const(False, e.type, loc=e.loc)
    if isinstance(e.b, n.Const):
        return e.a if e.b.value else n.Const(False, e.type, loc=e.loc)
    return None


def _rule_lor(e: n.Binary) -> n.Expr | None:
    if isinstance(e.a, n.Const):
        return n.Const(True, e.type, loc=e.loc) if e.a.value else e.b
    if isinstance(e.b, n.Const):
        return n.Const(True, e.type, loc=e.loc) if e.b.value else e.a
    return None


RULES: dict[str, tuple[Rule, ...]] = {
    "add": (_rule_add_zero, _rule_reassociate),
    "sub": (_rule_sub_zero, _rule_reassociate),
    "mul": (_rule_mul_one,),
    "div": (_rule_div_one,),
    "land": (_rule_land,),
    "lor": (_rule_lor,),
}


class _Folder(Mutator):
    def visit_Binary(self, e: n.Binary) -> n.Expr:
        e = self.generic_visit(e)
        if not isinstance(e, n.Binary):
            return e
        if isinstance(e.a, n.Const) and isinstance(e.b, n.Const):
            value = eval_binary(e.op, e.a.value, e.b.value, e.a.type)
            if value is not None:
                return n.Const(value, e.type, loc=e.loc)
        for rule in RULES.get(e.op, ()):
            replacement = rule(e)
            if replacement is not None:
                return self.visit(replacement) if replacement is not e else e
        return e

    def visit_Unary(self, e: n.Unary) -> n.Expr:
        e = self.generic_visit(e)
        if isinstance(e.x, n.Const):
            value = eval_unary(e.op, e.x.value, e.x.type)
            if value is not None:
                return n.Const(value, e.type, loc=e.loc)
        if e.op in ("not", "bnot") and isinstance(e.x, n.Unary) and e.x.op == e.op:
            return e.x.x
        return e

    def visit_Cast(self, e: n.Cast) -> n.Expr:
        e = self.generic_visit(e)
        if e.x.type == e.to:
            return e.x
        inner = e.x
        if isinstance(inner, n.Cast) and inner.x.type == e.to and e.to.is_int and inner.to.is_int \
                and inner.to.bits == e.to.bits:
            # (u32)((i32)x) with x: u32 — a same-width reinterpretation and back is the identity.
            return inner.x
        if isinstance(e.x, n.Const):
            value = eval_cast(e.x.value, e.x.type, e.to)
            if value is not None:
                return n.Const(value, e.to, loc=e.loc)
        return e

    def visit_Call(self, e: n.Call) -> n.Expr:
        e = self.generic_visit(e)
        if e.fn != "bitcast":
            return e
        x = e.args[0]
        if isinstance(x, n.Call) and x.fn == "bitcast" and x.args[0].type == e.rtype:
            return x.args[0]  # the bits there and back
        if isinstance(x, n.Const):
            value = eval_bitcast(x.value, x.type, e.rtype)
            if value is not None:
                return n.Const(value, e.rtype, loc=e.loc)
        return e

    def visit_Select(self, e: n.Select) -> n.Expr:
        e = self.generic_visit(e)
        if isinstance(e.cond, n.Const):
            return e.a if e.cond.value else e.b
        if e.a == e.b:
            return e.a
        return e

    def visit_If(self, s: n.If) -> n.Stmt | tuple[n.Stmt, ...] | None:
        s = self.generic_visit(s)
        if isinstance(s.cond, n.Const):
            return s.then if s.cond.value else s.orelse
        return s

    def visit_While(self, s: n.While) -> n.Stmt | None:
        s = self.generic_visit(s)
        if isinstance(s.cond, n.Const) and not s.cond.value:
            return None
        return s

    def visit_For(self, s: n.For) -> n.Stmt | None:
        s = self.generic_visit(s)
        if isinstance(s.start, n.Const) and isinstance(s.stop, n.Const) and s.start.value >= s.stop.value:
            return None
        return s


def fold_constants(kernel: n.Kernel) -> n.Kernel:
    """Fold constants and apply the identities in ``RULES`` everywhere in ``kernel``."""
    result = _Folder().visit(kernel)
    return result if result is not kernel else kernel


def fold_expr(e: n.Expr) -> n.Expr:
    """``fold_constants`` on one expression (used by other passes to tidy what they build)."""
    return _Folder().visit(e)


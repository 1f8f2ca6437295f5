"""Small rewriting helpers shared by the passes of every stage.

- ``rename_locals``: one renaming of local scalars (every place a local name appears);
- ``rename_buffers``: one renaming of the buffers that loads, stores and atomics name;
- integer expression builders that fold what is obvious (``x + 0``, ``2 + 3``, ``x + -4`` ->
  ``x - 4``, ``x * 1``) so that index and bound arithmetic built by passes stays readable;
- ``fold_min`` / ``fold_max``: a left fold of the two-argument ``min``/``max`` calls;
- ``inline_lets``: the bindings (``Decl.let``) written out at their uses, for code that matches
  index expressions whole.

Every helper returns its argument itself (``is``) when it changes nothing.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from polypy.ir import nodes as n
from polypy.ir.queries import let_values
from polypy.ir.types import ScalarType
from polypy.ir.visitor import Mutator


# --------------------------------------------------------------------------- renaming


class RenameLocals(Mutator):
    """Renames a local everywhere it appears: uses (``Var``), declarations, assignments, loop
    variables and the destinations of atomics and warp operations."""

    def __init__(self, mapping: Mapping[str, str], values: Mapping[n.Expr, n.Expr] | None = None):
        self.mapping = mapping
        self.values = values or {}

    def visit_Var(self, e: n.Var) -> n.Expr:
        new = self.mapping.get(e.name)
        if new is None:
            return self.values.get(e, e)
        return e if new == e.name else n.Var(new, e.vtype, loc=e.loc)

    def _renamed(self, s: Any, field: str) -> Any:
        s = self.generic_visit(s)
        old = getattr(s, field)
        new = self.mapping.get(old, old) if old is not None else None
        return s if new == old else dataclasses.replace(s, **{field: new})

    def visit_Decl(self, s: n.Decl) -> n.Stmt:
        return self._renamed(s, "name")

    def visit_Assign(self, s: n.Assign) -> n.Stmt:
        return self._renamed(s, "name")

    def visit_For(self, s: n.For) -> n.Stmt:
        return self._renamed(s, "var")

    def visit_AtomicRMW(self, s: n.AtomicRMW) -> n.Stmt:
        return self._renamed(s, "dest")

    def visit_Shuffle(self, s: n.Shuffle) -> n.Stmt:
        return self._renamed(s, "dest")

    def visit_Vote(self, s: n.Vote) -> n.Stmt:
        return self._renamed(s, "dest")


def rename_locals(node: Any, mapping: Mapping[str, str], values: Mapping[n.Expr, n.Expr] | None = None) -> Any:
    """``node`` (a node or a tuple of statements) with the locals named in ``mapping`` renamed
    everywhere; buffers and parameters of pointer type are not locals and keep their names.

    ``values``: reads (``Var`` keys) of names not in ``mapping`` replaced by an expression, in
    the same walk (a replacement is not renamed again)."""
    if not mapping and not values:
        return node
    r = RenameLocals(mapping, values or {})
    return r.visit_block(node) if isinstance(node, tuple) else r.visit(node)


class _RenameBuffers(Mutator):
    def __init__(self, mapping: Mapping[str, str]):
        self.mapping = mapping

    def _renamed(self, s: Any) -> Any:
        s = self.generic_visit(s)
        new = self.mapping.get(s.buffer)
        return s if new is None or new == s.buffer else dataclasses.replace(s, buffer=new)

    visit_Load = visit_Store = visit_AtomicRMW = _renamed


def rename_buffers(node: Any, mapping: Mapping[str, str]) -> Any:
    """``node`` (a node or a tuple of statements) with every load, store and atomic of a buffer
    named in ``mapping`` reading or writing the new name instead (declarations not touched)."""
    if not mapping:
        return node
    r = _RenameBuffers(mapping)
    return r.visit_block(node) if isinstance(node, tuple) else r.visit(node)


# --------------------------------------------------------------------------- integer builders


def signed_terms(e: n.Expr, sign: int = 1) -> list[tuple[int, n.Expr]]:
    """The summands of a chain of ``+``, ``-`` and negations of one type, with their signs
    (``a - (b + c)``: ``[(1, a), (-1, b), (-1, c)]``)."""
    if isinstance(e, n.Binary) and e.op in ("add", "sub") and e.type == e.a.type == e.b.type:
        return signed_terms(e.a, sign) + signed_terms(e.b, sign if e.op == "add" else -sign)
    if isinstance(e, n.Unary) and e.op == "neg":
        return signed_terms(e.x, -sign)
    return [(sign, e)]


def int_add(a: n.Expr, b: n.Expr) -> n.Expr:
    """``a + b`` on integers: ``x + 0`` -> ``x``, constants added, ``x + -4`` -> ``x - 4``."""
    if isinstance(b, n.Const) and b.value == 0:
        return a
    if isinstance(a, n.Const) and a.value == 0:
        return b
    if isinstance(a, n.Const) and isinstance(b, n.Const):
        return n.Const(int(a.value) + int(b.value), a.type)
    if isinstance(b, n.Const) and b.value < 0:
        return n.Binary("sub", a, n.Const(-int(b.value), b.type))
    return n.Binary("add", a, b)


def int_sub(a: n.Expr, b: n.Expr) -> n.Expr:
    """``a - b`` on integers; a constant ``b`` goes through ``int_add`` (``x - 0`` -> ``x``)."""
    if isinstance(b, n.Const):
        return int_add(a, n.Const(-int(b.value), b.type))
    return n.Binary("sub", a, b)


def int_scale(a: n.Expr, k: int) -> n.Expr:
    """``a * k`` on integers: ``x * 1`` -> ``x``, a constant ``a`` multiplied out."""
    if k == 1:
        return a
    if isinstance(a, n.Const):
        return n.Const(int(a.value) * k, a.type)
    return n.Binary("mul", a, n.Const(k, a.type))


def fold_min(xs: Sequence[n.Expr], ty: ScalarType) -> n.Expr:
    """``min(min(x0, x1), x2) ...`` (left fold; one operand: itself)."""
    return _fold("min", xs, ty)


def fold_max(xs: Sequence[n.Expr], ty: ScalarType) -> n.Expr:
    """``max(max(x0, x1), x2) ...`` (left fold; one operand: itself)."""
    return _fold("max", xs, ty)


def _fold(fn: str, xs: Sequence[n.Expr], ty: ScalarType) -> n.Expr:
    if not xs:
        raise ValueError(f"{fn} of no operands")
    out = xs[0]
    for x in xs[1:]:
        out = n.Call(fn, (out, x), ty)
    return out


# --------------------------------------------------------------------------- bindings


class _InlineLets(Mutator):
    def __init__(self, values: Mapping[str, n.Expr]):
        self.values = values

    def visit_Var(self, v: n.Var) -> n.Expr:
        value = self.values.get(v.name)
        return v if value is None else self.visit(value)

    def visit_Decl(self, s: n.Decl) -> n.Stmt | None:
        return None if s.let and s.name in self.values else self.generic_visit(s)


def inline_lets(node: Any) -> Any:
    """``node`` with each binding's value written where its name is read and the binding gone:
    the form that code matching index expressions whole expects (``autodiff.gather``'s
    translations of ``a[i - 1]``, ``a[i]``: of the global index, not of a name). Exact: a let is
    assigned nowhere and its value reads only names assigned nowhere (``forward_scalars``), so it
    means the same wherever its name is in scope."""
    values = let_values(node)
    return node if not values else _InlineLets(values).visit(node)

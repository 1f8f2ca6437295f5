"""Rows of a fixed length in an index (``A[(i - 1) * 512 + (j - 1)]``): syntax helpers for
``polypy.poly.windows``, which splits such an index ``outer * P + inner`` by standing a new
parameter ``P`` for the constant (isl delinearizes by a parameter, not a constant).
"""
from __future__ import annotations

import dataclasses

from polypy.ir import nodes as n
from polypy.ir.rewrite import signed_terms
from polypy.ir.types import ScalarType
from polypy.ir.visitor import Mutator, walk


def product_factors(e: n.Expr) -> list[n.Expr]:
    if isinstance(e, n.Binary) and e.op == "mul" and e.type == e.a.type == e.b.type:
        return product_factors(e.a) + product_factors(e.b)
    return [e]


def constant_factor(kernel: n.Kernel, buffer: str) -> n.Const | None:
    """The constant ``P > 1`` that every read of ``buffer`` multiplies one non-constant term by."""
    found: set[tuple[int, ScalarType]] = set()
    for x in walk(kernel):
        if not (isinstance(x, n.Load) and x.buffer == buffer):
            continue
        e = x.index[0]
        if not (e.type.is_int and e.type.is_signed):
            return None
        consts = set()
        for _, term in signed_terms(e, 1):
            factors = product_factors(term)
            if len(factors) > 1 and any(not isinstance(f, n.Const) for f in factors):
                consts |= {(int(f.value), f.type) for f in factors if isinstance(f, n.Const) and int(f.value) > 1}
        if len(consts) != 1:
            return None
        found |= consts
    if len(found) != 1:
        return None
    value, ty = found.pop()
    return n.Const(value, ty)


def symbolic_factor(kernel: n.Kernel, buffer: str, constant: n.Const, name: str) -> n.Kernel:
    """``kernel`` with ``constant`` in the reads of ``buffer`` replaced by a new integer parameter."""
    class Symbolic(Mutator):
        def visit_Load(self, e: n.Load) -> n.Expr:
            if e.buffer != buffer:
                return self.generic_visit(e)
            return dataclasses.replace(e, index=(_Replace().visit(e.index[0]),))

    class _Replace(Mutator):
        def visit_Const(self, e: n.Const) -> n.Expr:
            return n.Var(name, e.type) if e == constant else e

    kernel = Symbolic().visit(kernel)
    return dataclasses.replace(kernel, params=kernel.params + (n.Param(name, constant.type),))


class Pin(Mutator):
    """Replace the variable ``name`` by ``value``."""

    def __init__(self, name: str, value: n.Const):
        super().__init__()
        self.name, self.value = name, value

    def visit_Var(self, e: n.Var) -> n.Expr:
        if e.name != self.name:
            return e
        return self.value if e.type == self.value.type else n.Cast(e.type, self.value)


def fresh_name(kernel: n.Kernel, base: str) -> str:
    taken = {p.name for p in kernel.params} | {x.name for x in walk(kernel) if isinstance(x, n.Var)}
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    return name

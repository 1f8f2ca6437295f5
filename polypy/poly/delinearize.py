"""Row-major indices with a run-time row length: ``outer * P + inner`` (``Delinearized``).

Called by the model's builder (``polypy.poly.builder``) for each index isl cannot express; ``b``
is the builder (its converter, uniformity, bindings and space). The split is syntactic: the
summands of the index (through ``let`` bindings that read no memory and nothing assigned), the
products by one grid-uniform non-constant factor ``P`` on one side, the rest (affine) on the
other, with multiples of ``P`` moved between the two where that keeps ``0 <= inner < P``.
"""
from __future__ import annotations

import islpy as isl

from polypy.ir import nodes as n
from polypy.ir.depth import MAX_ANALYZED_NODES
from polypy.ir.queries import substitute_lets, tree_size
from polypy.ir.visitor import walk, walk_only
from polypy.poly.affine import Converter, _val, expression_key
from polypy.poly.index_shapes import product_factors, signed_terms
from polypy.poly.instances import Delinearized

# multiples of a delinearization's factor moved from its inner part to its outer part, tried in order
DELIN_SHIFTS = (0, 1, -1, 2, -2)


def delinearize(b, e: n.Expr, dom: isl.Set) -> Delinearized | None:
    """``e`` as ``outer * P + inner`` (see ``Delinearized``), for signed index arithmetic; not
    for an index larger than ``MAX_ANALYZED_NODES`` (whose every term would go through isl)."""
    if not (e.type.is_int and e.type.is_signed) or tree_size(e) > MAX_ANALYZED_NODES:
        return None
    e = substitute_lets(e, _pure_lets(b, e))
    first = _delinearized(b, e, dom, products_first=False)
    if first is not None and first.valid is None:
        return first
    # a product the model keeps as a block value (backprop's ``(hid + 1) * 16 * blockIdx.y``,
    # opaque to isl) is still a multiple of ``P``: split every product that names ``P`` instead
    second = _delinearized(b, e, dom, products_first=True)
    return second if second is not None and (first is None or second.valid is None) else first


def _pure_lets(b, e: n.Expr) -> dict[str, n.Expr]:
    """The locals ``e`` names (through one another) that isl knows no value of but whose one
    binding reads no memory and nothing assigned (launch indices, constants, unassigned
    parameters, other such locals): their values where ``e`` reads them, to split as one sum
    (backprop's ``w[index]`` with ``let index = (hid + 1) * 16 * by + ...``)."""
    out: dict[str, n.Expr] = {}
    todo = [v.name for v in walk_only(e, n.Var)]
    while todo:
        name = todo.pop()
        init = b.local_inits.get(name)
        if name in out or init is None or b.bound.get(name) is not None or b.decl_count.get(name) != 1:
            continue
        if any(not isinstance(x, (n.Var, n.Const, n.GpuIndex, n.Cast, n.Unary, n.Binary)) for x in walk(init)):
            continue
        names = [v.name for v in walk_only(init, n.Var)]
        if any(x in b.mutable or (x not in b.params and x not in b.local_inits) for x in names):
            continue
        out[name] = init
        todo.extend(names)
    # a local whose binding names one left out (other than a local isl knows) stays a name
    while True:
        bad = [k for k, v in out.items() if any(x.name not in out and x.name not in b.params and not _known(b, x.name)
                                                for x in walk_only(v, n.Var))]
        if not bad:
            return out
        for k in bad:
            del out[k]


def _known(b, name: str) -> bool:
    """A local bound once, to a value isl knows, never assigned."""
    return b.bound.get(name) is not None and b.decl_count.get(name) == 1 and name not in b.mutable


def _delinearized(b, e: n.Expr, dom: isl.Set, *, products_first: bool) -> Delinearized | None:
    pieces = []
    for sign, term in signed_terms(e, 1):
        value = b.conv.int_expr(term, dom)
        split = _product(b, term, dom) if value is None or products_first else None
        if value is None and split is None:
            return None
        pieces.append((sign, value, split))
    # the factors of the products isl cannot express; with ``products_first``, also every
    # other product by one of them
    needed = {expression_key(split[0]) for _, value, split in pieces if value is None}
    outer: dict[str, isl.PwAff] = {}
    factors: dict[str, n.Expr] = {}
    inner = b.conv.const(0)
    for sign, value, split in pieces:
        if split is None or (value is not None and expression_key(split[0]) not in needed):
            inner = inner + value if sign > 0 else inner - value
            continue
        factor, scaled = split
        key = expression_key(factor)
        factors[key] = factor
        scaled = scaled if sign > 0 else -scaled
        outer[key] = outer[key] + scaled if key in outer else scaled
    if len(outer) != 1:
        return None
    (key, outer_value), = outer.items()
    p = b.conv.int_expr(factors[key], dom)
    if p is None:
        return None
    # ``outer * P + inner == (outer + c) * P + (inner - c * P)``: a term that is itself a
    # multiple of ``P`` but written out (backprop's ``... + tx + 1 + (hid + 1)`` with ``P =
    # hid + 1``) lands in ``inner``; the first ``c`` that keeps ``inner`` in ``[0, P)``
    # everywhere, else the first under which it is for some parameter values
    partial = None
    for c in DELIN_SHIFTS:
        shifted_inner = inner - p * _val(c) if c else inner
        shifted_outer = outer_value + b.conv.const(c) if c else outer_value
        outside = (shifted_inner.lt_set(b.conv.const(0)) | shifted_inner.ge_set(p)) & dom
        if outside.is_empty():
            return Delinearized(key, shifted_outer, shifted_inner, size=p)
        # valid for the parameter values where no instance has its inner part out of range
        valid = b.universe.intersect_params(outside.params().complement())
        if partial is None and not (valid & dom).is_empty():
            partial = Delinearized(key, shifted_outer, shifted_inner, valid.coalesce(), p)
    return partial


def _product(b, term: n.Expr, dom: isl.Set) -> tuple[n.Expr, isl.PwAff] | None:
    """``term`` as ``X * P`` with ``P`` grid-uniform and not constant, ``X`` quasi-affine."""
    parts = product_factors(term)
    uniform = [f for f in parts if b._uniformity(f) == 1
               and Converter.constant_value(b.conv.int_expr(f, dom) or b.conv.const(0)) is None]
    if len(uniform) != 1:
        return None
    rest = b.conv.const(1)
    for f in parts:
        if f is uniform[0]:
            continue
        value = b.conv.int_expr(f, dom)
        if value is None:
            return None
        c = Converter.constant_value(value)
        if c is not None:
            rest = rest * _val(c)
        elif Converter.constant_value(rest) is not None:
            rest = value * _val(Converter.constant_value(rest))
        else:
            return None
    return uniform[0], rest

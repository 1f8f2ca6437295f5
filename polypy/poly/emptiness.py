"""When a kernel's writes to a buffer run for no thread at all (isl).

``writes_never_run(kernel, buffer)`` answers ``(True, None)`` where no thread of any launch
writes ``buffer`` (the domain of every write is empty within the launch assumptions), else
``(False, condition)``: a grid-uniform IR ``bool`` under which no thread does, or None where
isl finds none with an IR meaning. The condition excludes each piece of the parameter set
where some write runs by the negation of one of the piece's own constraints (an exact
sufficient condition, not necessarily the weakest). Unlike the privacy conditions of
``polypy.poly.sharing`` it may bound a launch's extent from below (``ni <= gridDim.y *
blockDim.y``: the launch covers the rows), which is what the halo of a gather asks
(``autodiff.sweep``).
"""
from __future__ import annotations

import islpy as isl

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.types import I64, ScalarType
from polypy.poly.model import BLOCK_DIM, GRID_DIM, build_model

MAX_PIECES = 8  # more pieces than this: no condition (one test per piece)


def writes_never_run(kernel: n.Kernel, buffer: str) -> tuple[bool, n.Expr | None]:
    try:
        model = build_model(kernel)
    except UserError:
        return False, None
    runs = None
    for a in model.accesses_of(buffer):
        if a.writes:
            p = a.domain.intersect_params(model.context).params()
            runs = p if runs is None else runs | p
    if runs is None or runs.is_empty():
        return True, None
    context = model.context.align_params(runs.space)
    bad = (runs & context).coalesce()
    basics = bad.gist(context).get_basic_sets()
    if len(basics) > MAX_PIECES:
        return False, None
    terms: list[n.Expr] = []
    for basic in basics:
        chosen = None
        for con in basic.get_constraints():  # the first whose negation holds at typical sizes
            if con.get_space().dim(isl.dim_type.div) == 0 and _typical(con, context):
                chosen = _negated(model, con)
            if chosen is not None:
                break
        if chosen is None:
            return False, None
        terms.append(chosen)
    out = terms[0]
    for t in terms[1:]:
        out = n.Binary("land", out, t)
    return False, out


TYPICAL = 16  # sizes and block dimensions at least this, grids of at least one block
ABSURD = 1 << 30


def _typical(con: isl.Constraint, context: isl.Set) -> bool:
    """Whether ``con`` fails for some launch of typical sizes (``ni <= 2`` is no condition)."""
    aff = con.get_aff()
    out = isl.Set.from_basic_set(isl.BasicSet.from_constraint(
        isl.Constraint.inequality_from_aff(aff.neg().add_constant_val(isl.Val(-1)))))
    if con.is_equality():
        out = out | isl.Set.from_basic_set(isl.BasicSet.from_constraint(
            isl.Constraint.inequality_from_aff(aff.add_constant_val(isl.Val(-1)))))
    out = out.align_params(context.space) & context
    for i in range(out.dim(isl.dim_type.param)):
        low = 1 if out.get_dim_name(isl.dim_type.param, i) in GRID_DIM else TYPICAL
        out = out.lower_bound_val(isl.dim_type.param, i, isl.Val(low))
        out = out.upper_bound_val(isl.dim_type.param, i, isl.Val(ABSURD - 1))
    return not out.is_empty()


def _param(model, name: str) -> n.Expr | None:
    if name in BLOCK_DIM:
        return n.BlockDim(BLOCK_DIM.index(name))
    if name in GRID_DIM:
        return n.GridDim(GRID_DIM.index(name))
    p = model.kernel.param(name)
    if p is not None and isinstance(p.ptype, ScalarType) and p.ptype.is_int:
        return n.Var(name, p.ptype)
    return model.uniform_exprs.get(name)


def _negated(model, con: isl.Constraint) -> n.Expr | None:
    """``not (sum coef * param + constant >= 0)`` (or ``== 0``) in i64, over parameters with an
    IR meaning only (None otherwise)."""
    space = con.get_space()
    for kind in (isl.dim_type.set, isl.dim_type.div):
        for i in range(space.dim(kind)):
            if not con.get_coefficient_val(kind, i).is_zero():
                return None
    total: n.Expr | None = None
    for i in range(space.dim(isl.dim_type.param)):
        coef = int(con.get_coefficient_val(isl.dim_type.param, i).to_python())
        if coef == 0:
            continue
        x = _param(model, space.get_dim_name(isl.dim_type.param, i))
        if x is None or x.type.is_float:
            return None
        term: n.Expr = n.Cast(I64, x) if x.type != I64 else x
        if abs(coef) != 1:
            term = n.Binary("mul", n.Const(abs(coef), I64), term)
        if total is None:
            total = term if coef > 0 else n.Unary("neg", term)
        else:
            total = n.Binary("add" if coef > 0 else "sub", total, term)
    if total is None:
        return None
    constant = int(con.get_constant_val().to_python())
    if con.is_equality():
        return n.Binary("ne", total, n.Const(-constant, I64))
    return n.Binary("le", total, n.Const(-constant - 1, I64))

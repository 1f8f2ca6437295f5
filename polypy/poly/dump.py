"""The polyhedral model as text, for ``--report`` and ``--emit ir``.

One line per loop, barrier and access: its path, source line, whether it is exact, and its
isl relation restricted to the dimensions that matter (the varying thread/block indices, the
block values and the enclosing loops), simplified against the launch assumptions::

    access body[1]#1 write weights  line 12  exact
        { [threadIdx.x, threadIdx.y] -> weights[threadIdx.y, threadIdx.x] : ... }
"""
from __future__ import annotations

import islpy as isl

from polypy.ir import nodes as n
from polypy.poly.model import BLOCK_IDX, THREAD_IDX, Access, Model, build_model
from polypy.poly.paths import format_path


def dump_model(kernel_or_model: n.Kernel | Model) -> str:
    model = kernel_or_model if isinstance(kernel_or_model, Model) else build_model(kernel_or_model)
    k = model.kernel
    lines = [f"// polyhedral model of kernel {k.name} "
             + ("(symbolic launch)" if model.launch is None else
                f"(grid {model.launch.grid}, block {model.launch.block})")]
    for text in model.assumptions:
        lines.append(f"// assumes: {text}")
    for name, text in model.uniform_params.items():
        lines.append(f"// parameter {name}: uniform over the grid")
    for bv in model.block_values:
        lines.append(f"// block value {bv.name}: one value per block")
    for lp in model.loops:
        kind = "exact (dimension = loop variable)" if lp.exact else \
            f"abstract iteration counter, {lp.trips or 'unbounded'} iterations"
        lines.append(f"loop {lp.dim} {format_path(lp.path)}{_line(lp.loc)}: {kind}")
    context = _context(model)
    for b in model.barriers:
        dom = _restrict(model, b.domain, [t for t in b.time if isinstance(t, str)], context)
        lines.append(f"barrier {format_path(b.path)}{_line(b.loc)}: {'exact' if b.exact else 'may execute'}"
                     f"  time {_time(b.time)}")
        lines.append(f"    {dom}")
    for a in model.accesses:
        if a.exact:
            status = "exact"
        else:
            parts = []
            if not a.domain_exact:
                parts.append("domain over-approximated")
            if not a.index_exact:
                parts.append("index unknown")
            status = ", ".join(parts)
        lines.append(f"access {a.id} {a.kind} {a.text}{_line(a.loc)}: {status}  time {_time(a.time)}")
        lines.append(f"    {_relation(model, a, context)}")
    return "\n".join(lines) + "\n"


def _line(loc) -> str:
    return f" (line {loc.line})" if loc is not None else ""


def _time(t: tuple[int | str, ...]) -> str:
    return "(" + ", ".join(str(x) for x in t) + ")"


def _context(model: Model) -> isl.Set:
    """What the model assumes about parameters, used to simplify the printed relations."""
    return model.context


def _kept_dims(model: Model, loop_dims: list[str]) -> set[str]:
    keep = {THREAD_IDX[d] for d in model.thread_dims} | {BLOCK_IDX[d] for d in model.block_dims}
    keep |= {bv.name for bv in model.block_values}
    keep |= set(loop_dims)
    return keep


def _restrict(model: Model, s: isl.Set, loop_dims: list[str], context: isl.Set) -> isl.Set:
    keep = _kept_dims(model, loop_dims)
    for pos in reversed(range(len(model.dims))):
        if model.dims[pos] not in keep:
            s = s.project_out(isl.dim_type.set, pos, 1)
    return s.gist_params(context).coalesce()


def _relation(model: Model, a: Access, context: isl.Set) -> str:
    text = _relation_map(model, a, context)
    for d, delin in enumerate(a.delin):
        if delin is not None:
            outer = delin.outer.gist_params(context).coalesce()
            inner = delin.inner.gist_params(context).coalesce()
            text += f"\n    index {d} = outer * {delin.factor} + inner, 0 <= inner < {delin.factor}: " \
                    f"outer {_pieces(outer)}, inner {_pieces(inner)}"
            if delin.valid is not None:
                text += f", where {delin.valid.params().gist(context).coalesce()}"
    return text


def _pieces(pa: isl.PwAff) -> str:
    """The expression(s) of ``pa`` without its domain tuple: ``(threadIdx.x + 1)``."""
    parts = []
    for _, aff in pa.get_pieces():
        text = str(aff)
        parts.append(text.split("-> [", 1)[1].rsplit("]", 1)[0] if "-> [" in text else text)
    return "; ".join(parts)


def _relation_map(model: Model, a: Access, context: isl.Set) -> str:
    m = None
    for d, e in enumerate(a.elems):
        if e is None:
            part = isl.Map.from_domain_and_range(isl.Set.universe(model.space),
                                                 isl.Set.universe(isl.Space.set_alloc(model.space.get_ctx(), 0, 1)))
        else:
            part = isl.Map.from_pw_aff(e)
        m = part if m is None else m.flat_range_product(part)
    if m is None:
        return str(a.domain)
    m = m.intersect_domain(a.domain).set_tuple_name(isl.dim_type.out, a.buffer)
    keep = _kept_dims(model, [t for t in a.time if isinstance(t, str)])
    for pos in reversed(range(len(model.dims))):
        if model.dims[pos] not in keep:
            m = m.project_out(isl.dim_type.in_, pos, 1)
    return str(m.gist_params(context).coalesce())

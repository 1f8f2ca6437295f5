"""Which atomic adds of a CPU-form kernel a launch can tell it never runs.

A versioned gradient (``autodiff.accumulation``) adds to an adjoint plainly where its privacy
condition holds and atomically otherwise::

    var d_a_private: bool = nj <= 512
    ...
    if (d_a_private) { d_a[i] = d_a[i] + ct } else { atomic.add d_a[i], ct }

The condition is a function of the launch shape and the integer arguments, so a launcher can
evaluate it before the launch; where it holds, no atomic of that buffer runs (and per-worker
copies, ``gpu2cpu.privatize_atomics``, would only cost).
"""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.ir.types import ScalarType
from polypy.ir.queries import written_names
from polypy.ir.visitor import walk, walk_block, walk_only
from polypy.poly.paths import child_blocks


def plain_when(kernel: n.Kernel, names: tuple[str, ...] | frozenset[str]) -> tuple[tuple[str, n.Expr], ...]:
    """Per buffer of ``names`` whose every atomic add is the ``else`` of an ``if (c)`` whose
    ``then`` adds to it plainly (a versioned gradient: ``c`` its privacy condition), ``c``:
    where a launch makes it true, no atomic runs and per-worker copies would only cost. ``c`` is
    the flag's initial value where it is a local declared once and never assigned; only a ``c``
    of the launch (``of_the_launch``) counts (a block window's flush picks plain adds or atomics
    per element: not a version)."""
    assigned = written_names(kernel.body)
    lets = {x.name: x.init for x in walk_only(kernel, n.Decl) if x.init is not None
            and x.name not in assigned}
    found: dict[str, set[n.Expr] | None] = {name: set() for name in names}

    def visit(stmts: tuple[n.Stmt, ...], elses: tuple[n.If, ...]) -> None:
        """``elses``: the ifs around, innermost last, whose ``else`` holds ``stmts``."""
        for st in stmts:
            if isinstance(st, n.AtomicRMW) and st.buffer in found:
                conds = found[st.buffer]
                guard = next((g for g in reversed(elses) if any(
                    isinstance(x, n.Store) and x.buffer == st.buffer for x in walk_block(g.then))), None)
                if conds is None or guard is None:
                    found[st.buffer] = None
                    continue
                cond = guard.cond
                if isinstance(cond, n.Var) and cond.name in lets:
                    cond = lets[cond.name]
                conds.add(cond)
            elif isinstance(st, n.If):
                visit(st.then, elses)
                visit(st.orelse, elses + (st,))
            else:
                for _, block in child_blocks(st):
                    visit(block, elses)

    visit(kernel.body, ())
    return tuple((name, cond) for name, conds in found.items() if conds and len(conds) == 1
                 and of_the_launch(cond := next(iter(conds)), kernel))


def of_the_launch(e: n.Expr, kernel: n.Kernel) -> bool:
    """``e`` is a function of the launch shape and the integer arguments only (a launcher can
    evaluate it): no thread or block index, no load, no local."""
    for x in walk(e):
        if isinstance(x, (n.ThreadIdx, n.BlockIdx, n.Load, n.Call)):
            return False
        if isinstance(x, n.Var):
            p = kernel.param(x.name)
            if p is None or not isinstance(p.ptype, ScalarType) or not p.ptype.is_int:
                return False
    return True

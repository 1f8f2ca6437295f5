"""The form of a kernel the race warnings ask their questions of (``write_conflicts.race_question``).

The warnings decide nothing, and judge only accesses the model knows exactly; three exact rewrites
make more of them exact, for the warnings only (the pipeline's passes keep their own rules):

* counted ``while`` loops whose bound or step reads ``__constant__`` memory become ``For`` loops
  (``raise_counted_loops(fixed=...)``: one value per launch, as a kernel cannot store there);
* a ``For`` whose start, stop or step reads a local assigned earlier in the same statement list,
  with nothing in between writing it or what its value reads, reads that value instead (Rodinia
  heartwall's ``pos_ori = ei_new; sum = 0; for (position = pos_ori; position < pos_ori + n; ...)``,
  the local assigned again in every section of the kernel);
* the index of an access through a pointer a local holds, read from a ``__constant__``/``__device__``
  record (``float *p = d_bufs[bx].a; p[t]``), reads the value the local certainly holds there
  (``polypy/poly/held_locals.py``), so that the access is judged by the slot it was read from.
"""
from __future__ import annotations

import dataclasses

from polypy.ir import nodes as n
from polypy.ir.queries import read_names, written_names
from polypy.ir.rewrite import rename_locals
from polypy.ir.visitor import Mutator, walk_only
from polypy.passes.raise_counted_loops import raise_counted_loops
from polypy.poly.held_locals import forward_held_locals


def race_form(kernel: n.Kernel) -> n.Kernel:
    """``kernel`` with the rewrites above (the same meaning)."""
    fixed = frozenset(b.name for b in kernel.buffers if b.space == "constant")
    return forward_held_locals(_ForwardLoopHeaders(fixed).visit(raise_counted_loops(kernel, fixed=fixed)))


class _ForwardLoopHeaders(Mutator):
    def __init__(self, fixed: frozenset[str]):
        self.fixed = fixed

    def visit_block(self, items):  # type: ignore[override]
        items = super().visit_block(items)
        if not any(isinstance(s, n.For) for s in items):
            return items
        out = list(items)
        for k, s in enumerate(items):
            if not isinstance(s, n.For):
                continue
            values = self._values(items[:k], read_names((s.start, s.stop, s.step)), written_names(s.body))
            if values:
                out[k] = dataclasses.replace(s, start=rename_locals(s.start, {}, values),
                                             stop=rename_locals(s.stop, {}, values),
                                             step=rename_locals(s.step, {}, values))
        return tuple(out)

    def _values(self, before: tuple[n.Stmt, ...], names: set[str], body: set[str]) -> dict[n.Expr, n.Expr]:
        """``Var(name) -> value`` for each of ``names`` assigned a value by an ``Assign`` of
        ``before`` that still holds at its end, and reads nothing the loop's ``body`` writes (a
        ``For``'s stop and step do not change inside it)."""
        out: dict[n.Expr, n.Expr] = {}
        for name in names:
            for i in range(len(before) - 1, -1, -1):
                s = before[i]
                if isinstance(s, n.Assign) and s.name == name:
                    later = written_names(before[i + 1:])
                    if name not in later and not (read_names(s.value) & (later | body)) and not any(
                            x.buffer not in self.fixed for x in walk_only(s.value, n.Load)):
                        out[n.Var(name, s.value.type)] = s.value
                    break
                if name in written_names((s,)):
                    break
        return out

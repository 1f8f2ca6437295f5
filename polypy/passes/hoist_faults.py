"""hoist_faults: the misaligned-address checks that are the same for the whole launch's block
are tested once per block (GPU form -> GPU form).

Requires: GPU form (a check is ``if (c) { fault; ... } [else { rest }]``,
``frontend/lower/views.py``). Guarantees: the same results, the same faults with the same
messages. A check's condition ``c`` is *block-uniform* when it reads no memory and no
``threadIdx``, only constants, ``blockIdx``/``blockDim``/``gridDim`` and scalar parameters the
kernel never assigns: one value for the whole block, known before any of its code runs. The
kernel is then unswitched on those conditions::

    body                      ==>   if (c1 || c2) { body }                (a check may fail: as written)
                                    else { body, each check on c1/c2 dropped (its else kept) }

The first branch is the kernel as written (renamed copy), so a fault happens where, and only
if, a thread reaches the check, as on the GPU. The second, taken by every block of an aligned
launch, has no check left: the threads run the same code as for an offset polypy can prove
aligned. Both are block-level ``if`` s, which the CPU schedule tests once per block, outside the
loops over threads.
"""
from __future__ import annotations

import dataclasses

from polypy.ir import nodes as n
from polypy.ir.names import NameSupply
from polypy.ir.queries import declared_names
from polypy.ir.rewrite import rename_locals
from polypy.ir.types import PointerType
from polypy.ir.visitor import Mutator, walk, walk_only


def _is_check(s: n.Node) -> bool:
    return isinstance(s, n.If) and any(isinstance(x, n.AssertFail) and x.fault == "misaligned" for x in s.then)


class _DropChecks(Mutator):
    """Each check on one of ``conds`` replaced by its ``else`` branch (the condition is false)."""

    def __init__(self, conds: set[n.Expr]):
        self.conds = conds

    def visit_block(self, items):  # type: ignore[override]
        items = super().visit_block(items)
        if not any(_is_check(s) and s.cond in self.conds for s in items):
            return items
        out: list = []
        for s in items:
            if _is_check(s) and s.cond in self.conds:
                out.extend(s.orelse)
            else:
                out.append(s)
        return tuple(out)


def hoist_faults(kernel: n.Kernel) -> n.Kernel:
    checks = [s for s in walk_only(kernel, n.If) if _is_check(s)]
    if not checks:
        return kernel
    scalars = {p.name for p in kernel.params if not isinstance(p.ptype, PointerType)}
    assigned = {x.name for x in walk_only(kernel, n.Assign, n.Decl)}
    allowed = (n.Const, n.BlockIdx, n.BlockDim, n.GridDim, n.Var, n.Binary, n.Unary, n.Cast, n.Select)

    def uniform(e: n.Expr) -> bool:
        return all(isinstance(x, allowed) and (not isinstance(x, n.Var) or (x.name in scalars and x.name not in assigned))
                   for x in walk(e))

    conds: list[n.Expr] = []
    for s in checks:
        if uniform(s.cond) and s.cond not in conds:
            conds.append(s.cond)
    if not conds:
        return kernel
    fast = _DropChecks(set(conds)).visit_block(kernel.body)
    names = NameSupply.for_kernel(kernel)
    mapping = {name: names.fresh(name) for name in sorted(declared_names(kernel.body))}
    slow = rename_locals(kernel.body, mapping)
    any_check = conds[0]
    for c in conds[1:]:
        any_check = n.Binary("lor", any_check, c, loc=c.loc)
    loc = checks[0].loc
    return dataclasses.replace(kernel, body=(n.If(any_check, slow, fast, loc=loc),))

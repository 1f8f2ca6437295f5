"""forward_scalars: substitute single-assignment integer locals into their uses.

Requires: unique local names (the frontend guarantees them). Guarantees: same semantics.

``int i = blockIdx.x * blockDim.x + threadIdx.x;`` is replaced at every use by its value, so
every later analysis sees the index expression itself (which the polyhedral model needs to
recognize affine accesses). A local is forwarded when it is

* declared with an initializer and never written again (no ``Assign``, not an atomic or warp
  destination), and
* its value is cheap and stable: integer or bool arithmetic on constants, thread/block
  registers and other never-written names (parameters included), with no loads; or it is a
  plain copy of such a name or a constant, of any type.

Values that read memory or compute floats are left alone: forwarding them would repeat work
(or read memory at a different time).
"""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.ir.queries import written_names
from polypy.ir.visitor import Mutator, walk


def _stable(e: n.Expr, immutable: set[str]) -> bool:
    if isinstance(e, (n.Const, n.GpuIndex)):
        return True
    if isinstance(e, n.Var):
        return e.name in immutable
    if not (e.type.is_int or e.type.is_bool):
        return False
    for x in walk(e):
        if isinstance(x, n.Load):
            return False
        if isinstance(x, n.Call) and x.fn not in ("min", "max", "abs"):
            return False
        if isinstance(x, n.Var) and x.name not in immutable:
            return False
        if isinstance(x, n.Expr) and not (x.type.is_int or x.type.is_bool):
            return False
    return True


class _Forward(Mutator):
    def __init__(self, immutable: set[str]):
        self.immutable = immutable
        self.values: dict[str, n.Expr] = {}

    def visit_Var(self, e: n.Var) -> n.Expr:
        return self.values.get(e.name, e)

    def visit_Decl(self, s: n.Decl) -> n.Stmt | None:
        s = self.generic_visit(s)
        if s.init is not None and s.name in self.immutable and _stable(s.init, self.immutable):
            self.values[s.name] = s.init
            return None
        return s


def forward_scalars(kernel: n.Kernel) -> n.Kernel:
    """Forward stable single-assignment locals (see module docstring)."""
    written = written_names(kernel.body)
    names = {p.name for p in kernel.params}
    for x in walk(kernel):
        if isinstance(x, n.Decl):
            names.add(x.name)
        elif isinstance(x, n.For):
            names.add(x.var)
    immutable = names - written
    return _Forward(immutable).visit(kernel)

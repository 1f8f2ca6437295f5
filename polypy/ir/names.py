"""Fresh local names: derived from the source name they stand for, unique in the kernel.

Local names are unique in a kernel (``docs/ir.md``), so every stage that invents a name — the
frontend for shadowed and inlined variables, the lowering for thread counters and per-thread
buffers, the AD engine for adjoints and tapes — takes it from a ``NameSupply`` that knows every
name already in use: ``acc`` is free or becomes ``acc_1``, ``acc_2``...
"""
from __future__ import annotations

from typing import Iterable

from polypy.ir import nodes as n
from polypy.ir.visitor import walk


def kernel_names(kernel: n.Kernel) -> set[str]:
    """Every name ``kernel`` uses: parameters, C parameters, buffers, locals and loop variables."""
    taken = {p.name for p in kernel.params} | {b.name for b in kernel.buffers}
    taken.update(sp.name for sp in kernel.source_params)
    for x in walk(kernel):
        if isinstance(x, n.Decl):
            taken.add(x.name)
        elif isinstance(x, n.For):
            taken.add(x.var)
        elif isinstance(x, n.Var):
            taken.add(x.name)
    return taken


class NameSupply:
    """Hands out names not taken yet (and takes them)."""

    def __init__(self, taken: Iterable[str] = ()):
        self.taken: set[str] = set(taken)

    @classmethod
    def for_kernel(cls, kernel: n.Kernel, reserved: Iterable[str] = ()) -> NameSupply:
        return cls(kernel_names(kernel) | set(reserved))

    def fresh(self, base: str) -> str:
        """``base`` if it is free, else ``base_1``, ``base_2``... (the result is taken)."""
        name, i = base, 0
        while name in self.taken:
            i += 1
            name = f"{base}_{i}"
        self.taken.add(name)
        return name

    def reserve(self, name: str) -> None:
        self.taken.add(name)

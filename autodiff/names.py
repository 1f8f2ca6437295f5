"""Fresh names for generated variables and buffers, derived from the user's names."""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.ir.visitor import walk


class Names:
    """Hands out names not used anywhere in a kernel (nor handed out before)."""

    def __init__(self, kernel: n.Kernel, reserved: set[str] | frozenset[str] = frozenset()):
        taken = {p.name for p in kernel.params} | {b.name for b in kernel.buffers} | set(reserved)
        for node in walk(kernel):
            if isinstance(node, n.Decl):
                taken.add(node.name)
            elif isinstance(node, n.For):
                taken.add(node.var)
            elif isinstance(node, n.Var):
                taken.add(node.name)
        self.taken = taken

    def fresh(self, base: str) -> str:
        name, i = base, 0
        while name in self.taken:
            i += 1
            name = f"{base}_{i}"
        self.taken.add(name)
        return name

    def reserve(self, name: str) -> None:
        self.taken.add(name)

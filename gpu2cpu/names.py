"""Fresh names for what the lowering introduces (thread counters, per-thread buffers, copies).

Local names are unique in a kernel (``docs/ir.md``), so every name the lowering invents is
checked against everything the kernel already names: parameters, buffers, locals and loop
variables. Names derive from the source name they stand for (``acc`` -> ``acc_buf``,
``acc_1``), so the generated code reads like the original.
"""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.ir.visitor import walk


class NameSupply:
    def __init__(self, kernel: n.Kernel, globals_: tuple[str, ...] = ()):
        self.taken: set[str] = {p.name for p in kernel.params} | {b.name for b in kernel.buffers}
        self.taken.update(globals_)
        self.taken.update(sp.name for sp in kernel.source_params)
        for x in walk(kernel):
            if isinstance(x, n.Decl):
                self.taken.add(x.name)
            elif isinstance(x, n.For):
                self.taken.add(x.var)
            elif isinstance(x, n.Var):
                self.taken.add(x.name)

    def fresh(self, base: str) -> str:
        """``base`` if it is free, else ``base_1``, ``base_2``... (the result is reserved)."""
        name, i = base, 0
        while name in self.taken:
            i += 1
            name = f"{base}_{i}"
        self.taken.add(name)
        return name

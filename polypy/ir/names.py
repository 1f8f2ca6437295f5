"""Fresh local names: derived from the source name they stand for, unique in the kernel.

Local names are unique in a kernel (``docs/ir.md``), so every stage that invents a name — the
frontend for shadowed and inlined variables, the lowering for thread counters and per-thread
buffers, the AD engine for adjoints and tapes — takes it from a ``NameSupply`` that knows every
name already in use: ``acc`` is free or becomes ``acc_1``, ``acc_2``...
"""
from __future__ import annotations

from typing import Iterable

from polypy.ir import nodes as n
from polypy.ir.visitor import walk_only


def kernel_names(kernel: n.Kernel) -> set[str]:
    """Every name ``kernel`` uses: parameters, C parameters, buffers, locals and loop variables."""
    taken = {p.name for p in kernel.params} | {b.name for b in kernel.buffers}
    taken.update(sp.name for sp in kernel.source_params)
    for field in kernel.CHILDREN:  # the body, and expressions elsewhere (buffers' sizes)
        value = getattr(kernel, field)
        if field == "body":
            for s in value:
                taken |= statement_names(s)
        elif value is not None:
            _add_names(value, taken)
    return taken


def _add_names(root: n.Node | tuple[n.Node, ...], names: set[str]) -> None:
    for x in walk_only(root, n.Var, n.Decl, n.For):
        names.add(x.var if isinstance(x, n.For) else x.name)  # type: ignore[attr-defined]


def statement_names(s: n.Stmt) -> frozenset[str]:
    """The locals and loop variables ``s`` declares and the names its expressions read,
    remembered in ``s`` and in each statement inside it (``Node._names``): every pass that makes
    fresh names asks, and a statement no pass changed costs nothing the second time (a
    100,000-term sum was walked whole a dozen times). Children first, without recursion."""
    if s._names is not None:
        return s._names
    order: list[n.Stmt] = []
    stack: list[n.Stmt] = [s]
    while stack:  # the statements not yet summed up, parents before children
        x = stack.pop()
        if x._names is None:
            order.append(x)
            stack.extend(c for name in x.BLOCKS for c in getattr(x, name))
    for x in reversed(order):
        if x._names is not None:  # reached twice (a shared subtree)
            continue
        names: set[str] = set()
        if isinstance(x, n.Decl):
            names.add(x.name)
        elif isinstance(x, n.For):
            names.add(x.var)
        for field in x.CHILDREN:
            value = getattr(x, field)
            if field in x.BLOCKS:
                for c in value:
                    names |= c._names  # type: ignore[operator]
            elif value is not None:
                _add_names(value, names)
        object.__setattr__(x, "_names", frozenset(names))
    return s._names  # type: ignore[return-value]


class NameSupply:
    """Hands out names not taken yet (and takes them)."""

    def __init__(self, taken: Iterable[str] = ()):
        self.taken: set[str] = set(taken)
        # per base, the suffix to try first: names are only ever added to ``taken``, so every
        # ``base_j`` below it stays taken (10,000 temporaries of one base were 50 million tries)
        self._next: dict[str, int] = {}

    @classmethod
    def for_kernel(cls, kernel: n.Kernel, reserved: Iterable[str] = ()) -> NameSupply:
        return cls(kernel_names(kernel) | set(reserved))

    def fresh(self, base: str) -> str:
        """``base`` if it is free, else ``base_1``, ``base_2``... (the result is taken)."""
        if base not in self.taken:
            self.taken.add(base)
            return base
        i = self._next.get(base, 1)
        while f"{base}_{i}" in self.taken:
            i += 1
        self._next[base] = i + 1
        name = f"{base}_{i}"
        self.taken.add(name)
        return name

    def reserve(self, name: str) -> None:
        self.taken.add(name)

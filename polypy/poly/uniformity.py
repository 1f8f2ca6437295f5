"""How uniform an expression of a kernel is, for the polyhedral model's builder.

0: it varies between threads or over time; 1: grid-uniform (one value per launch, an isl
parameter); 2: block-uniform (one value per block). A local is as uniform as its only
initializer when it is assigned nowhere else; a pointer parameter or a load is not uniform,
except a load of ``__constant__`` memory under ``build_model(constants=True)`` (the race
warnings), where its index is (a kernel cannot store there: one value per launch).

The state is explicit (``Uniformity``'s fields, fixed for one builder), the answers cached.
"""
from __future__ import annotations

from typing import Mapping

from polypy.ir import nodes as n
from polypy.ir.types import U64, PointerType
from polypy.ir.visitor import iter_children, walk


class Uniformity:
    def __init__(self, kernel: n.Kernel, mutable: frozenset[str] | set[str], params: Mapping[str, n.Param],
                 local_inits: Mapping[str, n.Expr], constants: bool):
        self.kernel = kernel
        self.mutable = mutable
        self.params = params
        self.local_inits = local_inits
        self.constants = constants
        self.held_symbols = {h.symbol for h in kernel.held_pointers}
        # Caches (valid for one builder: mutable names and inits are fixed).
        self._memo: dict[n.Node, int] = {}
        self._var_level: dict[str, int] = {}

    def level(self, e: n.Expr, seen: frozenset[str] = frozenset()) -> int:
        """0: varies between threads or over time; 1: grid-uniform; 2: block-uniform.

        The converter asks this of every level of an expression it cannot convert (``n | n | ...``),
        so without ``seen`` the answer is computed bottom-up once per node and remembered
        (``_memo``): re-walking each subtree made a 1,000-term expression quadratic."""
        if seen:
            return self._walk(e, seen)
        memo = self._memo
        level = memo.get(e)
        if level is not None:
            return level
        # Post-order without recursion: a node's level is its own, combined with its children's
        # (0 wins, else the highest), exactly what the walk below finds.
        stack: list[tuple[n.Node, bool]] = [(e, False)]
        while stack:
            x, children_done = stack.pop()
            if children_done:
                level = self._own(x)
                if level != 0:
                    for c in iter_children(x):
                        inner = memo[c]
                        if inner == 0:
                            level = 0
                            break
                        level = max(level, inner)
                memo[x] = level
                continue
            if x in memo:
                continue
            stack.append((x, True))
            if not isinstance(x, (n.ThreadIdx, n.Load)) or self.fixed_load(x):  # else 0 whatever the children are
                stack.extend((c, False) for c in iter_children(x) if c not in memo)
        return memo[e]

    def _own(self, x: n.Node) -> int:
        """The level of ``x`` itself, apart from its children (``level`` without ``seen``)."""
        if isinstance(x, n.ThreadIdx) or (isinstance(x, n.Load) and not self.fixed_load(x)):
            return 0
        if isinstance(x, n.BlockIdx):
            return 2
        if not isinstance(x, n.Var):
            return 1
        level = self._var_level.get(x.name)
        if level is None:
            level = self._walk(x, frozenset())
            self._var_level[x.name] = level
        return level

    def _walk(self, e: n.Expr, seen: frozenset[str]) -> int:
        level = 1
        for x in walk(e):
            if isinstance(x, n.ThreadIdx) or (isinstance(x, n.Load) and not self.fixed_load(x)):
                return 0
            if isinstance(x, n.BlockIdx):
                level = 2
            elif isinstance(x, n.Var):
                if x.name in self.mutable or x.name in seen:
                    return 0
                if x.name in self.params:
                    if isinstance(self.params[x.name].ptype, PointerType):
                        return 0
                    continue
                init = self.local_inits.get(x.name)
                if init is None:
                    return 0
                inner = self._walk(init, seen | {x.name})
                if inner == 0:
                    return 0
                level = max(level, inner)
        return level

    def fixed_load(self, x: n.Node) -> bool:
        """Whether ``x`` is a load of ``__constant__`` memory that ``constants`` lets be uniform
        where its index is (a kernel cannot store there: one value per launch)."""
        if not (self.constants and isinstance(x, n.Load) and self.kernel.space(x.buffer) == "constant"):
            return False
        # Not a pointer held there (``polypy.poly.held``): as a uniform value two different slots
        # would be two unknowns that may be equal, a race that only may happen.
        b = self.kernel.buffer(x.buffer)
        return not (b is not None and b.elem == U64 and b.symbol in self.held_symbols)

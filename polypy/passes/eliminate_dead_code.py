"""eliminate_dead_code: remove computations whose results are never used.

Requires: unique local names. Guarantees: same observable behaviour (memory effects, atomics,
barriers and control flow that may not terminate are kept).

Removes, until nothing changes:

* statements after ``break``/``continue``/``return`` in the same block;
* ``var`` declarations, assignments, warp shuffles and votes of locals that are never read
  (the destination of an atomic is dropped, the atomic itself stays);
* assignments overwritten later in the same block before anything reads them (``_overwritten``);
* ``if`` statements with two empty branches, and counted ``for`` loops with empty bodies.
"""
from __future__ import annotations

import dataclasses

from polypy.ir import nodes as n
from polypy.ir.queries import read_names
from polypy.ir.visitor import Mutator, walk

_TERMINATORS = (n.Break, n.Continue, n.Return)


class _Dce(Mutator):
    def __init__(self, live: set[str]):
        self.live = live

    def visit_tuple(self, items):  # type: ignore[override]
        items = super().visit_tuple(items)
        for i, s in enumerate(items):
            if isinstance(s, _TERMINATORS) and i + 1 < len(items):
                return items[: i + 1]
        if any(isinstance(s, n.Assign) for s in items if isinstance(s, n.Stmt)):
            dead = _overwritten_assigns(items)
            if dead:
                return tuple(s for i, s in enumerate(items) if i not in dead)
        return items

    def visit_Decl(self, s: n.Decl) -> n.Stmt | None:
        return None if s.name not in self.live else s

    def visit_Assign(self, s: n.Assign) -> n.Stmt | None:
        return None if s.name not in self.live else s

    def visit_Shuffle(self, s: n.Shuffle) -> n.Stmt | None:
        return None if s.dest not in self.live else s

    def visit_Vote(self, s: n.Vote) -> n.Stmt | None:
        return None if s.dest not in self.live else s

    def visit_AtomicRMW(self, s: n.AtomicRMW) -> n.Stmt:
        if s.dest is not None and s.dest not in self.live:
            return dataclasses.replace(s, dest=None)
        return s

    def visit_If(self, s: n.If) -> n.Stmt | None:
        s = self.generic_visit(s)
        if not s.then and not s.orelse:
            return None
        return s

    def visit_For(self, s: n.For) -> n.Stmt | None:
        s = self.generic_visit(s)
        if not s.body and isinstance(s.step, n.Const) and s.step.value > 0:
            return None
        return s


def _overwritten_assigns(items: tuple) -> set[int]:
    """The positions of the assignments in ``items`` (one block) that are dead: a later statement
    of the block assigns the name unconditionally before anything reads it, and nothing in
    between can leave the block (``break``/``continue``/``return``) or is not a statement. Reverse
    mode would otherwise differentiate the dead value, and a NaN partial derivative times its zero
    adjoint is NaN: ``a = pow(x, y); a = b`` with ``x < 0``.

    One pass from the end of the block, each statement walked once: ``over`` holds the names
    whose next event, reading forward from the current position, is such an assignment (a block
    of 20,000 assignments, as a gradient of a long product has, asked each one's future anew).
    While ``over`` is empty only assignments are looked at: the block of each of 1,000 nested
    ``if``s walked the 999 inside it."""
    dead: set[int] = set()
    over: set[str] = set()
    for i in range(len(items) - 1, -1, -1):
        s = items[i]
        if isinstance(s, n.Assign) and s.name in over:
            dead.add(i)
        if not over and not isinstance(s, n.Assign):
            continue  # nothing to take back, nothing to add: not walked (an ``if`` nesting 1,000 more)
        if not isinstance(s, n.Stmt) or any(isinstance(x, _TERMINATORS) for x in walk(s)):
            over = set()
            continue
        reads = read_names(s)
        over -= reads
        if isinstance(s, n.Assign) and s.name not in reads:
            over.add(s.name)
    return dead


def eliminate_dead_code(kernel: n.Kernel) -> n.Kernel:
    """Remove dead locals and unreachable statements (see module docstring)."""
    while True:
        live = read_names(kernel.body) | read_names(kernel.buffers)
        result = _Dce(live).visit(kernel)
        if result is kernel:
            return kernel
        kernel = result

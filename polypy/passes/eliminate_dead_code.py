"""eliminate_dead_code: remove computations whose results are never used.

Requires: unique local names. Guarantees: same observable behaviour (memory effects, atomics,
barriers and control flow that may not terminate are kept).

Removes, until nothing changes:

* statements after ``break``/``continue``/``return`` in the same block;
* ``var`` declarations, assignments, warp shuffles and votes of locals that are never read
  (the destination of an atomic is dropped, the atomic itself stays);
* assignments overwritten later in the same block before anything reads them (``_overwritten``);
* ``if`` statements with two empty branches, and counted ``for`` loops with empty bodies (a
  positive constant step, or one at least 1 at every launch: ``c += blockDim.x``,
  ``polypy.launch.launch_positive``).
"""
from __future__ import annotations

import dataclasses

from polypy.ir import nodes as n
from polypy.ir.names import statement_names
from polypy.ir.queries import read_names
from polypy.ir.visitor import Mutator, has_kind, walk_only
from polypy.launch import launch_positive

_TERMINATORS = (n.Break, n.Continue, n.Return)


class _Dce(Mutator):
    def __init__(self, live: set[str]):
        self.live = live

    def visit_block(self, items):  # type: ignore[override]
        # (statement lists only: a ``visit_tuple`` of its own made the Mutator walk every expression)
        items = super().visit_block(items)
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
        if not s.body and ((isinstance(s.step, n.Const) and s.step.value > 0) or launch_positive(s.step, s.vtype)):
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
    ``if``s walked the 999 inside it. What a statement reads is asked of ``statement_names`` (its
    reads, and the names it declares: more than it reads, which only keeps more assignments), and
    whether it holds a ``break`` of ``has_kind``: both remembered in the statements, so the ``if``
    nesting 999 more, asked again in each of its 1,000 enclosing blocks, is walked once.
    """
    dead: set[int] = set()
    over: set[str] = set()
    for i in range(len(items) - 1, -1, -1):
        s = items[i]
        if isinstance(s, n.Assign) and s.name in over:
            dead.add(i)
        if not over and not isinstance(s, n.Assign):
            continue  # nothing to take back, nothing to add: not walked (an ``if`` nesting 1,000 more)
        if not isinstance(s, n.Stmt) or has_kind(s, _TERMINATORS):
            over = set()
            continue
        reads = statement_names(s)
        over -= reads
        if isinstance(s, n.Assign) and s.name not in reads:
            over.add(s.name)
    return dead


_DEFINITIONS = (n.Decl, n.Assign, n.Shuffle, n.Vote)  # what ``_Dce`` drops when the name is dead


def _live_names(kernel: n.Kernel) -> set[str]:
    """The names still read once every definition of a dead local is gone (the ``Decl``,
    ``Assign``, ``Shuffle`` and ``Vote`` of a name nothing reads, then those that only such
    definitions read, and so on): what removing the unread definitions again and again until
    none is left leaves read, found in one walk by counting each name's readers. Names that
    read each other in a cycle stay, as they did. (One removal per walk took a pass over the
    whole kernel for each link of a chain of 1,000 temporaries.)"""
    readers: dict[str, int] = {}
    reads_of: dict[str, list[set[str]]] = {}  # per defined name, what each definition reads
    for s in walk_only(kernel.body, n.Stmt):
        reads: set[str] = set()
        for field in s.CHILDREN:
            if field not in s.BLOCKS:
                value = getattr(s, field)
                if value is not None and value != ():
                    reads |= read_names(value)
        for name in reads:
            readers[name] = readers.get(name, 0) + 1
        if isinstance(s, _DEFINITIONS):
            reads_of.setdefault(s.dest if isinstance(s, (n.Shuffle, n.Vote)) else s.name, []).append(reads)
    for name in read_names(kernel.buffers):
        readers[name] = readers.get(name, 0) + 1
    dead = [name for name in reads_of if not readers.get(name)]
    while dead:
        for definition in reads_of[dead.pop()]:
            for name in definition:
                readers[name] -= 1
                if not readers[name] and name in reads_of:
                    dead.append(name)
    return {name for name, count in readers.items() if count}


def eliminate_dead_code(kernel: n.Kernel) -> n.Kernel:
    """Remove dead locals and unreachable statements (see module docstring)."""
    while True:
        live = _live_names(kernel)
        result = _Dce(live).visit(kernel)
        if result is kernel:
            return kernel
        kernel = result

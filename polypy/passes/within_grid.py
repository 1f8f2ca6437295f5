"""``within_grid``: a kernel version for launches whose grid is at most ``grid`` blocks in each
dimension, with the conditions that grid decides folded away.

Requires a CPU-form kernel (usually specialized for a block shape); guarantees the same effect
for every launch whose ``gridDim`` is at most ``grid`` (the version's guard says so:
``polypy.ir.versions.GridWithin``). A whole program whose every launch of a kernel with a block
shape has a grid known at compile time (``dim3 grid((nx + 15) / 16, ...)`` with ``nx`` a
constant) runs only such launches, so its version for that shape needs no branch the grid
decides. The lowering's fast thread loops compute indices in 64 bits and are exact only where
the block's indices fit in 32 bits (``tighten_thread_bounds``); the test, e.g.::

    if ((i64)(blockIdx.x * 16u) + 15 <= 2147483647) { fast loops } else { loops as written }

holds for every block of a grid 7 blocks wide, so the version keeps the fast loops alone
(``samples/programs/jacobi_solver.cu``: 2 nests -> 1 per kernel).

A condition is decided by interval arithmetic over ``blockIdx.d`` in ``[0, grid[d] - 1]`` and
``gridDim.d`` in ``[1, grid[d]]``: constants, conversions, ``+ - *`` and comparisons, each
intermediate value inside its type's range (no wrap-around); anything else (a parameter, a
thread counter, a load) leaves the condition as it is. Only a condition found always true or
always false is replaced; ``fold-constants`` and ``eliminate-dead-code`` then drop the branch.
"""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.ir.types import BOOL, ScalarType
from polypy.ir.visitor import Mutator

Grid = tuple[int, int, int]
Interval = tuple[int, int]


def _range(t: ScalarType) -> Interval:
    if t.is_bool:
        return (0, 1)
    if t.is_signed:
        return (-(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1)
    return (0, (1 << t.bits) - 1)


def interval(e: n.Expr, grid: Grid) -> Interval | None:
    """The values ``e`` takes in a launch of at most ``grid`` blocks, or None where unknown."""
    if isinstance(e, n.Const):
        if e.type.is_float:
            return None
        v = int(e.value)
        return (v, v)
    if isinstance(e, n.BlockIdx):
        return (0, grid[e.dim] - 1)
    if isinstance(e, n.GridDim):
        return (1, grid[e.dim])
    if isinstance(e, n.Cast):
        inner = interval(e.x, grid)
        if inner is None or e.to.is_float or e.x.type.is_float:
            return None
        return inner if _fits(inner, e.to) else None
    if isinstance(e, n.Binary) and e.op in ("add", "sub", "mul"):
        a, b = interval(e.a, grid), interval(e.b, grid)
        if a is None or b is None or e.type.is_float:
            return None
        if e.op == "add":
            out = (a[0] + b[0], a[1] + b[1])
        elif e.op == "sub":
            out = (a[0] - b[1], a[1] - b[0])
        else:
            products = [x * y for x in a for y in b]
            out = (min(products), max(products))
        return out if _fits(out, e.type) else None
    return None


def _fits(i: Interval, t: ScalarType) -> bool:
    lo, hi = _range(t)
    return lo <= i[0] and i[1] <= hi


def decided(cond: n.Expr, grid: Grid) -> bool | None:
    """True or False where the comparison ``cond`` has that value in every launch of at most
    ``grid`` blocks; None otherwise."""
    if not (isinstance(cond, n.Binary) and cond.op in ("lt", "le", "gt", "ge", "eq", "ne")):
        return None
    a, b = interval(cond.a, grid), interval(cond.b, grid)
    if a is None or b is None:
        return None
    always = {"lt": a[1] < b[0], "le": a[1] <= b[0], "gt": a[0] > b[1], "ge": a[0] >= b[1],
              "eq": a[0] == a[1] == b[0] == b[1], "ne": a[1] < b[0] or b[1] < a[0]}[cond.op]
    never = {"lt": a[0] >= b[1], "le": a[0] > b[1], "gt": a[1] <= b[0], "ge": a[1] < b[0],
             "eq": a[1] < b[0] or b[1] < a[0], "ne": a[0] == a[1] == b[0] == b[1]}[cond.op]
    return True if always else False if never else None


class _Decide(Mutator):
    def __init__(self, grid: Grid):
        super().__init__()
        self.grid = grid

    def visit_Binary(self, e: n.Binary) -> n.Expr:
        value = decided(e, self.grid)
        if value is not None:
            return n.Const(value, BOOL)
        return self.generic_visit(e)


def within_grid(kernel: n.Kernel, *, grid: Grid) -> n.Kernel:
    """``kernel`` for launches of at most ``grid`` blocks (module docstring); the same object
    when the grid decides nothing."""
    from polypy.passes.eliminate_dead_code import eliminate_dead_code
    from polypy.passes.fold_constants import fold_constants

    decided_kernel = _Decide(tuple(grid)).visit(kernel)  # type: ignore[arg-type]
    if decided_kernel is kernel:
        return kernel
    return eliminate_dead_code(fold_constants(decided_kernel))

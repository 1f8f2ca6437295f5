"""A kernel's versions as one IR value: ``KernelVersions(default, ((guard, kernel), ...))``.

A launch runs the kernel of the first version whose guard holds for it, else ``default``
(None: no launch may miss every guard -- a whole program whose every launch of the kernel has
one of its block shapes; the launcher aborts on a broken promise). The versions are made by the
registered passes of ``polypy.passes.versions`` (block shape, coarse blocks, arrays apart), in the
one pipeline; the backends only print the dispatch (``codegen.c.versions``) or evaluate it
(``KernelVersions.select``). As Halide's specializations, lowered to ``IfThenElse`` on the guard.

A ``Guard`` is a conjunction of typed conditions. Each condition has ONE definition, its IR
expression (``Condition.expr``) over the launch::

    BlockShapeIs((32, 8, 1))        blockDim.x == 32u && blockDim.y == 8u && blockDim.z == 1u
    EnoughCoarseBlocks((4,1,1), 8)  ((u64)gridDim.x + 3) / 4 * (u64)gridDim.y * (u64)gridDim.z
                                        >= 8 * (u64)polypy_workers
    ArraysApart((("out", "in"),))   polypy_rt_apart(out, in)
    BoundsUnproven(("y",), ("x", "y"))
                                    polypy_rt_unproven(y) && !polypy_rt_unproven(x)
    GridWithin((7, 5, 1))           gridDim.x <= 7u && gridDim.y <= 5u && gridDim.z <= 1u
    UnitStrides((("x_stride1", i32),))
                                    x_stride1 == 1

The C backend prints that expression with its C expression printer (the names of the launcher
for ``gridDim``, ``blockDim``, the workers and the arguments); Python evaluates the same
expression (``Guard.holds``: the launch's values substituted, then ``fold_expr``; a scalar
argument's value from ``Facts.arguments``). What a
printer knows when it prints (``Facts``: the caller promised the arrays apart, or not) is
substituted and folded first (``Condition.known``): a condition that folds to true is left
out, a version whose condition folds to false is unreachable.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Iterator, Mapping, Union

from polypy.ir import nodes as n
from polypy.ir.types import BOOL, I32, U32, U64, ScalarType

# The launch's worker threads (OpenMP threads, the JIT's workers), a name only guards use.
WORKERS = n.Var("polypy_workers", I32)
# ``polypy_rt_apart(a, b)``: pointer arguments ``a`` and ``b`` lie in storage apart (polypy's runtime).
APART = "polypy_rt_apart"
# ``polypy_rt_unproven(a)``: the launch's accesses of array ``a`` are not proven inside it (the
# Python API's footprints, ``polypy.driver.launch_checks``).
UNPROVEN = "polypy_rt_unproven"


def _address(name: str) -> n.Var:
    """A pointer argument in a guard: only its name matters (printed as the argument, or
    replaced by a truth value when evaluated)."""
    return n.Var(name, U64)


@dataclasses.dataclass(frozen=True)
class BlockShapeIs:
    """The launch's block shape is ``shape``."""

    shape: tuple[int, int, int]

    def expr(self) -> n.Expr:
        return _all([n.Binary("eq", n.BlockDim(d), n.Const(s, U32)) for d, s in enumerate(self.shape)])

    def suffix(self) -> str:
        return "b" + "x".join(map(str, self.shape))


@dataclasses.dataclass(frozen=True)
class EnoughCoarseBlocks:
    """The launch's grid has at least ``blocks_per_worker`` coarse blocks of ``factor`` blocks per
    worker (partial coarse blocks counted; ``polypy.coarsening``); 0: every launch."""

    factor: tuple[int, int, int]
    blocks_per_worker: int

    def expr(self) -> n.Expr:
        if self.blocks_per_worker <= 0:
            return n.Const(True, BOOL)
        count: n.Expr | None = None
        for d, f in enumerate(self.factor):
            g: n.Expr = n.Cast(U64, n.GridDim(d))
            if f != 1:
                g = n.Binary("div", n.Binary("add", g, n.Const(f - 1, U64)), n.Const(f, U64))
            count = g if count is None else n.Binary("mul", count, g)
        assert count is not None
        need = n.Binary("mul", n.Const(self.blocks_per_worker, U64), n.Cast(U64, WORKERS))
        return n.Binary("ge", count, need)

    def suffix(self) -> str:
        return "_c" + "x".join(map(str, self.factor))


@dataclasses.dataclass(frozen=True)
class ArraysApart:
    """Each pair of pointer arguments (IR parameter names) lies in storage apart."""

    pairs: tuple[tuple[str, str], ...]

    def expr(self) -> n.Expr:
        return _all([n.Call(APART, (_address(a), _address(b)), BOOL) for a, b in self.pairs])

    def suffix(self) -> str:
        return "_r"


@dataclasses.dataclass(frozen=True)
class BoundsUnproven:
    """Some of ``arrays`` (IR names of pointer parameters and shared arrays) are not proven in
    bounds for the launch, and every other array of ``among`` is: the launch runs a version
    that bounds-checks ``arrays`` (``Kernel.bounds_checks``)."""

    arrays: tuple[str, ...]
    among: tuple[str, ...]

    def expr(self) -> n.Expr:
        some = [n.Call(UNPROVEN, (_address(a),), BOOL) for a in self.arrays]
        any_of = some[0] if some else n.Const(False, BOOL)
        for atom in some[1:]:
            any_of = n.Binary("lor", any_of, atom)
        rest = [n.Unary("not", n.Call(UNPROVEN, (_address(a),), BOOL)) for a in self.among if a not in self.arrays]
        return _all([any_of] + rest)

    def suffix(self) -> str:
        return "_k" + "_".join(self.arrays)


@dataclasses.dataclass(frozen=True)
class GridWithin:
    """The launch's grid has at most ``grid`` blocks in each dimension (every launch of a whole
    program's kernel with this block shape has a grid known at compile time:
    ``polypy.passes.within_grid``). No part of the version's name: it replaces the shape's version."""

    grid: tuple[int, int, int]

    def expr(self) -> n.Expr:
        return _all([n.Binary("le", n.GridDim(d), n.Const(g, U32)) for d, g in enumerate(self.grid)])

    def suffix(self) -> str:
        return ""


@dataclasses.dataclass(frozen=True)
class UnitStrides:
    """Each of ``strides`` (scalar parameters: IR name and type), a run-time stride, is 1 for
    the launch: the last strides of tensor accessors, 1 for a tensor of contiguous rows
    (``polypy.passes.versions.version_unit_strides``)."""

    strides: tuple[tuple[str, ScalarType], ...]

    def expr(self) -> n.Expr:
        return _all([n.Binary("eq", n.Var(name, t), n.Const(1, t)) for name, t in self.strides])

    def suffix(self) -> str:
        return "_s1"


Condition = Union[BlockShapeIs, EnoughCoarseBlocks, ArraysApart, BoundsUnproven, GridWithin, UnitStrides]
# The order of a version's name parts (``b32x8x1_c4x1x1_r``, ``b32x8x1_kout``, ``b32x8x1_r_s1``).
_NAME_ORDER = (BlockShapeIs, EnoughCoarseBlocks, ArraysApart, BoundsUnproven, UnitStrides)


def _all(atoms: list[n.Expr]) -> n.Expr:
    if not atoms:
        return n.Const(True, BOOL)
    out = atoms[0]
    for a in atoms[1:]:
        out = n.Binary("land", out, a)
    return out


@dataclasses.dataclass(frozen=True)
class Facts:
    """What is known about a launch: each field None where unknown. ``apart``: True/False, or a
    function of two parameter names (whether those arguments lie apart). ``unproven``: the
    arrays whose accesses the launch's footprints do not prove in bounds (empty: all proven).
    ``arguments``: scalar arguments' values by IR parameter name (integers)."""

    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    workers: int | None = None
    apart: bool | Callable[[str, str], bool] | None = None
    unproven: frozenset[str] | None = None
    arguments: Mapping[str, int] | None = None


def known(e: n.Expr, facts: Facts) -> n.Expr:
    """``e`` with what ``facts`` know substituted, folded (a ``Const`` where all is known)."""
    from polypy.ir.visitor import substitute
    from polypy.passes.fold_constants import fold_expr

    mapping: dict[n.Expr, n.Expr] = {}
    if facts.block is not None:
        mapping.update({n.BlockDim(d): n.Const(v, U32) for d, v in enumerate(facts.block)})
    if facts.grid is not None:
        mapping.update({n.GridDim(d): n.Const(v, U32) for d, v in enumerate(facts.grid)})
    if facts.workers is not None:
        mapping[WORKERS] = n.Const(max(1, facts.workers), I32)
    if facts.apart is not None:
        for x in _calls(e, APART):
            a, b = (arg.name for arg in x.args)  # type: ignore[attr-defined]
            value = facts.apart if isinstance(facts.apart, bool) else facts.apart(a, b)
            mapping[x] = n.Const(bool(value), BOOL)
    if facts.unproven is not None:
        for x in _calls(e, UNPROVEN):
            mapping[x] = n.Const(x.args[0].name in facts.unproven, BOOL)  # type: ignore[attr-defined]
    if facts.arguments is not None:
        from polypy.ir.visitor import walk

        for x in walk(e):
            if isinstance(x, n.Var) and x.name in facts.arguments and x != WORKERS:
                mapping[x] = n.Const(int(facts.arguments[x.name]), x.vtype)
    return fold_expr(substitute(e, mapping) if mapping else e)


def _calls(e: n.Expr, fn: str) -> Iterator[n.Call]:
    from polypy.ir.visitor import walk

    return (x for x in walk(e) if isinstance(x, n.Call) and x.fn == fn)


@dataclasses.dataclass(frozen=True)
class Guard:
    """A conjunction of conditions (the empty one holds always)."""

    conditions: tuple[Condition, ...] = ()

    def and_(self, condition: Condition) -> Guard:
        return Guard(self.conditions + (condition,))

    def find(self, kind: type) -> Condition | None:
        return next((c for c in self.conditions if isinstance(c, kind)), None)

    def expr(self) -> n.Expr:
        return _all([c.expr() for c in self.conditions])

    def holds(self, facts: Facts) -> bool:
        """Whether the guard holds for a launch all of whose relevant ``facts`` are known."""
        value = known(self.expr(), facts)
        if not isinstance(value, n.Const):
            from polypy.errors import InternalError
            from polypy.ir.printer import format_expr

            raise InternalError(f"guard {format_expr(value)} is not decided by the launch's facts")
        return bool(value.value)

    def text(self) -> str:
        from polypy.ir.printer import format_expr

        return format_expr(self.expr())

    def suffix(self) -> str:
        """The version's name: its conditions' parts, in one order (``b32x8x1_c4x1x1_r``)."""
        return "".join(c.suffix() for kind in _NAME_ORDER for c in self.conditions if isinstance(c, kind))


@dataclasses.dataclass(frozen=True)
class KernelVersions:
    """A kernel's versions: the first whose guard holds runs, else ``default`` (see the module
    docstring). ``name``: the kernel's."""

    default: n.Kernel | None
    versions: tuple[tuple[Guard, n.Kernel], ...] = ()

    @property
    def name(self) -> str:
        kernel = self.default if self.default is not None else self.versions[0][1]
        return kernel.name

    @property
    def kernels(self) -> tuple[n.Kernel, ...]:
        return tuple(k for _, k in self.versions) + ((self.default,) if self.default is not None else ())

    def select(self, facts: Facts) -> tuple[Guard | None, n.Kernel | None]:
        """The version a launch with ``facts`` runs: (its guard, its kernel); (None, default)
        where no guard holds."""
        for guard, kernel in self.versions:
            if guard.holds(facts):
                return guard, kernel
        return None, self.default

    def replace(self, **changes) -> KernelVersions:
        return dataclasses.replace(self, **changes)


def print_versions(versions: KernelVersions) -> str:
    """The text form: each version's guard and kernel in order, then the default."""
    from polypy.ir.printer import print_kernel

    out = [f"// versions of {versions.name}: {len(versions.versions)} guarded"
           f"{', and a default' if versions.default is not None else ', no default'}\n"]
    for guard, kernel in versions.versions:
        out.append(f"// when {guard.text()}  (version {guard.suffix()})\n")
        out.append(print_kernel(kernel))
    if versions.default is not None:
        out.append("// otherwise  (version generic)\n")
        out.append(print_kernel(versions.default))
    else:
        out.append("// otherwise: no version (a launch of another block shape aborts)\n")
    return "".join(out)

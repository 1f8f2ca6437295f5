"""The passes that make a kernel's versions (``polypy.ir.versions.KernelVersions``), in order.

Each is a pure function ``KernelVersions -> KernelVersions`` registered by name in
``polypy.driver.pipelines`` and run by ``run_pipeline`` (``--dump-after version-block-shapes``
prints the versions); ``build_versions`` runs them, for the C backend (``lower_and_emit``) and
the Python API alike. Starting from a CPU-form kernel as the default::

    version-block-shapes     (block == S, specialize_block_shape(K, S)) per block shape S
    version-coarse-blocks    before each: (block == S && enough coarse blocks, coarse K for S),
                             where the caller's ``coarsen`` gives one (polypy.coarsening)
    version-arrays-apart     before each shape's versions: the same with the written pointers
                             restrict, guarded by "arrays apart" (polypy.passes.apart_twins);
                             in a whole program also after all versions: (apart, the default's
                             twin), for launches of a block shape known only at run time
    version-without-default  no default: every launch has one of the shapes (a whole program)
    version-grid-bounds      each version of a shape whose launches' grids are all known (a whole
                             program without default): && grid within their largest, with what
                             that grid decides folded (polypy.passes.within_grid)
    version-unit-strides     before each version and the default: (guard && the accessors' last
                             strides are 1, the kernel with them 1: polypy.passes.unit_strides),
                             for a kernel reading tensor accessors
    version-bounds-checks    before all: (guard && some of A unproven, the version checking A)
                             for each version not for arrays apart, and the default; per set A
                             of arrays the caller's launches could not prove in bounds

so that one shape's versions come in the order a launch tries them::

    S && enough && unproven A -> coarse, checks A    S && unproven A -> fine, checks A
    S && apart && enough -> coarse, restrict         S && apart -> fine, restrict
    S && enough          -> coarse                   S          -> fine

each of these preceded by its unit-stride version (``S && enough && unit strides -> coarse, unit
strides``) where the kernel reads accessors.

A pass run on a value that has bounds-checked versions already leaves those in front, as they
are (``_around_checks``): a coarse version added later gets its checked one from
``version-bounds-checks`` again.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Mapping, Optional, Sequence

from polypy.ir import nodes as n
from polypy.ir.host import HostProgram, needs_stub
from polypy.ir.types import PointerType
from polypy.ir.visitor import walk
from polypy.ir.versions import (ArraysApart, BlockShapeIs, BoundsUnproven, EnoughCoarseBlocks, GridWithin, Guard,
                                KernelVersions, UnitStrides)
from polypy.launch import MAX_BLOCK, MAX_THREADS_PER_BLOCK, check_block_shape
from polypy.passes.apart_twins import apart_twin, restricted, with_restrict, written_pointers
from polypy.passes.pipeline import Pass, run_pipeline

BlockShape = tuple[int, int, int]
# Per block shape, a kernel's version for coarse blocks (``polypy.coarsening.CoarseVersion``: its
# kernel and the coarse blocks per worker a launch needs), or None: called with the default
# kernel (CPU form), the shape and the kernel specialized for that shape.
Coarsener = Callable[[n.Kernel, BlockShape, n.Kernel], Optional[object]]


def _shape_of(guard: Guard) -> BlockShape | None:
    """The block shape of a guard that is a block shape and nothing else."""
    if len(guard.conditions) == 1 and isinstance(guard.conditions[0], BlockShapeIs):
        return guard.conditions[0].shape
    return None


def version_block_shapes(versions: KernelVersions, *, shapes: Sequence[BlockShape] = ()) -> KernelVersions:
    """A version specialized for each block shape of ``shapes`` (``specialize-block-shape``)
    after those already made; requires the default kernel."""
    from polypy.passes.specialize import specialize_for_block

    kernel = versions.default
    if kernel is None:
        return versions
    made = {_shape_of(g) for g, _ in versions.versions}
    added = []
    for shape in dict.fromkeys(check_block_shape(tuple(s)) for s in shapes):
        if shape not in made:
            added.append((Guard((BlockShapeIs(shape),)), specialize_for_block(kernel, shape)))
    if not added:
        return versions
    return versions.replace(versions=versions.versions + tuple(added))


def _around_checks(run: Callable[[KernelVersions], KernelVersions], versions: KernelVersions) -> KernelVersions:
    """``run`` on ``versions`` without their bounds-checked versions, those put back in front."""
    checked = tuple((g, k) for g, k in versions.versions if g.find(BoundsUnproven) is not None)
    if not checked:
        return run(versions)
    rest = versions.replace(versions=versions.versions[len(checked):])
    if any(g.find(BoundsUnproven) is not None for g, _ in rest.versions):
        from polypy.errors import InternalError

        raise InternalError(f"kernel {versions.name!r}: bounds-checked versions after unchecked ones")
    done = run(rest)
    return versions if done is rest else done.replace(versions=checked + done.versions)


def version_coarse_blocks(versions: KernelVersions, *, coarsen: Coarsener | None = None) -> KernelVersions:
    """Before each block-shape version, its version for coarse blocks where ``coarsen`` gives one,
    guarded by "the grid has enough coarse blocks" (``polypy.coarsening``); a twin for arrays
    apart gets the coarse kernel with its restrict pointers. Shapes that have coarse versions
    already are left alone."""
    return _around_checks(functools.partial(_coarse_blocks, coarsen=coarsen), versions)


def _coarse_blocks(versions: KernelVersions, *, coarsen: Coarsener | None) -> KernelVersions:
    kernel = versions.default
    if coarsen is None or kernel is None:
        return versions
    done = {g.find(BlockShapeIs) for g, _ in versions.versions if g.find(EnoughCoarseBlocks) is not None}
    fine = {_shape_of(g): k for g, k in versions.versions if _shape_of(g) is not None}
    made: dict[BlockShape, object] = {}
    out: list[tuple[Guard, n.Kernel]] = []
    changed = False
    for guard, k in versions.versions:
        shape = guard.find(BlockShapeIs)
        if shape is not None and shape not in done and shape.shape in fine:
            if shape.shape not in made:
                made[shape.shape] = coarsen(kernel, shape.shape, fine[shape.shape])
            coarse = made[shape.shape]
            if coarse is not None:
                enough = EnoughCoarseBlocks(coarse.kernel.coarsen, coarse.blocks_per_worker)  # type: ignore[attr-defined]
                restrict = restricted(k) - restricted(fine[shape.shape])
                coarse_kernel = coarse.kernel if not restrict else with_restrict(coarse.kernel, restrict)  # type: ignore
                unit = guard.find(UnitStrides)
                if unit is not None:  # the coarse kernel of a unit-stride version: its strides 1 too
                    coarse_kernel = _unit(coarse_kernel, unit)  # type: ignore[arg-type]
                out.append((guard.and_(enough), coarse_kernel))
                changed = True
        out.append((guard, k))
    return versions.replace(versions=tuple(out)) if changed else versions


def apart_pairs(kernel: n.Kernel) -> tuple[tuple[str, str], ...]:
    """The pairs of pointer parameters a twin's "arrays apart" test needs: each written one with
    every other pointer parameter, each pair once."""
    written = written_pointers(kernel)
    pointers = [p.name for p in kernel.params if isinstance(p.ptype, PointerType)]
    return tuple(dict.fromkeys((w, p) for w in written for p in pointers
                               if p != w and not (p in written and written.index(p) < written.index(w))))


def version_arrays_apart(versions: KernelVersions, *, check_bounds: bool = False,
                         default: bool = False) -> KernelVersions:
    """Before the versions of each block shape, their twins with the written pointers restrict
    (``apart_twin``, where that can pay), guarded by the arrays being apart; shapes that have
    twins already are left alone. With ``default`` (a whole program, whose launches of a block
    shape known only at run time run the default kernel), the default's twin too, guarded by the
    arrays being apart alone, after every other version. Not for bounds-checked code (whose
    checks the twins would not keep apart from the fast ones)."""
    kernel = versions.default
    if check_bounds or kernel is None:
        return versions
    pairs = apart_pairs(kernel)
    if not pairs:
        return versions
    apart = ArraysApart(pairs)
    if default and not any(g == Guard((apart,)) for g, _ in versions.versions):
        twin = apart_twin(kernel)
        if twin is not None:
            versions = versions.replace(versions=versions.versions + ((Guard((apart,)), twin),))
    groups: dict[BlockShape, list[tuple[Guard, n.Kernel]]] = {}
    order: list[BlockShape] = []
    others: list[tuple[Guard, n.Kernel]] = []
    twinned = {g.find(BlockShapeIs) for g, _ in versions.versions if g.find(ArraysApart) is not None}
    for guard, k in versions.versions:
        shape = guard.find(BlockShapeIs)
        if shape is None or guard.find(ArraysApart) is not None or shape in twinned:  # twins made already
            others.append((guard, k))
            continue
        if shape.shape not in groups:
            order.append(shape.shape)
        groups.setdefault(shape.shape, []).append((guard, k))
    out: list[tuple[Guard, n.Kernel]] = []
    changed = False
    for shape in order:
        group = groups[shape]
        fine = next((k for g, k in group if _shape_of(g) is not None), None)
        twin = apart_twin(fine) if fine is not None else None
        if twin is not None:
            names = restricted(twin)
            for guard, k in group:
                conditions = (guard.conditions[0], apart) + guard.conditions[1:]
                out.append((Guard(conditions), twin if k is fine else with_restrict(k, names)))
            changed = True
        out.extend(group)
    return versions.replace(versions=tuple(out + others)) if changed else versions


def version_without_default(versions: KernelVersions) -> KernelVersions:
    """No default version: the caller knows every launch has one of the versions' block shapes."""
    if versions.default is None or not versions.versions:
        return versions
    return versions.replace(default=None)


def version_grid_bounds(versions: KernelVersions, *, grids: Mapping[BlockShape, BlockShape] | None = None,
                        ) -> KernelVersions:
    """Each version for a block shape of ``grids`` (the largest grid of every launch with that
    shape, all known at compile time) guarded by "the grid is within it" too, its kernel with what
    that grid decides folded (``within_grid``). Only without a default: the version then replaces
    the shape's own, and a launch with a larger grid is a broken promise (the launcher aborts)."""
    from polypy.passes.within_grid import within_grid

    if not grids or versions.default is not None:
        return versions
    out = []
    changed = False
    for guard, kernel in versions.versions:
        shape = guard.find(BlockShapeIs)
        if shape is None or shape.shape not in grids or guard.find(GridWithin) is not None:
            out.append((guard, kernel))
            continue
        grid = tuple(grids[shape.shape])
        out.append((guard.and_(GridWithin(grid)), within_grid(kernel, grid=grid)))  # type: ignore[arg-type]
        changed = True
    return versions.replace(versions=tuple(out)) if changed else versions


def _unit(kernel: n.Kernel, condition: UnitStrides) -> n.Kernel:
    from polypy.passes.unit_strides import specialize_unit_strides

    step = Pass("specialize-unit-strides", functools.partial(specialize_unit_strides,
                                                             strides=tuple(name for name, _ in condition.strides)))
    return run_pipeline(kernel, (step,))


def version_unit_strides(versions: KernelVersions) -> KernelVersions:
    """Before each version and the default (the default's guard: the condition alone), its
    kernel for launches whose accessors' last strides are all 1 (``specialize-unit-strides``),
    guarded by ``UnitStrides``: where the kernel reads accessors (``last_strides``). Versions
    that have their unit-stride ones already are left alone; bounds-checked ones stay in front."""
    return _around_checks(_unit_strides, versions)


def _unit_strides(versions: KernelVersions) -> KernelVersions:
    from polypy.passes.unit_strides import last_strides

    base = versions.default if versions.default is not None else \
        (versions.versions[0][1] if versions.versions else None)
    strides = last_strides(base) if base is not None else ()
    if not strides or any(g.find(UnitStrides) is not None for g, _ in versions.versions):
        return versions
    unit = UnitStrides(strides)
    out: list[tuple[Guard, n.Kernel]] = []
    for guard, kernel in versions.versions:
        out += [(guard.and_(unit), _unit(kernel, unit)), (guard, kernel)]
    if versions.default is not None:
        out.append((Guard((unit,)), _unit(versions.default, unit)))
    return versions.replace(versions=tuple(out))


def version_bounds_checks(versions: KernelVersions, *, arrays: Sequence[str] = (),
                          among: Sequence[str] = ()) -> KernelVersions:
    """Before all versions, for launches where some of ``arrays`` (pointer parameters, shared
    arrays; IR names) are not proven in bounds and the rest of ``among`` are
    (``BoundsUnproven``): the bounds-checked kernel of each version not for arrays apart (whose
    guard the checked one extends), and of the default. A coarse kernel checks the shared arrays
    it holds one slice of per sub-block slice by slice (``checked_kernel``). Bounds-checked
    versions made already stay, in their order, with those of each new version added."""
    if not arrays:
        return versions
    condition = BoundsUnproven(tuple(sorted(set(arrays))), tuple(sorted(set(among) | set(arrays))))
    made = {g: k for g, k in versions.versions if g.find(BoundsUnproven) is not None}
    rest = versions.versions[len(made):]
    conditions = list(dict.fromkeys(g.find(BoundsUnproven) for g in made)) + [condition]
    fine = {_shape_of(g): k for g, k in rest if _shape_of(g) is not None}
    out: list[tuple[Guard, n.Kernel]] = []
    for c in dict.fromkeys(conditions):
        plain = [(g, k) for g, k in rest if g.find(ArraysApart) is None]
        plain += [(Guard(), versions.default)] if versions.default is not None else []
        for g, k in plain:
            guard = g.and_(c)  # type: ignore[arg-type]
            shape = g.find(BlockShapeIs)
            found = made.get(guard)
            out.append((guard, found if found is not None else
                        checked_kernel(k, c.arrays, fine.get(shape.shape) if shape is not None else None)))  # type: ignore
    if len(out) == len(made):
        return versions
    return versions.replace(versions=tuple(out) + rest)


def checked_kernel(kernel: n.Kernel, arrays: Sequence[str], fine: n.Kernel | None = None) -> n.Kernel:
    """``kernel`` bounds-checking every access of ``arrays`` (``Kernel.bounds_checks``; names it
    does not have are left out). A coarse kernel (``fine``: its version for one block) checks the
    pointer parameters of ``arrays``, and where ``arrays`` has shared ones, every shared array of
    its own: those holding one slice per sub-block (a leading dimension of the factor over the
    fine array's shape) slice by slice. Copies of a shared array (``Kernel.copies``) are checked
    slice by slice, as the original."""
    checks = set(arrays)
    sliced: set[str] = set()
    if kernel.coarsen != (1, 1, 1) and fine is not None:
        factor = kernel.coarsen[0]
        fine_shared = {b.name: b for b in fine.buffers if b.space == "shared"}
        checks = {name for name in arrays if name not in fine_shared}
        if any(name in fine_shared for name in arrays):
            for b in kernel.buffers:
                if b.space != "shared":
                    continue
                checks.add(b.name)
                original = fine_shared.get(b.name)
                if (original is not None and original.shape is not None and b.shape is not None
                        and tuple(b.shape[1:]) == tuple(original.shape)
                        and isinstance(b.shape[0], n.Const) and int(b.shape[0].value) == factor):
                    sliced.add(b.name)
    sliced |= {copy for copy, _ in kernel.copies if copy in checks}
    own = {p.name for p in kernel.params if isinstance(p.ptype, PointerType)} | \
        {b.name for b in kernel.buffers} | {b.symbol for b in kernel.buffers if b.part is not None}
    checks &= own  # type: ignore[operator]
    return dataclasses.replace(kernel, bounds_checks=tuple(sorted(checks)), checked_slices=tuple(sorted(sliced & checks)))


def version_passes(*, shapes: Sequence[BlockShape] = (), coarsen: Coarsener | None = None,
                   check_bounds: bool = False, apart: bool = True, default: bool = True,
                   grids: Mapping[BlockShape, BlockShape] | None = None,
                   apart_default: bool = False) -> tuple[Pass, ...]:
    """The passes ``build_versions`` runs (each registered under its name in ``polypy.driver.pipelines``)."""
    unit = (Pass("version-unit-strides", version_unit_strides),)
    twin_default = apart and apart_default and default
    arrays_apart = (Pass("version-arrays-apart", functools.partial(version_arrays_apart, check_bounds=check_bounds,
                                                                   default=twin_default)),)
    if not shapes:
        return (arrays_apart if twin_default else ()) + unit
    steps = (Pass("version-block-shapes", functools.partial(version_block_shapes, shapes=tuple(shapes))),
             Pass("version-coarse-blocks", functools.partial(version_coarse_blocks, coarsen=coarsen)))
    if apart:
        steps += arrays_apart
    if default:
        return steps + unit
    steps += (Pass("version-without-default", version_without_default),)
    return steps + ((Pass("version-grid-bounds", functools.partial(version_grid_bounds, grids=dict(grids))),)
                    if grids else ()) + unit


def build_versions(kernel: n.Kernel, *, shapes: Sequence[BlockShape] = (), coarsen: Coarsener | None = None,
                   check_bounds: bool = False, apart: bool = True, default: bool = True,
                   grids: Mapping[BlockShape, BlockShape] | None = None,
                   apart_default: bool = False) -> KernelVersions:
    """The versions of CPU-form ``kernel``: one per block shape of ``shapes``, each with its coarse
    version (``coarsen``) and twins for arrays apart (``apart``, a backend that has them; not with
    ``check_bounds``), and ``kernel`` itself as the default unless ``default`` is False; without a
    default, the versions of the shapes of ``grids`` for grids at most those; each version (and
    the default) preceded by its unit-stride one where the kernel reads accessors (see the
    module docstring); with ``apart_default`` (a whole program), the default's twin for arrays
    apart too."""
    start = KernelVersions(kernel)
    if not shapes and not (apart_default and apart and default and not check_bounds):
        from polypy.passes.unit_strides import last_strides

        if not last_strides(kernel):
            return start
    return run_pipeline(start, version_passes(shapes=shapes, coarsen=coarsen, check_bounds=check_bounds,
                                              apart=apart, default=default, grids=grids,
                                              apart_default=apart_default))


# ---- a whole program's versions ------------------------------------------------------------------
# Block shapes per kernel that a whole program gets specialized versions for, at most.
MAX_PROGRAM_SPECIALIZATIONS = 4


def program_block_shapes(host: HostProgram) -> dict[str, list[BlockShape]]:
    """Per kernel, the block shapes of its launch sites that are constants (``<<<g, 256>>>``,
    ``dim3(16, 16)``, ``dim3(ROW_BLOCK)``: ``LaunchSite.block_shape``), the first
    ``MAX_PROGRAM_SPECIALIZATIONS``: a version each; launches with other shapes (a ``dim3``
    variable, a size computed at run time) run the default version."""
    out: dict[str, list[BlockShape]] = {}
    for site in host.launches:
        shape = site.block_shape
        if shape is None or not 1 <= shape[0] * shape[1] * shape[2] <= MAX_THREADS_PER_BLOCK or shape[2] > MAX_BLOCK[2]:
            continue
        shapes = out.setdefault(site.kernel, [])
        if shape not in shapes and len(shapes) < MAX_PROGRAM_SPECIALIZATIONS:
            shapes.append(shape)
    return out


def closed_kernels(host: HostProgram, kernels: Mapping[str, n.Kernel],
                   shapes: Mapping[str, Sequence[BlockShape]]) -> set[str]:
    """The kernels every launch of which has one of their specialized block shapes: launched
    only by the program's own ``<<<...>>>`` (no host stub it may call, no launch from device
    code), each with a block shape known at compile time. They need no default version."""
    from_device = {x.kernel for k in kernels.values() for x in walk(k) if isinstance(x, n.Launch)}
    out = set()
    for name in kernels:
        sites = [s for s in host.launches if s.kernel == name]
        if sites and name not in from_device and not needs_stub(host, name) and \
                all(s.block_shape is not None and s.block_shape in shapes.get(name, ()) for s in sites):
            out.add(name)
    return out


def program_versions(host: HostProgram, kernels: Mapping[str, n.Kernel], *, coarsen: Coarsener | None = None,
                     check_bounds: bool = False) -> dict[str, KernelVersions]:
    """The versions of each CPU-form kernel of the whole program ``host`` (``build_versions``):
    per block shape of its launches (``program_block_shapes``), without a default where every
    launch has one of them (``closed_kernels``)."""
    shapes = program_block_shapes(host)
    closed = closed_kernels(host, kernels, shapes)
    return {name: build_versions(k, shapes=shapes.get(name, ()), coarsen=coarsen, check_bounds=check_bounds,
                                 default=name not in closed, apart_default=True,
                                 grids=program_grids(host, name) if name in closed else None)
            for name, k in kernels.items()}


def program_grids(host: HostProgram, kernel: str) -> dict[BlockShape, BlockShape]:
    """Per block shape of ``kernel``'s launches, the largest grid (dimension by dimension) of
    those launches, where every one of them has a grid known at compile time."""
    grids: dict[BlockShape, list] = {}
    for site in host.launches:
        if site.kernel == kernel and site.block_shape is not None:
            grids.setdefault(tuple(site.block_shape), []).append(site.grid_shape)
    return {shape: tuple(max(g[d] for g in sites) for d in range(3))  # type: ignore[misc]
            for shape, sites in grids.items() if all(g is not None and min(g) >= 1 for g in sites)}

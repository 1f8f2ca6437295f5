"""The public Python API: compile CUDA kernels for this machine's cores and launch them on NumPy.

::

    import polypy
    mod = polypy.compile("kernels.cu")              # parse + optimize + lower + JIT (cached on disk)
    mod.saxpy[grid, block](n, 2.0, x, y)            # all cores; x, y are numpy arrays, updated in place
    mod.reduce[grid, block, shmem_bytes](x, out)    # with dynamic shared memory
    mod.saxpy.emulate[grid, block](n, 2.0, x, y)    # the reference emulator instead

``grid`` and ``block`` are an int or a tuple of 1 to 3 ints. Arguments come in the order of the
C signature (a struct parameter whole: dict, NumPy structured scalar or object with attributes),
or all by name. Arrays must be C-contiguous with exactly the element type of the parameter; an
N-D array is passed as its flat memory. Scalars are converted to the parameter type with C's
rules. Problems are ``polypy.UserError``.

Launches never corrupt memory. Before each launch, every array -- each pointer argument, each
``__shared__`` array, the ``extern __shared__`` one sized by ``shmem_bytes`` -- is compared with
the launch's footprint (the indices the kernel touches, computed with isl from the launch shape
and integer arguments, ``polypy.poly.footprint``): inside the array, the launch runs the fast
code; certainly outside (a too-small array, too little dynamic shared memory, a static shared
array smaller than the block uses), the launch is refused before it starts; where isl cannot
tell (a guard it cannot model, an index loaded from memory), the launch runs a bounds-checked
version of the kernel (compiled on first need), which stops at the first access outside its
array, touching nothing there, and raises a ``UserError`` naming the kernel, the array, the
index and the source line. Writes made before that point stay, as they would on a GPU.

Each kernel is compiled for the block shape of its launch, on the first launch with that shape
(``polypy.passes.specialize``: ``blockDim`` becomes constants, so thread loops have constant trip
counts and per-thread buffers a static size), and the machine code is kept in memory and in the
disk cache. After ``MAX_SPECIALIZATIONS`` shapes of one kernel, further shapes use the generic
version (compiled on first need), as does every launch with ``specialize=False``. A shape's
versions are the IR value of the versions stage (``polypy.passes.versions``: the shape's own,
its coarse blocks, its twin for arrays apart); each launch runs the first whose guard holds for
it (``CompiledKernel.select``), compiled on first use.

This module wires stages together (frontend -> GPU pipeline -> gpu2cpu -> codegen.llvm) and so
imports them inside functions only.
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import os
from typing import Any, Mapping, Sequence

import numpy as np

from polypy.errors import InternalError, UserError
from polypy.ir import nodes as n
from polypy.ir.types import ScalarType
from polypy.ir.versions import BlockShapeIs, EnoughCoarseBlocks, Facts, Guard, KernelVersions
from polypy.driver.launch_checks import ArrayChecks, Proof, checkable_arrays, original_name
from polypy.launch import arrays_apart, bind_arguments, launch_config
from polypy.stack import call_on_big_stack, on_big_stack

# Footprints remembered per kernel: launch shape + integer arguments -> per-array index ranges.
FOOTPRINT_CACHE_SIZE = 64
# Block shapes per kernel compiled as specializations; launches with more shapes use the generic code.
MAX_SPECIALIZATIONS = 8


@on_big_stack
def compile(path: str | os.PathLike | None, *, defines: dict[str, str] | None = None,
            include_dirs: Sequence[str] = (), threads: int | None = None, text: str | None = None,
            specialize: bool = True, coarsen: bool | int = True) -> CompiledModule:
    """Parse, optimize, lower to CPU form and JIT-compile every kernel of a CUDA file.

    ``threads``: worker threads per launch (default: every core this process may use).
    ``specialize``: compile each kernel for the block shape of its launches (on the first launch
    of each shape); False: one generic version for every shape.
    ``coarsen``: run consecutive blocks along x as one coarse block where that is legal and pays
    (``gpu2cpu.coarsen_blocks``; with ``specialize`` only); an int >= 2 forces that factor on
    every launch where it is legal (for testing); False: never.
    Machine code is cached on disk (see ``codegen.llvm.cache``), so compiling the same kernels
    again skips LLVM entirely. ``text``: the source itself; with ``path`` None, diagnostics name
    it ``<string>``.
    """
    from polypy.driver import source

    gpu = source.load(path, defines=defines, include_dirs=tuple(include_dirs), text=text)
    return CompiledModule.from_ir(gpu, threads=threads, specialize=specialize, coarsen=coarsen)


@on_big_stack
def _to_cpu(gpu: n.Module) -> n.Module:
    from polypy.driver.pipelines import lower_and_emit

    return lower_and_emit(gpu, "cpu")


class UnknownKernelError(UserError, AttributeError):
    """``mod.name`` where the module has no kernel ``name`` (also an AttributeError for hasattr)."""


class CompiledModule:
    """Compiled kernels of one source file; ``mod.<kernel>`` / ``mod["kernel"]`` give launchers.

    ``globals`` holds the module's ``__constant__`` and ``__device__`` arrays (NumPy arrays used
    in place by every launch, compiled or emulated; assign into them to set constant memory).
    ``jit`` is the generic machine code of every kernel (compiled when first needed); launches
    use per-block-shape specializations (``CompiledKernel.for_block``) unless ``specialize`` is
    False.
    """

    def __init__(self, gpu: n.Module | None, cpu: n.Module, jit: Any = None, threads: int | None = None, *,
                 specialize: bool = True, coarsen: bool | int = True):
        from codegen.llvm import global_storage

        self.gpu = gpu
        self.cpu = cpu
        self._jit = jit
        self.threads = threads
        self.specialize = specialize
        self.coarsen = _check_coarsen(coarsen)
        self.globals: dict[str, np.ndarray] = jit.globals if jit is not None else global_storage(cpu)
        self._kernels: dict[str, CompiledKernel] = {}
        for k in cpu.kernels:
            gpu_kernel = None
            if gpu is not None:
                try:
                    gpu_kernel = gpu.kernel(k.name)
                except KeyError:
                    gpu_kernel = None
            self._kernels[k.name] = CompiledKernel(self, k, gpu_kernel)

    @classmethod
    def from_ir(cls, gpu: n.Module | None, cpu: n.Module | None = None, *, threads: int | None = None,
                specialize: bool = True, coarsen: bool | int = True) -> CompiledModule:
        """Compile IR directly: a GPU-form module (lowered with ``to_cpu``) and/or its CPU form.

        Without ``gpu`` nothing is proven about a launch's accesses (every launch runs the
        bounds-checked code), and there is no ``emulate`` and no block coarsening (which lowers
        the GPU form again). Machine code is made on the first launch of each
        block shape (or first use of ``jit``).
        """
        if cpu is None:
            if gpu is None:
                raise UserError("CompiledModule.from_ir needs a GPU-form or a CPU-form module")
            cpu = _to_cpu(gpu)
        else:
            from codegen.llvm.lower import check_cpu_form
            from polypy.ir.verifier import verify_kernel

            for k in cpu.kernels:  # refuse what the backend would refuse, now rather than at a launch
                check_cpu_form(k)
                verify_kernel(k)
        return cls(gpu, cpu, None, threads, specialize=specialize, coarsen=coarsen)

    @property
    def jit(self) -> Any:
        """The generic machine code of every kernel (``codegen.llvm.JitModule``), for any block shape."""
        if self._jit is None:
            from codegen.llvm import compile_module

            self._jit = compile_module(self.cpu, globals=self.globals)
        return self._jit

    @property
    def threads(self) -> int | None:
        """Worker threads per launch (None: every core this process may use)."""
        return self._threads

    @threads.setter
    def threads(self, value: int | None) -> None:
        self._threads = _check_threads(value)

    @property
    def kernels(self) -> tuple[str, ...]:
        return tuple(self._kernels)

    def __getitem__(self, name: str) -> CompiledKernel:
        kernel = self._kernels.get(name)
        if kernel is None:
            known = ", ".join(self._kernels) or "none"
            raise UnknownKernelError(f"no kernel named {name!r} in this module (kernels: {known})")
        return kernel

    def __getattr__(self, name: str) -> CompiledKernel:
        if name.startswith("_"):
            raise AttributeError(name)
        return self[name]

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._kernels))

    def __repr__(self) -> str:
        return f"<polypy.CompiledModule kernels={list(self._kernels)}>"


class CompiledKernel:
    """One compiled kernel: ``kernel[grid, block]`` or ``kernel[grid, block, shmem]`` launches it."""

    def __init__(self, module: CompiledModule, cpu: n.Kernel, gpu: n.Kernel | None):
        self.module = module
        self.name = cpu.name
        self.cpu = cpu
        self.gpu = gpu
        # Launch shape + integer arguments -> what isl says about each array (a cache).
        self._footprints: collections.OrderedDict[tuple, Proof] = collections.OrderedDict()
        # (block shape or None for the generic code, the arrays checked) of the bounds-checked
        # versions compiled so far, in order (``bounds_checked``).
        self._checked: list[tuple[tuple[int, int, int] | None, frozenset[str]]] = []
        # Block shape (None: the generic code) -> the kernel's versions for it (``versions``, a cache).
        self._versions: dict[tuple[int, int, int] | None, KernelVersions] = {}
        # (block shape or None, arrays) whose bounds-checked versions are in ``_versions``.
        self._checks_made: set[tuple[tuple[int, int, int] | None, frozenset[str]]] = set()
        # The arrays a launch may leave unproven (``BoundsUnproven.among``).
        self._among = tuple(sorted(checkable_arrays(cpu)))
        # Block shape -> machine code specialized for it (a cache, filled by for_block).
        self._specialized: dict[tuple[int, int, int], Any] = {}
        # Block shape -> the coarsening factor planned for it (1: launches of that shape are not
        # coarsened; a cache, filled by select).
        self._coarse: dict[tuple[int, int, int], int] = {}
        # (block shape or None, version name) -> machine code of a version other than the shape's
        # own (coarse blocks, arrays apart, bounds-checked; a cache, filled by for_launch).
        self._machine: dict[tuple[tuple[int, int, int] | None, str], Any] = {}
        self._checks = ArrayChecks(self.signature)
        known = {p.name for p in self.signature.params}
        self._unbound = [p.name for p in cpu.params if p.name not in known]

    @property
    def compiled(self) -> Any:
        """The generic machine code (``codegen.llvm.JitKernel``), valid for every block shape."""
        return self.module.jit.kernels[self.name]

    @property
    def specializations(self) -> tuple[tuple[int, int, int], ...]:
        """The block shapes this kernel has machine code specialized for (fast or bounds-checked)."""
        shapes = dict.fromkeys(self._specialized)
        shapes.update(dict.fromkeys(block for block, _ in self._machine if block is not None))
        return tuple(shapes)

    def _may_specialize(self, block: tuple[int, int, int]) -> bool:
        if not self.module.specialize:
            return False
        return block in self.specializations or len(self.specializations) < MAX_SPECIALIZATIONS

    def versions(self, block: tuple[int, int, int] | None) -> KernelVersions:
        """This kernel's versions for launches of block shape ``block``, made by the versions
        stage (``polypy.passes.versions.build_versions``, on the first launch of the shape: the
        version for the shape and its twin for arrays apart, whose written pointers LLVM gets as
        ``noalias``); the version for coarse blocks and the bounds-checked ones are added by their
        passes (``version-coarse-blocks``, ``version-bounds-checks``) on the first launch that
        selects them (``select``). ``block`` None: the generic code's (the kernel alone)."""
        found = self._versions.get(block)
        if found is None:
            from polypy.passes.versions import build_versions

            found = KernelVersions(self.cpu) if block is None else \
                call_on_big_stack(build_versions, self.cpu, shapes=(block,))
            self._versions[block] = found
        return found

    def _fine(self, block: tuple[int, int, int]) -> n.Kernel:
        """The version for ``block`` (the one whose guard is the block shape alone)."""
        only = Guard((BlockShapeIs(block),))
        return next(k for g, k in self.versions(block).versions if g == only)

    def for_block(self, block: tuple[int, int, int]) -> Any:
        """The machine code launches with block shape ``block`` run (``codegen.llvm.JitKernel``):
        specialized for that shape (compiled now if new), or the generic code."""
        compiled = self._specialized.get(block)
        if compiled is not None:
            return compiled
        if not self._may_specialize(block):
            return self.compiled
        compiled = self._compile(self._fine(block))
        self._specialized[block] = compiled
        return compiled

    def _compile(self, kernel: n.Kernel, **options: Any) -> Any:
        from codegen.llvm import compile_module

        cpu = self.module.cpu
        jit = compile_module(n.Module((kernel,), globals=cpu.globals, source=cpu.source), globals=self.module.globals,
                             **options)
        return jit.kernels[self.name]

    def for_launch(self, grid: tuple[int, int, int], block: tuple[int, int, int],
                   arrays: Mapping[str, np.ndarray] | None = None, unproven: frozenset[str] = frozenset(),
                   arguments: Mapping[str, int] | None = None, *, coarse: bool = True) -> Any:
        """The machine code a launch of ``grid`` and ``block`` runs: the version of the shape's
        versions (``versions``) whose guard holds first: bounds-checking the arrays ``unproven``
        (those the launch's footprints do not prove in bounds); for coarse blocks of several
        blocks along x where the module coarsens, the shape allows it and the grid has enough of
        them; with the written pointers ``noalias`` where ``arrays`` (the launch's, proven in
        bounds) are apart; else the kernel's block function for the shape (``for_block``).
        Without a specialization for the shape, the generic code's versions (the kernel, and
        bounds-checked). ``coarse`` False: never a version for coarse blocks (code that runs
        single blocks, ``polypy.distributed``'s ranges that split a coarse block). Machine code
        is compiled on the first launch that uses it."""
        shape = block if self._may_specialize(block) else None
        if shape is None and not unproven:
            return self.compiled  # the generic code
        guard, kernel = self.select(grid, block, arrays, unproven, specialized=shape is not None,
                                    arguments=arguments, coarse=coarse)
        if shape is not None and (guard is None or guard == Guard((BlockShapeIs(block),))):
            return self.for_block(block)
        assert guard is not None
        key = (shape, guard.suffix())
        compiled = self._machine.get(key)
        if compiled is None:
            compiled = call_on_big_stack(self._compile_version, kernel)
            self._machine[key] = compiled
            if kernel.bounds_checks:
                self._checked.append((shape, unproven))
        return compiled

    def _compile_version(self, kernel: n.Kernel) -> Any:
        compiled = self._compile(kernel)
        if kernel.bounds_checks:
            if kernel.coarsen != (1, 1, 1):  # the copies of the partial coarse block are named after the originals
                sites = tuple(dataclasses.replace(site, buffer=original_name(site.buffer, self.cpu))
                              for site in compiled.abi.sites)
                compiled.abi = dataclasses.replace(compiled.abi, sites=sites)
            compiled.reported_names = dict(kernel.copies)  # a copy's faults name the shared array it copies
        return compiled

    @property
    def compiled_versions(self) -> tuple[tuple[tuple[int, int, int] | None, str], ...]:
        """(block shape, version name) of each version compiled so far (``b64x1x1``,
        ``b64x1x1_c4x1x1``, ``b64x1x1_r``, bounds-checked ``b64x1x1_kout``: ``polypy.ir.versions.
        Guard.suffix``; block None: the generic code's, ``_kout``), in order."""
        out = [(block, Guard((BlockShapeIs(block),)).suffix()) for block in self._specialized]
        return tuple(out + list(self._machine))

    def select(self, grid: tuple[int, int, int], block: tuple[int, int, int],
               arrays: Mapping[str, np.ndarray] | None = None, unproven: frozenset[str] = frozenset(), *,
               specialized: bool = True, arguments: Mapping[str, int] | None = None,
               coarse: bool = True) -> tuple[Guard | None, n.Kernel]:
        """The version of ``versions(block)`` (``specialized`` False: of the generic code's) a
        launch runs: the first whose guard holds for the launch's grid, block, workers, ``arrays``
        (None: not apart), ``unproven`` arrays and integer ``arguments`` by IR name (None: no
        stride is known to be 1). Where coarse blocks are planned for the shape
        and the grid has enough of them (the guard the coarse version gets), the version is made
        first; so are the versions bounds-checking ``unproven``. ``coarse`` False: the versions
        for coarse blocks are passed over (neither made nor selected)."""
        from codegen.llvm.launch import default_threads
        from polypy.passes.pipeline import Pass, run_pipeline

        shape = block if specialized else None
        versions = self.versions(shape)
        apart = arrays_apart(arrays) if arrays is not None else False
        facts = Facts(grid=grid, block=block, workers=self.module.threads or default_threads(), apart=apart,
                      unproven=frozenset(unproven), arguments=self._arguments(arguments))
        if shape is not None and coarse:
            versions = self._with_coarse_blocks(block, versions, facts)
        if unproven and (shape, unproven) not in self._checks_made:
            from polypy.passes.versions import version_bounds_checks

            step = Pass("version-bounds-checks", functools.partial(version_bounds_checks, arrays=tuple(unproven),
                                                                   among=self._among))
            versions = self._versions[shape] = call_on_big_stack(run_pipeline, versions, (step,))
            self._checks_made.add((shape, unproven))
        if not coarse:
            versions = versions.replace(versions=tuple((g, k) for g, k in versions.versions
                                                       if g.find(EnoughCoarseBlocks) is None))
        guard, kernel = versions.select(facts)
        assert kernel is not None
        return guard, kernel

    def _arguments(self, arguments: Mapping[str, int] | None) -> dict[str, int]:
        """The launch's integer ``arguments`` a guard may read: every integer scalar parameter,
        those not given 0 (no ``UnitStrides`` guard holds for them)."""
        given = arguments or {}
        return {p.name: int(given.get(p.name, 0)) for p in self.cpu.params
                if isinstance(p.ptype, ScalarType) and p.ptype.is_int}

    def _with_coarse_blocks(self, block: tuple[int, int, int], versions: KernelVersions, facts: Facts) -> KernelVersions:
        """``versions`` with the version for coarse blocks (``version-coarse-blocks``) where they
        are planned for ``block`` and the launch of ``facts`` has enough of them."""
        from polypy.coarsening import BLOCKS_PER_WORKER

        factor = self._coarse.get(block)
        if factor is None:
            factor = self._coarse[block] = self._coarsening_factor(block)
        forced = not isinstance(self.module.coarsen, bool)  # a factor asked for: every launch
        blocks_per_worker = 0 if forced else BLOCKS_PER_WORKER
        if (factor > 1 and not any(g.find(EnoughCoarseBlocks) is not None for g, _ in versions.versions)
                and Guard((EnoughCoarseBlocks((factor, 1, 1), blocks_per_worker),)).holds(facts)):
            from polypy.passes.pipeline import Pass, run_pipeline
            from polypy.passes.versions import version_coarse_blocks

            step = Pass("version-coarse-blocks",
                        functools.partial(version_coarse_blocks, coarsen=self._coarsener(factor, blocks_per_worker)))
            versions = self._versions[block] = call_on_big_stack(run_pipeline, versions, (step,))
            self._checks_made = {made for made in self._checks_made if made[0] != block}  # none for the coarse one yet
        return versions

    def _coarsener(self, factor: int, blocks_per_worker: int):
        """For ``version-coarse-blocks``: the kernel's coarse blocks of ``factor`` (planned)."""
        from polypy.coarsening import CoarseVersion
        from polypy.driver.coarsen import coarsen_for_block

        def coarsen(kernel: n.Kernel, block: tuple[int, int, int], fine: n.Kernel) -> CoarseVersion:
            assert self.gpu is not None
            coarse = coarsen_for_block(self.gpu, block=block, factor=factor)
            if coarse is None:
                raise InternalError(f"kernel {self.name!r}: coarsening by {factor} was planned but not done")
            return CoarseVersion(coarse, blocks_per_worker)

        return coarsen

    def _coarsening_factor(self, block: tuple[int, int, int]) -> int:
        setting = self.module.coarsen
        if setting is False or self.gpu is None:
            return 1
        from gpu2cpu.coarsen_blocks import plan_coarsening

        return call_on_big_stack(plan_coarsening, self.gpu, block=block,
                                 factor=None if setting is True else setting).factor

    @property
    def bounds_checked(self) -> tuple[tuple[tuple[int, int, int] | None, frozenset[str]], ...]:
        """The bounds-checked versions compiled so far: (block shape, or None for the generic
        code; the arrays they check), in compilation order."""
        return tuple(dict.fromkeys(self._checked))

    @property
    def coarsened(self) -> dict[tuple[int, int, int], int]:
        """Block shape -> coarsening factor, for the shapes launched so far (1: not coarsened)."""
        return dict(self._coarse)

    @property
    def signature(self) -> n.Kernel:
        """The kernel whose parameters the caller sees (GPU form when known: same parameters)."""
        return self.gpu if self.gpu is not None else self.cpu

    def __getitem__(self, config: Any) -> Launch:
        grid, block, shmem = launch_config(self.name, config, empty_grid=True)
        return (_EmptyLaunch if 0 in grid else Launch)(self, grid, block, shmem)

    @property
    def emulate(self) -> _Emulated:
        """``kernel.emulate[grid, block](...)``: the same launch on the reference emulator."""
        if self.gpu is None:
            raise UserError(f"kernel {self.name!r} was compiled from CPU-form IR only; there is nothing to emulate")
        return _Emulated(self)

    def footprint(self, grid: tuple[int, int, int], block: tuple[int, int, int],
                  ints: dict[str, int]) -> dict[str, tuple[int, int]]:
        """Per pointer parameter, the (lowest, highest) index this launch certainly touches.

        Only exact ranges are kept: where isl over-approximates (an access guarded by a condition
        it cannot use, an index loaded from memory) the real accesses may stay in bounds.
        Remembered per launch shape and integer arguments.
        """
        proof = self._proof(grid, block, ints)
        return {a.name: (a.lo, a.hi) for a in proof.arrays if a.space == "global" and a.exact}  # type: ignore[misc]

    def _proof(self, grid: tuple[int, int, int], block: tuple[int, int, int], ints: dict[str, int]) -> Proof:
        """What isl says about each array of a launch (see ``Proof``), remembered per launch
        shape and integer arguments."""
        key = (grid, block, tuple(sorted(ints.items())))
        cached = self._footprints.get(key)
        if cached is not None:
            self._footprints.move_to_end(key)
            return cached
        proof = call_on_big_stack(Proof.of, self, grid, block, ints)  # a miss: the walks may go deep
        self._footprints[key] = proof
        if len(self._footprints) > FOOTPRINT_CACHE_SIZE:
            self._footprints.popitem(last=False)
        return proof

    def __repr__(self) -> str:
        return f"<polypy.CompiledKernel {self.name}>"


class Launch:
    """``kernel[grid, block, shmem]``: call it with the kernel's arguments to run the launch."""

    def __init__(self, kernel: CompiledKernel, grid: tuple[int, int, int], block: tuple[int, int, int], shmem: int):
        self.kernel = kernel
        self.grid = grid
        self.block = block
        self.shmem = shmem

    def bind(self, args: tuple, kwargs: dict) -> tuple[dict[str, np.ndarray], dict[str, Any], dict[str, int]]:
        """The launch's arguments bound to the kernel's parameters and checked (alignment,
        writability, overlap): (arrays, scalars, integer scalars as ints), by IR name."""
        k = self.kernel
        values = _bind(k.signature, args, kwargs)
        arrays: dict[str, np.ndarray] = {}
        scalars: dict[str, Any] = {}
        ints: dict[str, int] = {}
        for name, v in values.items():
            if isinstance(v, np.ndarray):
                arrays[name] = v
            else:
                scalars[name] = v
                if isinstance(v, np.integer):
                    ints[name] = int(v)
        k._checks.check(arrays, k.module.globals)
        return arrays, scalars, ints

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        k = self.kernel
        arrays, scalars, ints = self.bind(args, kwargs)
        unproven = k._proof(self.grid, self.block, ints).check(self, arrays)
        if k._unbound:
            raise InternalError(f"CPU-form kernel {k.name!r} has a parameter {k._unbound[0]!r} the source does not")
        compiled = k.for_launch(self.grid, self.block, arrays, unproven, ints)
        compiled.run(self.grid, self.block, self.shmem, arrays, scalars, threads=k.module.threads)

    def __repr__(self) -> str:
        return f"<polypy launch {self.kernel.name}[{self.grid}, {self.block}, {self.shmem}]>"



class _EmptyLaunch(Launch):
    """A launch of a grid with no blocks (a 0 in ``grid``): it does nothing, as in a CUDA program
    that does not check the launch's error; the arguments are still checked."""

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.bind(args, kwargs)


class _Emulated:
    def __init__(self, kernel: CompiledKernel):
        self.kernel = kernel

    def __getitem__(self, config: Any):
        grid, block, shmem = launch_config(self.kernel.name, config, empty_grid=True)
        k = self.kernel

        def run(*args: Any, **kwargs: Any) -> None:
            from polypy.emulator import emulate

            if args and kwargs:
                raise UserError(f"pass the arguments of kernel {k.name!r} either all by position or all by name")
            emulate(k.gpu, grid, block, kwargs if kwargs else args, shmem=shmem, globals=k.module.globals)

        return run


# --------------------------------------------------------------------------- checks


def _check_coarsen(coarsen: bool | int) -> bool | int:
    if isinstance(coarsen, bool):
        return coarsen
    if not isinstance(coarsen, (int, np.integer)) or coarsen < 1:
        raise UserError(f"coarsen must be True, False or a factor >= 1, got {coarsen!r}")
    return int(coarsen)


def _check_threads(threads: int | None) -> int | None:
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise UserError(f"threads must be a positive int, got {threads!r}")
    return int(threads)


def _bind(kernel: n.Kernel, args: tuple, kwargs: dict) -> dict[str, Any]:
    if args and kwargs:
        raise UserError(f"pass the arguments of kernel {kernel.name!r} either all by position or all by name",
                        kernel.loc)
    return bind_arguments(kernel, kwargs if kwargs else args)

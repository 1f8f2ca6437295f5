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
version (compiled on first need), as does every launch with ``specialize=False``.

This module wires stages together (frontend -> GPU pipeline -> gpu2cpu -> codegen.llvm) and so
imports them inside functions only.
"""
from __future__ import annotations

import collections
import dataclasses
import os
from typing import Any, Mapping, Sequence

import numpy as np

from polypy.errors import InternalError, UserError
from polypy.ir import nodes as n
from polypy.ir.types import PointerType
from polypy.launch import bind_arguments, c_name, launch_config
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
        self._footprints: collections.OrderedDict[tuple, _Proof] = collections.OrderedDict()
        # (block shape or None for the generic code, arrays checked, coarsening factor) ->
        # bounds-checked machine code (a cache, filled by checked_for).
        self._checked: dict[tuple[tuple[int, int, int] | None, frozenset[str], int], Any] = {}
        # Block shape -> machine code specialized for it (a cache, filled by for_block).
        self._specialized: dict[tuple[int, int, int], Any] = {}
        # Block shape -> (coarsening factor, machine code for coarse blocks or None until needed);
        # factor 1: launches of that shape are not coarsened (a cache, filled by for_launch).
        self._coarse: dict[tuple[int, int, int], tuple[int, Any]] = {}
        self._checks = _ArrayChecks(self.signature)
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
        shapes.update(dict.fromkeys(block for block, _, _ in self._checked if block is not None))
        return tuple(shapes)

    def _may_specialize(self, block: tuple[int, int, int]) -> bool:
        if not self.module.specialize:
            return False
        return block in self.specializations or len(self.specializations) < MAX_SPECIALIZATIONS

    def for_block(self, block: tuple[int, int, int]) -> Any:
        """The machine code launches with block shape ``block`` run (``codegen.llvm.JitKernel``):
        specialized for that shape (compiled now if new), or the generic code."""
        compiled = self._specialized.get(block)
        if compiled is not None:
            return compiled
        if not self._may_specialize(block):
            return self.compiled
        from codegen.llvm import compile_module
        from polypy.passes.specialize import specialize_for_block

        kernel = specialize_for_block(self.cpu, block)
        cpu = self.module.cpu
        jit = compile_module(n.Module((kernel,), globals=cpu.globals, source=cpu.source), globals=self.module.globals)
        compiled = jit.kernels[self.name]
        self._specialized[block] = compiled
        return compiled

    def for_launch(self, grid: tuple[int, int, int], block: tuple[int, int, int]) -> Any:
        """The machine code a launch of ``grid`` and ``block`` runs: the kernel's block function
        for the shape (``for_block``), or one for coarse blocks of several blocks along x where
        the module coarsens, the shape allows it and the grid has enough of them
        (``polypy.coarsening``). Coarse code is compiled on the first launch that uses it."""
        fine = self.for_block(block)
        if block not in self._specialized:
            return fine  # the generic code: no coarsening either
        factor = self._launch_factor(grid, block)
        if factor == 1:
            return fine
        coarse = self._coarse[block][1]
        if coarse is None:
            coarse = self._compile_coarse(block, factor)
            self._coarse[block] = (factor, coarse)
        return coarse

    def _launch_factor(self, grid: tuple[int, int, int], block: tuple[int, int, int]) -> int:
        """The coarsening factor of a launch (1: fine blocks): the one planned for the block
        shape (remembered in ``_coarse``), where the grid has enough coarse blocks."""
        factor, _ = self._coarse.get(block, (None, None))
        if factor is None:
            factor = self._coarsening_factor(block)
            self._coarse[block] = (factor, None)
        if factor == 1:
            return 1
        from codegen.llvm.launch import default_threads
        from polypy.coarsening import BLOCKS_PER_WORKER, coarsening_pays

        forced = not isinstance(self.module.coarsen, bool)  # a factor asked for: every launch
        workers = self.module.threads or default_threads()
        if not coarsening_pays(grid, (factor, 1, 1), workers, blocks_per_worker=0 if forced else BLOCKS_PER_WORKER):
            return 1
        return factor

    def _coarsening_factor(self, block: tuple[int, int, int]) -> int:
        setting = self.module.coarsen
        if setting is False or self.gpu is None:
            return 1
        from gpu2cpu.coarsen_blocks import plan_coarsening

        return call_on_big_stack(plan_coarsening, self.gpu, block=block,
                                 factor=None if setting is True else setting).factor

    @on_big_stack
    def _compile_coarse(self, block: tuple[int, int, int], factor: int) -> Any:
        from codegen.llvm import compile_module
        from polypy.driver.coarsen import coarsen_for_block

        assert self.gpu is not None
        kernel = coarsen_for_block(self.gpu, block=block, factor=factor)
        if kernel is None:
            raise InternalError(f"kernel {self.name!r}: coarsening by {factor} was planned but not done")
        cpu = self.module.cpu
        jit = compile_module(n.Module((kernel,), globals=cpu.globals, source=cpu.source), globals=self.module.globals)
        return jit.kernels[self.name]

    @property
    def bounds_checked(self) -> tuple[tuple[tuple[int, int, int] | None, frozenset[str]], ...]:
        """The bounds-checked versions compiled so far: (block shape, or None for the generic
        code; the arrays they check), in compilation order."""
        return tuple(dict.fromkeys((block, arrays) for block, arrays, _ in self._checked))

    def checked_for(self, grid: tuple[int, int, int], block: tuple[int, int, int], arrays: frozenset[str]) -> Any:
        """Machine code for a launch of ``grid`` and ``block`` that bounds-checks every access of
        ``arrays`` (pointer parameters and shared arrays by IR name): specialized for the block
        shape and coarsened like ``for_launch`` (a coarse kernel checks its shared arrays slice by
        slice, and its own copies of them for the partial coarse block); compiled on first need."""
        shape = block if block in self._specialized or self._may_specialize(block) else None
        factor = 1 if shape is None else self._launch_factor(grid, block)
        key = (shape, arrays, factor)
        compiled = self._checked.get(key)
        if compiled is not None:
            return compiled
        compiled = call_on_big_stack(self._compile_checked, block, shape, arrays, factor)
        self._checked[key] = compiled
        return compiled

    def _compile_checked(self, block: tuple[int, int, int], shape: tuple[int, int, int] | None,
                         arrays: frozenset[str], factor: int) -> Any:
        from codegen.llvm import compile_module

        kernel = self.cpu
        sliced: frozenset[str] = frozenset()
        if shape is not None:
            from polypy.passes.specialize import specialize_for_block

            kernel = specialize_for_block(self.cpu, shape)
        if factor > 1:
            kernel, arrays, sliced = self._coarse_checked(block, factor, kernel, arrays)
        # Copies of a shared array (Kernel.copies) are checked row by row, as the original.
        copies = dict(kernel.copies)
        sliced = sliced | frozenset(copy for copy in copies if copy in arrays)
        cpu = self.module.cpu
        jit = compile_module(n.Module((kernel,), globals=cpu.globals, source=cpu.source), globals=self.module.globals,
                             checked={self.name: arrays}, sliced={self.name: sliced})
        compiled = jit.kernels[self.name]
        if factor > 1:  # the copies of the partial coarse block are named after the originals
            sites = tuple(dataclasses.replace(site, buffer=_original_name(site.buffer, self.cpu))
                          for site in compiled.abi.sites)
            compiled.abi = dataclasses.replace(compiled.abi, sites=sites)
        compiled.reported_names = copies  # a copy's faults name the shared array it copies
        return compiled

    def _coarse_checked(self, block: tuple[int, int, int], factor: int, fine: n.Kernel,
                        arrays: frozenset[str]) -> tuple[n.Kernel, frozenset[str], frozenset[str]]:
        """The coarse kernel for ``block`` and what its checked variant checks: the pointer
        parameters of ``arrays``; where ``arrays`` has shared ones, every shared array of the coarse
        kernel -- the sliced ones (one slice per sub-block) slice by slice."""
        from polypy.driver.coarsen import coarsen_for_block

        assert self.gpu is not None
        kernel = coarsen_for_block(self.gpu, block=block, factor=factor)
        if kernel is None:
            raise InternalError(f"kernel {self.name!r}: coarsening by {factor} was planned but not done")
        fine_shared = {b.name: b for b in fine.buffers if b.space == "shared"}
        checked = {name for name in arrays if name not in fine_shared}
        sliced = set()
        if any(name in fine_shared for name in arrays):
            for b in kernel.buffers:
                if b.space != "shared":
                    continue
                checked.add(b.name)
                original = fine_shared.get(b.name)
                if (original is not None and original.shape is not None and b.shape is not None
                        and tuple(b.shape[1:]) == tuple(original.shape)
                        and isinstance(b.shape[0], n.Const) and int(b.shape[0].value) == factor):
                    sliced.add(b.name)
        return kernel, frozenset(checked), frozenset(sliced)

    @property
    def coarsened(self) -> dict[tuple[int, int, int], int]:
        """Block shape -> coarsening factor, for the shapes launched so far (1: not coarsened)."""
        return {block: factor for block, (factor, _) in self._coarse.items()}

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

    def _proof(self, grid: tuple[int, int, int], block: tuple[int, int, int], ints: dict[str, int]) -> _Proof:
        """What isl says about each array of a launch (see ``_Proof``), remembered per launch
        shape and integer arguments."""
        key = (grid, block, tuple(sorted(ints.items())))
        cached = self._footprints.get(key)
        if cached is not None:
            self._footprints.move_to_end(key)
            return cached
        proof = call_on_big_stack(_Proof.of, self, grid, block, ints)  # a miss: the walks may go deep
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
        if unproven:
            compiled = k.checked_for(self.grid, self.block, unproven)
        else:
            compiled = k.for_launch(self.grid, self.block)
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


class _ArrayChecks:
    """What the binder does not check but compiled code relies on: alignment, writability, no
    overlap where the code assumes none (``__restrict__`` pairs, the module's own arrays).

    The pointer parameters and the pairs that must not overlap are worked out once per kernel;
    messages are built only for a failure (this runs on every launch)."""

    def __init__(self, kernel: n.Kernel):
        self.kernel = kernel
        self.pointers = [p for p in kernel.params if isinstance(p.ptype, PointerType)]
        self.writable = [p for p in self.pointers if not p.ptype.const]
        self.pairs = [(p, q) for i, p in enumerate(self.pointers) for q in self.pointers[i + 1:]
                      if (p.ptype.restrict or q.ptype.restrict) and not (p.ptype.const and q.ptype.const)]
        # a gradient's shadows and primal arguments (``Kernel.disjoint``): never the same storage
        named = {p.name: p for p in self.pointers}
        self.disjoint = [(named[a], named[b]) for a, b in kernel.disjoint if a in named and b in named]

    def what(self, p: n.Param) -> str:
        return f"argument {c_name(self.kernel, p.name)!r} of kernel {self.kernel.name!r}"

    def check(self, arrays: Mapping[str, np.ndarray], globals_: Mapping[str, np.ndarray]) -> None:
        for p in self.pointers:
            arr = arrays[p.name]
            if not arr.flags.aligned:
                raise UserError(f"{self.what(p)} is not aligned to its element size (pass a copy: arr.copy())", p.loc)
            for g, storage in globals_.items():
                if np.may_share_memory(arr, storage):
                    raise UserError(f"{self.what(p)} is the module's own __constant__/__device__ array {g!r}; "
                                    f"pass a copy", p.loc)
        for name, align, loc in self.kernel.aligned:
            arr = arrays.get(name)
            if arr is not None and arr.ctypes.data % align:
                # Views are checked from the argument's start; one that starts off the view's
                # alignment would fault on a GPU wherever the offsets do not make up for it.
                raise UserError(f"{self.what(self.kernel.param(name))} is at an address that is not a multiple of "
                                f"{align} bytes, which this view of it needs: polypy does not support such an "
                                f"argument (on a GPU, an access here at an aligned offset faults with 'misaligned "
                                f"address'); pass an aligned array", loc)
        for p in self.writable:
            if not arrays[p.name].flags.writeable:
                raise UserError(f"{self.what(p)} is read-only, but the parameter ({p.ptype}) is not const", p.loc)
        for p, q in self.pairs:
            if np.may_share_memory(arrays[p.name], arrays[q.name]):
                raise UserError(f"arguments {c_name(self.kernel, p.name)!r} and {c_name(self.kernel, q.name)!r} of "
                                f"kernel {self.kernel.name!r} overlap, but one of them is __restrict__", p.loc)
        for p, q in self.disjoint:
            if np.may_share_memory(arrays[p.name], arrays[q.name]):
                raise UserError(f"arguments {c_name(self.kernel, p.name)!r} and {c_name(self.kernel, q.name)!r} of "
                                f"kernel {self.kernel.name!r} overlap: a gradient's shadow must be storage of its "
                                f"own, apart from every primal argument", p.loc)


def _original_name(name: str, kernel: n.Kernel) -> str:
    """The shared array of ``kernel`` that ``name`` (a buffer of its coarse kernel: the
    partial block's copy ``s_1`` of ``s``) stands for; ``name`` itself when there is none."""
    if kernel.buffer(name) is not None:
        return name
    base, _, suffix = name.rpartition("_")
    if suffix.isdigit() and base and kernel.buffer(base) is not None:
        return base
    return name


@dataclasses.dataclass(frozen=True)
class _ArrayProof:
    """What isl says about the accesses of one array in one launch.

    ``lo``/``hi``: sound bounds of every index used (None: unbounded); ``exact``: both are
    certainly used; ``certain``: accesses that certainly use their range's bounds (each one
    ``(lo, hi, kind, loc)``), which prove a launch wrong when they fall outside the array.
    ``extent``: the array's element count when it does not depend on the arguments (a static
    shared array); ``itemsize`` for the dynamic shared one (extent ``shmem // itemsize``).
    """

    name: str
    space: str  # "global" | "shared" | "dynamic" (the extern __shared__ array)
    lo: int | None
    hi: int | None
    exact: bool
    certain: tuple[tuple[int, int, str, Any], ...]
    extent: int | None = None
    itemsize: int = 1

    def size(self, arrays: Mapping[str, np.ndarray], shmem: int) -> int | None:
        if self.space == "global":
            arr = arrays.get(self.name)
            return None if arr is None else arr.size
        if self.space == "dynamic":
            return shmem // self.itemsize
        return self.extent


@dataclasses.dataclass(frozen=True)
class _Proof:
    """Per array (pointer parameters, shared arrays) of a launch shape and integer arguments,
    what ``check`` needs to prove a launch in bounds, prove it out of bounds, or leave it to the
    bounds-checked code. ``arrays`` None: isl could not model the kernel (check everything)."""

    arrays: tuple[_ArrayProof, ...] | None
    everything: frozenset[str]  # what the bounds-checked code checks when nothing is proven
    # The arrays isl modelled (touched or not); an array of the CPU form outside it (one
    # gpu2cpu renamed, say) is never proven.
    modeled: frozenset[str] = frozenset()
    # (copy, original) shared arrays of the CPU form (``Kernel.copies``): proven with the original.
    copies: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def of(kernel: CompiledKernel, grid: tuple[int, int, int], block: tuple[int, int, int],
           ints: dict[str, int]) -> _Proof:
        cpu = kernel.cpu
        # A split extern shared array (Buffer.part) is checked by the name of the array it views;
        # the block function's own copies (Buffer.frame) are read at the indices they were filled at.
        everything = frozenset([p.name for p in cpu.params if isinstance(p.ptype, PointerType)]
                               + [b.symbol if b.part is not None else b.name for b in cpu.buffers
                                  if b.space == "shared" and not b.frame])
        if kernel.gpu is None:
            return _Proof(None, everything)
        from polypy.poly.footprint import footprint

        try:
            footprints = footprint(kernel.gpu, grid, block, ints, shared=True)
        except UserError:
            return _Proof(None, everything)  # a kernel isl cannot model: check every access
        arrays = []
        for name, fp in footprints.items():
            t = fp.touched
            if t is None:
                continue
            certain = tuple((a.range.lo, a.range.hi, a.kind, a.loc) for a in fp.accesses if a.range.exact)
            space, extent, itemsize = fp.space, None, 1
            buf = kernel.gpu.buffer(name)
            if space == "shared" and buf is not None:
                itemsize = buf.elem.itemsize
                if buf.shape is None:
                    space = "dynamic"
                elif all(isinstance(d, n.Const) for d in buf.shape):
                    extent = 1
                    for d in buf.shape:
                        extent *= int(d.value)  # type: ignore[attr-defined]
            arrays.append(_ArrayProof(name, space, t.lo, t.hi, t.exact, certain, extent, itemsize))
        return _Proof(tuple(arrays), everything, frozenset(footprints), cpu.copies)

    def check(self, launch: Launch, arrays: Mapping[str, np.ndarray]) -> frozenset[str]:
        """The arrays this launch must bounds-check (empty: it is proven in bounds); raises a
        ``UserError`` before the launch if isl proves an access outside its array."""
        if self.arrays is None:
            return self.everything
        unproven = []
        for a in self.arrays:
            size = a.size(arrays, launch.shmem)
            if size is None:
                unproven.append(a.name)
                continue
            if a.lo is not None and a.hi is not None and 0 <= a.lo and a.hi < size:
                continue
            for lo, hi, kind, loc in a.certain:
                if lo < 0 or hi >= size:
                    _refuse(launch, a, size, lo if lo < 0 else hi, kind, loc)
            unproven.append(a.name)
        if not set(unproven) <= self.everything:  # names the CPU form does not have: check all
            return self.everything
        proven = {copy for copy, original in self.copies if original in self.modeled and original not in unproven}
        return frozenset(unproven) | (self.everything - self.modeled - proven)


def _refuse(launch: Launch, a: _ArrayProof, size: int, index: int, kind: str, loc: Any) -> None:
    """Raise the error for a launch isl proves to access ``index`` of ``a`` (of ``size`` elements)."""
    kernel = launch.kernel.signature
    verb = "reads" if kind == "read" else "writes"
    if a.space == "global":
        what = f"argument {c_name(kernel, a.name)!r} of kernel {kernel.name!r}"
        if index < 0:
            raise UserError(f"{what}: this launch accesses index {index}, before the start of the array", loc)
        hi = a.hi if a.exact and a.hi is not None else index
        at_least = "" if a.exact else "at least "
        raise UserError(f"{what} is too small for this launch: it needs {at_least}{hi + 1} elements (indices up "
                        f"to {hi}), got an array of {size}", loc)
    if a.space == "dynamic" and index >= 0:
        exact = a.exact and a.hi is not None
        need = ((a.hi if exact else index) + 1) * a.itemsize  # type: ignore[operator]
        raise UserError(f"kernel {kernel.name} uses {'' if exact else 'at least '}{need} bytes of dynamic shared "
                        f"memory (it {verb} index {index} of '{a.name}'), launched with {launch.shmem}", loc)
    what = "dynamic shared array" if a.space == "dynamic" else "shared array"
    raise UserError(f"kernel {kernel.name} {verb} index {index} of {what} '{a.name}' of {size} elements "
                    f"with block {launch.block}", loc)

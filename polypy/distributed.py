"""One launch's blocks as tasks on a Dask cluster.

::

    from distributed import Client, LocalCluster
    import polypy.distributed as pd

    client = Client(LocalCluster(n_workers=2, threads_per_worker=1))
    mod = pd.compile(client, "jacobi2d.cu")          # compiled here too: footprints, checks
    mod.jacobi2d[grid, block](inp, out, nx, ny)      # blocks run on the workers; out is updated
    pd.launch(mod.jacobi2d, grid, block, 0, inp, out, nx, ny, tasks=8)

A launch's grid is cut into ``tasks`` ranges of blocks along its slowest dimension
(``polypy.poly.block_footprint``). isl computes, per range and array, the interval of indices
the range reads, and the pieces it writes (the maximal intervals of the exact write set, or one
interval holding every index it may write); the launch is refused (``UserError`` naming the
array) where what two ranges write back overlaps, where one range reads what another may write,
or where a write cannot be bounded. Atomics are accepted only on elements one range alone
touches. As for a local launch, a launch isl proves out of bounds is refused before anything
is shipped, and the arrays it cannot prove in bounds are bounds-checked on the workers.

Each task gets the slice it reads (plus the slice it may write, unless isl proves every element
of its pieces is written: then elements it leaves alone come back unchanged), runs the compiled
blocks of its range on the worker (``blockIdx``/``gridDim`` those of the full grid) and sends
the written pieces back; they are copied into the caller's arrays once every task has finished
(with worker processes, a failing task leaves the caller's arrays as they were).

On the worker each array is a *window*: one buffer holding the indices the task accesses, lo to
hi, passed to the compiled code as an address ``lo`` elements before the buffer (rebased), so
the kernel's own indices land in it. A task's memory is its footprint, not the arrays' size,
and a shipped slice that is the whole window is used where it arrived, without a copy. (The
simpler alternative, full-size buffers with only the slices filled, needs no address
arithmetic but copies every slice once more on the worker.) With workers in the caller's
process (``LocalCluster(processes=False)``) the slices are the caller's own memory, written in
place. Workers compile the kernel themselves from the source text (the disk cache makes that
cheap) and keep it per worker process. Scalars pass through; the module's ``__constant__`` and
``__device__`` arrays are shipped with every task, and a kernel that writes them is refused
(their updates would stay on the workers).

The scheduler of the cluster decides where tasks run; use ``threads`` (per task, default 1)
and ``tasks`` (default: the cluster's threads) together with the workers' thread counts.
This module needs nothing from ``distributed`` itself: it uses the client it is given.
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import math
import os
import threading
import time
from typing import Any, Mapping, Sequence

import numpy as np

from polypy.errors import UserError
from polypy.ir.types import PointerType
from polypy.launch import c_name, launch_config
from polypy.poly.block_footprint import BlockPlan, BlockRange, plan_block_ranges
from polypy.sources import read_source

# Plans remembered per kernel: launch shape + integer arguments + task count -> BlockPlan.
PLAN_CACHE_SIZE = 32


@dataclasses.dataclass(frozen=True)
class Source:
    """What a worker needs to compile the module again: the text and the options."""

    path: str
    text: str
    defines: tuple[tuple[str, str], ...]
    include_dirs: tuple[str, ...]
    specialize: bool
    coarsen: bool | int


def compile(client: Any, path: str | os.PathLike, *, defines: dict[str, str] | None = None,
            include_dirs: Sequence[str] = (), text: str | None = None, tasks: int | None = None,
            threads: int = 1, specialize: bool = True, coarsen: bool | int = True) -> DistributedModule:
    """Compile a CUDA file here (for footprints and argument checks) and launch its kernels on
    the cluster of ``client`` (a ``distributed.Client``).

    ``tasks``: block ranges per launch (default: the threads of the cluster's workers when a
    launch starts); ``threads``: threads each task runs its blocks on. The other options are
    those of ``polypy.compile``; the workers compile with the same ones.
    """
    from polypy.driver.api import compile as compile_here

    if text is None:
        try:
            text = read_source(path)  # as the frontend reads it (a bad byte is U+FFFD)
        except OSError as exc:
            raise UserError(f"cannot read {os.fspath(path)!r}: {exc.strerror}") from None
    source = Source(os.fspath(path), text, tuple(sorted((defines or {}).items())), tuple(include_dirs),
                    specialize, coarsen)
    module = compile_here(path, defines=defines, include_dirs=include_dirs, text=text, threads=threads,
                          specialize=specialize, coarsen=coarsen)
    return DistributedModule(client, source, module, tasks=tasks, threads=threads)


def launch(kernel: DistributedKernel, grid: Any, block: Any, shmem: int, *args: Any, tasks: int | None = None,
           **kwargs: Any) -> None:
    """``kernel[grid, block, shmem](*args)`` with ``tasks`` block ranges instead of the module's
    default."""
    grid3, block3, shmem = launch_config(kernel.name, (grid, block, shmem))
    DistributedLaunch(kernel, grid3, block3, shmem, tasks=tasks)(*args, **kwargs)


class DistributedModule:
    """``polypy.compile``'s module whose launches run on a Dask cluster: ``mod.<kernel>[grid, block](...)``."""

    def __init__(self, client: Any, source: Source, module: Any, *, tasks: int | None, threads: int):
        if tasks is not None and (isinstance(tasks, bool) or not isinstance(tasks, int) or tasks < 1):
            raise UserError(f"tasks must be a positive int, got {tasks!r}")
        self.client = client
        self.source = source
        self.local = module  # the polypy.CompiledModule of this process
        self.tasks = tasks
        self.threads = threads
        self._kernels = {name: DistributedKernel(self, module[name]) for name in module.kernels}

    @property
    def globals(self) -> dict[str, np.ndarray]:
        """The module's ``__constant__``/``__device__`` arrays, shipped with every launch."""
        return self.local.globals

    @property
    def kernels(self) -> tuple[str, ...]:
        return tuple(self._kernels)

    def __getitem__(self, name: str) -> DistributedKernel:
        kernel = self._kernels.get(name)
        if kernel is None:
            self.local[name]  # raises the API's error, naming the kernels there are
        return self._kernels[name]

    def __getattr__(self, name: str) -> DistributedKernel:
        if name.startswith("_"):
            raise AttributeError(name)
        return self[name]

    def default_tasks(self) -> int:
        if self.tasks is not None:
            return self.tasks
        return max(1, sum(self.client.nthreads().values()))

    def __repr__(self) -> str:
        return f"<polypy.distributed.DistributedModule kernels={list(self._kernels)}>"


class DistributedKernel:
    """One kernel of a ``DistributedModule``; ``kernel[grid, block(, shmem)](...)`` launches it."""

    def __init__(self, module: DistributedModule, local: Any):
        self.module = module
        self.local = local  # polypy.driver.api.CompiledKernel
        self.name = local.name
        self._plans: dict[tuple, BlockPlan] = {}
        # Bytes of array slices the last launch sent to its tasks and got back from them, and
        # the seconds each of its tasks spent running blocks (the rest is shipping and merging).
        self.last_transfer: tuple[int, int] = (0, 0)
        self.last_task_seconds: tuple[float, ...] = ()

    def __getitem__(self, config: Any) -> DistributedLaunch:
        grid, block, shmem = launch_config(self.name, config)
        return DistributedLaunch(self, grid, block, shmem)

    def plan(self, grid: tuple[int, int, int], block: tuple[int, int, int], ints: dict[str, int],
             tasks: int) -> BlockPlan:
        """The block ranges of a launch and their footprints (remembered per launch)."""
        key = (grid, block, tuple(sorted(ints.items())), tasks)
        plan = self._plans.get(key)
        if plan is None:
            if self.local.gpu is None:
                raise UserError(f"kernel {self.name!r} has no GPU form to compute footprints from")
            # Ranges along x keep the coarse blocks of the launch's code whole, where there are
            # enough of them for every task (else ranges of single blocks run uncoarsened code).
            align = self.local._coarsening_factor(block) if self.local.module.specialize else 1
            if -(-grid[0] // align) < tasks:
                align = 1
            plan = plan_block_ranges(self.local.gpu, grid, block, ints, tasks, align_x=align)
            if len(self._plans) >= PLAN_CACHE_SIZE:
                self._plans.pop(next(iter(self._plans)))
            self._plans[key] = plan
        return plan

    def __repr__(self) -> str:
        return f"<polypy.distributed.DistributedKernel {self.name}>"


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """Everything one task needs: the module's source, the launch, its block range, the arrays'
    sizes and shipped slices, what to send back."""

    source: Source
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shmem: int
    blocks: BlockRange
    scalars: dict[str, Any]
    windows: dict[str, tuple[int, int, int, str]]  # name -> (lo, hi) inclusive: every index accessed; size, dtype
    pieces: dict[str, tuple[int, np.ndarray]]  # name -> (first index, contents)
    outputs: dict[str, tuple[tuple[int, int], ...]]  # name -> intervals (lo, hi inclusive) sent back
    globals: dict[str, np.ndarray]
    threads: int
    checked: frozenset[str] = frozenset()  # arrays whose accesses are bounds-checked


class DistributedLaunch:
    """``kernel[grid, block, shmem]`` of a ``DistributedKernel``: call it with the kernel's
    arguments (as for ``polypy``'s launches) to run the launch on the cluster; ``tasks`` block
    ranges (None: the module's default)."""

    def __init__(self, kernel: DistributedKernel, grid: tuple[int, int, int], block: tuple[int, int, int],
                 shmem: int, *, tasks: int | None = None):
        self.kernel = kernel
        self.grid = grid
        self.block = block
        self.shmem = shmem
        self.tasks = tasks

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        from polypy.driver.api import Launch

        dk = self.kernel
        k = dk.local
        mod = dk.module
        launch = Launch(k, self.grid, self.block, self.shmem)
        arrays, scalars, ints = launch.bind(args, kwargs)
        # As a local launch: refused if isl proves an access outside its array; the arrays it
        # cannot prove in bounds are bounds-checked on the workers.
        checked = k._proof(self.grid, self.block, ints).check(launch, arrays)
        tasks = mod.default_tasks() if self.tasks is None else self.tasks
        if isinstance(tasks, bool) or not isinstance(tasks, int) or tasks < 1:
            raise UserError(f"tasks must be a positive int, got {tasks!r}")
        plan = dk.plan(self.grid, self.block, ints, tasks)
        _check_no_aliasing(k.signature, plan, arrays)
        specs = [self._spec(r, f, arrays, scalars, mod, checked) for r, f in zip(plan.ranges, plan.footprints)]
        # Scattered first: the slices go straight to the workers (not through the scheduler as
        # part of the task graph), one task's data to each in turn, and its task runs there.
        shipped = mod.client.scatter(specs, hash=False)
        futures = [mod.client.submit(run_task, spec, pure=False) for spec in shipped]
        results = mod.client.gather(futures)
        dk.last_task_seconds = tuple(seconds for _, seconds in results)
        dk.last_transfer = (sum(p.nbytes for spec in specs for _, p in spec.pieces.values()),
                            sum(a.nbytes for written, _ in results for a in written.values()))
        # Merged only now: no task is still reading a caller's array while it changes.
        for spec, (written, _) in zip(specs, results):
            for name, pieces in spec.outputs.items():
                data, at = written[name], 0
                for lo, hi in pieces:
                    arrays[name][lo:hi + 1] = data[at:at + hi - lo + 1]
                    at += hi - lo + 1

    def _spec(self, r: BlockRange, footprints: dict, arrays: dict[str, np.ndarray], scalars: dict[str, Any],
              mod: DistributedModule, checked: frozenset[str]) -> TaskSpec:
        windows: dict[str, tuple[int, int, int, str]] = {}
        pieces: dict[str, tuple[int, np.ndarray]] = {}
        outputs: dict[str, tuple[tuple[int, int], ...]] = {}
        for name, arr in arrays.items():
            f = footprints.get(name)
            if f is None:
                continue
            accessed, shipped = [], []
            if f.read is not None:
                accessed.append(_clamp(f.read.lo, f.read.hi, arr.size))
                shipped.append(accessed[-1])
            back = [_clamp(lo, hi, arr.size) for lo, hi in f.pieces]
            back = [iv for iv in back if iv[0] <= iv[1]]
            if back:
                outputs[name] = tuple(back)
                accessed.append((back[0][0], back[-1][1]))
                if not f.covered:  # elements it may leave alone keep the caller's values
                    shipped.append(accessed[-1])
            accessed = [iv for iv in accessed if iv[0] <= iv[1]]
            if accessed:
                windows[name] = (min(iv[0] for iv in accessed), max(iv[1] for iv in accessed), arr.size,
                                 arr.dtype.str)
            shipped = [iv for iv in shipped if iv[0] <= iv[1]]
            if shipped:
                lo, hi = min(iv[0] for iv in shipped), max(iv[1] for iv in shipped)
                pieces[name] = (lo, arr[lo:hi + 1])
        return TaskSpec(mod.source, self.kernel.name, self.grid, self.block, self.shmem, r, dict(scalars), windows,
                        pieces, outputs, dict(mod.globals), mod.threads, checked)

    def __repr__(self) -> str:
        return f"<polypy distributed launch {self.kernel.name}[{self.grid}, {self.block}, {self.shmem}]>"


def _clamp(lo: int | None, hi: int | None, size: int) -> tuple[int, int]:
    """An interval of indices, unknown bounds widened to the array (out-of-bounds accesses are
    undefined behaviour, and the launch's footprint check has refused the ones isl proves)."""
    return (0 if lo is None else max(0, lo)), (size - 1 if hi is None else min(size - 1, hi))


def _check_no_aliasing(kernel: Any, plan: BlockPlan, arrays: dict[str, np.ndarray]) -> None:
    """Two arguments sharing memory, one of them written: slices shipped apart would not see
    each other's writes."""
    written = {name for f in plan.footprints for name, fp in f.items() if fp.write is not None}
    names = [p.name for p in kernel.params if isinstance(p.ptype, PointerType) and p.name in arrays]
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if (a in written or b in written) and np.may_share_memory(arrays[a], arrays[b]):
                raise UserError(f"arguments {c_name(kernel, a)!r} and {c_name(kernel, b)!r} of kernel "
                                f"{kernel.name!r} share memory and one of them is written; a distributed launch "
                                f"needs separate arrays")


# --------------------------------------------------------------------------- on the worker

# Source -> polypy.CompiledModule, per worker process (a cache: compiling is done once).
_WORKER_MODULE_CACHE: dict[Source, Any] = {}
_WORKER_LOCK = threading.Lock()
_GLOBALS_LOCK = threading.Lock()


def worker_module(source: Source) -> Any:
    """The compiled module for ``source`` in this process (compiled on first use)."""
    with _WORKER_LOCK:
        module = _WORKER_MODULE_CACHE.get(source)
        if module is None:
            from polypy.driver.api import compile as compile_here

            module = compile_here(source.path, defines=dict(source.defines), include_dirs=source.include_dirs,
                                  text=source.text, threads=1, specialize=source.specialize,
                                  coarsen=source.coarsen)
            _WORKER_MODULE_CACHE[source] = module
        return module


def run_task(spec: TaskSpec) -> tuple[dict[str, np.ndarray], float]:
    """Run one block range of a launch (on a worker); return the written slices and the seconds
    the blocks took. A ``UserError`` (a bounds-checked access outside its array, say) comes back
    to the caller as a plain ``UserError`` with the same message and location: subclasses with
    extra constructor arguments do not survive pickling."""
    try:
        return _run_task(spec)
    except UserError as exc:
        if type(exc) is UserError:
            raise
        note = (f"in the distributed task running the blocks with {spec.blocks}", None)
        raise UserError(exc.message, exc.loc, notes=exc.notes + (note,)) from None


def _run_task(spec: TaskSpec) -> tuple[dict[str, np.ndarray], float]:
    module = worker_module(spec.source)
    kernel = module[spec.kernel]
    windows: dict[str, np.ndarray] = {}
    rebased: dict[str, np.ndarray] = {}
    for name, (lo, hi, size, dtype) in spec.windows.items():
        piece = spec.pieces.get(name)
        if piece is not None and piece[0] == lo and piece[1].size == hi - lo + 1 and piece[1].flags.writeable:
            buf = piece[1]  # what was shipped is the whole window: used in place
        else:
            buf = np.zeros(hi - lo + 1, dtype=np.dtype(dtype))
            if piece is not None:
                buf[piece[0] - lo:piece[0] - lo + piece[1].size] = piece[1]
        windows[name] = buf
        rebased[name] = _rebased(buf, lo, size)
    ints = {name: int(v) for name, v in spec.scalars.items() if isinstance(v, np.integer)}
    compiled, ids = block_range_code(kernel, spec.grid, spec.block, spec.blocks, checked=spec.checked, arguments=ints)
    for p in compiled.abi.params:  # arrays the range never accesses: any valid address
        if isinstance(p.ptype, PointerType) and p.name not in rebased:
            rebased[p.name] = np.zeros(1, dtype=np.uint8)
    # Tasks in one process share the module's constant/device arrays: set them and run one at a time.
    with _GLOBALS_LOCK if module.globals else contextlib.nullcontext():
        for name, value in spec.globals.items():
            module.globals[name][...] = value
        start = time.perf_counter()
        compiled.run(spec.grid, spec.block, spec.shmem, rebased, spec.scalars, threads=spec.threads, blocks=ids)
        seconds = time.perf_counter() - start
    written = {}
    for name, pieces in spec.outputs.items():
        base = spec.windows[name][0]
        slices = [windows[name][lo - base:hi - base + 1] for lo, hi in pieces]
        written[name] = slices[0] if len(slices) == 1 else np.concatenate(slices)
    return written, seconds


def _rebased(window: np.ndarray, lo: int, size: int) -> np.ndarray:
    """An array header of the caller's array's ``size`` whose element 0 lies ``lo`` elements
    before ``window``'s first element.

    The compiled code uses nothing of an array but its address (``ctypes.data``) and size, and
    adds the kernel's own indices to the address, so indices ``lo..`` land in ``window``, which
    holds every index the task accesses (its footprint). The header's memory is never read or
    written through NumPy; ``window`` stays alive in the caller of this function."""
    address = window.ctypes.data - lo * window.itemsize
    return np.frombuffer((ctypes.c_char * (size * window.itemsize)).from_address(address), dtype=window.dtype)


def block_range_code(kernel: Any, grid: tuple[int, int, int], block: tuple[int, int, int], r: BlockRange, *,
                     checked: frozenset[str] = frozenset(),
                     arguments: Mapping[str, int] | None = None) -> tuple[Any, tuple[int, int]]:
    """The machine code for the blocks of ``r`` and the linear ids ``[first, last)`` it counts
    them by: coarse blocks where the launch's code is coarsened and ``r`` starts and ends at
    coarse-block boundaries, else the code for single blocks; with ``checked``, the code that
    bounds-checks the accesses of those arrays (coarsened like the launch's). ``arguments``: the
    launch's integer arguments by IR name, which select as in a local launch (the version for
    unit last strides of tensor accessors where they are 1)."""
    compiled = kernel.for_launch(grid, block, unproven=checked, arguments=arguments)
    f = compiled.abi.coarsen
    d = r.dim
    if r.lo % f[d] or (r.hi % f[d] and r.hi != grid[d]):
        if checked:  # ranges are aligned to coarse blocks where there are enough of them
            raise UserError(f"kernel {kernel.name!r}: the bounds-checked code of this launch runs coarse blocks of "
                            f"{f[d]} blocks along x; the blocks with {r} split one (use fewer tasks)")
        compiled = kernel.for_launch(grid, block, arguments=arguments, coarse=False)
        f = compiled.abi.coarsen
    counts = [-(-g // c) for g, c in zip(grid, f)]
    inner = math.prod(counts[:d])
    return compiled, (r.lo // f[d] * inner, -(-r.hi // f[d]) * inner)

"""Compiling a CPU-form module to machine code in this process, with the disk cache.

``compile_module(module)`` emits LLVM IR (``lower``), looks its hash up in the disk cache
(``cache``), and otherwise optimizes and compiles it (``target``) and stores the object code.
Either way the object code is loaded into an MCJIT execution engine with ``add_object_file``:
a cache hit runs no LLVM optimization or code generation at all.

``JitKernel.run`` launches one kernel: arguments already checked and converted by the caller
(``polypy.driver.api``) go through ctypes to ``K_worker``, called once per thread on a shared block
counter (``launch.run_workers``). A bounds-checked kernel (``compile_module(..., checked=...)``)
also gets the extent of each array and a fault record; after a fault it raises
``launch.BoundsError`` naming the kernel, the array, the index and the source line.

Privatized atomics: for a kernel whose ``private_atomics`` (``gpu2cpu.privatize_atomics``) names
pointer parameters touched only by atomic adds, a parallel launch where the copies are cheap
enough (``private_copies``) runs a version of the kernel compiled with plain adds for those
parameters, each worker thread on its own zeroed copies, and adds the copies into the arrays
afterwards, worker after worker; a one-thread launch runs that version on the arrays themselves.
The version is compiled on first use.
"""
from __future__ import annotations

import ctypes
import itertools
import math
import sys
import threading
import time
import dataclasses
from typing import Mapping, Sequence

import llvmlite.binding as llvm
import numpy as np

from codegen.llvm import cache, target
from codegen.llvm.abi import FAULT_WORDS, GLOBAL_SPACES, KernelABI
from codegen.llvm.dispatch import DispatchABI, JitDispatch, emit_dispatch, version_kernels
from codegen.llvm.launch import BoundsError, LaunchError, chunk_size, default_threads, run_workers
from codegen.llvm.lower import emit_module
from codegen.llvm.printing import ASSERT_WORD, fault_key
from codegen.llvm.types import ctype_of
from polypy.analysis.versions import plain_when
from polypy.errors import DeviceAssertError, InternalError, MisalignedAddressError
from polypy.ir.printf import fault_summary
from polypy.ir import nodes as n
from polypy.ir.queries import runs_of_a_thread_range
from polypy.ir.types import U32, PointerType, ScalarType
from polypy.ir.versions import KernelVersions
from polypy.ir.visitor import Mutator, substitute, walk
from polypy.stack import on_big_stack
from polypy.passes.fold_constants import fold_expr


def emit_llvm_ir(module: n.Module, *, optimize: bool = False, versions: Sequence[KernelVersions] = ()) -> str:
    """The textual LLVM IR of a CPU-form module (``optimize``: after the O3 pipeline).
    ``versions``: kernels compiled as their versions, with the function choosing one
    (``codegen.llvm.dispatch``), in place of the module's kernel of that name."""
    text, _, _ = _emit(with_versions(module, versions), versions=versions)
    return target.optimized_ir(text) if optimize else text


def with_versions(module: n.Module, versions: Sequence[KernelVersions]) -> n.Module:
    """``module`` with the kernels of ``versions`` under their compiled names in place of theirs."""
    if not versions:
        return module
    names = {v.name for v in versions}
    kernels = tuple(k for k in module.kernels if k.name not in names)
    return dataclasses.replace(module, kernels=kernels + tuple(k for v in versions for k in version_kernels(v)))


def _emit(module: n.Module, checked: Mapping[str, frozenset[str]] | None = None,
          sliced: Mapping[str, frozenset[str]] | None = None,
          versions: Sequence[KernelVersions] = ()) -> tuple[str, dict[str, KernelABI], dict[str, DispatchABI]]:
    triple, _, _ = target.host()
    llmod, abis = emit_module(module, triple=triple, data_layout=target.data_layout(), checked=checked,
                              sliced=sliced)
    dispatch = {v.name: emit_dispatch(llmod, v) for v in versions}
    return _no_copy_idioms(str(llmod)), abis, dispatch


# Function attributes that keep LLVM's loop idiom recognition from turning a block's short copy and
# zeroing loops (a tile's row, 128 bytes) into calls of memcpy/memset, each costing more than the
# loop (the C backend's pragma says the same to GCC). llvmlite knows no string attributes, so
# they are added to the text of each kernel function's definition.
_NO_COPY_IDIOMS = ' "no-builtin-memcpy" "no-builtin-memmove" "no-builtin-memset"'


def _no_copy_idioms(text: str) -> str:
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("define ") and (line.endswith(" nounwind") or line.endswith(" nounwind optnone")):
            lines[i] = line + _NO_COPY_IDIOMS
    return "\n".join(lines)


@on_big_stack
def compile_module(module: n.Module, *, use_cache: bool = True,
                   globals: dict[str, np.ndarray] | None = None,
                   checked: Mapping[str, frozenset[str]] | None = None,
                   sliced: Mapping[str, frozenset[str]] | None = None,
                   versions: Sequence[KernelVersions] = ()) -> JitModule:
    """Machine code for every kernel of a CPU-form module, loaded and ready to launch.

    ``globals``: the storage of the module's constant/device arrays (``global_storage``) when it
    is shared with other compiled versions of the same module (block-shape specializations);
    default: new storage. ``checked``: kernel name -> the arrays (pointer parameters, shared
    arrays) whose every access that kernel bounds-checks, ``sliced``: those checked per slice of
    a coarse block (see ``lower.emit_module``). ``versions``: kernels compiled as their versions
    and the function choosing one (``JitModule.dispatch``, see ``codegen.llvm.dispatch``).
    """
    start = time.perf_counter()
    module = with_versions(module, versions)
    ir_text, abis, dispatch = _emit(module, checked, sliced, versions)
    key = cache.cache_key(ir_text, target.fingerprint())
    obj = cache.load(key) if use_cache else None
    from_cache = obj is not None
    if obj is None:
        obj, _optimized = target.compile_to_object(ir_text)
        if use_cache:
            cache.store(key, obj)
    jit = JitModule(module, abis, obj, ir_text=ir_text, from_cache=from_cache, globals=globals, dispatch=dispatch)
    jit._source = (module, checked, sliced, use_cache)
    jit.compile_seconds = time.perf_counter() - start
    return jit


class JitModule:
    """The compiled kernels of one module, and the storage of its constant/device arrays.

    ``globals`` maps each ``__constant__``/``__device__`` array to a NumPy array (initialized
    from the source's initializer, zero elsewhere) that every launch of every kernel uses: writes
    by one launch are seen by the next, as in CUDA, and the host may read or fill them (the
    equivalent of ``cudaMemcpyTo/FromSymbol``).
    """

    def __init__(self, module: n.Module, abis: dict[str, KernelABI], obj: bytes, *, ir_text: str, from_cache: bool,
                 globals: dict[str, np.ndarray] | None = None, dispatch: Mapping[str, DispatchABI] | None = None):
        self.llvm_ir = ir_text
        self.from_cache = from_cache
        self.object_code = obj
        self.compile_seconds = 0.0
        self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), target.target_machine())
        self._engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        self._engine.finalize_object()
        self.globals: dict[str, np.ndarray] = global_storage(module) if globals is None else globals
        # What compiled this module (set by ``compile_module``), for the plain-add versions.
        self._source: tuple | None = None
        self._plain: dict[str, JitKernel] = {}
        self._plain_lock = threading.Lock()
        private = {k.name: k.private_atomics for k in module.kernels}
        plain = {k.name: (k, conditions) for k in module.kernels if k.private_atomics
                 and (conditions := dict(plain_when(k, k.private_atomics)))}
        adds = {k.name: adds_per_thread(k) for k in module.kernels if k.private_atomics}
        # Device printf writes to descriptor 1 directly: what Python printed before is flushed
        # first. A failed device assert leaves its line in the module's assert word.
        self.prints = any(isinstance(x, n.Print) for k in module.kernels for x in walk(k))
        self.asserts = {fault_key(x): x for k in module.kernels for x in walk(k) if isinstance(x, n.AssertFail)}
        address = self._engine.get_global_value_address(ASSERT_WORD) if self.asserts else 0
        self._assert_word = ctypes.c_int32.from_address(address) if address else None
        self.kernels: dict[str, JitKernel] = {}
        for name, abi in abis.items():
            address = self._engine.get_function_address(abi.worker_symbol)
            if not address:
                raise InternalError(f"compiled code has no symbol {abi.worker_symbol!r}")
            self.kernels[name] = JitKernel(self, abi, address, private=private.get(name, ()), adds=adds.get(name),
                                           plain=plain.get(name))
        # Kernel name -> its versions' dispatch (``compile_module(..., versions=...)``).
        self.dispatch: dict[str, JitDispatch] = {}
        for name, dabi in (dispatch or {}).items():
            address = self._engine.get_function_address(dabi.symbol)
            if not address:
                raise InternalError(f"compiled code has no symbol {dabi.symbol!r}")
            self.dispatch[name] = JitDispatch(self, dabi, address)

    def __getitem__(self, name: str) -> JitKernel:
        return self.kernels[name]

    def check_asserts(self) -> None:
        """Raise ``DeviceAssertError`` if a device assert failed in the launch that just ran
        (and clear the word for the next launch)."""
        if self._assert_word is None or not self._assert_word.value:
            return
        failed = self.asserts[self._assert_word.value]
        self._assert_word.value = 0
        error = MisalignedAddressError if failed.fault == "misaligned" else DeviceAssertError
        raise error(fault_summary(failed), failed.loc)

    def plain_version(self, name: str) -> JitKernel:
        """Kernel ``name`` compiled with plain adds for its ``private_atomics`` (compiled once,
        sharing this module's constant/device arrays): for launches that give each worker thread
        its own copy of those arrays, or that run on one thread."""
        with self._plain_lock:
            found = self._plain.get(name)
            if found is not None:
                return found
            if self._source is None:
                raise InternalError(f"no source kept for the plain-add version of {name!r}")
            module, checked, sliced, use_cache = self._source
            kernel = module.kernel(name)
            plain = _PlainAdds(kernel).visit(kernel)
            plain = dataclasses.replace(plain, private_atomics=())
            one = dataclasses.replace(module, kernels=(plain,))
            pick = (lambda table: None if table is None else {k: v for k, v in table.items() if k == name})
            jit = compile_module(one, use_cache=use_cache, globals=self.globals, checked=pick(checked),
                                 sliced=pick(sliced))
            found = self._plain[name] = jit.kernels[name]
            return found


class _PlainAdds(Mutator):
    """``atomic.add b[i], v`` -> ``b[i] = b[i] + v`` for the buffers ``names``: right where one
    thread alone touches the array (a worker's private copy, a one-thread launch), since nothing
    else in the kernel reads or writes it (``gpu2cpu.privatize_atomics``)."""

    def __init__(self, kernel: n.Kernel):
        self.kernel = kernel
        self.names = frozenset(kernel.private_atomics)

    def visit_AtomicRMW(self, s: n.AtomicRMW):
        if s.buffer not in self.names:
            return s
        if s.op != "add" or s.dest is not None:
            raise InternalError(f"'{s.buffer}' marked for privatization has an atomic {s.op} with its result used",
                                s.loc)
        old = n.Load(s.buffer, s.index, self.kernel.elem_type(s.buffer), loc=s.loc)
        return n.Store(s.buffer, s.index, n.Binary("add", old, s.value, loc=s.loc), loc=s.loc)


def global_storage(module: n.Module) -> dict[str, np.ndarray]:
    """New storage for the constant/device arrays of ``module`` (see ``JitModule.globals``)."""
    definitions: dict[str, n.Buffer] = {g.name: g for g in module.globals}
    for k in module.kernels:
        for b in k.buffers:
            if b.space in GLOBAL_SPACES:
                definitions.setdefault(b.name, b)
    out = {}
    symbols: dict[str, np.ndarray] = {}  # views of one C variable (``Buffer.symbol``) share its bytes
    for name, b in definitions.items():
        shape = tuple(int(d.value) for d in b.shape or () if isinstance(d, n.Const))
        if b.shape is None or len(shape) != len(b.shape):
            raise InternalError(f"module array {name!r} has a non-constant shape", b.loc)
        if b.symbol is None:
            storage = np.zeros(math.prod(shape), dtype=b.elem.dtype)
        else:
            nbytes = math.prod(shape) * b.elem.itemsize
            raw = symbols.setdefault(b.symbol, np.zeros(nbytes, dtype=np.uint8))
            storage = raw[:nbytes].view(b.elem.dtype)
        if b.init is not None:
            values = np.asarray(b.init, dtype=np.float64 if b.elem.is_float else object).astype(b.elem.dtype)
            if b.symbol is None:
                storage[:len(values)] = values
            else:  # a view holds its own members only: the others' slots are zeros in its initializer
                where = np.flatnonzero(values)
                storage[where] = values[where]
        out[name] = storage
    return out


# A launch whose blocks are expected to take less than this in all runs on the calling thread:
# waking the pool's helpers costs more than it could save.
SERIAL_BELOW_SECONDS = 30e-6
# A parallel launch that took less than this (wall time, or time in native code on all threads
# together) may have been such a launch: the next launch with the same block shape runs on one
# thread, once, to measure what its blocks cost alone. That costs at most about as much again.
PROBE_BELOW_SECONDS = 1e-3


# Privatized atomics (see the module docstring): the copies of one launch take at most this
# many bytes, and each array at most this many elements per atomic add the launch makes to it
# (summed over its workers' copies): zeroing and adding a copy's element is a plain vector
# operation, a float atomic add a compare-and-swap loop costing about as much as 16 of them.
PRIVATE_COPY_BYTES = 64 << 20
PRIVATE_ELEMS_PER_ADD = 16
# How many times a loop whose trip count is not a constant is counted on to run (spmv's row loop:
# its trip count is in the matrix).
UNKNOWN_TRIPS = 4


def private_copies(sizes: Mapping[str, tuple[int, int]], workers: int, launch_threads: int,
                   adds: Mapping[str, int] | None = None) -> bool:
    """Whether a launch on ``workers`` threads with ``launch_threads`` GPU threads gives each
    worker its own copy of the arrays ``sizes`` (name -> (elements, bytes per element));
    ``adds``: per array, the atomic adds one thread makes to it (``adds_per_thread``; default 1)."""
    if workers <= 1 or not sizes:
        return False
    total = sum(count * itemsize for count, itemsize in sizes.values()) * workers
    per = adds or {}
    return total <= PRIVATE_COPY_BYTES and all(
        count * workers <= PRIVATE_ELEMS_PER_ADD * per.get(name, 1) * launch_threads
        for name, (count, _) in sizes.items())


def adds_per_thread(kernel: n.Kernel) -> dict[str, int]:
    """Per buffer, how many atomic adds one GPU thread of the CPU-form ``kernel`` makes to it, as
    far as the code tells: constant loops count their trips, other loops ``UNKNOWN_TRIPS``, an if
    its costlier branch (the versions of a nest are alternatives), thread loops once (and a loop
    over the pieces of a thread range, ``runs_of_a_thread_range``, once). Loops over
    the threads one after the other add up, also where they cover different threads (a loop split
    by the range of the counter): an estimate, at most that many times too high."""
    def count(body: tuple[n.Stmt, ...]) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in body:
            inner: dict[str, int] = {}
            if isinstance(s, n.AtomicRMW) and s.op == "add":
                inner = {s.buffer: 1}
            elif isinstance(s, n.If):
                a, b = count(s.then), count(s.orelse)
                inner = {k: max(a.get(k, 0), b.get(k, 0)) for k in a.keys() | b.keys()}
            elif isinstance(s, n.For):
                trips = 1 if s.kind == "threads" else _trips(s)
                inner = {k: v * trips for k, v in count(s.body).items()}
            elif isinstance(s, n.While):
                trips = 1 if runs_of_a_thread_range(s) else UNKNOWN_TRIPS
                inner = {k: v * trips for k, v in count(s.body + s.update).items()}
            for k, v in inner.items():
                out[k] = out.get(k, 0) + v
        return out

    return count(kernel.body)


def _trips(loop: n.For) -> int:
    values = [e.value for e in (loop.start, loop.stop, loop.step) if isinstance(e, n.Const)]
    if len(values) == 3 and values[2] > 0:
        return max(1, -(-(values[1] - values[0]) // values[2]))
    return UNKNOWN_TRIPS


# Each worker's copy starts on a line of its own: two workers adding into one cache line (a
# 25-element mask's adjoint is 100 bytes) would bounce it between cores as the atomics did.
# 128: adjacent-line prefetchers pair 64-byte lines.
ROW_ALIGN = 128


def launch_value(e: n.Expr, kernel: n.Kernel, grid: tuple[int, int, int], block: tuple[int, int, int],
                 scalars: Mapping[str, np.generic]) -> bool | int | float | None:
    """``e``'s value for a launch: ``blockDim``/``gridDim`` and the integer parameters replaced
    by the launch's values, then folded (None: it depends on anything else)."""
    known: dict[n.Expr, n.Expr] = {}
    for d in range(3):
        known[n.BlockDim(d)] = n.Const(block[d], U32)
        known[n.GridDim(d)] = n.Const(grid[d], U32)
    for p in kernel.params:
        if p.name in scalars and isinstance(p.ptype, ScalarType) and p.ptype.is_int:
            known[n.Var(p.name, p.ptype)] = n.Const(int(scalars[p.name]), p.ptype)
    folded = fold_expr(substitute(e, known))
    return folded.value if isinstance(folded, n.Const) else None


def _worker_rows(workers: int, size: int, dtype: np.dtype) -> np.ndarray:
    """Zeros of shape ``(workers, size)`` whose rows each start on a ``ROW_ALIGN``-byte boundary."""
    itemsize = np.dtype(dtype).itemsize
    stride = -(-size * itemsize // ROW_ALIGN) * ROW_ALIGN
    raw = np.zeros(workers * stride + ROW_ALIGN, dtype=np.uint8)
    skip = -raw.ctypes.data % ROW_ALIGN
    rows = raw[skip:skip + workers * stride].reshape(workers, stride)[:, :size * itemsize]
    return rows.view(dtype)


def _overlaps(a: np.ndarray, b: np.ndarray) -> bool:
    lo_a, lo_b = a.ctypes.data, b.ctypes.data
    return lo_a < lo_b + b.nbytes and lo_b < lo_a + a.nbytes


class JitKernel:
    def __init__(self, owner: JitModule, abi: KernelABI, address: int, *, private: tuple[str, ...] = (),
                 adds: Mapping[str, int] | None = None, plain: tuple[n.Kernel, dict[str, n.Expr]] | None = None):
        self.owner = owner  # keeps the execution engine (and so the code) alive
        self.abi = abi
        self.name = abi.kernel
        # The array a bounds error names, by buffer name, where the code's buffer stands for
        # another (a copy of a shared array the CPU schedule made: the caller sets it).
        self.reported_names: dict[str, str] = {}
        # Pointer parameters a launch may accumulate per worker (``Kernel.private_atomics``).
        self.private = private
        self.adds = dict(adds or {})  # per private parameter, the atomic adds a thread makes to it
        # (kernel, per private parameter: the launch condition under which its adds are plain)
        self.plain = plain
        argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64] + [ctypes.c_uint32] * 6 + [ctypes.c_int64]
        for p in abi.params:
            argtypes.append(ctypes.c_void_p if isinstance(p.ptype, PointerType) else ctype_of(p.ptype))
        argtypes += [ctypes.c_void_p] * len(abi.globals)
        if abi.bounds_checked:  # the fault record, then each pointer parameter's element count
            argtypes += [ctypes.c_void_p] + [ctypes.c_int64] * sum(isinstance(p.ptype, PointerType) for p in abi.params)
        self._cfunc = ctypes.CFUNCTYPE(ctypes.c_int32, *argtypes)(address)
        # Per parameter: (name, is a pointer, is a float): argtypes convert Python numbers.
        self._params = [(p.name, isinstance(p.ptype, PointerType), not isinstance(p.ptype, PointerType)
                         and p.ptype.is_float) for p in abi.params]
        # Per block shape: seconds per block measured on one thread, deciding whether a launch is
        # worth waking helpers for; and the shapes whose next launch measures that.
        self._block_seconds: dict[tuple[int, int, int], float] = {}
        self._probe: set[tuple[int, int, int]] = set()

    def run(self, grid: tuple[int, int, int], block: tuple[int, int, int], shmem: int,
            arrays: Mapping[str, np.ndarray], scalars: Mapping[str, np.generic], *,
            threads: int | None = None, blocks: tuple[int, int] | None = None) -> None:
        """One launch. ``arrays`` (C-contiguous, right dtype) and ``scalars`` (of the parameter
        types) are keyed by IR parameter name; the caller has checked them. ``blocks``: run only
        the linear (coarse) block ids ``[first, last)`` of the grid (x fastest; ``blockIdx`` and
        ``gridDim`` as in the full launch); default: every block."""
        total = self.abi.block_count(grid)  # coarse blocks, for a coarsened kernel
        first, last = (0, total) if blocks is None else (max(0, blocks[0]), min(total, blocks[1]))
        num_blocks = last - first
        if num_blocks <= 0:
            return
        args: list[object] = []  # the caller keeps the arrays alive for the launch
        for name, pointer, is_float in self._params:
            if pointer:
                args.append(arrays[name].ctypes.data)
            else:
                value = scalars[name]
                args.append(float(value) if is_float else int(value))
        for b in self.abi.globals:
            args.append(self.owner.globals[b.name].ctypes.data)
        fault = None
        if self.abi.bounds_checked:
            fault = np.zeros(FAULT_WORDS, dtype=np.int64)
            args.append(fault.ctypes.data)
            args += [arrays[name].size for name, pointer, _ in self._params if pointer]
        workers = max(1, min(threads if threads is not None else default_threads(), num_blocks))
        per_block = self._block_seconds.get(block)
        if workers > 1 and (block in self._probe or per_block is not None
                            and per_block * num_blocks < SERIAL_BELOW_SECONDS):
            workers = 1
        counter = ctypes.c_int64(first)
        head = (ctypes.addressof(counter), last, chunk_size(num_blocks, workers), *grid, *block, int(shmem))
        ran = self  # the kernel whose code runs: its sites name a bounds-checked launch's fault
        # Not for a range of blocks: ``polypy.distributed`` passes array headers over a window of
        # the caller's array, whose elements outside what the blocks touch must not be written.
        copies = None if blocks is not None else self._private_arrays(
            arrays, workers, math.prod(grid) * math.prod(block), self._atomic_free(grid, block, scalars))
        if copies is not None:
            ran = self.owner.plain_version(self.name)
        cfunc = ran._cfunc
        if copies:  # one argument list per worker thread, each with its own copies
            where = {name: i for i, (name, pointer, _) in enumerate(self._params)}
            per_worker = []
            for w in range(workers):
                own = list(args)
                for name, copy in copies.items():
                    own[where[name]] = copy[w].ctypes.data
                per_worker.append(own)
            slots = itertools.count()  # next() on it is atomic under the GIL: one slot per thread

            def call() -> int:
                return cfunc(*head, *per_worker[next(slots)])
        else:
            def call() -> int:
                return cfunc(*head, *args)

        if ran.owner.prints:
            sys.stdout.flush()
        start = time.perf_counter()
        try:
            busy = run_workers(call, workers)
        except LaunchError:
            ran.owner.check_asserts()
            if fault is not None and fault[0]:
                raise ran._bounds_error(fault, shmem, self.reported_names) from None
            raise
        ran.owner.check_asserts()
        if copies:  # worker after worker: the same order of additions for the same worker loads
            for name, copy in copies.items():
                out = arrays[name]
                total = copy[0]
                for w in range(1, workers):
                    total += copy[w]
                if out.dtype.kind == "f":  # an element no worker added to keeps its bits (-0.0)
                    np.add(out, total, out=out, where=total != 0)
                else:
                    out += total
        elapsed = time.perf_counter() - start
        if workers == 1:
            self._block_seconds[block] = elapsed / num_blocks
            self._probe.discard(block)
        elif per_block is None and min(elapsed, busy) < PROBE_BELOW_SECONDS:
            self._probe.add(block)

    def _atomic_free(self, grid: tuple[int, int, int], block: tuple[int, int, int],
                     scalars: Mapping[str, np.generic]) -> frozenset[str]:
        """The private parameters this launch adds to with plain adds only: their versioning
        condition (``polypy.analysis.versions.plain_when``) holds for its shape and arguments."""
        if self.plain is None:
            return frozenset()
        kernel, conditions = self.plain
        return frozenset(name for name, cond in conditions.items()
                         if launch_value(cond, kernel, grid, block, scalars) is True)

    def _private_arrays(self, arrays: Mapping[str, np.ndarray], workers: int,
                        launch_threads: int, plain: frozenset[str] = frozenset()) -> dict[str, np.ndarray] | None:
        """None: the launch keeps its atomics. Else the plain-add version runs, on a zeroed copy
        per worker of each array returned (``{}``: one thread, on the arrays themselves).
        ``plain``: private parameters whose atomics this launch never runs (no copy for them)."""
        if not self.private:
            return None
        if workers == 1:
            return {}
        mine = {name: arrays[name] for name in self.private if name not in plain}
        if not mine:
            return None  # no atomic runs: the code as it is
        sizes = {name: (a.size, a.itemsize) for name, a in mine.items()}
        if not private_copies(sizes, workers, launch_threads, self.adds):
            return None
        # An array that another argument shares bytes with could be read there mid-launch.
        for name, a in mine.items():
            for other, pointer, _ in self._params:
                if pointer and other != name and _overlaps(a, arrays[other]):
                    return None
        return {name: _worker_rows(workers, a.size, a.dtype) for name, a in mine.items()}

    def _bounds_error(self, fault: np.ndarray, shmem: int, names: Mapping[str, str] | None = None) -> BoundsError:
        """The error for the fault record of a bounds-checked launch (see ``lower``); ``names``:
        the array to name for a buffer that stands for another."""
        site = self.abi.sites[int(fault[0]) - 1]
        if names and site.buffer in names:
            site = dataclasses.replace(site, buffer=names[site.buffer])
        index, extent = int(fault[1]), int(fault[2])
        if site.part is not None:  # the split array's own index and extent
            p, q = site.part
            index, extent = index * q + p, shmem // site.itemsize
        block = tuple(int(v) for v in fault[3:6])
        verb = "read" if site.kind == "read" else "wrote"
        if site.space == "global":
            what = "array"
        else:
            what = "dynamic shared array" if site.dynamic else "shared array"
        message = f"kernel {self.name} {verb} index {index} of {what} '{site.buffer}' of {extent} elements"
        if site.dynamic:
            message += f" (launched with {shmem} bytes of dynamic shared memory)"
        message += f", in block ({block[0]}, {block[1]}, {block[2]}); the launch was stopped there"
        return BoundsError(message, site.loc, kernel=self.name, buffer=site.buffer, index=index, extent=extent,
                           kind=site.kind)

"""Compiling a CPU-form module to machine code in this process, with the disk cache.

``compile_module(module)`` emits LLVM IR (``lower``), looks its hash up in the disk cache
(``cache``), and otherwise optimizes and compiles it (``target``) and stores the object code.
Either way the object code is loaded into an MCJIT execution engine with ``add_object_file``:
a cache hit runs no LLVM optimization or code generation at all.

``JitKernel.run`` launches one kernel: arguments already checked and converted by the caller
(``polypy.api``) go through ctypes to ``K_blocks``, which ``launch.run_blocks`` spreads over
threads.
"""
from __future__ import annotations

import ctypes
import math
from typing import Mapping

import llvmlite.binding as llvm
import numpy as np

from codegen.llvm import cache, target
from codegen.llvm.launch import default_threads, run_blocks
from codegen.llvm.lower import GLOBAL_SPACES, KernelABI, emit_module
from codegen.llvm.types import ctype_of
from polypy.errors import InternalError
from polypy.ir import nodes as n
from polypy.ir.types import PointerType


def emit_llvm_ir(module: n.Module, *, optimize: bool = False) -> str:
    """The textual LLVM IR of a CPU-form module (``optimize``: after the O3 pipeline)."""
    text, _ = _emit(module)
    return target.optimized_ir(text) if optimize else text


def _emit(module: n.Module) -> tuple[str, dict[str, KernelABI]]:
    triple, _, _ = target.host()
    llmod, abis = emit_module(module, triple=triple, data_layout=target.data_layout())
    return str(llmod), abis


def compile_module(module: n.Module, *, use_cache: bool = True) -> JitModule:
    """Machine code for every kernel of a CPU-form module, loaded and ready to launch."""
    ir_text, abis = _emit(module)
    key = cache.cache_key(ir_text, target.fingerprint())
    obj = cache.load(key) if use_cache else None
    from_cache = obj is not None
    if obj is None:
        obj, _optimized = target.compile_to_object(ir_text)
        if use_cache:
            cache.store(key, obj)
    return JitModule(module, abis, obj, ir_text=ir_text, from_cache=from_cache)


class JitModule:
    """The compiled kernels of one module, and the storage of its constant/device arrays.

    ``globals`` maps each ``__constant__``/``__device__`` array to a NumPy array (initialized
    from the source's initializer, zero elsewhere) that every launch of every kernel uses: writes
    by one launch are seen by the next, as in CUDA, and the host may read or fill them (the
    equivalent of ``cudaMemcpyTo/FromSymbol``).
    """

    def __init__(self, module: n.Module, abis: dict[str, KernelABI], obj: bytes, *, ir_text: str, from_cache: bool):
        self.llvm_ir = ir_text
        self.from_cache = from_cache
        self.object_code = obj
        self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), target.target_machine())
        self._engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        self._engine.finalize_object()
        self.globals: dict[str, np.ndarray] = _global_storage(module)
        self.kernels: dict[str, JitKernel] = {}
        for name, abi in abis.items():
            address = self._engine.get_function_address(abi.symbol)
            if not address:
                raise InternalError(f"compiled code has no symbol {abi.symbol!r}")
            self.kernels[name] = JitKernel(self, abi, address)

    def __getitem__(self, name: str) -> JitKernel:
        return self.kernels[name]


def _global_storage(module: n.Module) -> dict[str, np.ndarray]:
    definitions: dict[str, n.Buffer] = {g.name: g for g in module.globals}
    for k in module.kernels:
        for b in k.buffers:
            if b.space in GLOBAL_SPACES:
                definitions.setdefault(b.name, b)
    out = {}
    for name, b in definitions.items():
        shape = tuple(int(d.value) for d in b.shape or () if isinstance(d, n.Const))
        if b.shape is None or len(shape) != len(b.shape):
            raise InternalError(f"module array {name!r} has a non-constant shape", b.loc)
        storage = np.zeros(math.prod(shape), dtype=b.elem.dtype)
        if b.init is not None:
            storage[:len(b.init)] = np.asarray(b.init, dtype=np.float64 if b.elem.is_float else object).astype(
                b.elem.dtype)
        out[name] = storage
    return out


class JitKernel:
    def __init__(self, owner: JitModule, abi: KernelABI, address: int):
        self.owner = owner  # keeps the execution engine (and so the code) alive
        self.abi = abi
        self.name = abi.kernel
        argtypes = [ctypes.c_int64, ctypes.c_int64] + [ctypes.c_uint32] * 6 + [ctypes.c_int64]
        for p in abi.params:
            argtypes.append(ctypes.c_void_p if isinstance(p.ptype, PointerType) else ctype_of(p.ptype))
        argtypes += [ctypes.c_void_p] * len(abi.globals)
        self._cfunc = ctypes.CFUNCTYPE(ctypes.c_int32, *argtypes)(address)

    def run(self, grid: tuple[int, int, int], block: tuple[int, int, int], shmem: int,
            arrays: Mapping[str, np.ndarray], scalars: Mapping[str, np.generic], *,
            threads: int | None = None) -> None:
        """One launch. ``arrays`` (C-contiguous, right dtype) and ``scalars`` (of the parameter
        types) are keyed by IR parameter name; the caller has checked them."""
        args: list[object] = []  # the caller keeps the arrays alive for the launch
        for p in self.abi.params:
            if isinstance(p.ptype, PointerType):
                args.append(arrays[p.name].ctypes.data)
            else:
                value = scalars[p.name]
                args.append(ctype_of(p.ptype)(int(value) if not p.ptype.is_float else float(value)))
        for b in self.abi.globals:
            args.append(self.owner.globals[b.name].ctypes.data)
        head = (*grid, *block, int(shmem))
        cfunc = self._cfunc

        def call(first: int, last: int) -> int:
            return cfunc(first, last, *head, *args)

        num_blocks = grid[0] * grid[1] * grid[2]
        run_blocks(call, num_blocks, threads if threads is not None else default_threads())

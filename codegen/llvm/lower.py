"""CPU-form kernels -> LLVM IR, with llvmlite's IRBuilder.

Each kernel ``K`` becomes a function that runs K's blocks, taking chunks of consecutive block
ids from a counter shared by the workers of a launch (see ``KernelABI``)::

    i32 @K_worker(ptr next, i64 total, i64 chunk,
                  i32 gridDim.x, i32 gridDim.y, i32 gridDim.z,
                  i32 blockDim.x, i32 blockDim.y, i32 blockDim.z, i64 shmem_bytes,
                  <K's parameters in order>, ptr <each constant/device buffer K uses>)

    entry:    one alloca per scalar variable (SROA / mem2reg turn them into registers);
              shared and local buffers: an alloca when their size is a small constant,
              else one malloc each (a distinct allocation: alias analysis sees them apart),
              once per call: every block this worker runs reuses them
    chunks:   first = atomic fetch-add(*next, chunk); stop when first >= total
    blocks:   for id in [first, min(first + chunk, total)):   (linear block id, x fastest)
                  blockIdx = (id % gx, id / gx % gy, id / (gx*gy))
                  <K's body: the work of one block, thread loops included>
    exit:     free the malloc'ed buffers; return 0 (1: a malloc failed, nothing ran)

A coarsened kernel (``Kernel.coarsen``, see ``gpu2cpu.coarsen_blocks``) counts coarse blocks
instead: ``total`` is ``prod(ceil(gridDim.d / coarsen[d]))`` and block ``id`` has ``blockIdx.d =
coarsen[d] * (its coordinate d)``; ``gridDim`` stays the launch's grid.

A launch calls ``K_worker`` once on each of its threads with the same counter (one native call
per thread, however many blocks), so uneven blocks balance out without going back to Python.
``K_blocks(first, last, <the rest as K_worker>)`` runs one range of blocks (a counter of its
own, one chunk): the simplest entry point, for tests and single-threaded callers.

C semantics, exactly (the emulator and ``polypy.ir.semantics`` are the reference):

* integers wrap (no ``nsw``/``nuw`` on IR arithmetic), except in the index of a memory access,
  where signed arithmetic is done in 64 bits (``index64``: C leaves its overflow undefined, and an
  in-bounds index is its exact value); signedness picks ``sdiv``/``udiv``,
  ``srem``/``urem``, ``ashr``/``lshr``, signed/unsigned compares and extensions;
* what C leaves undefined never traps or turns into LLVM poison: an integer division by zero
  divides by 1 instead (x86 would raise SIGFPE and kill the process), ``INT_MIN / -1`` wraps as on
  GPUs, a shift count outside [0, width) is clamped to the width as the GPU's ``shl``/``shr``
  do (0, or the sign fill of a signed ``>>``), float->int conversions saturate (NaN -> 0) as
  CUDA's ``cvt.rzi`` does (selects around an ``fptosi`` of an operand in range, which vectorize:
  ``ExpressionEmitter.saturating``);
* ``Select``/``land``/``lor`` evaluate only the operand they need: an operand that loads or
  divides is emitted in its own basic block (a phi joins them); cheap pure operands use ``select``;
* float compares are ordered except ``!=`` (C: NaN != x is true); ``bool`` is ``i1`` in registers
  and one byte in memory;
* atomics are seq_cst ``atomicrmw`` where LLVM has the operation, ``cmpxchg`` loops otherwise.

Bounds-checked variant (a kernel with ``bounds_checks``, the pipeline's ``version-bounds-checks``;
or ``emit_module(..., checked={K: buffers})``): every load, store and atomic
of the named buffers (pointer parameters, shared arrays) first compares its linear index with
the buffer's extent -- a pointer parameter's element count is passed at launch, after the
globals, following a pointer to the *fault record*::

    i32 @K_worker(<as above>, ptr fault, i64 <extent of each pointer parameter>...)

An index outside ``[0, extent)`` touches nothing: the first faulting access of the launch writes
``fault = {site + 1, index, extent, blockIdx.x, .y, .z}`` (a compare-and-swap on ``fault[0]``
picks one among racing workers; ``site`` indexes ``KernelABI.sites``), sets the launch's block
counter to ``total`` so that no worker starts another chunk, and the worker returns 2.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping

from llvmlite import ir

from codegen.llvm.abi import KernelABI, kernel_abi
from codegen.llvm.expressions import ExpressionEmitter
from codegen.llvm.function import KernelFunction
from codegen.llvm.statements import StatementEmitter

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.verifier import verify_kernel


def check_cpu_form(kernel: n.Kernel) -> None:
    if kernel.stage != "cpu":
        raise UserError(f"kernel {kernel.name!r} is in {kernel.stage!r} form; the LLVM backend compiles CPU-form "
                        f"kernels (lower it with polypy.driver.pipelines.to_cpu first)", kernel.loc)


def emit_module(module: n.Module, *, triple: str = "", data_layout: str = "",
                checked: Mapping[str, frozenset[str]] | None = None,
                sliced: Mapping[str, frozenset[str]] | None = None) -> tuple[ir.Module, dict[str, KernelABI]]:
    """An LLVM module with one ``K_blocks`` function per kernel of ``module`` (all CPU form).

    ``checked``: kernel name -> the buffers whose accesses that kernel bounds-checks (its
    bounds-checked variant, see the module docstring); other kernels are emitted as usual.
    ``sliced``: kernel name -> those of its checked shared arrays that hold one slice per
    sub-block of a coarse block (``coarsen_blocks``: leading dimension = the factor): an access
    is checked against its slice (the indices after the first), as in the fine kernel.
    """
    llmod = ir.Module(name=_module_name(module))
    if triple:
        llmod.triple = triple
    if data_layout:
        llmod.data_layout = data_layout
    abis: dict[str, KernelABI] = {}
    for kernel in module.kernels:
        check_cpu_form(kernel)
        verify_kernel(kernel)
        abi = kernel_abi(kernel, *_checks(kernel, checked, sliced))
        fn = emit_kernel_function(llmod, kernel, abi)
        if abi.bounds_checked:
            abi = dataclasses.replace(abi, sites=tuple(fn.sites))
        abis[kernel.name] = abi
    return llmod, abis


def _checks(kernel: n.Kernel, checked: Mapping[str, frozenset[str]] | None,
            sliced: Mapping[str, frozenset[str]] | None) -> tuple[frozenset[str] | None, frozenset[str]]:
    """What ``kernel`` bounds-checks and checks per slice: as ``checked``/``sliced`` say where they
    name it, else as the kernel says (``Kernel.bounds_checks``, a version the pipeline made)."""
    if checked is not None and kernel.name in checked:
        return checked[kernel.name], frozenset() if sliced is None else sliced.get(kernel.name, frozenset())
    if kernel.bounds_checks:
        return frozenset(kernel.bounds_checks), frozenset(kernel.checked_slices)
    return None, frozenset()


def _module_name(module: n.Module) -> str:
    for k in module.kernels:
        if k.loc is not None:
            return k.loc.file
    return "polypy"



def emit_kernel_function(llmod: ir.Module, kernel: n.Kernel, abi: KernelABI) -> KernelFunction:
    """The functions of ``kernel`` in ``llmod``. Their state is one object, ``KernelFunction``
    (builder, variables, buffers, loops, fault exit, and the helpers on them), passed to the
    expression and the statement emitters, which read and extend it::

        fn = KernelFunction(...)             the functions' state
        exprs = ExpressionEmitter(fn)        expressions -> values in fn
        stmts = StatementEmitter(fn, exprs)  statements -> blocks of fn
        fn.emit(stmts.block)                 entry, block loop, the body, the fault exit
    """
    fn = KernelFunction(llmod, kernel, abi)
    exprs = ExpressionEmitter(fn)
    fn.expr = exprs.expr
    fn.emit(StatementEmitter(fn, exprs).block)
    return fn

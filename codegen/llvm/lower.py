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
  GPUs, shift counts are reduced modulo the width, float->int conversions saturate (NaN -> 0) as
  CUDA's ``cvt.rzi`` does (``llvm.fptosi.sat``);
* ``Select``/``land``/``lor`` evaluate only the operand they need: an operand that loads or
  divides is emitted in its own basic block (a phi joins them); cheap pure operands use ``select``;
* float compares are ordered except ``!=`` (C: NaN != x is true); ``bool`` is ``i1`` in registers
  and one byte in memory;
* atomics are seq_cst ``atomicrmw`` where LLVM has the operation, ``cmpxchg`` loops otherwise.

Bounds-checked variant (``emit_module(..., checked={K: buffers})``): every load, store and atomic
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
import math
from typing import Mapping

from llvmlite import ir

from codegen.llvm.mathlib import MATH_EMITTERS
from codegen.llvm.types import I1, I8, I32, I64, PTR, abi_type, int_type_of_width, memory_type, value_type

from polypy.errors import InternalError, Loc, UserError
from polypy.ir import nodes as n
from polypy.ir.types import I64 as IR_I64
from polypy.ir.types import U32 as IR_U32
from polypy.ir.types import PointerType, ScalarType
from polypy.ir.verifier import verify_kernel
from polypy.ir.visitor import Visitor, walk

# Shared/local buffers of constant size live on the worker's stack up to this many bytes in all
# (worker threads have the platform's default stack, 8 MiB on Linux); larger ones are malloc'ed.
STACK_SCRATCH_LIMIT = 64 * 1024
# Heap scratch is rounded up to, and padded by, one cache line.
_LINE = 64

GLOBAL_SPACES = ("constant", "device")
SCRATCH_SPACES = ("shared", "local")

# Leading parameters of every K_blocks function, before the kernel's own.
LAUNCH_PARAMS = ("first", "last", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "shmem")
# K_worker's status codes.
STATUS_OUT_OF_MEMORY = 1
STATUS_BOUNDS_FAULT = 2
# i64 words of a bounds-checked kernel's fault record (see the module docstring).
FAULT_WORDS = 6


@dataclasses.dataclass(frozen=True)
class CheckSite:
    """One bounds-checked access of a kernel: the buffer, how it is accessed, where in the source."""

    buffer: str
    kind: str  # "read" | "write" | "atomic"
    space: str  # "global" (a pointer parameter) | "shared"
    dynamic: bool  # the ``extern __shared__`` array, sized by the launch's dynamic shared bytes
    loc: Loc | None
# Leading parameters of every K_worker function, before the kernel's own.
WORKER_PARAMS = ("next", "total", "chunk", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "shmem")


@dataclasses.dataclass(frozen=True)
class KernelABI:
    """How to call the compiled function of one kernel.

    ``symbol`` (``K_blocks``) takes ``LAUNCH_PARAMS`` (i64, i64, six i32, i64), ``worker_symbol``
    (``K_worker``) takes ``WORKER_PARAMS`` (pointer to an i64 counter, i64, i64, six i32, i64);
    then both take ``params`` (pointers as addresses, scalars by value, ``bool`` as a byte), then
    one pointer per ``globals`` buffer (the storage of a ``constant``/``device`` array); a
    ``bounds_checked`` one then takes the fault record and the extent of each pointer
    parameter. They return 0, 1 if scratch allocation failed, 2 after a bounds fault.
    """

    kernel: str
    symbol: str
    params: tuple[n.Param, ...]
    globals: tuple[n.Buffer, ...]
    worker_symbol: str = ""
    coarsen: tuple[int, int, int] = (1, 1, 1)
    # Bounds-checked variant: the buffers checked and the checked accesses (fault site numbers).
    bounds_checked: bool = False
    checked: frozenset[str] = frozenset()
    sites: tuple[CheckSite, ...] = ()
    # Checked shared arrays of a coarse kernel that have one slice per sub-block (a leading
    # dimension of the coarsening factor): each access is checked against its slice.
    sliced: frozenset[str] = frozenset()

    def block_count(self, grid: tuple[int, int, int]) -> int:
        """How many (coarse) blocks ``first``/``last``/``total`` count for a launch of ``grid``."""
        return math.prod(-(-g // f) for g, f in zip(grid, self.coarsen))


def kernel_abi(kernel: n.Kernel, checked: frozenset[str] | None = None,
               sliced: frozenset[str] = frozenset()) -> KernelABI:
    """The ABI of ``kernel`` (``checked``: of its variant bounds-checking those buffers, ``sliced``
    those of them checked per slice; the sites are filled in by the emitter)."""
    globals_ = tuple(b for b in kernel.buffers if b.space in GLOBAL_SPACES)
    return KernelABI(kernel.name, f"{kernel.name}_blocks", kernel.params, globals_, f"{kernel.name}_worker",
                     kernel.coarsen, bounds_checked=checked is not None, checked=frozenset(checked or ()),
                     sliced=frozenset(sliced) & frozenset(checked or ()))


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
        abi = kernel_abi(kernel, None if checked is None else checked.get(kernel.name),
                         frozenset() if sliced is None else sliced.get(kernel.name, frozenset()))
        emitter = _KernelEmitter(llmod, kernel, abi)
        emitter.emit()
        if abi.bounds_checked:
            abi = dataclasses.replace(abi, sites=tuple(emitter.sites))
        abis[kernel.name] = abi
    return llmod, abis


def _module_name(module: n.Module) -> str:
    for k in module.kernels:
        if k.loc is not None:
            return k.loc.file
    return "polypy"


# --------------------------------------------------------------------------- the emitter


@dataclasses.dataclass
class _BufferInfo:
    base: ir.Value
    elem: ScalarType
    dims: list[ir.Value]  # i64 extents; only dims[1:] are used (row-major linearization)
    extent: ir.Value | None = None  # i64 element count, for bounds checks


@dataclasses.dataclass
class _Loop:
    exit: ir.Block
    cont: ir.Block


_SIGNED_MIN = {8: -(1 << 7), 16: -(1 << 15), 32: -(1 << 31), 64: -(1 << 63)}

_ICMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


class _DistinctMD(ir.values.MDValue):
    """A ``distinct`` metadata node (a loop ID: its first operand is itself)."""

    def descr(self, buf):
        buf.append("distinct ")
        super().descr(buf)


class _KernelEmitter(Visitor):
    def __init__(self, llmod: ir.Module, kernel: n.Kernel, abi: KernelABI):
        self.llmod = llmod
        self.kernel = kernel
        self.abi = abi
        self.rest_types = [I32] * 6 + [I64]
        for p in kernel.params:
            self.rest_types.append(PTR if isinstance(p.ptype, PointerType) else abi_type(p.ptype))
        self.rest_types += [PTR] * len(abi.globals)
        self.rest_names = list(WORKER_PARAMS[3:]) + [p.name for p in kernel.params] + [b.name for b in abi.globals]
        self.pointer_params = [p for p in kernel.params if isinstance(p.ptype, PointerType)]
        if abi.bounds_checked:
            self.rest_types += [PTR] + [I64] * len(self.pointer_params)
            self.rest_names += ["fault"] + [f"{p.name}.extent" for p in self.pointer_params]
        self.sites: list[CheckSite] = []
        self.fault_bb: ir.Block | None = None
        self.fault_phis: tuple[ir.Value, ir.Value, ir.Value] | None = None
        # K_blocks first: it is the entry point a reader looks for (its body comes last).
        self.range_fn = ir.Function(llmod, ir.FunctionType(I32, [I64, I64] + self.rest_types), name=abi.symbol)
        self.fn = ir.Function(llmod, ir.FunctionType(I32, [PTR, I64, I64] + self.rest_types), name=abi.worker_symbol)
        self.fn.attributes.add("nounwind")
        for arg, name in zip(self.fn.args, WORKER_PARAMS[:3] + tuple(self.rest_names)):
            arg.name = name
        self.fn.args[0].add_attribute("noalias")  # the launch's counter: no kernel data
        self.entry = self.fn.append_basic_block("entry")
        self.builder = ir.IRBuilder(self.entry)
        self.slots: dict[str, ir.Value] = {}     # name -> alloca of a scalar variable
        self.values: dict[str, ir.Value] = {}    # name -> SSA value of a never-assigned parameter
        self.buffers: dict[str, _BufferInfo] = {}
        self.loops: list[_Loop] = []
        self.risky_cache: dict[int, bool] = {}
        self.var_types = _variable_types(kernel)
        self.block_idx: list[ir.Value] = []
        args = self.fn.args
        self.grid_dim = list(args[3:6])
        self.block_dim = list(args[6:9])
        self.shmem = args[9]

    # -- helpers the math table uses (MathContext)
    def declare(self, name: str, ret: ir.Type, args: list[ir.Type], *, pure: bool = True) -> ir.Function:
        existing = self.llmod.globals.get(name)
        if existing is not None:
            return existing
        fn = ir.Function(self.llmod, ir.FunctionType(ret, args), name=name)
        if not name.startswith("llvm."):
            fn.attributes.add("nounwind")
            if pure:
                fn.attributes.add("readnone")  # libm without errno: LLVM may hoist and CSE it
        return fn

    def new_block(self, name: str) -> ir.Block:
        return self.fn.append_basic_block(name)

    def slot(self, name: str, ty: ScalarType) -> ir.Value:
        """The alloca of variable ``name`` (created in the entry block on first use)."""
        ptr = self.slots.get(name)
        if ptr is None:
            ptr = self.entry_alloca(value_type(ty), name)
            self.slots[name] = ptr
        return ptr

    def entry_alloca(self, ty: ir.Type, name: str, align: int | None = None) -> ir.Value:
        """An alloca at the top of the entry block (where mem2reg/SROA look for them)."""
        with self.builder.goto_entry_block():
            self.builder.position_at_start(self.entry)
            ptr = self.builder.alloca(ty, name=name)
        ptr.type = PTR  # llvmlite types allocas as typed pointers; LLVM has only opaque ones
        ptr.align = align
        return ptr

    # -- the function
    def emit(self) -> ir.Function:
        b = self.builder
        k = self.kernel
        params = self.fn.args[len(WORKER_PARAMS):len(WORKER_PARAMS) + len(k.params)]
        after_params = len(WORKER_PARAMS) + len(k.params)
        globals_ = self.fn.args[after_params:after_params + len(self.abi.globals)]
        extents = {}
        if self.abi.bounds_checked:
            self.fault_record = self.fn.args[after_params + len(self.abi.globals)]
            self.fault_record.add_attribute("noalias")
            extent_args = self.fn.args[after_params + len(self.abi.globals) + 1:]
            extents = {p.name: arg for p, arg in zip(self.pointer_params, extent_args)}
        assigned = _assigned_names(k)
        for p, arg in zip(k.params, params):
            if isinstance(p.ptype, PointerType):
                if p.ptype.restrict:
                    arg.add_attribute("noalias")
                self.buffers[p.name] = _BufferInfo(arg, p.ptype.elem, [], extents.get(p.name))
            elif p.name not in assigned:
                self.values[p.name] = self.from_abi(arg, p.ptype)
        for buf, arg in zip(self.abi.globals, globals_):
            arg.add_attribute("noalias")  # storage owned by the compiled module, never a user array
            dims = [ir.Constant(I64, _const_extent(buf, d)) for d in buf.shape or ()]
            self.buffers[buf.name] = _BufferInfo(arg, buf.elem, dims)
        where = f" ({k.loc.file}:{k.loc.line})" if k.loc is not None else ""
        b.comment(f"kernel {k.name}{where}: chunks of consecutive blocks taken from *next until none is left")
        heap = self.allocate_scratch()

        exit_bb = self.new_block("exit")
        oom_bb = self.new_block("out_of_memory")
        if heap:
            failed = ir.Constant(I1, 0)
            for ptr in heap:
                failed = b.or_(failed, b.icmp_unsigned("==", ptr, ir.Constant(PTR, None)))
            start_bb = self.new_block("start")
            b.cbranch(failed, oom_bb, start_bb)
            b.position_at_end(start_bb)

        # for (;;) { first = fetch_add(*next, chunk); if (first >= total) break;
        #            for (id = first; id < min(first + chunk, total); ++id) <block id> }
        next_, total, chunk = self.fn.args[0], self.fn.args[1], self.fn.args[2]
        id_slot = self.slot(".block_id", IR_I64)
        last_slot = self.slot(".last_block", IR_I64)
        grab = self.new_block("chunk")
        header = self.new_block("blocks")
        body = self.new_block("block")
        latch = self.new_block("next_block")
        b.branch(grab)
        b.position_at_end(grab)
        first = b.atomic_rmw("add", next_, chunk, "monotonic", name="first")
        in_range = self.new_block("chunk.start")
        b.cbranch(b.icmp_signed("<", first, total), in_range, exit_bb)
        b.position_at_end(in_range)
        end = b.add(first, chunk)
        b.store(b.select(b.icmp_signed("<", end, total), end, total), last_slot)
        b.store(first, id_slot)
        # blockIdx of the chunk's first block (x fastest); the next ones by counting, not dividing.
        # A coarsened kernel counts coarse blocks: ceil(gridDim / coarsen) of them along each
        # dimension, blockIdx their first block's (multiples of the factors).
        factors = k.coarsen
        gx, gy = (self.coarse_count(d) for d in (0, 1))
        rest = b.udiv(first, gx)
        idx_slots = [self.slot(f".block_{axis}", IR_U32) for axis in "xyz"]
        self.idx_slots = idx_slots
        for slot, value, f in zip(idx_slots, (b.urem(first, gx), b.urem(rest, gy), b.udiv(rest, gy)), factors):
            if f != 1:
                value = b.mul(value, ir.Constant(I64, f))
            b.store(b.trunc(value, I32), slot)
        b.branch(header)
        b.position_at_end(header)
        block_id = b.load(id_slot, typ=I64)
        b.cbranch(b.icmp_signed("<", block_id, b.load(last_slot, typ=I64)), body, grab)
        b.position_at_end(body)
        self.block_idx = [b.load(slot, typ=I32, name=name) for slot, name in zip(idx_slots, ("bx", "by", "bz"))]
        for p, arg in zip(k.params, params):
            if not isinstance(p.ptype, PointerType) and p.name in assigned:
                # A parameter the body assigns starts every block from the argument's value.
                b.store(self.from_abi(arg, p.ptype), self.slot(p.name, p.ptype))
        self.block(k.body)
        b.branch(latch)
        b.position_at_end(latch)
        b.store(b.add(b.load(id_slot, typ=I64), ir.Constant(I64, 1)), id_slot)
        # (bx, by, bz) += 1 with carries: bx wraps at gridDim.x into by, by at gridDim.y into bz.
        one, zero = ir.Constant(I32, 1), ir.Constant(I32, 0)
        if factors == (1, 1, 1):
            bx = b.add(b.load(idx_slots[0], typ=I32), one)
            wrap_x = b.icmp_unsigned("==", bx, self.grid_dim[0])
            b.store(b.select(wrap_x, zero, bx), idx_slots[0])
            by = b.add(b.load(idx_slots[1], typ=I32), b.zext(wrap_x, I32))
            wrap_y = b.icmp_unsigned("==", by, self.grid_dim[1])
            b.store(b.select(wrap_y, zero, by), idx_slots[1])
            b.store(b.add(b.load(idx_slots[2], typ=I32), b.zext(wrap_y, I32)), idx_slots[2])
        else:
            # Coarse blocks: bx += fx, wrapping (at or past gridDim.x) into by += fy, and so on.
            # No u32 overflow: blockIdx < gridDim < 2^31 and factors are small.
            fx, fy, fz = (ir.Constant(I32, f) for f in factors)
            bx = b.add(b.load(idx_slots[0], typ=I32), fx)
            wrap_x = b.icmp_unsigned(">=", bx, self.grid_dim[0])
            b.store(b.select(wrap_x, zero, bx), idx_slots[0])
            by = b.load(idx_slots[1], typ=I32)
            by = b.select(wrap_x, b.add(by, fy), by)
            wrap_y = b.icmp_unsigned(">=", by, self.grid_dim[1])
            b.store(b.select(wrap_y, zero, by), idx_slots[1])
            bz = b.load(idx_slots[2], typ=I32)
            b.store(b.select(wrap_y, b.add(bz, fz), bz), idx_slots[2])
        b.branch(header)

        free = self.declare("free", ir.VoidType(), [PTR], pure=False) if heap else None
        b.position_at_end(exit_bb)
        for ptr in heap:
            b.call(free, [ptr])
        b.ret(ir.Constant(I32, 0))
        b.position_at_end(oom_bb)
        for ptr in heap:
            b.call(free, [ptr])  # free(NULL) is a no-op
        b.ret(ir.Constant(I32, STATUS_OUT_OF_MEMORY))
        exits = [exit_bb, oom_bb]
        if self.fault_bb is not None:
            exits += self.emit_fault(heap, free)
        for block in exits:  # read top to bottom: the exits come last
            self.fn.blocks.remove(block)
            self.fn.blocks.append(block)
        self.emit_range_entry()
        return self.fn

    def emit_fault(self, heap: list[ir.Value], free: ir.Function | None) -> list[ir.Block]:
        """The end of the fault block: record the fault (first one only), stop the launch, free
        the scratch memory, return ``STATUS_BOUNDS_FAULT``. Returns its blocks."""
        assert self.fault_bb is not None and self.fault_phis is not None
        b = self.builder
        b.position_at_end(self.fault_bb)
        site, index, extent = self.fault_phis
        record = self.fault_record
        pair = b.cmpxchg(record, ir.Constant(I64, 0), site, "seq_cst", "seq_cst")
        first_bb = self.new_block("bounds_fault.first")
        stop_bb = self.new_block("bounds_fault.stop")
        b.cbranch(b.extract_value(pair, 1), first_bb, stop_bb)
        b.position_at_end(first_bb)
        words = [index, extent] + [b.zext(b.load(slot, typ=I32), I64) for slot in self.idx_slots]
        for i, word in enumerate(words, start=1):
            b.store(word, b.gep(record, [ir.Constant(I64, i)], inbounds=True, source_etype=I64))
        b.branch(stop_bb)
        b.position_at_end(stop_bb)
        # No worker starts another chunk of blocks: the counter is past the end.
        b.atomic_rmw("xchg", self.fn.args[0], self.fn.args[1], "seq_cst")
        for ptr in heap:
            b.call(free, [ptr])
        b.ret(ir.Constant(I32, STATUS_BOUNDS_FAULT))
        return [self.fault_bb, first_bb, stop_bb]

    def bounds_check(self, buffer: str, info: _BufferInfo, linear: ir.Value, node: n.Node, kind: str) -> None:
        """Branch to the fault block unless ``0 <= linear < extent`` (one unsigned compare)."""
        b = self.builder
        if info.extent is None:
            raise InternalError(f"no extent for bounds-checked buffer {buffer!r}", node.loc)
        if self.fault_bb is None:
            self.fault_bb = self.new_block("bounds_fault")
            with b.goto_block(self.fault_bb):
                self.fault_phis = (b.phi(I64, name="fault_site"), b.phi(I64, name="fault_index"),
                                   b.phi(I64, name="fault_extent"))
        assert self.fault_phis is not None
        space = "global" if self.kernel.param(buffer) is not None else "shared"
        decl = self.kernel.buffer(buffer)
        self.sites.append(CheckSite(buffer, kind, space, decl is not None and decl.shape is None, node.loc))
        ok = b.icmp_unsigned("<", linear, info.extent)
        here = b.block
        inside = self.new_block("in_bounds")
        b.cbranch(ok, inside, self.fault_bb)
        site, index, extent = self.fault_phis
        site.add_incoming(ir.Constant(I64, len(self.sites)), here)
        index.add_incoming(linear, here)
        extent.add_incoming(info.extent, here)
        b.position_at_end(inside)

    def coarse_count(self, d: int) -> ir.Value:
        """Blocks (coarse blocks, for a coarsened kernel) along dimension ``d``, as i64."""
        b = self.builder
        g = b.zext(self.grid_dim[d], I64)
        f = self.kernel.coarsen[d]
        if f == 1:
            return g
        return b.udiv(b.add(g, ir.Constant(I64, f - 1)), ir.Constant(I64, f))

    def emit_range_entry(self) -> None:
        """``K_blocks(first, last, ...)``: K_worker on a counter of its own, in one chunk."""
        fn = self.range_fn
        fn.attributes.add("nounwind")
        for arg, name in zip(fn.args, LAUNCH_PARAMS[:2] + tuple(self.rest_names)):
            arg.name = name
        for arg, mine in zip(fn.args[2:], self.fn.args[3:]):
            for attribute in mine.attributes:
                arg.add_attribute(attribute)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        first, last = fn.args[0], fn.args[1]
        counter = b.alloca(I64, name="next")
        counter.type = PTR
        b.store(first, counter)
        size = b.sub(last, first)
        chunk = b.select(b.icmp_signed(">", size, ir.Constant(I64, 0)), size, ir.Constant(I64, 1))
        b.ret(b.call(self.fn, [counter, last, chunk] + list(fn.args[2:])))

    def allocate_scratch(self) -> list[ir.Value]:
        """Pointers of the shared/local buffers; returns the malloc'ed ones (to check and free).

        Constant-size buffers go on the stack while they fit in ``STACK_SCRATCH_LIMIT`` (LLVM can
        then keep small ones in registers); the others get one malloc each, sized from the
        launch's block shape. Every ``extern __shared__`` array starts at the same address, as in
        CUDA: they share one allocation of the launch's dynamic byte count.
        """
        b = self.builder
        heap: list[ir.Value] = []
        on_stack = 0
        extern_base: ir.Value | None = None
        for buf in self.kernel.buffers:
            if buf.space not in SCRATCH_SPACES:
                continue
            size = buf.elem.itemsize
            if buf.shape is None:
                dims: list[ir.Value] = [b.udiv(self.shmem, ir.Constant(I64, size))]
                if extern_base is None:
                    extern_base = self.malloc(self.shmem, buf.name)
                    heap.append(extern_base)
                self.buffers[buf.name] = _BufferInfo(extern_base, buf.elem, dims, dims[0])
                continue
            dims = [self.extent(d) for d in buf.shape]
            if all(isinstance(d, ir.Constant) for d in dims):
                count = math.prod(int(d.constant) for d in dims)
                if on_stack + count * size <= STACK_SCRATCH_LIMIT:
                    on_stack += count * size
                    ptr = self.entry_alloca(ir.ArrayType(memory_type(buf.elem), max(count, 1)), buf.name, _LINE)
                    self.buffers[buf.name] = _BufferInfo(ptr, buf.elem, dims, ir.Constant(I64, count))
                    continue
            count = dims[0]
            for d in dims[1:]:
                count = b.mul(count, d)
            ptr = self.malloc(b.mul(count, ir.Constant(I64, size)), buf.name)
            heap.append(ptr)
            self.buffers[buf.name] = _BufferInfo(ptr, buf.elem, dims, count)
        for name in self.abi.sliced:  # checked per slice: the extent of one slice
            info = self.buffers[name]
            if len(info.dims) > 1:
                extent = info.dims[1]
                for d in info.dims[2:]:
                    extent = b.mul(extent, d)
                info.extent = extent
        return heap

    def malloc(self, nbytes: ir.Value, name: str) -> ir.Value:
        """``malloc`` of ``nbytes`` rounded up to a cache line, plus one (never a 0-byte request)."""
        b = self.builder
        fn = self.llmod.globals.get("malloc")
        if fn is None:
            fn = self.declare("malloc", PTR, [I64], pure=False)
            fn.return_value.add_attribute("noalias")
        padded = b.and_(b.add(nbytes, ir.Constant(I64, 2 * _LINE - 1)), ir.Constant(I64, -_LINE))
        return b.call(fn, [padded], name=name)

    def extent(self, e: n.Expr) -> ir.Value:
        """A buffer extent as i64 (constants stay constants, so the size can be static)."""
        if isinstance(e, n.Const):
            return ir.Constant(I64, int(e.value))
        return self.to_i64(self.expr(e), e.type)

    # -- conversions
    def from_abi(self, arg: ir.Value, ty: ScalarType) -> ir.Value:
        if ty.is_bool:
            return self.builder.icmp_unsigned("!=", arg, ir.Constant(I8, 0))
        return arg

    def to_memory(self, v: ir.Value, ty: ScalarType) -> ir.Value:
        return self.builder.zext(v, I8) if ty.is_bool else v

    def from_memory(self, v: ir.Value, ty: ScalarType) -> ir.Value:
        return self.builder.icmp_unsigned("!=", v, ir.Constant(I8, 0)) if ty.is_bool else v

    def to_i64(self, v: ir.Value, ty: ScalarType) -> ir.Value:
        if ty.is_bool:
            return self.builder.zext(v, I64)
        if not ty.is_int:
            raise InternalError(f"index of type {ty} in kernel {self.kernel.name!r}")
        if ty.bits == 64:
            return v
        return self.builder.sext(v, I64) if ty.is_signed else self.builder.zext(v, I64)

    # -- memory
    def address(self, buffer: str, index: tuple[n.Expr, ...], node: n.Node | None = None,
                kind: str = "read") -> tuple[ir.Value, ScalarType]:
        """The address of ``buffer[index]`` (bounds-checked first where the ABI says so)."""
        info = self.buffers.get(buffer)
        if info is None:
            raise InternalError(f"unknown buffer {buffer!r} in kernel {self.kernel.name!r}")
        b = self.builder
        linear = self.index64(index[0])
        for extent, i in zip(info.dims[1:], index[1:]):
            # In-bounds accesses never overflow this arithmetic: nsw helps SCEV see the strides.
            linear = b.add(b.mul(linear, extent, flags=("nsw",)), self.index64(i), flags=("nsw",))
        if buffer in self.abi.sliced and node is not None and len(index) > 1:
            # One slice per sub-block: the index within the slice, against the slice's size.
            within = self.index64(index[1])
            for extent, i in zip(info.dims[2:], index[2:]):
                within = b.add(b.mul(within, extent, flags=("nsw",)), self.index64(i), flags=("nsw",))
            self.bounds_check(buffer, info, within, node, kind)
        elif buffer in self.abi.checked and node is not None and not _within(index, info.extent):
            self.bounds_check(buffer, info, linear, node, kind)
        ptr = b.gep(info.base, [linear], inbounds=True, source_etype=memory_type(info.elem))
        return ptr, info.elem

    def index64(self, e: n.Expr) -> ir.Value:
        """An index expression as i64, its signed ``int``/``long long`` arithmetic done in 64 bits.

        C leaves signed overflow undefined, so wherever C defines ``(y + dy) * width + x`` its
        value is the exact integer one, which 64-bit arithmetic computes (``nsw``: it cannot
        overflow either). Computed in 32 bits and sign-extended, the same index would hide its
        affine form from SCEV, which then needs run-time no-wrap checks to vectorize the thread
        loop (and gives up beyond a few). Unsigned arithmetic wraps in C: it stays as written.
        """
        t = e.type
        b = self.builder
        if isinstance(e, n.Binary) and e.op in ("add", "sub", "mul") and t.is_signed and t.bits in (32, 64):
            x, y = self.index64(e.a), self.index64(e.b)
            op = {"add": b.add, "sub": b.sub, "mul": b.mul}[e.op]
            return op(x, y, flags=("nsw",))
        if isinstance(e, n.Cast) and e.to.is_signed and e.to.bits == 64 and e.x.type.is_signed and e.x.type.is_int:
            return self.index64(e.x)  # (long long) of signed arithmetic: the same exact value
        return self.to_i64(self.expr(e), t)

    # -- statements
    def block(self, stmts: tuple[n.Stmt, ...]) -> None:
        for s in stmts:
            self.visit(s)

    def visit_Decl(self, s: n.Decl) -> None:
        ptr = self.slot(s.name, s.vtype)
        if s.init is not None:
            self.builder.store(self.expr(s.init), ptr)

    def visit_Assign(self, s: n.Assign) -> None:
        ty = self.var_types.get(s.name)
        if ty is None:
            raise InternalError(f"assignment to undeclared {s.name!r} in kernel {self.kernel.name!r}", s.loc)
        value = self.expr(s.value)
        self.builder.store(value, self.slot(s.name, ty))

    def visit_Store(self, s: n.Store) -> None:
        ptr, elem = self.address(s.buffer, s.index, s, "write")
        value = self.expr(s.value)
        self.builder.store(self.to_memory(value, elem), ptr, align=max(elem.itemsize, 1))

    def visit_AtomicRMW(self, s: n.AtomicRMW) -> None:
        ptr, elem = self.address(s.buffer, s.index, s, "atomic")
        value = self.expr(s.value)
        old = self.atomic(s, ptr, elem, value)
        if s.dest is not None:
            self.builder.store(old, self.slot(s.dest, elem))

    def atomic(self, s: n.AtomicRMW, ptr: ir.Value, elem: ScalarType, value: ir.Value) -> ir.Value:
        b = self.builder
        op = s.op
        mem_value = self.to_memory(value, elem)
        if op == "cas":
            assert s.compare is not None
            compare = self.to_memory(self.expr(s.compare), elem)
            it = int_type_of_width(elem)
            if elem.is_float:  # cmpxchg compares bits; CUDA's atomicCAS does too
                compare, mem_value = b.bitcast(compare, it), b.bitcast(mem_value, it)
            pair = b.cmpxchg(ptr, compare, mem_value, "seq_cst", "seq_cst")
            old = b.extract_value(pair, 0)
            if elem.is_float:
                old = b.bitcast(old, memory_type(elem))
            return self.from_memory(old, elem)
        rmw = _rmw_operation(op, elem)
        if rmw is not None:
            return self.from_memory(b.atomic_rmw(rmw, ptr, mem_value, "seq_cst"), elem)
        return self.atomic_loop(ptr, elem, lambda old: self.combine(op, old, value, elem))

    def combine(self, op: str, old: ir.Value, value: ir.Value, elem: ScalarType) -> ir.Value:
        """The value stored by atomic ``op`` given the ``old`` one (CUDA's definitions)."""
        b = self.builder
        if op in ("inc", "dec"):
            one = ir.Constant(old.type, 1)
            zero = ir.Constant(old.type, 0)
            if op == "inc":  # old >= limit ? 0 : old + 1
                return b.select(self.compare("ge", old, value, elem), zero, b.add(old, one))
            # (old == 0 || old > limit) ? limit : old - 1
            wrap = b.or_(b.icmp_unsigned("==", old, zero), self.compare("gt", old, value, elem))
            return b.select(wrap, value, b.sub(old, one))
        if op in ("min", "max") and elem.is_float:
            # NaN-propagating, like the emulator's np.minimum / np.maximum.
            nan = b.fcmp_unordered("uno", old, value)
            better = b.fcmp_ordered("<" if op == "min" else ">", value, old)
            return b.select(nan, b.fadd(old, value), b.select(better, value, old))
        raise InternalError(f"atomic.{op} on {elem} in kernel {self.kernel.name!r}")

    def atomic_loop(self, ptr: ir.Value, elem: ScalarType, combine) -> ir.Value:
        """A compare-and-swap loop applying ``combine`` atomically; returns the old value."""
        b = self.builder
        it = int_type_of_width(elem)
        mt = memory_type(elem)
        initial = b.load_atomic(ptr, "monotonic", max(elem.itemsize, 1), typ=it)
        before = b.block
        loop = self.new_block("atomic_retry")
        done = self.new_block("atomic_done")
        b.branch(loop)
        b.position_at_end(loop)
        old_bits = b.phi(it)
        old_bits.add_incoming(initial, before)
        old = self.from_memory(b.bitcast(old_bits, mt) if elem.is_float else old_bits, elem)
        new = self.to_memory(combine(old), elem)
        new_bits = b.bitcast(new, it) if elem.is_float else new
        pair = b.cmpxchg(ptr, old_bits, new_bits, "seq_cst", "seq_cst")
        old_bits.add_incoming(b.extract_value(pair, 0), b.block)
        b.cbranch(b.extract_value(pair, 1), done, loop)
        b.position_at_end(done)
        return old

    def visit_If(self, s: n.If) -> None:
        b = self.builder
        cond = self.expr(s.cond)
        then_bb = self.new_block("then")
        merge = self.new_block("endif")
        else_bb = self.new_block("else") if s.orelse else merge
        b.cbranch(cond, then_bb, else_bb)
        b.position_at_end(then_bb)
        self.block(s.then)
        b.branch(merge)
        if s.orelse:
            b.position_at_end(else_bb)
            self.block(s.orelse)
            b.branch(merge)
        b.position_at_end(merge)

    def visit_For(self, s: n.For) -> None:
        b = self.builder
        # stop and step do not change inside the loop (an IR invariant): evaluate them once.
        start, stop, step = self.expr(s.start), self.expr(s.stop), self.expr(s.step)
        var = self.slot(s.var, s.vtype)
        b.store(start, var)
        self.note(s, f"{'thread loop' if s.kind == 'threads' else 'for'} {s.var}")
        prefix = "threads" if s.kind == "threads" else "for"
        header = self.new_block(f"{prefix}.{s.var}")
        body = self.new_block(f"{prefix}.{s.var}.body")
        latch = self.new_block(f"{prefix}.{s.var}.next")
        exit_bb = self.new_block(f"{prefix}.{s.var}.end")
        b.branch(header)
        b.position_at_end(header)
        b.cbranch(self.compare("lt", b.load(var, typ=value_type(s.vtype)), stop, s.vtype), body, exit_bb)
        b.position_at_end(body)
        self.loops.append(_Loop(exit_bb, latch))
        self.block(s.body)
        self.loops.pop()
        b.branch(latch)
        b.position_at_end(latch)
        current = b.load(var, typ=value_type(s.vtype))
        b.store(b.fadd(current, step) if s.vtype.is_float else b.add(current, step), var)
        back = b.branch(header)
        if s.kind == "threads":
            back.set_metadata("llvm.loop", self.no_unroll())
        b.position_at_end(exit_bb)

    def no_unroll(self) -> ir.Value:
        """Loop metadata ``llvm.loop.unroll.disable`` for a thread loop.

        Thread loops are what the loop vectorizer should vectorize (consecutive threads touch
        consecutive elements). With a constant trip count (a specialized block shape), LLVM's
        full unroller would otherwise flatten a short ``tx`` loop *before* vectorization, and the
        vectorizer then vectorizes the enclosing ``ty`` loop instead: strided accesses, gathers
        and scatters (backprop_layerforward: 3x slower). The vectorizer still interleaves.
        """
        hint = self.llmod.add_metadata([ir.MetaDataString(self.llmod, "llvm.loop.unroll.disable")])
        loop_id = _DistinctMD(self.llmod, [], name=str(len(self.llmod.metadata)))
        loop_id.operands = (loop_id, hint)
        return loop_id

    def visit_While(self, s: n.While) -> None:
        b = self.builder
        self.note(s, "while")
        header = self.new_block("while")
        body = self.new_block("while.body")
        update = self.new_block("while.update")
        exit_bb = self.new_block("while.end")
        b.branch(header)
        b.position_at_end(header)
        b.cbranch(self.expr(s.cond), body, exit_bb)
        b.position_at_end(body)
        self.loops.append(_Loop(exit_bb, update))
        self.block(s.body)
        self.loops.pop()
        b.branch(update)
        b.position_at_end(update)
        # The frontend lowers do-while to ``while (true) { body } update { if (!cond) break }``:
        # a break in the update leaves this loop.
        self.loops.append(_Loop(exit_bb, header))
        self.block(s.update)
        self.loops.pop()
        b.branch(header)
        b.position_at_end(exit_bb)

    def visit_Break(self, s: n.Break) -> None:
        self._jump(self.loops[-1].exit)

    def visit_Continue(self, s: n.Continue) -> None:
        self._jump(self.loops[-1].cont)

    def note(self, s: n.Stmt, what: str) -> None:
        """A comment naming the source line of a loop, so the emitted IR can be read."""
        if s.loc is not None:
            self.builder.comment(f"{what} ({s.loc.file}:{s.loc.line})")

    def _jump(self, target: ir.Block) -> None:
        self.builder.branch(target)
        # Statements after a jump are unreachable; they still need a block to go into.
        self.builder.position_at_end(self.new_block("dead"))

    def _not_cpu_form(self, node: n.Node) -> None:
        raise InternalError(f"{type(node).__name__} in CPU-form kernel {self.kernel.name!r}", node.loc)

    visit_Barrier = visit_Shuffle = visit_Vote = visit_Return = visit_ThreadIdx = _not_cpu_form

    def generic_visit(self, node: n.Node) -> None:
        raise InternalError(f"the LLVM backend cannot emit {type(node).__name__}", node.loc)

    # -- expressions
    def expr(self, e: n.Expr) -> ir.Value:
        return self.visit(e)

    def visit_Const(self, e: n.Const) -> ir.Value:
        t = e.ctype
        if t.is_bool:
            return ir.Constant(I1, int(bool(e.value)))
        if t.is_int:
            value = int(e.value)
            if value >= 1 << (t.bits - 1):  # LLVM spells integer constants signed
                value -= 1 << t.bits
            return ir.Constant(value_type(t), value)
        return ir.Constant(value_type(t), float(e.value))

    def visit_Var(self, e: n.Var) -> ir.Value:
        value = self.values.get(e.name)
        if value is not None:
            return value
        return self.builder.load(self.slot(e.name, e.vtype), typ=value_type(e.vtype))

    def visit_BlockIdx(self, e: n.BlockIdx) -> ir.Value:
        return self.block_idx[e.dim]

    def visit_BlockDim(self, e: n.BlockDim) -> ir.Value:
        return self.block_dim[e.dim]

    def visit_GridDim(self, e: n.GridDim) -> ir.Value:
        return self.grid_dim[e.dim]

    def visit_Load(self, e: n.Load) -> ir.Value:
        ptr, elem = self.address(e.buffer, e.index, e, "read")
        value = self.builder.load(ptr, typ=memory_type(elem), align=max(elem.itemsize, 1))
        return self.from_memory(value, elem)

    def visit_Unary(self, e: n.Unary) -> ir.Value:
        b = self.builder
        x = self.expr(e.x)
        if e.op == "neg":
            return b.fneg(x) if e.x.type.is_float else b.neg(x)
        if e.op in ("not", "bnot"):
            return b.not_(x)
        raise InternalError(f"unknown unary operator {e.op!r}", e.loc)

    def visit_Binary(self, e: n.Binary) -> ir.Value:
        if e.op in n.LOGIC_OPS:
            return self.logic(e)
        a = self.expr(e.a)
        b_ = self.expr(e.b)
        ty = e.a.type
        if e.op in n.COMPARE_OPS:
            return self.compare(e.op, a, b_, ty)
        if e.op in ("shl", "shr"):
            return self.shift(e.op, a, b_, ty, e.b.type)
        return self.arith(e.op, a, b_, ty, e)

    def compare(self, op: str, a: ir.Value, b_: ir.Value, ty: ScalarType) -> ir.Value:
        b = self.builder
        if ty.is_float:
            if op == "ne":
                return b.fcmp_unordered("!=", a, b_)  # NaN != x is true in C
            return b.fcmp_ordered(_ICMP[op], a, b_)
        if ty.is_signed:
            return b.icmp_signed(_ICMP[op], a, b_)
        return b.icmp_unsigned(_ICMP[op], a, b_)

    def shift(self, op: str, a: ir.Value, count: ir.Value, ty: ScalarType, count_ty: ScalarType) -> ir.Value:
        b = self.builder
        t = value_type(ty)
        bits = ty.bits
        if count_ty.bits > bits:
            count = b.trunc(count, t)
        elif count_ty.bits < bits:
            count = b.zext(count, t)
        # A count outside [0, bits) is undefined in C; reduce it rather than create poison.
        count = b.and_(count, ir.Constant(t, bits - 1))
        if op == "shl":
            return b.shl(a, count)
        return b.ashr(a, count) if ty.is_signed else b.lshr(a, count)

    def arith(self, op: str, a: ir.Value, b_: ir.Value, ty: ScalarType, e: n.Expr) -> ir.Value:
        b = self.builder
        if ty.is_float:
            fop = {"add": b.fadd, "sub": b.fsub, "mul": b.fmul, "div": b.fdiv, "rem": b.frem}.get(op)
            if fop is None:
                raise InternalError(f"{op} on {ty}", e.loc)
            return fop(a, b_)
        iop = {"add": b.add, "sub": b.sub, "mul": b.mul, "band": b.and_, "bor": b.or_, "bxor": b.xor}.get(op)
        if iop is not None:
            return iop(a, b_)
        if op in ("div", "rem"):
            return self.divide(op, a, b_, ty)
        raise InternalError(f"unknown binary operator {op!r}", e.loc)

    def divide(self, op: str, a: ir.Value, d: ir.Value, ty: ScalarType) -> ir.Value:
        """Integer ``/`` or ``%`` that never traps: a zero divisor (and INT_MIN / -1) divide by 1.

        x / 1 == x and x % 1 == 0 give INT_MIN / -1 == INT_MIN and INT_MIN % -1 == 0, the wrapped
        results; a division by zero is undefined in C, and dividing by 1 keeps the process alive.
        A constant divisor other than 0 and -1 needs no guard.
        """
        b = self.builder
        t = value_type(ty)
        if ty.is_signed:
            instruction = b.sdiv if op == "div" else b.srem
        else:
            instruction = b.udiv if op == "div" else b.urem
        if isinstance(d, ir.Constant) and d.constant not in (0, -1):
            return instruction(a, d)  # a constant divisor that cannot trap: no guard
        bad = b.icmp_unsigned("==", d, ir.Constant(t, 0))
        if ty.is_signed:
            overflow = b.and_(b.icmp_signed("==", d, ir.Constant(t, -1)),
                              b.icmp_signed("==", a, ir.Constant(t, _SIGNED_MIN[ty.bits])))
            bad = b.or_(bad, overflow)
        return instruction(a, b.select(bad, ir.Constant(t, 1), d))

    def logic(self, e: n.Binary) -> ir.Value:
        b = self.builder
        a = self.expr(e.a)
        if not self.risky(e.b):
            rhs = self.expr(e.b)
            return b.and_(a, rhs) if e.op == "land" else b.or_(a, rhs)
        # C's && / ||: evaluate b only when a does not decide.
        start = b.block
        rhs_bb = self.new_block(e.op + ".rhs")
        done = self.new_block(e.op + ".end")
        if e.op == "land":
            b.cbranch(a, rhs_bb, done)
        else:
            b.cbranch(a, done, rhs_bb)
        b.position_at_end(rhs_bb)
        rhs = self.expr(e.b)
        rhs_end = b.block
        b.branch(done)
        b.position_at_end(done)
        phi = b.phi(I1)
        phi.add_incoming(ir.Constant(I1, 0 if e.op == "land" else 1), start)
        phi.add_incoming(rhs, rhs_end)
        return phi

    def visit_Select(self, e: n.Select) -> ir.Value:
        b = self.builder
        cond = self.expr(e.cond)
        if not (self.risky(e.a) or self.risky(e.b)):
            return b.select(cond, self.expr(e.a), self.expr(e.b))
        then_bb = self.new_block("select.true")
        else_bb = self.new_block("select.false")
        done = self.new_block("select.end")
        b.cbranch(cond, then_bb, else_bb)
        b.position_at_end(then_bb)
        a = self.expr(e.a)
        a_end = b.block
        b.branch(done)
        b.position_at_end(else_bb)
        c = self.expr(e.b)
        c_end = b.block
        b.branch(done)
        b.position_at_end(done)
        phi = b.phi(value_type(e.type))
        phi.add_incoming(a, a_end)
        phi.add_incoming(c, c_end)
        return phi

    def risky(self, e: n.Expr) -> bool:
        """Whether evaluating ``e`` when C would not may fault or cost: a load or an integer division."""
        key = id(e)
        cached = self.risky_cache.get(key)
        if cached is None:
            cached = any(isinstance(x, n.Load) or (isinstance(x, n.Binary) and x.op in ("div", "rem")
                                                   and x.type.is_int) for x in walk(e))
            self.risky_cache[key] = cached
        return cached

    def visit_Cast(self, e: n.Cast) -> ir.Value:
        x = self.expr(e.x)
        return self.convert(x, e.x.type, e.to)

    def convert(self, x: ir.Value, src: ScalarType, dst: ScalarType) -> ir.Value:
        b = self.builder
        if src == dst:
            return x
        t = value_type(dst)
        if dst.is_bool:
            if src.is_float:
                return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))  # NaN -> true
            return b.icmp_unsigned("!=", x, ir.Constant(x.type, 0))
        if src.is_bool:
            return b.uitofp(x, t) if dst.is_float else b.zext(x, t)
        if src.is_float and dst.is_float:
            return b.fpext(x, t) if dst.bits > src.bits else b.fptrunc(x, t)
        if dst.is_float:
            return b.sitofp(x, t) if src.is_signed else b.uitofp(x, t)
        if src.is_float:
            # Saturating, NaN -> 0: CUDA's cvt.rzi (and the emulator); never LLVM poison.
            kind = "fptosi" if dst.is_signed else "fptoui"
            fn = self.declare(f"llvm.{kind}.sat.i{dst.bits}.f{src.bits}", t, [x.type])
            return b.call(fn, [x])
        if dst.bits < src.bits:
            return b.trunc(x, t)
        if dst.bits > src.bits:
            return b.sext(x, t) if src.is_signed else b.zext(x, t)
        return x  # same width, other signedness: the same bits

    def visit_Call(self, e: n.Call) -> ir.Value:
        emit = MATH_EMITTERS.get(e.fn)
        if emit is None:
            raise InternalError(f"the LLVM backend has no math function {e.fn!r}", e.loc)
        args = [self.expr(a) for a in e.args]
        return emit(self, args, e.args[0].type)


def _rmw_operation(op: str, elem: ScalarType) -> str | None:
    """The ``atomicrmw`` operation for ``op`` on ``elem``, or None (a cmpxchg loop is needed)."""
    if elem.is_float:
        return {"add": "fadd", "sub": "fsub", "exch": "xchg"}.get(op)
    plain = {"add": "add", "sub": "sub", "exch": "xchg", "and": "and", "or": "or", "xor": "xor"}.get(op)
    if plain is not None:
        return plain
    if op in ("min", "max"):
        return op if elem.is_signed else "u" + op
    if op in ("inc", "dec") and not elem.is_signed and not elem.is_bool:
        # LLVM's uinc_wrap / udec_wrap are exactly CUDA's atomicInc / atomicDec.
        return "uinc_wrap" if op == "inc" else "udec_wrap"
    return None


def _within(index: tuple[n.Expr, ...], extent: ir.Value | None) -> bool:
    """Whether a 1-D index is in ``[0, extent)`` by its type alone (``local[data[i]]`` with
    ``unsigned char`` data and 256 elements): such an access needs no bounds check."""
    if len(index) != 1 or not isinstance(extent, ir.Constant):
        return False
    bounds = _value_range(index[0])
    return bounds is not None and bounds[0] >= 0 and bounds[1] < int(extent.constant)


def _value_range(e: n.Expr) -> tuple[int, int] | None:
    """Bounds of an integer expression from its constants and the types of its casts."""
    t = e.type
    if not (t.is_int or t.is_bool):
        return None
    full = (0, 1) if t.is_bool else ((-(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1) if t.is_signed
                                     else (0, (1 << t.bits) - 1))
    if isinstance(e, n.Const):
        return int(e.value), int(e.value)
    if isinstance(e, n.Cast):
        inner = _value_range(e.x)
        if inner is not None and full[0] <= inner[0] and inner[1] <= full[1]:
            return inner  # a widening conversion keeps the value
    return full


def _const_extent(buf: n.Buffer, d: n.Expr) -> int:
    if not isinstance(d, n.Const):
        raise InternalError(f"module buffer {buf.name!r} has a non-constant extent", buf.loc)
    return int(d.value)


def walk_kernel(kernel: n.Kernel):
    for s in kernel.body:
        yield from walk(s)


def _assigned_names(kernel: n.Kernel) -> set[str]:
    return {node.name for node in walk_kernel(kernel) if isinstance(node, n.Assign)}


def _variable_types(kernel: n.Kernel) -> dict[str, ScalarType]:
    types = {p.name: p.ptype for p in kernel.params if isinstance(p.ptype, ScalarType)}
    for node in walk_kernel(kernel):
        if isinstance(node, n.Decl):
            types[node.name] = node.vtype
        elif isinstance(node, n.For):
            types[node.var] = node.vtype
    return types


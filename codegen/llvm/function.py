"""The LLVM function of one kernel: parameters, scratch buffers (stack or heap), the loop over
blocks, the fault exit, conversions between ABI, memory and register types, addresses and bounds
checks. ``statements`` and ``expressions`` emit the kernel's body into it."""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

from llvmlite import ir

from codegen.llvm.abi import (
    CheckSite, KernelABI, LAUNCH_PARAMS, SCRATCH_SPACES, STATUS_BOUNDS_FAULT, STATUS_OUT_OF_MEMORY,
    WORKER_PARAMS,
)
from codegen.llvm.types import I1, I8, I32, I64, PTR, abi_type, memory_type, value_type

from polypy.errors import InternalError
from polypy.ir import nodes as n
from polypy.ir.queries import local_types, loop_depth
from polypy.ir.types import I64 as IR_I64
from polypy.ir.types import U32 as IR_U32
from polypy.ir.types import PointerType, ScalarType
from polypy.ir.visitor import walk

from codegen.scratch import scratch_dims


# Shared/local buffers of constant size live on the worker's stack up to this many bytes in all
# (worker threads have the platform's default stack, 8 MiB on Linux); larger ones are malloc'ed.
STACK_SCRATCH_LIMIT = 64 * 1024
# Heap scratch is rounded up to, and padded by, one cache line.
_LINE = 64
# A kernel with loops nested deeper than this is compiled without LLVM's optimizations
# (``optnone``): its loop passes take time that grows with the square of the depth or faster
# (LICM: 4 s of CPU for 300 nested loops, minutes for 1,000). Its code stays exact, only slower.
MAX_OPTIMIZED_LOOP_DEPTH = 100



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



class KernelFunction:
    """The function being emitted for one kernel: its state (builder, variables, buffers, loops,
    fault exit) and the helpers the statement and expression emitters share, which it is passed
    to (``codegen.llvm.lower``). ``expr`` lowers an expression (the expression emitter's, set by
    the caller): addresses and the block loop use it."""

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
        if loop_depth(kernel.body) > MAX_OPTIMIZED_LOOP_DEPTH:
            self.fn.attributes.add("noinline")  # optnone requires it
            self.fn.attributes.add("optnone")
        for arg, name in zip(self.fn.args, WORKER_PARAMS[:3] + tuple(self.rest_names)):
            arg.name = name
        self.fn.args[0].add_attribute("noalias")  # the launch's counter: no kernel data
        self.entry = self.fn.append_basic_block("entry")
        self.builder = ir.IRBuilder(self.entry)
        self.slots: dict[str, ir.Value] = {}     # name -> alloca of a scalar variable
        self.values: dict[str, ir.Value] = {}    # name -> SSA value of a never-assigned parameter
        self.buffers: dict[str, _BufferInfo] = {}
        self.loops: list[_Loop] = []
        # Access groups of the enclosing thread loops proved free of cross-lane dependences
        # (``StatementEmitter.parallel_group``): every load and store in them is tagged.
        self.access_groups: list[ir.Value] = []
        # Per enclosing loop, innermost last: whether the code in it is meant to be vectorized (a
        # thread loop, or a short loop fully unrolled in a vectorized one; not a serial loop):
        # the form of the float -> integer conversions (``ExpressionEmitter.convert``).
        self.vector_context: list[bool] = []
        self.expr: Callable[[n.Expr], ir.Value] = _unset
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

    def tag_access(self, instr: ir.Instruction) -> None:
        """Put a load or store in the access groups of the parallel thread loops around it."""
        if self.access_groups:
            groups = self.access_groups
            instr.set_metadata("llvm.access.group", groups[0] if len(groups) == 1 else
                               ir.values.MDValue(self.llmod, list(groups), name=str(len(self.llmod.metadata))))

    # -- the function
    def emit(self, statements: Callable[[tuple[n.Stmt, ...]], None]) -> ir.Function:
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
        statements(k.body)
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
        part = decl.part if decl is not None else None
        self.sites.append(CheckSite(buffer if part is None else decl.symbol, kind, space,  # type: ignore[union-attr, arg-type]
                                    decl is not None and decl.shape is None, node.loc, part,
                                    0 if decl is None else decl.elem.itemsize))
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
                total = b.udiv(self.shmem, ir.Constant(I64, size))
                if extern_base is None:
                    nbytes = self.shmem
                    if buf.part is not None:  # q parts of ceil(N / q) elements
                        nbytes = b.add(nbytes, ir.Constant(I64, buf.part[1] * size))
                    extern_base = self.malloc(nbytes, buf.name)
                    heap.append(extern_base)
                if buf.part is None:
                    self.buffers[buf.name] = _BufferInfo(extern_base, buf.elem, [total], total)
                    continue
                p, q = buf.part
                count = b.udiv(b.add(total, ir.Constant(I64, q - 1 - p)), ir.Constant(I64, q))  # ceil((N - p) / q)
                start = b.mul(b.udiv(b.add(total, ir.Constant(I64, q - 1)), ir.Constant(I64, q)), ir.Constant(I64, p))
                base = b.gep(extern_base, [b.mul(start, ir.Constant(I64, size))], inbounds=True, source_etype=I8)
                self.buffers[buf.name] = _BufferInfo(base, buf.elem, [count], count)
                continue
            dims = [self.extent(d) for d in buf.shape]
            padded = scratch_dims(buf)
            if padded is not None and buf.name not in self.abi.checked:  # checked: against the IR's count
                dims = [ir.Constant(I64, d) for d in padded]
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
    types.update(local_types(kernel.body))
    return types


def _unset(e: n.Expr) -> ir.Value:
    raise InternalError("the kernel function has no expression emitter", e.loc)

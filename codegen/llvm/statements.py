"""Statements -> LLVM IR: locals, stores, atomics (``atomicrmw`` or a ``cmpxchg`` loop), if,
loops (with their loop metadata), break/continue."""
from __future__ import annotations

from llvmlite import ir

from codegen.lanes import scatter_loop, vector_loop
from codegen.llvm.function import _Loop
from codegen.llvm.printing import emit_assert_fail, emit_print
from codegen.llvm.types import PTR, int_type_of_width, memory_type, value_type

from polypy.errors import InternalError, UserError
from polypy.ir import nodes as n
from polypy.ir.queries import tree_size
from polypy.ir.visitor import Visitor, walk
from polypy.ir.types import ScalarType

# Loops whose bodies hold more IR nodes than this are not offered to LLVM's loop vectorizer:
# its cost model takes time quadratic in the loop's instructions (a 12,000-factor product in one
# thread loop: 17 s of the O3 pipeline, 0.8 s without it), and a body that long gains little.
MAX_VECTORIZED_NODES = 10_000


class _DistinctMD(ir.values.MDValue):
    """A ``distinct`` metadata node (a loop ID: its first operand is itself)."""

    def descr(self, buf):
        buf.append("distinct ")
        super().descr(buf)



class StatementEmitter(Visitor):
    """Statements of one kernel into LLVM IR: ``fn`` is the function being emitted (its state and
    helpers, ``codegen.llvm.function.KernelFunction``), ``exprs`` lowers expressions into it."""

    def __init__(self, fn, exprs):
        self.fn = fn
        self.exprs = exprs

    # -- statements
    def block(self, stmts: tuple[n.Stmt, ...]) -> None:
        for s in stmts:
            self.visit(s)

    def visit_Decl(self, s: n.Decl) -> None:
        ptr = self.fn.slot(s.name, s.vtype)
        if s.init is not None:
            self.fn.builder.store(self.exprs.expr(s.init), ptr)

    def visit_Assign(self, s: n.Assign) -> None:
        ty = self.fn.var_types.get(s.name)
        if ty is None:
            raise InternalError(f"assignment to undeclared {s.name!r} in kernel {self.fn.kernel.name!r}", s.loc)
        value = self.exprs.expr(s.value)
        if s.name in self.fn.kernel.order_free_sums and isinstance(value, ir.Instruction) and value.opname == "fadd":
            # A sum of atomic adds (``gpu2cpu.sum_uniform_atomics``): CUDA gives them no order, so
            # the loop vectorizer may reassociate it into a vector reduction.
            value.flags.append("reassoc")
        self.fn.builder.store(value, self.fn.slot(s.name, ty))

    def visit_Store(self, s: n.Store) -> None:
        ptr, elem = self.fn.address(s.buffer, s.index, s, "write")
        value = self.exprs.expr(s.value)
        self.fn.tag_access(self.fn.builder.store(self.fn.to_memory(value, elem), ptr, align=max(elem.itemsize, 1)))

    def visit_Print(self, s: n.Print) -> None:
        emit_print(self.fn, s)

    def visit_Launch(self, s: n.Launch) -> None:
        raise UserError(f"kernel launches from device code (dynamic parallelism: '{s.kernel}' launched here) are not "
                        "supported by the LLVM backend (polypy.compile); translate the whole program with "
                        "'polypy translate' (C++ and OpenMP)", s.loc)

    def visit_Barrier(self, s: n.Barrier) -> None:
        """Only a grid barrier is left in the CPU form (``grid.sync()``): not done by this backend."""
        raise UserError("grid.sync() (a cooperative launch) is not supported by the LLVM backend (polypy.compile); "
                        "translate the program with 'polypy translate' (C++ and OpenMP) or run it with "
                        "'polypy run --emulate'", s.loc)

    def visit_AssertFail(self, s: n.AssertFail) -> None:
        emit_assert_fail(self.fn, s)

    def visit_Fence(self, s: n.Fence) -> None:
        """A sequentially consistent fence (the atomics are seq_cst already: see ``n.Fence``)."""
        self.fn.builder.fence("seq_cst")

    def visit_Prefetch(self, s: n.Prefetch) -> None:
        """``llvm.prefetch`` (read, high locality, data cache) of the element's address, which may
        lie outside the buffer: no bounds check, no ``inbounds``."""
        info = self.fn.buffers.get(s.buffer)
        if info is None:
            raise InternalError(f"unknown buffer {s.buffer!r} in kernel {self.fn.kernel.name!r}")
        b = self.fn.builder
        linear = self.fn.to_i64(self.exprs.expr(s.index[0]), s.index[0].type)
        for extent, i in zip(info.dims[1:], s.index[1:]):
            linear = b.add(b.mul(linear, extent), self.fn.to_i64(self.exprs.expr(i), i.type))
        ptr = b.gep(info.base, [linear], source_etype=memory_type(info.elem))
        i32 = ir.IntType(32)
        fn = self.fn.declare("llvm.prefetch.p0", ir.VoidType(), [PTR, i32, i32, i32])
        b.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])

    def visit_AtomicRMW(self, s: n.AtomicRMW) -> None:
        ptr, elem = self.fn.address(s.buffer, s.index, s, "atomic")
        value = self.exprs.expr(s.value)
        old = self.atomic(s, ptr, elem, value)
        if s.dest is not None:
            self.fn.builder.store(old, self.fn.slot(s.dest, elem))

    def atomic(self, s: n.AtomicRMW, ptr: ir.Value, elem: ScalarType, value: ir.Value) -> ir.Value:
        b = self.fn.builder
        op = s.op
        mem_value = self.fn.to_memory(value, elem)
        if op == "cas":
            assert s.compare is not None
            compare = self.fn.to_memory(self.exprs.expr(s.compare), elem)
            it = int_type_of_width(elem)
            if elem.is_float:  # cmpxchg compares bits; CUDA's atomicCAS does too
                compare, mem_value = b.bitcast(compare, it), b.bitcast(mem_value, it)
            pair = b.cmpxchg(ptr, compare, mem_value, "seq_cst", "seq_cst")
            old = b.extract_value(pair, 0)
            if elem.is_float:
                old = b.bitcast(old, memory_type(elem))
            return self.fn.from_memory(old, elem)
        rmw = _rmw_operation(op, elem)
        if rmw is not None:
            return self.fn.from_memory(b.atomic_rmw(rmw, ptr, mem_value, "seq_cst"), elem)
        return self.atomic_loop(ptr, elem, lambda old: self.combine(op, old, value, elem))

    def combine(self, op: str, old: ir.Value, value: ir.Value, elem: ScalarType) -> ir.Value:
        """The value stored by atomic ``op`` given the ``old`` one (CUDA's definitions)."""
        b = self.fn.builder
        if op in ("inc", "dec"):
            one = ir.Constant(old.type, 1)
            zero = ir.Constant(old.type, 0)
            if op == "inc":  # old >= limit ? 0 : old + 1
                return b.select(self.exprs.compare("ge", old, value, elem), zero, b.add(old, one))
            # (old == 0 || old > limit) ? limit : old - 1
            wrap = b.or_(b.icmp_unsigned("==", old, zero), self.exprs.compare("gt", old, value, elem))
            return b.select(wrap, value, b.sub(old, one))
        if op in ("min", "max") and elem.is_float:
            # NaN-propagating, like the emulator's np.minimum / np.maximum.
            nan = b.fcmp_unordered("uno", old, value)
            better = b.fcmp_ordered("<" if op == "min" else ">", value, old)
            return b.select(nan, b.fadd(old, value), b.select(better, value, old))
        raise InternalError(f"atomic.{op} on {elem} in kernel {self.fn.kernel.name!r}")

    def atomic_loop(self, ptr: ir.Value, elem: ScalarType, combine) -> ir.Value:
        """A compare-and-swap loop applying ``combine`` atomically; returns the old value."""
        b = self.fn.builder
        it = int_type_of_width(elem)
        mt = memory_type(elem)
        initial = b.load_atomic(ptr, "monotonic", max(elem.itemsize, 1), typ=it)
        before = b.block
        loop = self.fn.new_block("atomic_retry")
        done = self.fn.new_block("atomic_done")
        b.branch(loop)
        b.position_at_end(loop)
        old_bits = b.phi(it)
        old_bits.add_incoming(initial, before)
        old = self.fn.from_memory(b.bitcast(old_bits, mt) if elem.is_float else old_bits, elem)
        new = self.fn.to_memory(combine(old), elem)
        new_bits = b.bitcast(new, it) if elem.is_float else new
        pair = b.cmpxchg(ptr, old_bits, new_bits, "seq_cst", "seq_cst")
        old_bits.add_incoming(b.extract_value(pair, 0), b.block)
        b.cbranch(b.extract_value(pair, 1), done, loop)
        b.position_at_end(done)
        return old

    def visit_If(self, s: n.If) -> None:
        b = self.fn.builder
        cond = self.exprs.expr(s.cond)
        then_bb = self.fn.new_block("then")
        merge = self.fn.new_block("endif")
        else_bb = self.fn.new_block("else") if s.orelse else merge
        b.cbranch(cond, then_bb, else_bb)
        b.position_at_end(then_bb)
        ranges = self.exprs.float_ranges  # what the condition says holds in each branch
        with ranges.assuming(s.cond, True, s.then):
            self.block(s.then)
        b.branch(merge)
        if s.orelse:
            b.position_at_end(else_bb)
            with ranges.assuming(s.cond, False, s.orelse):
                self.block(s.orelse)
            b.branch(merge)
        b.position_at_end(merge)

    def visit_For(self, s: n.For) -> None:
        b = self.fn.builder
        # stop and step do not change inside the loop (an IR invariant): evaluate them once.
        start, stop, step = self.exprs.expr(s.start), self.exprs.expr(s.stop), self.exprs.expr(s.step)
        var = self.fn.slot(s.var, s.vtype)
        b.store(start, var)
        self.note(s, f"{'thread loop' if s.kind == 'threads' else 'for'} {s.var}")
        prefix = "threads" if s.kind == "threads" else "for"
        header = self.fn.new_block(f"{prefix}.{s.var}")
        body = self.fn.new_block(f"{prefix}.{s.var}.body")
        latch = self.fn.new_block(f"{prefix}.{s.var}.next")
        exit_bb = self.fn.new_block(f"{prefix}.{s.var}.end")
        b.branch(header)
        b.position_at_end(header)
        b.cbranch(self.exprs.compare("lt", b.load(var, typ=value_type(s.vtype)), stop, s.vtype), body, exit_bb)
        b.position_at_end(body)
        self.fn.loops.append(_Loop(exit_bb, latch))
        group = self.parallel_group(s) if s.kind == "threads" else None
        if group is not None:
            self.fn.access_groups.append(group)
        unrolled = bool(self.fn.access_groups) and _short(s) and self.fn.vector_context[-1:] == [True]
        self.fn.vector_context.append(s.kind == "threads" or unrolled)
        self.block(s.body)
        self.fn.vector_context.pop()
        if group is not None:
            self.fn.access_groups.pop()
        self.fn.loops.pop()
        b.branch(latch)
        b.position_at_end(latch)
        current = b.load(var, typ=value_type(s.vtype))
        b.store(b.fadd(current, step) if s.vtype.is_float else b.add(current, step), var)
        back = b.branch(header)
        huge = sum(tree_size(x) for x in s.body) > MAX_VECTORIZED_NODES
        if s.kind == "threads":
            back.set_metadata("llvm.loop", self.no_unroll(group, count=4 if group is None and scatter_loop(s) else None,
                                                          vectorize=not (huge or wraps_by_power_of_two(s))))
        elif self.fn.access_groups and _short(s):
            back.set_metadata("llvm.loop", self.full_unroll())
        elif huge or wraps_by_power_of_two(s):
            back.set_metadata("llvm.loop", self.loop_hints([]))
        b.position_at_end(exit_bb)

    def parallel_group(self, s: n.For) -> ir.Value | None:
        """An access group for the thread loop ``s`` when its iterations provably touch different
        elements (``codegen.lanes.vector_loop``, what gives ``#pragma omp simd`` in C): its
        loads and stores are tagged with it and the loop is marked ``llvm.loop.parallel_accesses``,
        so the vectorizer needs no dependence analysis or run-time alias checks. None otherwise."""
        if vector_loop(self.fn.kernel, s) is None:
            return None
        return _DistinctMD(self.fn.llmod, [], name=str(len(self.fn.llmod.metadata)))

    def full_unroll(self) -> ir.Value:
        """Loop metadata ``llvm.loop.unroll.full`` for a short serial loop inside a vector thread
        loop: the loop vectorizer only vectorizes innermost loops, so the thread loop around it
        vectorizes once it is unrolled, which LLVM's size threshold would refuse to a jammed body
        (``polypy.passes.jam_threads``: matmul_tiled's four rows of 16 products, 8x slower as
        scalar code)."""
        hint = self.fn.llmod.add_metadata([ir.MetaDataString(self.fn.llmod, "llvm.loop.unroll.full")])
        loop_id = _DistinctMD(self.fn.llmod, [], name=str(len(self.fn.llmod.metadata)))
        loop_id.operands = (loop_id, hint)
        return loop_id

    def no_unroll(self, group: ir.Value | None = None, count: int | None = None,
                  vectorize: bool = True) -> ir.Value:
        """Loop metadata ``llvm.loop.unroll.disable`` for a thread loop (``llvm.loop.unroll.count``
        ``count`` instead for a loop that scatters, ``codegen.lanes.scatter_loop``).

        Thread loops are what the loop vectorizer should vectorize (consecutive threads touch
        consecutive elements). With a constant trip count (a specialized block shape), LLVM's
        full unroller would otherwise flatten a short ``tx`` loop *before* vectorization, and the
        vectorizer then vectorizes the enclosing ``ty`` loop instead: strided accesses, gathers
        and scatters (backprop_layerforward: 3x slower). The vectorizer still interleaves.
        """
        if count is not None:
            hint = self.fn.llmod.add_metadata([ir.MetaDataString(self.fn.llmod, "llvm.loop.unroll.count"),
                                            ir.Constant(ir.IntType(32), count)])
        else:
            hint = self.fn.llmod.add_metadata([ir.MetaDataString(self.fn.llmod, "llvm.loop.unroll.disable")])
        loop_id = _DistinctMD(self.fn.llmod, [], name=str(len(self.fn.llmod.metadata)))
        loop_id.operands = (loop_id, hint) if vectorize else (loop_id, hint, self.no_vectorize())
        if group is not None:  # the loop's accesses carry no cross-iteration dependence
            # A node of its own (add_metadata would hand back an earlier loop's: access groups
            # have no operands, so they all compare equal).
            parallel = ir.values.MDValue(self.fn.llmod, [ir.MetaDataString(self.fn.llmod, "llvm.loop.parallel_accesses"),
                                                      group], name=str(len(self.fn.llmod.metadata)))
            loop_id.operands = (*loop_id.operands, parallel)
        return loop_id

    def no_vectorize(self) -> ir.Value:
        """The hint ``llvm.loop.vectorize.enable`` false (see ``wraps_by_power_of_two``)."""
        return self.fn.llmod.add_metadata([ir.MetaDataString(self.fn.llmod, "llvm.loop.vectorize.enable"),
                                        ir.Constant(ir.IntType(1), 0)])

    def loop_hints(self, hints: list[ir.Value]) -> ir.Value:
        """A loop id holding ``hints`` and the no-vectorize hint."""
        loop_id = _DistinctMD(self.fn.llmod, [], name=str(len(self.fn.llmod.metadata)))
        loop_id.operands = (loop_id, *hints, self.no_vectorize())
        return loop_id

    def visit_While(self, s: n.While) -> None:
        b = self.fn.builder
        self.note(s, "while")
        header = self.fn.new_block("while")
        body = self.fn.new_block("while.body")
        update = self.fn.new_block("while.update")
        exit_bb = self.fn.new_block("while.end")
        b.branch(header)
        b.position_at_end(header)
        b.cbranch(self.exprs.expr(s.cond), body, exit_bb)
        b.position_at_end(body)
        self.fn.loops.append(_Loop(exit_bb, update))
        self.fn.vector_context.append(False)
        self.block(s.body)
        self.fn.vector_context.pop()
        self.fn.loops.pop()
        b.branch(update)
        b.position_at_end(update)
        # The frontend lowers do-while to ``while (true) { body } update { if (!cond) break }``:
        # a break in the update leaves this loop.
        self.fn.loops.append(_Loop(exit_bb, header))
        self.block(s.update)
        self.fn.loops.pop()
        back = b.branch(header)
        if wraps_by_power_of_two(s):
            back.set_metadata("llvm.loop", self.loop_hints([]))
        b.position_at_end(exit_bb)

    def visit_Break(self, s: n.Break) -> None:
        self._jump(self.fn.loops[-1].exit)

    def visit_Continue(self, s: n.Continue) -> None:
        self._jump(self.fn.loops[-1].cont)

    def note(self, s: n.Stmt, what: str) -> None:
        """A comment naming the source line of a loop, so the emitted IR can be read."""
        if s.loc is not None:
            self.fn.builder.comment(f"{what} ({s.loc.file}:{s.loc.line})")

    def _jump(self, target: ir.Block) -> None:
        self.fn.builder.branch(target)
        # Statements after a jump are unreachable; they still need a block to go into.
        self.fn.builder.position_at_end(self.fn.new_block("dead"))

    def _not_cpu_form(self, node: n.Node) -> None:
        raise InternalError(f"{type(node).__name__} in CPU-form kernel {self.fn.kernel.name!r}", node.loc)

    visit_Shuffle = visit_Vote = visit_Return = _not_cpu_form

    def generic_visit(self, node: n.Node) -> None:
        raise InternalError(f"the LLVM backend cannot emit {type(node).__name__}", node.loc)


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


# Serial loops of at most this many iterations inside a vector thread loop are unrolled fully.
SHORT_TRIPS = 32


def wraps_by_power_of_two(loop: n.For | n.While) -> bool:
    """Whether ``loop`` computes an integer modulo a constant power of two of something that
    is not constant (``(tx + 1) % 32``, ``(i + k) & 63``): such loops are not given to LLVM's
    loop vectorizer. LLVM 22.1 (llvmlite 0.50) vectorizes ``out[b * 32 + i] = x[b * 32 + (i + 1) % 32]``
    over ``i < 32`` as if ``(i + 1) % 32`` were ``i + 1`` (the last lane reads ``x[b * 32 + 32]``),
    with or without polypy's loop metadata; scalar code, and GCC's vectors, are right."""
    for x in walk(loop):
        if not (isinstance(x, n.Binary) and x.type.is_int and x.op in ("rem", "band")):
            continue
        for value, other in ((x.b, x.a), (x.a, x.b)):
            if isinstance(value, n.Const) and not isinstance(other, n.Const):
                v = int(value.value)
                if (x.op == "rem" and v > 0 and v & (v - 1) == 0) or (x.op == "band" and v > 0 and v & (v + 1) == 0):
                    return True
    return False


def _short(s: n.For) -> bool:
    """A serial loop with constant bounds and at most ``SHORT_TRIPS`` iterations."""
    if not all(isinstance(e, n.Const) for e in (s.start, s.stop, s.step)) or s.vtype.is_float:
        return False
    start, stop, step = int(s.start.value), int(s.stop.value), int(s.step.value)
    return step > 0 and len(range(start, stop, step)) <= SHORT_TRIPS

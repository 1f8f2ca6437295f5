"""Expressions -> LLVM IR with C semantics (see ``codegen.llvm.lower``): wrapping integers, no
traps on division, ordered float compares, operands that load or divide evaluated only when needed."""
from __future__ import annotations

from llvmlite import ir

from codegen.llvm.mathlib import MATH_EMITTERS
from codegen.llvm.types import I1, memory_type, value_type

from polypy.analysis.float_ranges import FloatRanges
from polypy.errors import InternalError, UserError
from polypy.ir import nodes as n
from polypy.ir.types import ScalarType
from polypy.ir.visitor import Visitor, walk


_SIGNED_MIN = {8: -(1 << 7), 16: -(1 << 15), 32: -(1 << 31), 64: -(1 << 63)}

_ICMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}



class ExpressionEmitter(Visitor):
    """Expressions of one function into LLVM IR: ``fn`` is the function being emitted, the state
    they read and the helpers they use (``codegen.llvm.function.KernelFunction``, or the dispatch
    of ``codegen.llvm.dispatch``: ``builder``, ``new_block``, ``values``, ``slot``, ``grid_dim``,
    ``block_dim``, ``block_idx``, ``declare``, and for loads ``address``, ``from_memory``,
    ``tag_access``)."""

    def __init__(self, fn):
        self.fn = fn
        self.risky_cache: dict[int, bool] = {}
        # The float -> integer conversions that cannot saturate (C's plain fptosi/fptoui).
        kernel = getattr(fn, "kernel", None)
        self.float_ranges = FloatRanges(kernel.body if kernel is not None else (),
                                        tuple(p.name for p in kernel.params) if kernel is not None else ())

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
        value = self.fn.values.get(e.name)
        if value is not None:
            return value
        return self.fn.builder.load(self.fn.slot(e.name, e.vtype), typ=value_type(e.vtype))

    def visit_BlockIdx(self, e: n.BlockIdx) -> ir.Value:
        return self.fn.block_idx[e.dim]

    def visit_BlockDim(self, e: n.BlockDim) -> ir.Value:
        return self.fn.block_dim[e.dim]

    def visit_GridDim(self, e: n.GridDim) -> ir.Value:
        return self.fn.grid_dim[e.dim]

    def visit_Load(self, e: n.Load) -> ir.Value:
        ptr, elem = self.fn.address(e.buffer, e.index, e, "read")
        value = self.fn.builder.load(ptr, typ=memory_type(elem), align=max(elem.itemsize, 1))
        self.fn.tag_access(value)
        return self.fn.from_memory(value, elem)

    def visit_Unary(self, e: n.Unary) -> ir.Value:
        b = self.fn.builder
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
        b = self.fn.builder
        if ty.is_float:
            if op == "ne":
                return b.fcmp_unordered("!=", a, b_)  # NaN != x is true in C
            return b.fcmp_ordered(_ICMP[op], a, b_)
        if ty.is_signed:
            return b.icmp_signed(_ICMP[op], a, b_)
        return b.icmp_unsigned(_ICMP[op], a, b_)

    def shift(self, op: str, a: ir.Value, count: ir.Value, ty: ScalarType, count_ty: ScalarType) -> ir.Value:
        b = self.fn.builder
        t = value_type(ty)
        bits = ty.bits
        # A count outside [0, bits) is undefined in C; the GPU's shl/shr read it as unsigned and
        # clamp it to the width (0, or the sign fill for a signed >>), and programs rely on that
        # (Rodinia's huffman shifts by 32 - bit with bit 0). A constant count below the width
        # is a plain shift.
        if isinstance(count, ir.Constant) and isinstance(count.constant, int) and 0 <= count.constant < bits:
            over = None
        elif not count_ty.is_signed and (1 << count_ty.bits) <= bits:  # a bool count: always in range
            over = None
        else:
            over = b.icmp_unsigned(">=", count, ir.Constant(count.type, bits))
        if count_ty.bits > bits:
            count = b.trunc(count, t)
        elif count_ty.bits < bits:
            count = b.zext(count, t)
        if over is not None and op == "shr" and ty.is_signed:
            return b.ashr(a, b.select(over, ir.Constant(t, bits - 1), count))
        if over is not None:
            count = b.and_(count, ir.Constant(t, bits - 1))  # no poison in the arm not taken
        if op == "shl":
            shifted = b.shl(a, count)
        else:
            shifted = b.ashr(a, count) if ty.is_signed else b.lshr(a, count)
        return shifted if over is None else b.select(over, ir.Constant(t, 0), shifted)

    def arith(self, op: str, a: ir.Value, b_: ir.Value, ty: ScalarType, e: n.Expr) -> ir.Value:
        b = self.fn.builder
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
        b = self.fn.builder
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
        b = self.fn.builder
        a = self.expr(e.a)
        if not self.risky(e.b):
            rhs = self.expr(e.b)
            return b.and_(a, rhs) if e.op == "land" else b.or_(a, rhs)
        # C's && / ||: evaluate b only when a does not decide.
        start = b.block
        rhs_bb = self.fn.new_block(e.op + ".rhs")
        done = self.fn.new_block(e.op + ".end")
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
        b = self.fn.builder
        cond = self.expr(e.cond)
        if not (self.risky(e.a) or self.risky(e.b)):
            return b.select(cond, self.expr(e.a), self.expr(e.b))
        then_bb = self.fn.new_block("select.true")
        else_bb = self.fn.new_block("select.false")
        done = self.fn.new_block("select.end")
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
        if self.float_ranges.exact_conversion(e):  # provably in range, not NaN: no saturation
            t = value_type(e.to)
            b = self.fn.builder
            return b.fptosi(x, t) if e.to.is_signed else b.fptoui(x, t)
        return self.convert(x, e.x.type, e.to)

    def convert(self, x: ir.Value, src: ScalarType, dst: ScalarType) -> ir.Value:
        b = self.fn.builder
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
            if getattr(self.fn, "vector_context", [False])[-1:] == [True]:
                return self.saturating(x, dst)
            # In serial loops and outside loops, scalar code: the intrinsic's x86 code (clamp,
            # convert, one NaN test) has the shorter dependence chain.
            kind = "fptosi" if dst.is_signed else "fptoui"
            fn = self.fn.declare(f"llvm.{kind}.sat.i{dst.bits}.f{src.bits}", t, [x.type])
            return b.call(fn, [x])
        if dst.bits < src.bits:
            return b.trunc(x, t)
        if dst.bits > src.bits:
            return b.sext(x, t) if src.is_signed else b.zext(x, t)
        return x  # same width, other signedness: the same bits

    def saturating(self, x: ir.Value, dst: ScalarType) -> ir.Value:
        """CUDA's cvt.rzi (and the emulator's): truncation, NaN -> 0, the type's bound out of range;
        never LLVM poison. Written as selects around a conversion of an operand in range (the C
        prelude's polypy_cvtv_* form): NaN and operands >= the largest value + 1 (``up``, a power of
        two, exact in either float type) fail one comparison and become 0, the minimum is a select,
        the maximum a select after. ``llvm.fptosi.sat`` computes the same, but LLVM 22 converts its
        vectors one lane at a time on x86 (3.5x a vectorized loop's time, docs/real_programs.md,
        "Vector conversions"); these selects vectorize as masked moves. Written where the code
        is meant to be vectorized (``vector_context``: directly in a thread loop); in scalar code
        the intrinsic's chain is shorter (1.45x faster in a chain of dependent conversions)."""
        b = self.fn.builder
        t = value_type(dst)
        lo = -float(2 ** (dst.bits - 1)) if dst.is_signed else 0.0
        up = float(2 ** (dst.bits - 1 if dst.is_signed else dst.bits))
        ft = x.type
        c = b.select(b.fcmp_ordered("<", x, ir.Constant(ft, up)), x, ir.Constant(ft, 0.0))
        c = b.select(b.fcmp_ordered(">", c, ir.Constant(ft, lo)), c, ir.Constant(ft, lo))
        r = b.fptosi(c, t) if dst.is_signed else b.fptoui(c, t)
        top = ir.Constant(t, (2 ** (dst.bits - 1) if dst.is_signed else 2 ** dst.bits) - 1)
        return b.select(b.fcmp_ordered(">=", x, ir.Constant(ft, up)), top, r)

    def visit_Call(self, e: n.Call) -> ir.Value:
        if e.fn == "texture":
            raise UserError("texture fetches are not supported by the LLVM backend (translate the program to C++: "
                            "polypy translate, or polypy run)", e.loc)
        emit = MATH_EMITTERS.get(e.fn)
        if emit is None:
            raise InternalError(f"the LLVM backend has no math function {e.fn!r}", e.loc)
        args = [self.expr(a) for a in e.args]
        return emit(self.fn, args, e.args[0].type)

    def visit_ThreadIdx(self, e: n.ThreadIdx) -> ir.Value:
        raise InternalError(f"ThreadIdx in CPU-form kernel {self.fn.kernel.name!r}", e.loc)

    def generic_visit(self, node: n.Node) -> None:
        raise InternalError(f"the LLVM backend cannot emit {type(node).__name__}", node.loc)

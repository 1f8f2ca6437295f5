"""The math functions of ``polypy.ir.mathfns``, as LLVM IR, keyed by canonical name.

Each entry takes the emitter's ``MathContext``, the already evaluated LLVM arguments and the IR
type of the first argument, and returns the result. Where an LLVM intrinsic has exactly the C
meaning it is used (``llvm.sqrt``, ``llvm.minnum`` for ``fmin``, ``llvm.round`` for C's
round-half-away ``round``...): the optimizer understands intrinsics (constant folding,
vectorization of the exact ones). ``exp`` is written out inline (``_exp``) so that it
vectorizes, and so is ``tanh`` (``_tanhf``, ``_tanh_f64``). Everything else calls libm by its C name (``sinhf``
for f32, ``sinh`` for f64); the JIT resolves those in the process, where libm is loaded.

No fast-math flags anywhere: results are the IEEE/libm results a C compiler gives at ``-O3``
without ``-ffast-math``.
"""
from __future__ import annotations

from typing import Callable, Protocol

from llvmlite import ir

from codegen.llvm.types import F32, F64, I1, I32, I64, int_type_of_width, value_type
from polypy.ir.mathfns import (EXP_CLAMP_BITS, EXP_INV_STEP, EXP_K_OFFSET, EXP_Q, EXP_SHIFTER, EXP_STEP_HI,
                               EXP_STEP_LO, EXP_TABLE_HI, EXP_TABLE_LO, EXP_TABLE_SIZE, EXPF_CLAMP_BITS, EXPF_LN2,
                               EXPF_LOG2E, EXPF_TAYLOR, TANH_CLAMP_BITS, TANH_SPLIT, TANHF_CLAMP_BITS, TANHF_Q)
from polypy.ir.types import ScalarType


class MathContext(Protocol):
    builder: ir.IRBuilder

    def declare(self, name: str, ret: ir.Type, args: list[ir.Type], *, pure: bool = True) -> ir.Function:
        ...


Emit = Callable[[MathContext, list[ir.Value], ScalarType], ir.Value]


def _suffix(ty: ScalarType) -> str:
    return "f32" if ty.name == "f32" else "f64"


def _intrinsic(base: str) -> Emit:
    """``llvm.<base>.f32`` / ``.f64`` on all arguments (same type as the result)."""

    def emit(cx: MathContext, args: list[ir.Value], ty: ScalarType) -> ir.Value:
        t = value_type(ty)
        fn = cx.declare(f"llvm.{base}.{_suffix(ty)}", t, [t] * len(args))
        return cx.builder.call(fn, args)

    return emit


def _libm(name: str) -> Emit:
    """The C library function: ``name + 'f'`` for f32, ``name`` for f64."""

    def emit(cx: MathContext, args: list[ir.Value], ty: ScalarType) -> ir.Value:
        t = value_type(ty)
        fn = cx.declare(name + ("f" if ty.name == "f32" else ""), t, [t] * len(args))
        return cx.builder.call(fn, args)

    return emit


def _const(ty: ScalarType, value: float) -> ir.Constant:
    return ir.Constant(value_type(ty), value)


def _rsqrt(cx: MathContext, args: list[ir.Value], ty: ScalarType) -> ir.Value:
    # rsqrt is 1/sqrt in the argument's precision: a rounded sqrt, then a rounded division
    # (polypy.ir.mathfns; CUDA's own rsqrtf is not correctly rounded either).
    b = cx.builder
    x = args[0]
    t = value_type(ty)
    sqrt = cx.declare(f"llvm.sqrt.{'f32' if ty.name == 'f32' else 'f64'}", t, [t])
    return b.fdiv(ir.Constant(t, 1.0), b.call(sqrt, [x]))


def _saturate(cx: MathContext, args: list[ir.Value], ty: ScalarType) -> ir.Value:
    # __saturatef: clamp to [0, 1]; NaN gives 0 (ordered compares are false on NaN).
    b = cx.builder
    x = args[0]
    below_one = b.select(b.fcmp_ordered("<", x, _const(ty, 1.0)), x, _const(ty, 1.0))
    return b.select(b.fcmp_ordered(">", x, _const(ty, 0.0)), below_one, _const(ty, 0.0))


def _fmod(cx: MathContext, args: list[ir.Value], ty: ScalarType) -> ir.Value:
    return cx.builder.frem(args[0], args[1])  # LLVM's frem is C's fmod


def _fabs(cx: MathContext, x: ir.Value, ty: ScalarType) -> ir.Value:
    t = value_type(ty)
    return cx.builder.call(cx.declare(f"llvm.fabs.{_suffix(ty)}", t, [t]), [x])


def _isnan(cx: MathContext, args: list[ir.Value], ty: ScalarType) -> ir.Value:
    return cx.builder.fcmp_unordered("uno", args[0], args[0])


def _isinf(cx: MathContext, args: list[ir.Value], ty: ScalarType) -> ir.Value:
    return cx.builder.fcmp_ordered("==", _fabs(cx, args[0], ty), _const(ty, float("inf")))


def _isfinite(cx: MathContext, args: list[ir.Value], ty: ScalarType) -> ir.Value:
    return cx.builder.fcmp_ordered("!=", _fabs(cx, args[0], ty), _const(ty, float("inf")))


def _signbit(cx: MathContext, args: list[ir.Value], ty: ScalarType) -> ir.Value:
    b = cx.builder
    bits = b.bitcast(args[0], int_type_of_width(ty))
    return b.icmp_signed("<", bits, ir.Constant(bits.type, 0))


def _bits_min(b: ir.IRBuilder, value: ir.Value, limit: int) -> ir.Value:
    bound = ir.Constant(value.type, limit)
    return b.select(b.icmp_unsigned("<", value, bound), value, bound)


def _or_nan(b: ir.IRBuilder, result: ir.Value, magnitude: ir.Value, inf_bits: int, nan_bits: int) -> ir.Value:
    """``result`` made a NaN where the argument's ``magnitude`` bits were a NaN's."""
    t = magnitude.type
    nan = b.select(b.icmp_unsigned(">", magnitude, ir.Constant(t, inf_bits)), ir.Constant(t, nan_bits), ir.Constant(t, 0))
    return b.bitcast(b.or_(b.bitcast(result, t), nan), result.type)


def _expf(cx: MathContext, x: ir.Value) -> ir.Value:
    """The C prelude's ``polypy_expf``, operation for operation (no contraction: the same bits)."""
    b = cx.builder
    bits = b.bitcast(x, I32)
    magnitude = b.and_(bits, ir.Constant(I32, 0x7FFFFFFF))
    clamped = b.or_(_bits_min(b, magnitude, EXPF_CLAMP_BITS), b.and_(bits, ir.Constant(I32, 0x80000000)))
    xd = b.fpext(b.bitcast(clamped, F32), F64)
    k = b.call(cx.declare("llvm.rint.f64", F64, [F64]), [b.fmul(xd, ir.Constant(F64, EXPF_LOG2E))])
    exponent = b.add(b.fptosi(k, I32), ir.Constant(I32, 1023))  # k is finite: a NaN was clamped
    scale = b.bitcast(b.shl(b.zext(exponent, I64), ir.Constant(I64, 52)), F64)
    r = b.fsub(xd, b.fmul(k, ir.Constant(F64, EXPF_LN2)))
    coefficients = list(reversed(EXPF_TAYLOR))
    p: ir.Value = ir.Constant(F64, coefficients[0])
    for c in coefficients[1:]:
        p = b.fadd(ir.Constant(F64, c), b.fmul(r, p))
    return _or_nan(b, b.fptrunc(b.fmul(p, scale), F32), magnitude, 0x7F800000, 0x7FC00000)


def _table(cx: MathContext, name: str, values: tuple[float, ...]) -> ir.GlobalVariable:
    module = cx.builder.module
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    ty = ir.ArrayType(F64, len(values))
    table = ir.GlobalVariable(module, ty, name=name)
    table.global_constant = True
    table.linkage = "internal"
    table.initializer = ir.Constant(ty, list(values))
    return table


def _exp_f64(cx: MathContext, x: ir.Value) -> ir.Value:
    """The C prelude's ``polypy_exp``, operation for operation."""
    b = cx.builder
    rint = cx.declare("llvm.rint.f64", F64, [F64])

    def c(v: float) -> ir.Constant:
        return ir.Constant(F64, v)

    def low_bits(v: ir.Value) -> ir.Value:  # the integer v (a double) in the low bits of v + 2^52 + 2^51
        return b.bitcast(b.fadd(v, c(EXP_SHIFTER)), I64)

    bits = b.bitcast(x, I64)
    magnitude = b.and_(bits, ir.Constant(I64, 0x7FFFFFFFFFFFFFFF))
    clamped = b.or_(_bits_min(b, magnitude, EXP_CLAMP_BITS), b.and_(bits, ir.Constant(I64, 0x8000000000000000)))
    xd = b.bitcast(clamped, F64)
    kd = b.call(rint, [b.fmul(xd, c(EXP_INV_STEP))])
    a = b.fsub(xd, b.fmul(kd, c(EXP_STEP_HI)))
    lo = b.fmul(kd, c(EXP_STEP_LO))
    r = b.fsub(a, lo)
    r_lo = b.fsub(b.fsub(a, r), lo)
    coefficients = list(reversed(EXP_Q))
    q: ir.Value = c(coefficients[0])
    for coefficient in coefficients[1:]:
        q = b.fadd(c(coefficient), b.fmul(r, q))
    e = b.fadd(r_lo, b.fadd(r, b.fmul(b.fmul(r, r), q)))
    size = EXP_TABLE_SIZE
    kf = b.call(rint, [b.fsub(b.fmul(kd, c(1.0 / size)), c(EXP_K_OFFSET))])
    j = b.and_(low_bits(b.fsub(kd, b.fmul(kf, c(float(size))))), ir.Constant(I64, size - 1))
    zero = ir.Constant(I64, 0)
    t = b.load(b.gep(_table(cx, "polypy_exp_table_hi", EXP_TABLE_HI), [zero, j], inbounds=True))
    t_lo = b.load(b.gep(_table(cx, "polypy_exp_table_lo", EXP_TABLE_LO), [zero, j], inbounds=True))
    y = b.fadd(t, b.fadd(t_lo, b.fmul(t, e)))
    k1 = b.call(rint, [b.fsub(b.fmul(kf, c(0.5)), c(0.25))])

    def power_of_two(k: ir.Value) -> ir.Value:
        return b.bitcast(b.shl(b.add(low_bits(k), ir.Constant(I64, 1023)), ir.Constant(I64, 52)), F64)

    y = b.fmul(b.fmul(y, power_of_two(k1)), power_of_two(b.fsub(kf, k1)))
    return _or_nan(b, y, magnitude, 0x7FF0000000000000, 0x7FF8000000000000)


def _exp(cx: MathContext, args: list[ir.Value], ty: ScalarType) -> ir.Value:
    """``exp`` written out as the C prelude writes it (``polypy.ir.mathfns``, ``EXPF_*`` and
    ``EXP_*``), so that the loop vectorizer takes it where a call to libm stays a scalar call per
    element; the same bits as the C backend."""
    return _expf(cx, args[0]) if ty.name == "f32" else _exp_f64(cx, args[0])


def _tanhf(cx: MathContext, x: ir.Value) -> ir.Value:
    """The C prelude's ``polypy_tanhf``, operation for operation (``polypy.ir.mathfns``, ``TANHF_*``)."""
    b = cx.builder
    bits = b.bitcast(x, I32)
    magnitude = b.and_(bits, ir.Constant(I32, 0x7FFFFFFF))
    r = b.fmul(ir.Constant(F64, 2.0), b.fpext(b.bitcast(_bits_min(b, magnitude, TANHF_CLAMP_BITS), F32), F64))
    k = b.call(cx.declare("llvm.rint.f64", F64, [F64]), [b.fmul(r, ir.Constant(F64, EXPF_LOG2E))])
    exponent = b.add(b.fptosi(k, I32), ir.Constant(I32, 1023))  # 0 <= k <= 29
    scale = b.bitcast(b.shl(b.zext(exponent, I64), ir.Constant(I64, 52)), F64)
    t = b.fsub(r, b.fmul(k, ir.Constant(F64, EXPF_LN2)))
    coefficients = list(reversed(TANHF_Q))
    q: ir.Value = ir.Constant(F64, coefficients[0])
    for c in coefficients[1:]:
        q = b.fadd(ir.Constant(F64, c), b.fmul(t, q))
    expm1 = b.fadd(b.fmul(b.fadd(t, b.fmul(b.fmul(t, t), q)), scale), b.fsub(scale, ir.Constant(F64, 1.0)))
    y = b.fptrunc(b.fdiv(expm1, b.fadd(expm1, ir.Constant(F64, 2.0))), F32)
    signed = b.bitcast(b.or_(b.bitcast(y, I32), b.and_(bits, ir.Constant(I32, 0x80000000))), F32)
    return _or_nan(b, signed, magnitude, 0x7F800000, 0x7FC00000)


def _tanh_f64(cx: MathContext, x: ir.Value) -> ir.Value:
    """The C prelude's ``polypy_tanh``, operation for operation (``polypy.ir.mathfns``, ``TANH_*``)."""
    b = cx.builder
    rint = cx.declare("llvm.rint.f64", F64, [F64])
    add, sub, mul = b.fadd, b.fsub, b.fmul

    def c(v: float) -> ir.Constant:
        return ir.Constant(F64, v)

    def low_bits(v: ir.Value) -> ir.Value:  # the integer v (a double) in the low bits of v + 2^52 + 2^51
        return b.bitcast(add(v, c(EXP_SHIFTER)), I64)

    def product_error(v: ir.Value, w: ir.Value, p: ir.Value) -> ir.Value:  # v * w - p exactly (Dekker)
        cv, cw = mul(c(TANH_SPLIT), v), mul(c(TANH_SPLIT), w)
        vh, wh = sub(cv, sub(cv, v)), sub(cw, sub(cw, w))
        vl, wl = sub(v, vh), sub(w, wh)
        return add(add(add(sub(mul(vh, wh), p), mul(vh, wl)), mul(vl, wh)), mul(vl, wl))

    bits = b.bitcast(x, I64)
    magnitude = b.and_(bits, ir.Constant(I64, 0x7FFFFFFFFFFFFFFF))
    u = mul(c(2.0), b.bitcast(_bits_min(b, magnitude, TANH_CLAMP_BITS), F64))
    kd = b.call(rint, [mul(u, c(EXP_INV_STEP))])
    ua = sub(u, mul(kd, c(EXP_STEP_HI)))
    ub = mul(kd, c(EXP_STEP_LO))
    r = sub(ua, ub)
    r_lo = sub(sub(ua, r), ub)
    coefficients = list(reversed(EXP_Q))
    q: ir.Value = c(coefficients[0])
    for coefficient in coefficients[1:]:
        q = add(c(coefficient), mul(r, q))
    em_lo = add(r_lo, mul(mul(r, r), q))
    size = EXP_TABLE_SIZE
    kf = b.call(rint, [sub(mul(kd, c(1.0 / size)), c(EXP_K_OFFSET))])
    j = b.and_(low_bits(sub(kd, mul(kf, c(float(size))))), ir.Constant(I64, size - 1))
    zero = ir.Constant(I64, 0)
    t_hi = b.load(b.gep(_table(cx, "polypy_exp_table_hi", EXP_TABLE_HI), [zero, j], inbounds=True))
    t_lo = b.load(b.gep(_table(cx, "polypy_exp_table_lo", EXP_TABLE_LO), [zero, j], inbounds=True))
    s = b.bitcast(b.shl(b.add(low_bits(kf), ir.Constant(I64, 1023)), ir.Constant(I64, 52)), F64)
    big = mul(s, t_hi)
    high = sub(big, c(1.0))
    high_err = sub(sub(big, high), c(1.0))
    p = mul(t_hi, r)
    sp = mul(s, p)
    h = add(high, sp)
    bb = sub(h, high)
    low = add(sub(high, sub(h, bb)), sub(sp, bb))
    small = add(add(product_error(t_hi, r, p), mul(t_hi, em_lo)), mul(t_lo, add(c(1.0), add(r, em_lo))))
    low = add(low, add(high_err, mul(s, small)))
    eh = add(h, low)
    el = sub(low, sub(eh, h))
    d = add(eh, c(2.0))
    bb = sub(d, eh)
    dl = add(add(sub(eh, sub(d, bb)), sub(c(2.0), bb)), el)
    y0 = b.fdiv(eh, d)
    p = mul(y0, d)
    residual = sub(add(sub(sub(eh, p), product_error(y0, d, p)), el), mul(y0, dl))
    y = add(y0, b.fdiv(residual, d))
    signed = b.bitcast(b.or_(b.bitcast(y, I64), b.and_(bits, ir.Constant(I64, 0x8000000000000000))), F64)
    return _or_nan(b, signed, magnitude, 0x7FF0000000000000, 0x7FF8000000000000)


def _tanh(cx: MathContext, args: list[ir.Value], ty: ScalarType) -> ir.Value:
    """``polypy_tanhf`` / ``polypy_tanh`` inline, as the C prelude writes them (they vectorize;
    the same bits as the C backend)."""
    return _tanhf(cx, args[0]) if ty.name == "f32" else _tanh_f64(cx, args[0])


def _int_minmax(which: str) -> Emit:
    def emit(cx: MathContext, args: list[ir.Value], ty: ScalarType) -> ir.Value:
        t = value_type(ty)
        name = ("s" if ty.is_signed else "u") + which
        fn = cx.declare(f"llvm.{name}.i{ty.bits}", t, [t, t])
        return cx.builder.call(fn, args)

    return emit


def _abs(cx: MathContext, args: list[ir.Value], ty: ScalarType) -> ir.Value:
    t = value_type(ty)
    if not ty.is_signed:
        return args[0]
    fn = cx.declare(f"llvm.abs.i{ty.bits}", t, [t, I1])
    return cx.builder.call(fn, [args[0], ir.Constant(I1, 0)])  # abs(INT_MIN) wraps to INT_MIN


def _bitcast(cx: MathContext, args: list[ir.Value], ty: ScalarType) -> ir.Value:
    """The bits as the other kind of the same size (LLVM integers have no sign: ``i32`` for both
    ``i32`` and ``u32``)."""
    target = int_type_of_width(ty) if ty.is_float else (F32 if ty.bits == 32 else F64)
    return cx.builder.bitcast(args[0], target)


MATH_EMITTERS: dict[str, Emit] = {
    "exp": _exp,
    "exp2": _intrinsic("exp2"),
    "exp10": _libm("exp10"),
    "expm1": _libm("expm1"),
    "log": _intrinsic("log"),
    "log2": _intrinsic("log2"),
    "log10": _intrinsic("log10"),
    "log1p": _libm("log1p"),
    "sqrt": _intrinsic("sqrt"),
    "rsqrt": _rsqrt,
    "cbrt": _libm("cbrt"),
    "sin": _intrinsic("sin"),
    "cos": _intrinsic("cos"),
    "tan": _libm("tan"),
    "asin": _libm("asin"),
    "acos": _libm("acos"),
    "atan": _libm("atan"),
    "sinh": _libm("sinh"),
    "cosh": _libm("cosh"),
    "tanh": _tanh,
    "asinh": _libm("asinh"),
    "acosh": _libm("acosh"),
    "atanh": _libm("atanh"),
    "erf": _libm("erf"),
    "erfc": _libm("erfc"),
    "fabs": _intrinsic("fabs"),
    "floor": _intrinsic("floor"),
    "ceil": _intrinsic("ceil"),
    "trunc": _intrinsic("trunc"),
    "round": _intrinsic("round"),  # half away from zero, as C's round
    "rint": _intrinsic("rint"),    # the default rounding mode: to nearest even
    "saturate": _saturate,
    "pow": _intrinsic("pow"),
    "atan2": _libm("atan2"),
    "fmin": _intrinsic("minnum"),  # a NaN operand is ignored, as C's fmin
    "fmax": _intrinsic("maxnum"),
    "fmod": _fmod,
    "hypot": _libm("hypot"),
    "copysign": _intrinsic("copysign"),
    "fdim": _libm("fdim"),
    "fma": _intrinsic("fma"),
    "isnan": _isnan,
    "isinf": _isinf,
    "isfinite": _isfinite,
    "signbit": _signbit,
    "min": _int_minmax("min"),
    "max": _int_minmax("max"),
    "abs": _abs,
    "bitcast": _bitcast,
}

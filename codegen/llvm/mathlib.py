"""The math functions of ``polypy.ir.mathfns``, as LLVM IR, keyed by canonical name.

Each entry takes the emitter's ``MathContext``, the already evaluated LLVM arguments and the IR
type of the first argument, and returns the result. Where an LLVM intrinsic has exactly the C
meaning it is used (``llvm.sqrt``, ``llvm.minnum`` for ``fmin``, ``llvm.round`` for C's
round-half-away ``round``...): the optimizer understands intrinsics (constant folding,
vectorization of the exact ones). f32 ``exp`` is written out inline (``_exp``) so that it
vectorizes. Everything else calls libm by its C name (``tanhf`` for f32,
``tanh`` for f64); the JIT resolves those in the process, where libm is loaded.

No fast-math flags anywhere: results are the IEEE/libm results a C compiler gives at ``-O3``
without ``-ffast-math``.
"""
from __future__ import annotations

from typing import Callable, Protocol

from llvmlite import ir

from codegen.llvm.types import F32, F64, I1, I32, I64, int_type_of_width, value_type
from polypy.ir.mathfns import EXPF_CLAMP_BITS, EXPF_LN2, EXPF_LOG2E, EXPF_TAYLOR
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


def _exp(cx: MathContext, args: list[ir.Value], ty: ScalarType) -> ir.Value:
    """f64: ``llvm.exp``. f32: the branch-free sequence of ``polypy.ir.mathfns`` (``EXPF_*``),
    operation for operation the C prelude's ``polypy_expf`` (no contraction, so the same bits):
    the loop vectorizer takes it where a call to ``expf`` stays a scalar call per element."""
    if ty.name != "f32":
        return _intrinsic("exp")(cx, args, ty)
    b = cx.builder
    bits = b.bitcast(args[0], I32)
    magnitude = b.and_(bits, ir.Constant(I32, 0x7FFFFFFF))
    limit = ir.Constant(I32, EXPF_CLAMP_BITS)
    clamped = b.select(b.icmp_unsigned("<", magnitude, limit), magnitude, limit)
    clamped = b.or_(clamped, b.and_(bits, ir.Constant(I32, 0x80000000)))
    nan = b.icmp_unsigned(">", magnitude, ir.Constant(I32, 0x7F800000))
    clamped = b.or_(clamped, b.select(nan, ir.Constant(I32, 0x7FC00000), ir.Constant(I32, 0)))
    x = b.fpext(b.bitcast(clamped, F32), F64)
    k = b.call(cx.declare("llvm.rint.f64", F64, [F64]), [b.fmul(x, ir.Constant(F64, EXPF_LOG2E))])
    exponent = b.add(b.fptosi(k, I32), ir.Constant(I32, 1023))
    scale = b.bitcast(b.shl(b.zext(exponent, I64), ir.Constant(I64, 52)), F64)
    r = b.fsub(x, b.fmul(k, ir.Constant(F64, EXPF_LN2)))
    coefficients = list(reversed(EXPF_TAYLOR))
    p: ir.Value = ir.Constant(F64, coefficients[0])
    for c in coefficients[1:]:
        p = b.fadd(ir.Constant(F64, c), b.fmul(r, p))
    return b.fptrunc(b.fmul(p, scale), F32)


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
    "tanh": _libm("tanh"),
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
}

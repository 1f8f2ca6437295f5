"""CUDA's directed-rounding intrinsics (issue 41 item 7): ``__fadd_rd``, ``__dmul_ru``,
``__fsqrt_rz``, ``__float2int_ru``, ``__ll2float_rd``... bit for bit, on the emulator, the C
backend and the LLVM backend, against an exact reference: the result computed with Python's
``fractions.Fraction`` and rounded by hand (IEEE 754 binary32/binary64, subnormals kept, overflow
to infinity or the largest finite value as the direction says, exact zeros signed as IEEE says).

Inputs: special values (zeros, infinities, NaN, the smallest subnormal, the largest finite),
random bit patterns (every exponent), operand pairs of nearby exponents (so that rounding
matters), cancellations, overflows and subnormal results.
"""
from __future__ import annotations

import math
import zlib
from fractions import Fraction

import numpy as np
import pytest

import polypy
from c_support import run_c, run_emulated

MODES = ("rn", "rz", "ru", "rd")
N = 3000


# --------------------------------------------------------------------------- the exact reference
def _format(dtype) -> tuple[int, int, int]:
    """(precision bits, minimum exponent, maximum exponent)."""
    return (24, -126, 127) if dtype == np.float32 else (53, -1022, 1023)


def round_fraction(q: Fraction, dtype, mode: str, zero_negative: bool = False) -> float:
    """``q`` rounded to ``dtype`` in ``mode``; an exact zero is -0 when ``zero_negative``."""
    if q == 0:
        return -0.0 if zero_negative else 0.0
    bits, emin, emax = _format(dtype)
    negative = q < 0
    m = -q if negative else q
    e = m.numerator.bit_length() - m.denominator.bit_length()
    if Fraction(2) ** e > m:
        e -= 1
    e = max(e, emin)
    ulp = Fraction(2) ** (e - bits + 1)
    k = m / ulp
    low = k.numerator // k.denominator
    rest = k - low
    if mode == "rn":
        up = rest > Fraction(1, 2) or (rest == Fraction(1, 2) and low % 2 == 1)
    elif mode == "rz":
        up = False
    else:  # toward +inf raises a positive magnitude, toward -inf a negative one
        up = rest != 0 and ((mode == "ru") != negative)
    v = (low + 1 if up else low) * ulp
    largest = (2 - Fraction(2) ** (1 - bits)) * Fraction(2) ** emax
    if v > largest:
        v = None  # past the range: infinity (the rounding went up) ...
    value = math.inf if v is None else float(v)
    away = (mode == "ru" and not negative) or (mode == "rd" and negative)
    if v is None and mode != "rn" and not away:
        value = float(largest)  # ... unless the direction is toward zero for this sign
    return -value if negative else value


def _specials(dtype) -> np.ndarray:
    info = np.finfo(dtype)
    tiny = np.array(1, np.uint32 if dtype == np.float32 else np.uint64).view(dtype)
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3.0, 0.1, info.max, -info.max, info.tiny, -info.tiny,
            tiny, -tiny, 2 * tiny, info.eps, 1 + info.eps, 2.0, 0.5]
    return np.array(vals, dtype)


def _random(dtype, rng: np.random.Generator, count: int) -> np.ndarray:
    ut = np.uint32 if dtype == np.float32 else np.uint64
    bits = rng.integers(0, np.iinfo(ut).max, size=count, dtype=ut, endpoint=True)
    return bits.view(dtype)


def _nearby(dtype, rng, x: np.ndarray, spread: int) -> np.ndarray:
    """Values within 2^spread of x (random mantissas and signs)."""
    scale = np.ldexp(np.ones(x.size), rng.integers(-spread, spread + 1, size=x.size))
    with np.errstate(all="ignore"):
        return (x * scale * rng.uniform(0.5, 2.0, size=x.size) * rng.choice([-1.0, 1.0], size=x.size)).astype(dtype)


def operands(dtype, arity: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    sp = _specials(dtype)
    pairs = [np.repeat(sp, sp.size), np.tile(sp, sp.size)]  # every pair of special values
    k = N - sp.size * sp.size
    first = _random(dtype, rng, k)
    first[k // 3:] = _nearby(dtype, rng, np.ones(k - k // 3), 40)  # moderate values
    info = np.finfo(dtype)
    first[: k // 10] = (rng.uniform(-1, 1, size=k // 10) * float(info.tiny) * 4).astype(dtype)  # subnormal region
    with np.errstate(all="ignore"):
        second = _nearby(dtype, rng, first.astype(np.float64), 30)
    second[k // 2: k // 2 + k // 10] = -first[k // 2: k // 2 + k // 10]  # exact cancellations
    second[k // 5: k // 5 + 50] = _random(dtype, rng, 50)
    a = np.concatenate([pairs[0], first]).astype(dtype)
    b = np.concatenate([pairs[1], second]).astype(dtype)
    if arity == 1:
        return [np.concatenate([a, np.abs(b)])[:N]]
    if arity == 2:
        return [a, b]
    with np.errstate(all="ignore"):
        c = np.concatenate([_specials(dtype), _nearby(dtype, rng, (a.astype(np.float64) * b)[sp.size:], 4)])[:N]
    return [a, b, c.astype(dtype)]


def _exact_sum_zero_sign(x: float, y: float, mode: str) -> bool:
    """Whether an exact zero x + y is -0 (IEEE 754 6.3)."""
    if x == 0 and y == 0 and math.copysign(1, x) == math.copysign(1, y):
        return math.copysign(1, x) < 0
    return mode == "rd"


def reference(op: str, args: tuple[float, ...], dtype, mode: str) -> float:
    """The exactly rounded result; non-finite operands and exact infinities take IEEE's
    (mode-independent) result, which numpy's round-to-nearest gives."""
    vals = [float(a) for a in args]
    with np.errstate(all="ignore"):
        a = [dtype(v) for v in vals]
        if op == "add":
            rn = a[0] + a[1]
        elif op == "sub":
            rn = a[0] - a[1]
        elif op == "mul":
            rn = a[0] * a[1]
        elif op == "div":
            rn = a[0] / a[1]
        elif op == "rcp":
            rn = dtype(1) / a[0]
        elif op == "sqrt":
            rn = np.sqrt(a[0])
        else:
            rn = dtype(math.fma(vals[0], vals[1], vals[2])) if hasattr(math, "fma") else None
    if not all(math.isfinite(v) for v in vals) or (op in ("div", "rcp") and vals[-1] == 0) or \
            (op == "sqrt" and vals[0] < 0):
        return float(rn) if rn is not None else math.nan
    f = [Fraction(v) for v in vals]
    if op in ("add", "sub"):
        y = f[1] if op == "add" else -f[1]
        yv = vals[1] if op == "add" else -vals[1]
        q = f[0] + y
        return round_fraction(q, dtype, mode, q == 0 and _exact_sum_zero_sign(vals[0], yv, mode))
    if op == "mul":
        q = f[0] * f[1]
        neg = (math.copysign(1, vals[0]) * math.copysign(1, vals[1])) < 0
        return round_fraction(q, dtype, mode, neg)
    if op in ("div", "rcp"):
        num, den = (f[0], f[1]) if op == "div" else (Fraction(1), f[0])
        nv, dv = (vals[0], vals[1]) if op == "div" else (1.0, vals[0])
        neg = (math.copysign(1, nv) * math.copysign(1, dv)) < 0
        return round_fraction(num / den, dtype, mode, neg)
    if op == "sqrt":
        if vals[0] == 0:
            return vals[0]
        return _round_sqrt(f[0], dtype, mode)
    # fma
    p = f[0] * f[1]
    q = p + f[2]
    pv = math.copysign(0.0, math.copysign(1, vals[0]) * math.copysign(1, vals[1])) if p == 0 else 1.0
    zero_neg = q == 0 and _exact_sum_zero_sign(pv if p == 0 else float(p), vals[2], mode)
    return round_fraction(q, dtype, mode, zero_neg)


def _round_sqrt(x: Fraction, dtype, mode: str) -> float:
    """The square root of x > 0 rounded: bracket it between neighbours of the double estimate."""
    r = round_fraction(Fraction(math.sqrt(float(x))), dtype, "rn")
    lo = r
    while Fraction(lo) ** 2 > x:
        lo = float(np.nextafter(dtype(lo), dtype(0)))
    while Fraction(float(np.nextafter(dtype(lo), dtype(np.inf)))) ** 2 <= x:
        lo = float(np.nextafter(dtype(lo), dtype(np.inf)))
    hi = float(np.nextafter(dtype(lo), dtype(np.inf)))
    if Fraction(lo) ** 2 == x or mode in ("rz", "rd"):
        return lo
    if mode == "ru":
        return hi
    mid = (Fraction(lo) + Fraction(hi)) / 2  # sqrt(x) is never exactly the midpoint
    return lo if x < mid * mid else hi


def _same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    both_nan = np.isnan(got) & np.isnan(want)
    ut = np.uint32 if got.dtype == np.float32 else np.uint64
    return both_nan | (got.view(ut) == want.view(ut))


# --------------------------------------------------------------------------- the kernels
ARITH = {  # op -> (float name stem, double name stem, arity)
    "add": ("__fadd", "__dadd", 2), "sub": ("__fsub", "__dsub", 2), "mul": ("__fmul", "__dmul", 2),
    "div": ("__fdiv", "__ddiv", 2), "rcp": ("__frcp", "__drcp", 1), "sqrt": ("__fsqrt", "__dsqrt", 1),
    "fma": ("__fmaf", None, 3),
}


def _kernel_source(stem: str, ctype: str, arity: int) -> str:
    params = ", ".join(f"const {ctype}* x{i}" for i in range(arity))
    call_args = ", ".join(f"x{i}[i]" for i in range(arity))
    outs = ", ".join(f"{ctype}* o_{m}" for m in MODES)
    body = " ".join(f"o_{m}[i] = {stem}_{m}({call_args});" for m in MODES)
    return (f"__global__ void k({outs}, {params}, int n) {{\n"
            f"  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) {{ {body} }}\n}}\n")


def _run(tmp_path, source: str, args: dict, way: str) -> dict:
    src = tmp_path / "rounding.cu"
    src.write_text(source)
    blocks = (args["n"] + 127) // 128
    if way == "llvm":
        out = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        polypy.compile(str(src)).k[blocks, 128](*out.values())
        return out
    kernel = polypy.load(str(src)).kernel("k")
    return (run_emulated if way == "emulator" else run_c)(kernel, blocks, 128, args)


CASES = [(op, dt) for op in ARITH for dt in ("f32", "f64") if not (dt == "f64" and ARITH[op][1] is None)]
WAYS = ["emulator", "c", "llvm"]


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("op,dt", CASES, ids=[f"{o}-{d}" for o, d in CASES])
def test_directed_arithmetic_is_exactly_rounded(tmp_path, op: str, dt: str, way: str) -> None:
    dtype = np.float32 if dt == "f32" else np.float64
    stem = ARITH[op][0] if dt == "f32" else ARITH[op][1]
    arity = ARITH[op][2]
    xs = operands(dtype, arity, seed=zlib.crc32(f"{op}-{dt}".encode()))
    if op == "fma" and not hasattr(math, "fma"):
        # Python < 3.13 has no math.fma: the round-to-nearest reference of specials comes from
        # the exact product instead (float32 inputs: a*b+c in double rounds once more, exact
        # only for finite operands, which the reference handles with fractions).
        keep = np.all([np.isfinite(x) for x in xs], axis=0)
        xs = [x[keep] for x in xs]
    n = xs[0].size
    args = {f"o_{m}": np.zeros(n, dtype) for m in MODES}
    args.update({f"x{i}": x for i, x in enumerate(xs)})
    args["n"] = n
    out = _run(tmp_path, _kernel_source(stem, "float" if dt == "f32" else "double", arity), args, way)
    for m in MODES:
        want = np.array([reference(op, tuple(x[i] for x in xs), dtype, m) for i in range(n)], dtype)
        ok = _same(out[f"o_{m}"], want)
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            raise AssertionError(f"{stem}_{m}{tuple(float(x[i]) for x in xs)} = {float(out[f'o_{m}'][i])!r}, "
                                 f"exactly rounded {float(want[i])!r} ({int((~ok).sum())} of {n} differ)")


# --------------------------------------------------------------------------- conversions
CONVERSIONS = {  # stem -> (source C type, source dtype, result C type, result dtype)
    "__float2int": ("float", np.float32, "int", np.int32), "__float2uint": ("float", np.float32, "unsigned int", np.uint32),
    "__double2int": ("double", np.float64, "int", np.int32),
    "__double2uint": ("double", np.float64, "unsigned int", np.uint32),
    "__float2ll": ("float", np.float32, "long long", np.int64),
    "__float2ull": ("float", np.float32, "unsigned long long", np.uint64),
    "__double2ll": ("double", np.float64, "long long", np.int64),
    "__double2ull": ("double", np.float64, "unsigned long long", np.uint64),
    "__int2float": ("int", np.int32, "float", np.float32), "__uint2float": ("unsigned int", np.uint32, "float", np.float32),
    "__ll2float": ("long long", np.int64, "float", np.float32),
    "__ull2float": ("unsigned long long", np.uint64, "float", np.float32),
    "__ll2double": ("long long", np.int64, "double", np.float64),
    "__ull2double": ("unsigned long long", np.uint64, "double", np.float64),
    "__double2float": ("double", np.float64, "float", np.float32),
}


def _conversion_inputs(dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        edges = [info.min, info.max, 0, 1, -1 if info.min < 0 else 2, info.max - 1, info.min + 1, 1 << 24, (1 << 24) + 1,
                 (1 << 53) + 1 if info.bits == 64 else 12345, info.max // 3]
        rand = rng.integers(info.min, info.max, size=N - 1000, dtype=dtype, endpoint=True)
        small = rng.integers(-(1 << 26) if info.min < 0 else 0, 1 << 26, size=1000 - len(edges)).astype(dtype)
        return np.concatenate([np.array(edges, dtype=dtype), small, rand])
    sp = _specials(dtype)
    extra = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.0 ** 31, -(2.0 ** 31), 2.0 ** 31 - 1, 2.0 ** 32, 2.0 ** 32 - 1,
                      -(2.0 ** 31) - 1, 4294967295.5, 2147483647.5, -2147483648.5, 1e10, -1e10, 2.0 ** 63,
                      -(2.0 ** 63), 2.0 ** 64, 2.0 ** 63 - 1024, 2.0 ** 64 - 2048, 1e19, -1e19, 1e30], np.float64)
    with np.errstate(all="ignore"):
        extra = extra.astype(dtype)
        half = (rng.integers(-(1 << 33), 1 << 33, size=1000) / 2.0).astype(dtype)  # ties
        wide = _nearby(dtype, rng, np.ones(N - 1000 - sp.size - extra.size), 40)
    return np.concatenate([sp, extra, half, wide])


def _convert_reference(x, src, dst, mode: str):
    if np.issubdtype(dst, np.integer):
        v = float(x)
        if math.isnan(v):
            return 0
        info = np.iinfo(dst)
        if math.isinf(v):
            return info.max if v > 0 else info.min
        q = Fraction(v)
        k = {"rn": round(q), "rz": math.trunc(q), "ru": math.ceil(q), "rd": math.floor(q)}[mode]
        return max(info.min, min(info.max, k))
    if np.issubdtype(src, np.floating) and not math.isfinite(float(x)):
        return float(x)
    q = Fraction(int(x)) if np.issubdtype(src, np.integer) else Fraction(float(x))
    return round_fraction(q, dst, mode, q == 0 and math.copysign(1, float(x)) < 0)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("stem", sorted(CONVERSIONS))
def test_rounded_conversions_are_exact(tmp_path, stem: str, way: str) -> None:
    """Integer results round as asked and saturate (NaN gives 0, as CUDA's conversions; CUDA
    documents out-of-range results as undefined);
    float results are exactly rounded, ties to even for rn."""
    sc, sd, dc, dd = CONVERSIONS[stem]
    x = _conversion_inputs(sd, zlib.crc32(stem.encode()))
    n = x.size
    outs = ", ".join(f"{dc}* o_{m}" for m in MODES)
    body = " ".join(f"o_{m}[i] = {stem}_{m}(x[i]);" for m in MODES)
    source = (f"__global__ void k({outs}, const {sc}* x, int n) {{\n"
              f"  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) {{ {body} }}\n}}\n")
    args = {f"o_{m}": np.zeros(n, dd) for m in MODES}
    args.update({"x": x, "n": n})
    out = _run(tmp_path, source, args, way)
    for m in MODES:
        want = np.array([_convert_reference(x[i], sd, dd, m) for i in range(n)], dd)
        ok = _same(out[f"o_{m}"], want) if np.issubdtype(dd, np.floating) else out[f"o_{m}"] == want
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            raise AssertionError(f"{stem}_{m}({x[i]!r}) = {out[f'o_{m}'][i]!r}, exactly {want[i]!r} "
                                 f"({int((~ok).sum())} of {n} differ)")


REFUSED_CALLS = {"__fma_rd": "double x, double y, double z) { return __fma_rd(x, y, z)",
                 "__fma_ru": "double x, double y, double z) { return __fma_ru(x, y, z)"}


@pytest.mark.parametrize("name", sorted(REFUSED_CALLS))
def test_unimplemented_rounding_intrinsics_are_located_errors(tmp_path, name: str) -> None:
    import subprocess
    import sys

    src = tmp_path / "refused.cu"
    src.write_text(f"__device__ double f({REFUSED_CALLS[name]}; }}\n"
                   "__global__ void k(double* o, const double* a) { o[threadIdx.x] = f(a[0], a[1], a[2]); }\n")
    out = tmp_path / "out.c"
    r = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(src), "-o", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1
    assert f"refused.cu:1:" in r.stderr and f"error: '{name}':" in r.stderr and "is not supported" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not out.exists()

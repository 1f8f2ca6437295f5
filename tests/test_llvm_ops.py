"""C semantics of every IR operation in the LLVM backend, against the reference emulator.

Each test writes a GPU-form kernel, runs it on the emulator and, in CPU form (``cpu_form``),
through LLVM, on the same inputs, and compares. Edge cases are part of the inputs: negative
division and remainder, wrap-around, shifts of signed and unsigned values, NaN and infinities,
out-of-range float->int conversions (CUDA saturates), signed zeros.
"""
from __future__ import annotations

import numpy as np
import pytest

from test_llvm_support import assert_same, compile_cpu, cpu_form, gpu_kernel, isolated_cache, run_both, run_compiled

from polypy.ir.mathfns import MATH_FUNCTIONS
from polypy.ir.types import SCALAR_TYPES

pytestmark = pytest.mark.usefixtures("isolated_cache")
assert isolated_cache

INT_TYPES = ("i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64")
FLOAT_TYPES = ("f32", "f64")
N = 1000
GRID, BLOCK = 8, 128  # 1024 threads, the last 24 guarded off


def _elementwise(name: str, inputs: dict[str, str], outputs: dict[str, tuple[str, str]]) -> str:
    """A kernel computing ``out[i] = expr`` for every output, element by element."""
    params = ["n: i32"] + [f"{x}: const {t}*" for x, t in inputs.items()] + [f"{o}: {t}*" for o, (t, _) in outputs.items()]
    body = "\n".join(f"    {o}[i] = {expr}" for o, (_, expr) in outputs.items())
    return f"""
kernel {name}({", ".join(params)}) {{
  var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  if (i < n) {{
{body}
  }}
}}
"""


def _edge_ints(t: str, rng: np.random.Generator, count: int) -> np.ndarray:
    info = np.iinfo(SCALAR_TYPES[t].dtype)
    edges = [info.min, info.max, 0, 1, 2, 3, 7, info.max - 1, info.min + 1]
    if info.min < 0:
        edges += [-1, -2, -3, -7]
    random = rng.integers(info.min, info.max, size=count, dtype=SCALAR_TYPES[t].dtype, endpoint=True)
    small = rng.integers(max(info.min, -20), 20, size=count).astype(SCALAR_TYPES[t].dtype)
    return np.concatenate([np.array(edges, dtype=SCALAR_TYPES[t].dtype), random, small])[:count]


# --------------------------------------------------------------------------- integers


@pytest.mark.parametrize("t", INT_TYPES)
def test_integer_arithmetic_bitwise_and_compares(t):
    rng = np.random.default_rng(1)
    a = _edge_ints(t, rng, N)
    b = rng.permutation(_edge_ints(t, rng, N))
    b_nz = np.where(b == 0, np.array(3, dtype=b.dtype), b)  # the emulator refuses division by zero
    ops = {"add": "+", "sub": "-", "mul": "*", "band": "&", "bor": "|", "bxor": "^"}
    outputs = {f"o_{op}": (t, f"a[i] {sym} b[i]") for op, sym in ops.items()}
    outputs["o_div"] = (t, "a[i] / d[i]")
    outputs["o_rem"] = (t, "a[i] % d[i]")
    outputs["o_neg"] = (t, "-a[i]")
    outputs["o_bnot"] = (t, "~a[i]")
    for cmp, sym in {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}.items():
        outputs[f"o_{cmp}"] = ("bool", f"a[i] {sym} b[i]")
    k = gpu_kernel(_elementwise("intops", {"a": t, "b": t, "d": t}, outputs))
    dtype = SCALAR_TYPES[t].dtype
    args = {"n": N, "a": a, "b": b, "d": b_nz}
    for o, (ot, _) in outputs.items():
        args[o] = np.zeros(N + 24, dtype=SCALAR_TYPES[ot].dtype)
    emulated, compiled = run_both(k, GRID, BLOCK, args)
    assert_same(emulated, compiled, outputs)
    # spot checks of C's rules, independent of the emulator
    if SCALAR_TYPES[t].is_signed:
        neg = np.flatnonzero((a == -7) & (b_nz == 2))
        for j in neg:
            assert compiled["o_div"][j] == -3 and compiled["o_rem"][j] == -1
    assert compiled["o_add"].dtype == dtype


@pytest.mark.parametrize("t", INT_TYPES)
@pytest.mark.parametrize("count_type", ["i32", "u32", "u8", "i64"])
def test_shifts_by_type(t, count_type):
    bits = SCALAR_TYPES[t].bits
    rng = np.random.default_rng(2)
    a = _edge_ints(t, rng, N)
    c = rng.integers(0, bits, size=N).astype(SCALAR_TYPES[count_type].dtype)  # in range: defined in C
    outputs = {"o_shl": (t, "a[i] << c[i]"), "o_shr": (t, "a[i] >> c[i]"), "o_shr1": (t, f"a[i] >> {_lit(bits - 1, t)}")}
    k = gpu_kernel(_elementwise("shifts", {"a": t, "c": count_type}, outputs))
    args = {"n": N, "a": a, "c": c, **{o: np.zeros(N + 24, SCALAR_TYPES[t].dtype) for o in outputs}}
    emulated, compiled = run_both(k, GRID, BLOCK, args)
    assert_same(emulated, compiled, outputs)
    if SCALAR_TYPES[t].is_signed:  # arithmetic shift: the sign fills
        assert np.all(compiled["o_shr1"][:N] == np.where(a < 0, -1, 0))
    else:
        assert np.all(compiled["o_shr1"][:N] == (a >> (bits - 1)))


def _lit(value: int, t: str) -> str:
    suffix = {"i32": "", "u32": "u", "i64": "l", "u64": "ul"}.get(t)
    return f"{value}{suffix}" if suffix is not None else f"{value}:{t}"


@pytest.mark.parametrize("t", ["i32", "u32", "i64", "i8"])
def test_undefined_integer_division_does_not_trap(t):
    """x / 0 is undefined in C (x86 would raise SIGFPE); INT_MIN / -1 wraps as on GPUs."""
    k = gpu_kernel(_elementwise("divz", {"a": t, "b": t}, {"q": (t, "a[i] / b[i]"), "r": (t, "a[i] % b[i]")}))
    info = np.iinfo(SCALAR_TYPES[t].dtype)
    a = np.array([5, info.min, info.min, 7, 0], dtype=SCALAR_TYPES[t].dtype)
    b = np.array([0, 0, -1 if info.min < 0 else 1, 0, 0], dtype=SCALAR_TYPES[t].dtype)
    jit = compile_cpu(cpu_form(k))
    args = {"n": 5, "a": a, "b": b, "q": np.zeros(5, a.dtype), "r": np.zeros(5, a.dtype)}
    run_compiled(jit, "divz", 1, 32, args)  # no crash is the point
    if info.min < 0:
        assert args["q"][2] == info.min and args["r"][2] == 0


def test_integer_min_max_abs_all_types():
    for t in INT_TYPES:
        rng = np.random.default_rng(3)
        a = _edge_ints(t, rng, N)
        b = rng.permutation(a)
        outputs = {"o_min": (t, "min(a[i], b[i])"), "o_max": (t, "max(a[i], b[i])"), "o_abs": (t, "abs(a[i])")}
        k = gpu_kernel(_elementwise("mm", {"a": t, "b": t}, outputs))
        args = {"n": N, "a": a, "b": b, **{o: np.zeros(N + 24, a.dtype) for o in outputs}}
        emulated, compiled = run_both(k, GRID, BLOCK, args)
        assert_same(emulated, compiled, outputs)


# --------------------------------------------------------------------------- floats

_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3e38, -3e38]


def _floats(t: str, rng: np.random.Generator, count: int) -> np.ndarray:
    dtype = SCALAR_TYPES[t].dtype
    with np.errstate(over="ignore"):
        special = np.array(_SPECIAL, dtype=dtype)
    values = rng.standard_normal(count) * 10.0 ** rng.integers(-3, 4, size=count)
    return np.concatenate([special, values.astype(dtype)])[:count]


@pytest.mark.parametrize("t", FLOAT_TYPES)
def test_float_arithmetic_compares_and_nan(t):
    rng = np.random.default_rng(4)
    a = _floats(t, rng, N)
    b = rng.permutation(_floats(t, rng, N))
    outputs = {f"o_{op}": (t, f"a[i] {sym} b[i]") for op, sym in
               {"add": "+", "sub": "-", "mul": "*", "div": "/", "rem": "%"}.items()}
    outputs["o_neg"] = (t, "-a[i]")
    for cmp, sym in {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}.items():
        outputs[f"o_{cmp}"] = ("bool", f"a[i] {sym} b[i]")
    outputs["o_notnan"] = ("bool", "!(a[i] != a[i])")
    k = gpu_kernel(_elementwise("fops", {"a": t, "b": t}, outputs))
    args = {"n": N, "a": a, "b": b, **{o: np.zeros(N + 24, SCALAR_TYPES[ot].dtype) for o, (ot, _) in outputs.items()}}
    emulated, compiled = run_both(k, GRID, BLOCK, args)
    assert_same(emulated, compiled, outputs)  # IEEE arithmetic: bit-exact
    # signed zero survives negation; NaN != NaN
    assert np.signbit(compiled["o_neg"][0])
    assert np.isnan(a[11]) and not compiled["o_eq"][11] and compiled["o_ne"][11]


CASTS = ["bool", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f32", "f64"]


@pytest.mark.parametrize("src", CASTS)
def test_conversions_from_every_type(src):
    """C conversions to every type; float->int saturates with NaN -> 0 (CUDA's cvt.rzi)."""
    rng = np.random.default_rng(5)
    if src == "bool":
        x = rng.integers(0, 2, size=N).astype(bool)
    elif src in FLOAT_TYPES:
        x = _floats(src, rng, N)
        big = np.array([2.0 ** 31, -2.0 ** 31 - 1e3, 2.0 ** 32 + 5, 2.0 ** 63, -2.0 ** 64, 255.9, -128.7, 65535.5,
                        -0.9, 0.9], dtype=SCALAR_TYPES[src].dtype)
        x[20:20 + len(big)] = big
    else:
        x = _edge_ints(src, rng, N)
    outputs = {f"o_{dst}": (dst, f"({dst})x[i]") for dst in CASTS if dst != src}
    k = gpu_kernel(_elementwise("casts", {"x": src}, outputs))
    args = {"n": N, "x": x, **{o: np.zeros(N + 24, SCALAR_TYPES[t].dtype) for o, (t, _) in outputs.items()}}
    emulated, compiled = run_both(k, GRID, BLOCK, args)
    assert_same(emulated, compiled, outputs)


# --------------------------------------------------------------------------- math functions

def _domain(fn: str, t: str, rng: np.random.Generator, count: int) -> list[np.ndarray]:
    dtype = SCALAR_TYPES[t].dtype
    arity = MATH_FUNCTIONS[fn].arity

    def u(lo: float, hi: float) -> np.ndarray:
        return rng.uniform(lo, hi, count).astype(dtype)

    if fn in ("log", "log2", "log10", "sqrt", "rsqrt"):
        return [u(1e-3, 100.0)]
    if fn == "log1p":
        return [u(-0.99, 10.0)]
    if fn in ("asin", "acos", "atanh"):
        return [u(-0.99, 0.99)]
    if fn == "acosh":
        return [u(1.0, 10.0)]
    if fn in ("exp", "exp2", "exp10", "expm1", "sinh", "cosh"):
        return [u(-8.0, 8.0)]
    if fn == "pow":
        return [u(0.01, 10.0), u(-3.0, 3.0)]
    if fn in ("isnan", "isinf", "isfinite", "signbit", "fabs", "floor", "ceil", "trunc", "round", "rint",
              "saturate", "fmin", "fmax", "copysign", "fdim", "fmod"):
        out = []
        for _ in range(arity):
            x = _floats(t, rng, count)
            x[16:40] = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 0.49999997, -0.49999997, 1.0, 0.0, -0.0] * 2,
                                dtype=dtype)
            out.append(rng.permutation(x) if out else x)
        if fn == "fmod":
            out[1] = np.where(out[1] == 0, np.array(1.5, dtype), out[1])
        return out
    return [u(-6.0, 6.0) for _ in range(arity)]


EXACT = {"sqrt", "rsqrt", "fabs", "floor", "ceil", "trunc", "round", "rint", "saturate", "fmin", "fmax", "fmod",
         "copysign", "fdim", "fma", "isnan", "isinf", "isfinite", "signbit"}
FLOAT_FNS = sorted(name for name, fn in MATH_FUNCTIONS.items() if fn.domain == "float")


@pytest.mark.parametrize("t", FLOAT_TYPES)
def test_every_math_function(t):
    """Every float function of polypy.ir.mathfns; correctly rounded ones bit-exact, libm ones to a few ulp."""
    rng = np.random.default_rng(6)
    inputs: dict[str, str] = {}
    outputs: dict[str, tuple[str, str]] = {}
    args: dict = {"n": N}
    for fn in FLOAT_FNS:
        spec = MATH_FUNCTIONS[fn]
        names = []
        for j, values in enumerate(_domain(fn, t, rng, N)):
            name = f"x_{fn}_{j}"
            inputs[name] = t
            args[name] = values
            names.append(f"{name}[i]")
        rt = "bool" if spec.returns_bool else t
        outputs[f"o_{fn}"] = (rt, f"{fn}({', '.join(names)})")
        args[f"o_{fn}"] = np.zeros(N + 24, SCALAR_TYPES[rt].dtype)
    k = gpu_kernel(_elementwise("mathfns", inputs, outputs))
    emulated, compiled = run_both(k, GRID, BLOCK, args)
    exact = [f"o_{fn}" for fn in FLOAT_FNS if fn in EXACT]
    assert_same(emulated, compiled, exact)
    approx = [f"o_{fn}" for fn in FLOAT_FNS if fn not in EXACT]
    if t == "f32":
        assert_same(emulated, compiled, approx, rtol=4e-7, atol=1e-7)
    else:
        assert_same(emulated, compiled, approx, rtol=1e-14, atol=1e-15)


def test_fmin_fmax_ignore_nan_and_fma_rounds_once():
    k = gpu_kernel(_elementwise("nanmin", {"a": "f32", "b": "f32", "c": "f32"}, {
        "lo": ("f32", "fmin(a[i], b[i])"), "hi": ("f32", "fmax(a[i], b[i])"), "f": ("f32", "fma(a[i], b[i], c[i])"),
        "p": ("f32", "a[i] * b[i] + c[i]")}))
    a = np.array([np.nan, 1.0, np.nan, 1.0 + 2.0 ** -23], np.float32)
    b = np.array([2.0, np.nan, np.nan, 1.0 - 2.0 ** -23], np.float32)
    c = np.array([0.0, 0.0, 0.0, -1.0], np.float32)
    jit = compile_cpu(cpu_form(k))
    args = {"n": 4, "a": a, "b": b, "c": c, **{o: np.zeros(4, np.float32) for o in ("lo", "hi", "f", "p")}}
    run_compiled(jit, "nanmin", 1, 32, args)
    np.testing.assert_array_equal(args["lo"], [2.0, 1.0, np.nan, 1.0 - 2.0 ** -23])
    np.testing.assert_array_equal(args["hi"], [2.0, 1.0, np.nan, 1.0 + 2.0 ** -23])
    assert args["f"][3] == np.float32(-(2.0 ** -46))  # one rounding: the exact product's tail survives
    assert args["p"][3] == 0.0  # no contraction: a*b rounds to 1.0 first (no fast-math)


# --------------------------------------------------------------------------- lazy evaluation

def test_select_and_logic_evaluate_only_the_needed_operand():
    """The operand not chosen would read far outside the array (and fault) if it were evaluated."""
    k = gpu_kernel("""
        kernel lazy(n: i32, m: i32, flag: const bool*, x: const f32*, d: const i32*, out: f32*, both: bool*, either: bool*, q: i32*) {
          var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
          if (i < n) {
            out[i] = flag[i] ? x[i] : x[i + 1000000000]
            both[i] = i < m && x[i + 1000000000 * (i / m)] > 0.0f
            either[i] = i >= m || x[i + 1000000000 * (i / m)] > 0.0f
            q[i] = d[i] != 0 ? 100 / d[i] : -1
          }
        }
    """)
    n, m = 1000, 600
    rng = np.random.default_rng(7)
    flag = np.ones(n, bool)
    x = rng.uniform(-1, 1, n).astype(np.float32)
    d = rng.integers(-3, 4, n).astype(np.int32)
    args = {"n": n, "m": m, "flag": flag, "x": x, "d": d, "out": np.zeros(n, np.float32), "both": np.zeros(n, bool),
            "either": np.zeros(n, bool), "q": np.zeros(n, np.int32)}
    jit = compile_cpu(cpu_form(k))
    run_compiled(jit, "lazy", 8, 128, args)
    np.testing.assert_array_equal(args["out"], x)
    np.testing.assert_array_equal(args["both"], (np.arange(n) < m) & (x > 0))
    np.testing.assert_array_equal(args["either"], (np.arange(n) >= m) | (x > 0))
    np.testing.assert_array_equal(args["q"], np.where(d != 0, 100 // np.where(d == 0, 1, np.abs(d)) * np.sign(d), -1))


# --------------------------------------------------------------------------- control flow, buffers, launch shape

def test_loops_break_continue_and_assigned_parameters():
    k = gpu_kernel("""
        kernel loops(n: i32, limit: i32, out: i32*, out2: i32*) {
          var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
          if (i < n) {
            var s: i32 = 0
            for j: i32 = 0 to i step 1 {
              if (j % 3 == 0) {
                continue
              }
              if (j > 50) {
                break
              }
              s = s + j
            }
            out[i] = s
            var w: i32 = 0
            var c: i32 = i
            while (c > 0) {
              w = w + 1
              if (w > 10) {
                break
              }
            } update {
              c = c / 2
            }
            var v: i32 = i
            var digits: i32 = 0
            while (true) {
              digits = digits + 1
              v = v / 10
            } update {
              if (!(v != 0)) {
                break
              }
            }
            out2[i] = w * 100 + limit + 1000 * digits
          }
        }
    """)
    args = {"n": 300, "limit": 7, "out": np.zeros(320, np.int32), "out2": np.zeros(320, np.int32)}
    emulated, compiled = run_both(k, 10, 32, args)
    assert_same(emulated, compiled, ["out", "out2"])


def test_a_parameter_assigned_by_the_block_starts_from_its_argument_in_every_block():
    jit = compile_cpu("""
        kernel countdown(limit: i32, out: i32*) stage cpu {
          limit = limit - (i32)blockIdx.x
          for threads tx: u32 = 0u to blockDim.x step 1u {
            out[(i32)(blockIdx.x * blockDim.x + tx)] = limit
          }
        }
    """)
    out = np.zeros(64 * 4, np.int32)
    run_compiled(jit, "countdown", 64, 4, {"limit": 100, "out": out}, threads=2)
    np.testing.assert_array_equal(out, 100 - np.repeat(np.arange(64), 4))


def test_three_dimensional_grid_and_block():
    k = gpu_kernel("""
        kernel coords(out: u32*) {
          var b: u32 = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)
          var t: u32 = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)
          out[b * blockDim.x * blockDim.y * blockDim.z + t] = blockIdx.x + 100u * blockIdx.y + 10000u * blockIdx.z + 1000000u * (threadIdx.x + 10u * threadIdx.y + 100u * threadIdx.z)
        }
    """)
    grid, block = (3, 4, 5), (2, 3, 4)
    args = {"out": np.zeros(3 * 4 * 5 * 2 * 3 * 4, np.uint32)}
    for threads in (1, 2, 3):
        emulated, compiled = run_both(k, grid, block, args, threads=threads)
        assert_same(emulated, compiled, ["out"])


def test_small_int_and_bool_memory():
    k = gpu_kernel(_elementwise("narrow", {"a": "i8", "b": "u16", "f": "bool"}, {
        "o1": ("i8", "f[i] ? a[i] : -a[i]"), "o2": ("u16", "b[i] + (u16)a[i]"), "o3": ("bool", "!f[i]"),
        "o4": ("i16", "(i16)a[i] * (i16)3")}))
    rng = np.random.default_rng(8)
    args = {"n": N, "a": _edge_ints("i8", rng, N), "b": _edge_ints("u16", rng, N),
            "f": rng.integers(0, 2, N).astype(bool), "o1": np.zeros(N, np.int8), "o2": np.zeros(N, np.uint16),
            "o3": np.zeros(N, bool), "o4": np.zeros(N, np.int16)}
    emulated, compiled = run_both(k, GRID, BLOCK, args)
    assert_same(emulated, compiled, ["o1", "o2", "o3", "o4"])


def test_bool_scalar_parameter():
    k = gpu_kernel(_elementwise("flagged", {"x": "f32"}, {"y": ("f32", "on ? x[i] : 0.0f")}).replace(
        "n: i32,", "n: i32, on: bool,"))
    jit = compile_cpu(cpu_form(k))
    x = np.arange(10, dtype=np.float32)
    for on in (True, False):
        args = {"n": 10, "on": on, "x": x, "y": np.full(10, 5.0, np.float32)}
        run_compiled(jit, "flagged", 1, 32, args)
        np.testing.assert_array_equal(args["y"], x if on else 0.0)


def test_constants_keep_their_exact_bits():
    from polypy.ir import nodes as n
    from polypy.ir.types import F32, F64, I8, I32, U32, U64

    values = [(float("nan"), F32), (float("inf"), F32), (-float("inf"), F32), (-0.0, F32), (1e-45, F32),
              (3.4028234663852886e38, F32), (0.1, F32), (float("nan"), F64), (-0.0, F64), (5e-324, F64), (0.1, F64),
              (0xFFFFFFFF, U32), (2 ** 64 - 1, U64), (-128, I8)]
    params = tuple(n.Param(f"o{j}", n.PointerType(t)) for j, (_, t) in enumerate(values))
    body = tuple(n.Store(f"o{j}", (n.Const(0, I32),), n.Const(v, t)) for j, (v, t) in enumerate(values))
    jit = compile_cpu(n.Kernel("consts", params, (), body, stage="cpu"))
    args = {p.name: np.zeros(1, p.ptype.elem.dtype) for p in params}
    run_compiled(jit, "consts", 1, 1, args)
    for j, (v, t) in enumerate(values):
        assert args[f"o{j}"].tobytes() == np.array([v]).astype(t.dtype).tobytes(), (v, t)

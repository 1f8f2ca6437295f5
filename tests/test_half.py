"""Half precision (``__half``, ``__half2``: IEEE binary16) and bfloat16 (``__nv_bfloat16``,
``__nv_bfloat162``) from polypy's ``cuda_fp16.h`` / ``cuda_bf16.h``: every operation rounded to
nearest even once, bit for bit, through the emulator, the LLVM JIT (the Python API, np.float16
arrays) and the C backend, on edge operands (subnormals, overflow, ties, NaN, -0) and random bits,
over several launch shapes; conversions in every rounding mode; shared memory and warp shuffles
of halves. Whole programs, API arguments and refusals: tests/test_half_programs.py.
The reference (tests/half_reference.py) rounds exact rationals by the IEEE definition; NumPy's
float16 arithmetic agrees with it (checked here too)."""
from __future__ import annotations

import numpy as np
import pytest

import half_reference as R
import polypy
from c_support import copy_args, need_compiler, run_c, run_emulated
from polypy.driver.library import build_library
from polypy.driver.pipelines import to_cpu
from polypy.lowp import from_bfloat16, to_bfloat16

OPS = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#define K 16
#define F 14
template <class T>
__device__ void ops(const T* a, const T* b, const T* c, T* out, int* flags, int i) {
  T x = a[i], y = b[i], z = c[i];
  T* o = out + i * K;
  o[0] = __hadd(x, y);
  o[1] = __hsub(x, y);
  o[2] = __hmul(x, y);
  o[3] = __hdiv(x, y);
  o[4] = __hfma(x, y, z);
  o[5] = hsqrt(x);
  o[6] = __hneg(x);
  o[7] = __habs(x);
  o[8] = __hmax(x, y);
  o[9] = __hmin(x, y);
  o[10] = x * y + z;            /* operators: two roundings */
  T w = x;
  w -= y;
  o[11] = w;
  o[12] = hrint(x);
  o[13] = hfloor(x);
  o[14] = hceil(x);
  o[15] = htrunc(x);
  int* f = flags + i * F;
  f[0] = __heq(x, y); f[1] = __hne(x, y); f[2] = __hlt(x, y); f[3] = __hle(x, y);
  f[4] = __hgt(x, y); f[5] = __hge(x, y); f[6] = __hequ(x, y); f[7] = __hneu(x, y);
  f[8] = __hltu(x, y); f[9] = __hgeu(x, y); f[10] = __hisnan(x); f[11] = __hisinf(x);
  f[12] = x == y; f[13] = x != y;
}
__global__ void half_ops(const __half* a, const __half* b, const __half* c, __half* out, int* flags, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) ops(a, b, c, out, flags, i);
}
__global__ void bf16_ops(const __nv_bfloat16* a, const __nv_bfloat16* b, const __nv_bfloat16* c,
                         __nv_bfloat16* out, int* flags, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) ops(a, b, c, out, flags, i);
}
"""

CONVERT = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
__global__ void convert(const float* x, const double* d, const int* k, __half* h, __nv_bfloat16* bf,
                        int* back, float* f, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  h[6 * i + 0] = __float2half_rn(x[i]);
  h[6 * i + 1] = __float2half_rz(x[i]);
  h[6 * i + 2] = __float2half_rd(x[i]);
  h[6 * i + 3] = __float2half_ru(x[i]);
  h[6 * i + 4] = __double2half(d[i]);
  h[6 * i + 5] = __int2half_rn(k[i]);
  bf[6 * i + 0] = __float2bfloat16_rn(x[i]);
  bf[6 * i + 1] = __float2bfloat16_rz(x[i]);
  bf[6 * i + 2] = __float2bfloat16_rd(x[i]);
  bf[6 * i + 3] = __float2bfloat16_ru(x[i]);
  bf[6 * i + 4] = __double2bfloat16(d[i]);
  bf[6 * i + 5] = __int2bfloat16_rn(k[i]);
  __half q = __float2half(x[i] * 0.001f);
  back[4 * i + 0] = __half2int_rn(q);
  back[4 * i + 1] = __half2int_rz(q);
  back[4 * i + 2] = __half2int_rd(q);
  back[4 * i + 3] = __half2int_ru(q);
  half implicit = x[i];        /* the converting constructor: round to nearest even */
  f[2 * i] = implicit;         /* operator float: exact */
  f[2 * i + 1] = __bfloat162float(bf[6 * i]);
}
"""

PAIRS = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
__global__ void pairs(const __half2* p, const __half2* q, __half2* r, const __nv_bfloat162* u,
                      const __nv_bfloat162* v, __nv_bfloat162* w, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    __half2 s = __hfma2(p[i], q[i], __lowhigh2highlow(p[i]));
    r[3 * i] = s;
    r[3 * i + 1] = __h2div(p[i], q[i]) + __halves2half2(__high2half(q[i]), __low2half(p[i]));
    r[3 * i + 2] = __floats2half2_rn(__low2float(p[i]) * 3.0f, __high2float(q[i]));
    __nv_bfloat162 t = __hmul2(u[i], v[i]);
    t += __bfloat162bfloat162(__low2bfloat16(v[i]));
    w[2 * i] = t;
    w[2 * i + 1] = __hfma2(u[i], v[i], make_bfloat162(__high2bfloat16(u[i]), __float2bfloat16(1.0f)));
  }
}
"""

BLOCKS = [32, 256, 7]


def _grid(kernel: str, n: int, block: int) -> int:
    """A thread per element (the last block partly idle)."""
    return -(-n // block)


def _operands(fmt: tuple[int, int], count: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """a, b, c bits: every pair of edge values, then random bits; c from the edges and random."""
    edges = R.edge_bits(fmt)
    a = [x for x in edges for _ in edges]
    b = [y for _ in edges for y in edges]
    rng = np.random.default_rng(seed)
    # ties: operands whose exact sum or product needs one more bit than the format has
    top = 1 << (sum(fmt) + 1)
    a += list(rng.integers(0, top, count))
    b += list(rng.integers(0, top, count))
    a_arr, b_arr = np.array(a, np.uint16), np.array(b, np.uint16)
    c = np.array(rng.choice(np.array(edges + list(rng.integers(0, top, 40)), np.uint16), len(a)), np.uint16)
    # c must not be NaN/inf where a * b is finite and nonzero? (no: IEEE handles it; the reference too)
    return a_arr, b_arr, c


def _ref_ops(a: np.ndarray, b: np.ndarray, c: np.ndarray, fmt) -> tuple[np.ndarray, np.ndarray]:
    out, flags = [], []
    nan = lambda x: np.isnan(R.to_float(int(x), fmt))  # noqa: E731
    for x, y, z in zip(a.tolist(), b.tolist(), c.tolist()):
        fx, fy = R.to_float(x, fmt), R.to_float(y, fmt)
        row = [R.binary(op, x, y, fmt) for op in "+-*/"]
        row += [R.fma(x, y, z, fmt), R.sqrt(x, fmt), x ^ 0x8000, x & 0x7FFF]
        row += [_pick(x, y, fmt, True), _pick(x, y, fmt, False)]
        row += [R.binary("+", R.binary("*", x, y, fmt), z, fmt), R.binary("-", x, y, fmt)]
        row += [_integral(x, fmt, m) for m in (np.rint, np.floor, np.ceil, np.trunc)]
        out.append(row)
        un = nan(x) or nan(y)
        inf = 0 if not np.isinf(fx) else (1 if fx > 0 else -1)
        flags.append([fx == fy, fx < fy or fx > fy, fx < fy, fx <= fy, fx > fy, fx >= fy, fx == fy or un, fx != fy,
                      fx < fy or un, fx >= fy or un, nan(x), inf, fx == fy, fx != fy])
    return np.array(out, np.uint16), np.array(flags, np.int32)


def _pick(x: int, y: int, fmt, maximum: bool) -> int:
    fx, fy = R.to_float(x, fmt), R.to_float(y, fmt)
    if np.isnan(fx) and np.isnan(fy):
        return R.CANONICAL_NAN
    if np.isnan(fx) or np.isnan(fy):
        return y if np.isnan(fx) else x
    if fx == fy:  # -0 < +0
        neg_x = bool(x & 0x8000)
        return x if (not neg_x if maximum else neg_x) else y
    return x if (fx > fy) == maximum else y


def _integral(x: int, fmt, fn) -> int:
    f = R.to_float(x, fmt)
    if np.isnan(f):
        return R.CANONICAL_NAN
    r = float(fn(np.float64(f)))
    return R._special(r, fmt) if r == 0 or np.isinf(r) else R.round_to(R.Fraction(r), fmt)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("half")
    out = {}
    for name, text in (("ops", OPS), ("convert", CONVERT), ("pairs", PAIRS)):
        (d / f"{name}.cu").write_text(text)
        out[name] = str(d / f"{name}.cu")
    return out


@pytest.fixture(scope="module")
def op_cases():
    cases = {}
    for fmt, name in ((R.HALF, "half_ops"), (R.BFLOAT16, "bf16_ops")):
        a, b, c = _operands(fmt)
        cases[name] = (fmt, a, b, c, *_ref_ops(a, b, c, fmt))
    return cases


def test_reference_agrees_with_numpy_float16() -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(0, 1 << 16, 3000).astype(np.uint16)
    b = rng.integers(0, 1 << 16, 3000).astype(np.uint16)
    fa, fb = a.view(np.float16), b.view(np.float16)
    with np.errstate(all="ignore"):
        for op, fn in (("+", np.add), ("-", np.subtract), ("*", np.multiply), ("/", np.divide)):
            want = np.array([R.binary(op, int(x), int(y), R.HALF) for x, y in zip(a, b)], np.uint16)
            R.same_bits(fn(fa, fb).view(np.uint16), want, R.HALF, op)
        R.same_bits(np.sqrt(fa).view(np.uint16), np.array([R.sqrt(int(x), R.HALF) for x in a], np.uint16), R.HALF, "sqrt")
    x = np.float32([1.0, 1.00390625, 1.01171875, -3.3e38, 3.4e38, 1e-40, np.nan, -0.0])
    assert to_bfloat16(x).tolist() == [R.round_to(R.Fraction(float(v)), R.BFLOAT16) if np.isfinite(v) and v != 0
                                       else R._special(float(v), R.BFLOAT16) for v in x]
    assert np.array_equal(from_bfloat16(to_bfloat16(np.float32([1.5, -2.0]))), np.float32([1.5, -2.0]))


@pytest.mark.parametrize("kernel", ["half_ops", "bf16_ops"])
@pytest.mark.parametrize("way", ["emulator", "c"])
def test_operations_are_exact(sources, op_cases, kernel: str, way: str) -> None:
    fmt, a, b, c, want, flags = op_cases[kernel]
    k = polypy.load(sources["ops"]).kernel(kernel)
    n = len(a)
    if way == "c":
        need_compiler()
        # built once, with each shape's versions compiled in (not one more library per shape)
        lib = build_library([to_cpu(k)], (), block_shapes={kernel: [(b, 1, 1) for b in BLOCKS]})
    for block in BLOCKS[:2] if way == "emulator" else BLOCKS:
        args = {"a": a, "b": b, "c": c, "out": np.zeros(16 * n, np.uint16), "flags": np.zeros(14 * n, np.int32), "n": n}
        grid = _grid(kernel, n, block)
        if way == "emulator":
            out = run_emulated(k, grid, block, args)
        else:
            out = copy_args(args)
            lib.launch(kernel, grid, block, out)
        R.same_bits(out["out"], want, fmt, f"{kernel} {way} {grid}x{block}")
        np.testing.assert_array_equal(out["flags"].reshape(flags.shape), flags)


def test_operations_are_exact_through_the_api(sources, op_cases) -> None:
    """The LLVM JIT, with np.float16 arrays for __half memory and np.uint16 bits for bfloat16."""
    mod = polypy.compile(sources["ops"])
    for kernel in ("half_ops", "bf16_ops"):
        fmt, a, b, c, want, flags = op_cases[kernel]
        n = len(a)
        for block in BLOCKS:
            dt = np.float16 if kernel == "half_ops" else np.uint16
            out, fl = np.zeros(16 * n, dt), np.zeros(14 * n, np.int32)
            getattr(mod, kernel)[_grid(kernel, n, block), block](a.view(dt), b.view(dt), c.view(dt), out, fl, n)
            R.same_bits(out.view(np.uint16), want, fmt, f"{kernel} llvm {block}")
            np.testing.assert_array_equal(fl.reshape(flags.shape), flags)


def _convert_inputs() -> dict:
    rng = np.random.default_rng(5)
    specials = np.float32([0.0, -0.0, 65504.0, 65519.99, 65520.0, 65536.0, -65520.0, 1e-8, 2.0 ** -25,
                           2.0 ** -25 * 1.0000001, -(2.0 ** -24) * 1.5, 2.0 ** -24 * 2.5, 1.0 + 2.0 ** -11,
                           1.0 + 3 * 2.0 ** -11, np.inf, -np.inf, np.nan, 3.4e38, -1e-45, 1.00390625, 1.01171875,
                           -2.5, 2.5, 3.5, 0.4999])
    rand = (rng.standard_normal(200) * 10.0 ** rng.integers(-9, 7, 200)).astype(np.float32)
    x = np.concatenate([specials, rand])
    n = len(x)
    d = x.astype(np.float64) * (1 + 2.0 ** -30)  # doubles between floats: one rounding, not two
    d[:3] = [1.0 + 2.0 ** -11 + 2.0 ** -40, 65519.999999, 2.0 ** -25 + 2.0 ** -60]
    k = rng.integers(-(1 << 31), 1 << 31, n).astype(np.int32)
    k[:6] = [0, 2049, 2051, 65519, 65520, -(1 << 31)]
    return {"x": x, "d": d, "k": k, "h": np.zeros(6 * n, np.uint16), "bf": np.zeros(6 * n, np.uint16),
            "back": np.zeros(4 * n, np.int32), "f": np.zeros(2 * n, np.float32), "n": n}


def _convert_reference(args: dict) -> dict:
    h, bf, back, f = [], [], [], []
    exact = lambda v: R.Fraction(float(v)) if np.isfinite(v) and v != 0 else float(v)  # noqa: E731

    def rnd(v, fmt, mode="rn"):
        e = exact(v)
        return R._special(e, fmt) if isinstance(e, float) and (e == 0 or np.isinf(e)) else R.round_to(e, fmt, mode)

    for x, d, k in zip(args["x"], args["d"], args["k"]):
        for fmt, out in ((R.HALF, h), (R.BFLOAT16, bf)):
            out += [rnd(x, fmt, m) for m in ("rn", "rz", "rd", "ru")] + [rnd(d, fmt), rnd(float(k), fmt)]
        q = R.to_float(rnd(np.float32(x) * np.float32(0.001), R.HALF), R.HALF)
        for fn in (np.rint, np.trunc, np.floor, np.ceil):
            back.append(0 if np.isnan(q) else int(np.clip(fn(q), -(2 ** 31), 2 ** 31 - 1)))
        f += [R.to_float(h[-6], R.HALF), R.to_float(bf[-6], R.BFLOAT16)]
    return {"h": np.array(h, np.uint16), "bf": np.array(bf, np.uint16), "back": np.array(back, np.int32),
            "f": np.array(f, np.float32)}


@pytest.mark.parametrize("way", ["emulator", "c", "llvm"])
def test_conversions_round_as_named(sources, way: str) -> None:
    args = _convert_inputs()
    want = _convert_reference(args)
    n = args["n"]
    if way == "llvm":
        out = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        polypy.compile(sources["convert"]).convert[(n + 63) // 64, 64](*out.values())
    else:
        k = polypy.load(sources["convert"]).kernel("convert")
        out = (run_emulated if way == "emulator" else run_c)(k, (n + 31) // 32, 32, args)
    R.same_bits(out["h"], want["h"], R.HALF, "half")
    R.same_bits(out["bf"], want["bf"], R.BFLOAT16, "bfloat16")
    np.testing.assert_array_equal(out["back"], want["back"])
    np.testing.assert_array_equal(out["f"].view(np.uint32)[~np.isnan(want["f"])],
                                  want["f"].view(np.uint32)[~np.isnan(want["f"])])


@pytest.mark.parametrize("way", ["emulator", "c", "llvm"])
def test_pairs_compute_lane_by_lane(sources, way: str) -> None:
    rng = np.random.default_rng(9)
    n = 150
    p, q = (rng.integers(0, 1 << 16, 2 * n).astype(np.uint16) for _ in range(2))
    u, v = (rng.integers(0, 1 << 16, 2 * n).astype(np.uint16) for _ in range(2))
    args = {"p": p, "q": q, "r": np.zeros(6 * n, np.uint16), "u": u, "v": v, "w": np.zeros(4 * n, np.uint16), "n": n}
    H, B = R.HALF, R.BFLOAT16
    r, w = [], []
    for i in range(n):
        px, py, qx, qy = int(p[2 * i]), int(p[2 * i + 1]), int(q[2 * i]), int(q[2 * i + 1])
        r += [R.fma(px, qx, py, H), R.fma(py, qy, px, H)]
        r += [R.binary("+", R.binary("/", px, qx, H), qy, H), R.binary("+", R.binary("/", py, qy, H), px, H)]
        three = R.to_float(px, H) * 3.0
        r += [R.round_to(R.Fraction(np.float32(three).item()), H) if np.isfinite(np.float32(three)) and three != 0
              else R._special(float(np.float32(three)), H), qy]
        ux, uy, vx, vy = int(u[2 * i]), int(u[2 * i + 1]), int(v[2 * i]), int(v[2 * i + 1])
        w += [R.binary("+", R.binary("*", ux, vx, B), vx, B), R.binary("+", R.binary("*", uy, vy, B), vx, B)]
        w += [R.fma(ux, vx, uy, B), R.fma(uy, vy, 0x3F80, B)]
    if way == "llvm":
        out = {k: (val.copy() if isinstance(val, np.ndarray) else val) for k, val in args.items()}
        out["p"], out["q"], out["r"] = out["p"].view(np.float16), out["q"].view(np.float16), out["r"].view(np.float16)
        polypy.compile(sources["pairs"]).pairs[5, 32](*out.values())
    else:
        k = polypy.load(sources["pairs"]).kernel("pairs")
        out = (run_emulated if way == "emulator" else run_c)(k, 3, 64, args)
    R.same_bits(out["r"].view(np.uint16), np.array(r, np.uint16), H, "half2")
    R.same_bits(out["w"], np.array(w, np.uint16), B, "bfloat162")


def test_fma_rounds_once_where_double_would_round_twice(tmp_path) -> None:
    """bfloat16 3 * 129 = 387 is a tie between 386 and 388; a tiny c decides it. Rounding a * b + c
    in double first would lose c and round the tie to even (388) for both signs."""
    src = tmp_path / "fma.cu"
    src.write_text("#include <cuda_bf16.h>\n__global__ void f(const __nv_bfloat16* a, __nv_bfloat16* r) {\n"
                   "  r[threadIdx.x] = __hfma(a[0], a[1], a[2 + threadIdx.x]);\n}\n")
    a = to_bfloat16(np.float32([3.0, 129.0, 2.0 ** -100, -(2.0 ** -100)]))
    r = np.zeros(2, np.uint16)
    polypy.compile(str(src)).f[1, 2](a, r)
    assert from_bfloat16(r).tolist() == [388.0, 386.0]


SHARED = r"""
#include <cuda_fp16.h>
__global__ void block_sum(const __half* x, __half* sums) {
  __shared__ __half s[128];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) sums[blockIdx.x] = s[0];
}
"""


@pytest.mark.parametrize("way", ["emulator", "c", "llvm"])
def test_shared_memory_tree_sum_in_half(tmp_path, way: str) -> None:
    """__half in __shared__ memory across barriers: each step of the tree rounds to half, so the
    reference is the same tree in np.float16."""
    src = tmp_path / "sum.cu"
    src.write_text(SHARED)
    x = np.random.default_rng(4).uniform(-8, 8, 6 * 128).astype(np.float16)
    want = x.reshape(6, 128).copy()
    stride = 64
    while stride > 0:
        want[:, :stride] = want[:, :stride] + want[:, stride:2 * stride]
        stride //= 2
    sums = np.zeros(6, np.float16)
    if way == "llvm":
        polypy.compile(str(src)).block_sum[6, 128](x, sums)
    else:
        k = polypy.load(str(src)).kernel("block_sum")
        sums = (run_emulated if way == "emulator" else run_c)(k, 6, 128, {"x": x.view(np.uint16), "sums": sums.view(np.uint16)})["sums"].view(np.float16)
    assert sums.view(np.uint16).tolist() == want[:, 0].view(np.uint16).tolist()


INT_MODES = r"""
#include <cuda_bf16.h>
__global__ void int_modes(const int* k, __half* h, __nv_bfloat16* b, unsigned short* u, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    h[4 * i] = __int2half_rn(k[i]); h[4 * i + 1] = __int2half_rz(k[i]);
    h[4 * i + 2] = __int2half_rd(k[i]); h[4 * i + 3] = __int2half_ru(k[i]);
    b[4 * i] = __int2bfloat16_rn(k[i]); b[4 * i + 1] = __int2bfloat16_rz(k[i]);
    b[4 * i + 2] = __int2bfloat16_rd(k[i]); b[4 * i + 3] = __int2bfloat16_ru(k[i]);
    u[i] = __half2ushort_rn(h[4 * i]);   /* saturating: negative to 0, infinity to 65535 */
  }
}
"""


@pytest.mark.parametrize("way", ["emulator", "llvm"])
def test_integer_conversions_in_every_mode(tmp_path, way: str) -> None:
    src = tmp_path / "ints.cu"
    src.write_text(INT_MODES)
    rng = np.random.default_rng(8)
    k = np.concatenate([np.int32([0, 1, -1, 2049, -2049, 2051, 65504, 65519, 65520, 70000, -70000, 257, -257,
                                  (1 << 31) - 1, -(1 << 31)]), rng.integers(-(1 << 31), 1 << 31, 60).astype(np.int32),
                        rng.integers(-5000, 5000, 60).astype(np.int32)])
    n = len(k)
    args = {"k": k, "h": np.zeros(4 * n, np.uint16), "b": np.zeros(4 * n, np.uint16), "u": np.zeros(n, np.uint16), "n": n}
    if way == "llvm":
        out = copy_args(args)
        polypy.compile(str(src)).int_modes[(n + 63) // 64, 64](*out.values())
    else:
        out = run_emulated(polypy.load(str(src)).kernel("int_modes"), (n + 63) // 64, 64, args)
    modes = ("rn", "rz", "rd", "ru")
    want_h = [R.round_to(R.Fraction(int(v)), R.HALF, m) if v else 0 for v in k for m in modes]
    want_b = [R.round_to(R.Fraction(int(v)), R.BFLOAT16, m) if v else 0 for v in k for m in modes]
    assert out["h"].tolist() == want_h
    assert out["b"].tolist() == want_b
    near = [R.to_float(want_h[4 * i], R.HALF) for i in range(n)]
    assert out["u"].tolist() == [0 if f <= 0 else 65535 if f >= 65535 else int(np.rint(f)) for f in near]


SHUFFLES = r"""
#include <cuda_bf16.h>
__global__ void warp_sum(const __half* x, __half* out, const __nv_bfloat162* p, __nv_bfloat162* q) {
  int t = threadIdx.x;
  __half v = __ldg(&x[blockIdx.x * 32 + t]);
  for (int o = 16; o > 0; o /= 2) v = __hadd(v, __shfl_down_sync(0xffffffffu, v, o));
  if (t == 0) out[blockIdx.x] = v;
  q[blockIdx.x * 32 + t] = __shfl_xor_sync(0xffffffffu, p[blockIdx.x * 32 + t], 1);
}
"""


@pytest.mark.parametrize("way", ["emulator", "llvm"])
def test_warp_shuffles_of_halves(tmp_path, way: str) -> None:
    src = tmp_path / "shfl.cu"
    src.write_text(SHUFFLES)
    rng = np.random.default_rng(6)
    x = rng.uniform(-2, 2, 3 * 32).astype(np.float16)
    p = rng.integers(0, 1 << 16, 2 * 3 * 32).astype(np.uint16)
    want = x.reshape(3, 32).copy()
    o = 16
    while o > 0:  # lanes past the warp's end read their own value (CUDA's __shfl_down_sync)
        shifted = np.concatenate([want[:, o:], want[:, 32 - o:]], axis=1)
        want = want + shifted
        o //= 2
    out, q = np.zeros(3, np.float16), np.zeros_like(p)
    if way == "llvm":
        polypy.compile(str(src)).warp_sum[3, 32](x, out, p, q)
    else:
        got = run_emulated(polypy.load(str(src)).kernel("warp_sum"), 3, 32,
                           {"x": x.view(np.uint16), "out": out.view(np.uint16), "p": p, "q": q})
        out, q = got["out"].view(np.float16), got["q"]
    assert out.view(np.uint16).tolist() == want[:, 0].view(np.uint16).tolist()
    assert q.tolist() == p.reshape(-1, 2, 2)[:, ::-1, :].reshape(-1).tolist()  # pairs of lanes swapped


ALL_BITS = r"""
#include <cuda_bf16.h>
__global__ void all_bits(const __half* h, float* f, __half* back, const __nv_bfloat16* b, float* g, __half* bh) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  f[i] = __half2float(h[i]);
  back[i] = __float2half(f[i] * 0.75f);
  g[i] = __bfloat162float(b[i]);
  bh[i] = __float2half(__bfloat162float(b[i]));  /* exact, then rounded once */
}
"""


@pytest.mark.parametrize("way", ["emulator", "llvm"])
def test_every_16_bit_pattern(tmp_path, way: str) -> None:
    """All 65,536 halves to float (exact) and back after a float product (rounded), and all
    65,536 bfloat16 to float and to half, against NumPy's float16 conversions."""
    src = tmp_path / "all.cu"
    src.write_text(ALL_BITS)
    bits = np.arange(1 << 16, dtype=np.uint16)
    args = {"h": bits, "f": np.zeros(1 << 16, np.float32), "back": np.zeros(1 << 16, np.uint16), "b": bits,
            "g": np.zeros(1 << 16, np.float32), "bh": np.zeros(1 << 16, np.uint16)}
    if way == "llvm":
        out = copy_args(args)
        polypy.compile(str(src)).all_bits[256, 256](*out.values())
    else:
        out = run_emulated(polypy.load(str(src)).kernel("all_bits"), 256, 256, args)
    half = bits.view(np.float16).astype(np.float32)
    ok = ~np.isnan(half)
    assert np.array_equal(out["f"].view(np.uint32)[ok], half.view(np.uint32)[ok]) and np.isnan(out["f"][~ok]).all()
    with np.errstate(all="ignore"):
        want_back = (half * np.float32(0.75)).astype(np.float16)
    R.same_bits(out["back"], want_back.view(np.uint16), R.HALF, "back")
    bf = from_bfloat16(bits)
    okb = ~np.isnan(bf)
    assert np.array_equal(out["g"].view(np.uint32)[okb], bf.view(np.uint32)[okb]) and np.isnan(out["g"][~okb]).all()
    with np.errstate(all="ignore"):
        R.same_bits(out["bh"], bf.astype(np.float16).view(np.uint16), R.HALF, "bfloat16 to half")


VIEWS = r"""
#include <cuda_fp16.h>
__global__ void twice(const __half* x, __half* y, int n2) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n2) {  /* __half memory read and written as pairs, as vectorized CUDA code does */
    const __half2* x2 = reinterpret_cast<const __half2*>(x);
    reinterpret_cast<__half2*>(y)[i] = __hmul2(x2[i], __float2half2_rn(2.0f)) - __half2half2(x[2 * i + 1]);
  }
}
"""


@pytest.mark.parametrize("way", ["emulator", "llvm"])
def test_half_memory_viewed_as_pairs(tmp_path, way: str) -> None:
    src = tmp_path / "views.cu"
    src.write_text(VIEWS)
    x = np.random.default_rng(1).uniform(-3, 3, 300).astype(np.float16)
    odd = np.repeat(x[1::2], 2)
    want = x * np.float16(2) - odd
    y = np.zeros_like(x)
    if way == "llvm":
        polypy.compile(str(src)).twice[2, 128](x, y, 150)
    else:
        y = run_emulated(polypy.load(str(src)).kernel("twice"), 2, 128,
                         {"x": x.view(np.uint16), "y": y.view(np.uint16), "n2": 150})["y"].view(np.float16)
    assert y.view(np.uint16).tolist() == want.view(np.uint16).tolist()


STEPS = r"""
#include <cuda_bf16.h>
__global__ void steps(const __half* x, __half* y, __nv_bfloat16* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    __half h = x[i];
    h++; --h; ++h;               /* each step rounded: ((x + 1) - 1) + 1 */
    y[i] = h;
    __nv_bfloat16 v = b[i];
    v--; v--;
    b[i] = v;
  }
}
"""


@pytest.mark.parametrize("way", ["emulator", "llvm"])
def test_increments_round_each_step(tmp_path, way: str) -> None:
    src = tmp_path / "steps.cu"
    src.write_text(STEPS)
    x = np.float16([0.0, -1.0, 2048.0, 2049.0 - 1, 1e-4, 65504.0, -0.0, 0.3])
    b = to_bfloat16(np.float32([0.0, 256.0, 257.0, 1e-3, -1.0, 3e38, 0.5, 7.0]))
    one = np.float16(1)
    want_y = ((x + one) - one) + one
    one_b = int(to_bfloat16(np.float32(1.0)))
    want_b = [R.binary("-", R.binary("-", int(v), one_b, R.BFLOAT16), one_b, R.BFLOAT16) for v in b]
    y = np.zeros_like(x)
    if way == "llvm":
        polypy.compile(str(src)).steps[1, 8](x, y, b, 8)
    else:
        out = run_emulated(polypy.load(str(src)).kernel("steps"), 1, 8,
                           {"x": x.view(np.uint16), "y": y.view(np.uint16), "b": b, "n": 8})
        y, b = out["y"].view(np.float16), out["b"]
    assert y.view(np.uint16).tolist() == want_y.view(np.uint16).tolist()
    assert b.tolist() == want_b

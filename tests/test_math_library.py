"""More of CUDA's math library in device code (issue 36 item 7; frontend/lower/more_math.py):
``remainder``, ``remquo``, ``ilogb``, ``logb``, ``nextafter``, ``lrint``/``llrint``,
``lround``/``llround``, ``nearbyint``, ``scalbn``/``scalbln`` bit for bit against the C library
(through ctypes) in float and double, on the emulator, the C and the LLVM backend, over zeros,
infinities, NaN, subnormals, the largest values, ties and random bits; ``sinpif``, ``cospif``,
``sincospif``, ``rcbrtf``, ``rhypotf``, ``norm3df``, ``rnorm3df``, ``normcdff`` within CUDA's ulp
bounds of an mpmath reference; the unwritten ones refused at their call."""
from __future__ import annotations

import ctypes
import ctypes.util
import math

import numpy as np
import pytest

import polypy
from polypy.errors import UserError
from c_support import run_way

LIBM = ctypes.CDLL(ctypes.util.find_library("m"))

EXACT = """
__global__ void lib(const {T}* x, const {T}* y, const int* k, {T}* rem, {T}* rq, int* quo, int* ilb, {T}* lgb,
                    {T}* nxt, long long* lri, long long* llri, long long* lro, long long* llro, {T}* nbi, {T}* scn,
                    {T}* scl, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {{
    rem[i] = remainder{f}(x[i], y[i]);
    int q = 12345;
    rq[i] = remquo{f}(x[i], y[i], &q);
    quo[i] = q;
    ilb[i] = ilogb{f}(x[i]);
    lgb[i] = logb{f}(x[i]);
    nxt[i] = nextafter{f}(x[i], y[i]);
    lri[i] = lrint{f}(x[i]);
    llri[i] = llrint(x[i]);
    lro[i] = lround{f}(x[i]);
    llro[i] = llround(x[i]);
    nbi[i] = nearbyint{f}(x[i]);
    scn[i] = scalbn{f}(x[i], k[i]);
    scl[i] = scalbln(x[i], (long)k[i] * 4096L);
  }}
}}
"""


def _inputs(dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(36 if dtype == np.float32 else 37)
    info = np.finfo(dtype)
    ut = np.uint32 if dtype == np.float32 else np.uint64
    tiny = np.array(1, ut).view(dtype)
    big = 4194304.5 if dtype == np.float32 else 2.0 ** 51 + 0.5
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.5, 7.5, 3.0,
                        info.max, -info.max, info.tiny, -info.tiny, tiny, -tiny, 3 * tiny, big, -big, 1e30, -1e30,
                        2.0 ** 63, -2.0 ** 63, 2.0 ** 64, 0.1, -7.25], dtype)
    sx, sy = (a.ravel() for a in np.meshgrid(special, special))
    bx = rng.integers(0, np.iinfo(ut).max, size=800, dtype=ut, endpoint=True).view(dtype)
    by = rng.integers(0, np.iinfo(ut).max, size=800, dtype=ut, endpoint=True).view(dtype)
    my = rng.uniform(-100, 100, size=600).astype(dtype)
    mx = (my * rng.integers(-50, 50, size=600).astype(dtype) + my * dtype(0.5)).astype(dtype)  # ties of x / y
    wx = rng.uniform(-1e6, 1e6, size=600).astype(dtype)
    wy = rng.uniform(-10, 10, size=600).astype(dtype)
    x = np.concatenate([sx, bx, mx, wx])
    y = np.concatenate([sy, by, my, wy])
    span = 330 if dtype == np.float32 else 2300
    k = rng.integers(-span, span, size=x.size).astype(np.int32)
    k[::7] = np.array([2 ** 31 - 1, -2 ** 31, 0, 5, -160, 300, -2000], np.int32)[np.arange(k[::7].size) % 7]
    return x, y, k


def _libm(name: str, ctype):
    fn = getattr(LIBM, name)
    fn.restype = ctype
    return fn


def _reference(x: np.ndarray, y: np.ndarray, k: np.ndarray) -> dict[str, np.ndarray]:
    f = "f" if x.dtype == np.float32 else ""
    ft = ctypes.c_float if f else ctypes.c_double
    dtype = x.dtype
    fns = {name: _libm(name + f, ft) for name in ("remainder", "logb", "nextafter", "nearbyint")}
    remquo = _libm("remquo" + f, ft)
    ilogb = _libm("ilogb" + f, ctypes.c_int)
    llrint = _libm("llrint" + f, ctypes.c_longlong)
    llround = _libm("llround" + f, ctypes.c_longlong)
    scalbn = _libm("scalbn" + f, ft)
    scalbln = _libm("scalbln" + f, ft)
    out: dict[str, list] = {name: [] for name in ("rem", "rq", "quo", "ilb", "lgb", "nxt", "lri", "lro", "nbi",
                                                   "scn", "scl")}
    for xi, yi, ki in zip(x.tolist(), y.tolist(), k.tolist()):
        a, b = ft(xi), ft(yi)
        out["rem"].append(fns["remainder"](a, b))
        q = ctypes.c_int(0)
        r = remquo(a, b, ctypes.byref(q))
        out["rq"].append(r)
        out["quo"].append(q.value if not math.isnan(r) else 0)
        out["ilb"].append(ilogb(a))
        out["lgb"].append(fns["logb"](a))
        out["nxt"].append(fns["nextafter"](a, b))
        # C leaves an out-of-range conversion unspecified; CUDA's saturates (NaN gives 0).
        if math.isnan(xi):
            out["lri"].append(0)
            out["lro"].append(0)
        elif not -2.0 ** 63 <= xi < 2.0 ** 63:
            out["lri"].append(2 ** 63 - 1 if xi > 0 else -2 ** 63)
            out["lro"].append(2 ** 63 - 1 if xi > 0 else -2 ** 63)
        else:
            out["lri"].append(llrint(a))
            out["lro"].append(llround(a))
        out["nbi"].append(fns["nearbyint"](a))
        out["scn"].append(scalbn(a, ctypes.c_int(ki)))
        out["scl"].append(scalbln(a, ctypes.c_long(ki * 4096)))
    want = {name: np.array(v, dtype=(np.int32 if name in ("quo", "ilb") else np.int64 if name in ("lri", "lro")
                                      else dtype)) for name, v in out.items()}
    want["llri"], want["llro"] = want["lri"], want["lro"]
    return want


def _mismatches(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    if got.dtype.kind == "f":
        ut = np.uint32 if got.dtype == np.float32 else np.uint64
        return ~((np.isnan(got) & np.isnan(want)) | (got.view(ut) == want.view(ut)))
    return got != want


@pytest.fixture(scope="module", params=["float", "double"])
def exact_case(request):
    dtype = np.float32 if request.param == "float" else np.float64
    x, y, k = _inputs(dtype)
    return request.param, x, y, k, _reference(x, y, k)


@pytest.mark.parametrize("way", ["emulator", "c", "llvm"])
def test_exact_functions_match_the_c_library(exact_case, way: str) -> None:
    ctype, x, y, k, want = exact_case
    n = x.size
    args = {"x": x, "y": y, "k": k}
    for name in ("rem", "rq", "quo", "ilb", "lgb", "nxt", "lri", "llri", "lro", "llro", "nbi", "scn", "scl"):
        args[name] = np.zeros(n, want[name].dtype)
    args["n"] = n
    source = EXACT.format(T=ctype, f="f" if ctype == "float" else "")
    out = run_way(source, "lib", (n + 127) // 128, 128, args, way, name=f"lib_{ctype}.cu")
    quo = want["quo"]
    for name in want:
        got = out[name]
        if name == "quo":
            # C and CUDA promise the sign of x / y and the low 3 bits of the quotient.
            bad = (np.sign(got) != np.sign(quo)) | ((np.abs(got) & 7) != (np.abs(quo) & 7))
        else:
            bad = _mismatches(got, want[name])
        assert not bad.any(), (name, [(float(x[i]), float(y[i]), int(k[i]), got[i], want[name][i])
                                      for i in np.flatnonzero(bad)[:4]])


APPROX = """
__global__ void approx(const float* x, const float* y, const float* z, float* sp, float* cp, float* ss, float* sc,
                       float* rc, float* rh, float* n3, float* r3, float* nc, float* ex, float* ei, float* ec,
                       float* ni, float* lg, float* tg, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    sp[i] = sinpif(x[i]);
    cp[i] = cospi(x[i]);
    sincospif(x[i], &ss[i], &sc[i]);
    rc[i] = rcbrtf(x[i]);
    rh[i] = rhypotf(x[i], y[i]);
    n3[i] = norm3df(x[i], y[i], z[i]);
    r3[i] = rnorm3d(x[i], y[i], z[i]);
    nc[i] = normcdff(x[i]);
    ex[i] = erfcxf(x[i]);
    ei[i] = erfinvf(y[i]);
    ec[i] = erfcinvf(z[i]);
    ni[i] = normcdfinvf(y[i] * 0.5f);
    lg[i] = lgammaf(x[i]);
    tg[i] = tgamma(x[i]);
  }
}
"""

# CUDA's documented bounds (CUDA Math API, single precision), in ulps.
_BOUNDS = {"sp": 1, "cp": 1, "ss": 1, "sc": 1, "rc": 1, "rh": 2, "n3": 2, "r3": 2, "nc": 5, "ex": 4, "ei": 2, "ec": 4, "ni": 5, "lg": 6, "tg": 5}


def _approx_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(38)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, -0.5, 1.0, -1.0, 1.5, 2.0, -3.0, 0.25, 0.75,
                        1e-3, -1e-40, 8388607.5, 3e38, -3e38, 1e-45, 12.5, -14.0, -20.0, 6.0, 24.99, 25.0,
                        25.5, 30.0, 1e3, 1e10, -9.0, -9.5, 26.5, 2.0, 1 - 2.0 ** -24, 1 + 2.0 ** -23, 2 - 2.0 ** -23,
                        2 + 2.0 ** -22, -0.5, -1.5, -2.5, -10.5, -11.25, -1e-30, 35.0, 35.1, 1e36, 1e37, 171.5,
                        -42.5, -2.0 ** 23, 1e-30], np.float32)
    x = np.concatenate([special, rng.uniform(-8, 8, 400), rng.uniform(-1e5, 1e5, 200),
                        rng.standard_normal(200) * 3]).astype(np.float32)
    # y, z: also erfinv's and erfcinv's domains (|y| <= 1, 0 <= z <= 2), their ends and beyond.
    unit = np.array([1.0, -1.0, 0.5, -0.5, 1 - 2.0 ** -24, -1 + 2.0 ** -24, 1e-30, 2.0 ** -149, 0.999, 0.25],
                    np.float32)
    y = np.concatenate([np.roll(x, 3), unit, rng.uniform(-1, 1, 300)]).astype(np.float32)
    ends = np.array([0.0, 2.0, 1.0, 1e-38, 2.0 ** -149, 2 - 2.0 ** -23, 1 + 2.0 ** -23, 1 - 2.0 ** -24, 0.5, 1.5,
                     1e-5], np.float32)
    z = np.concatenate([np.roll(x, 11), ends, rng.uniform(0, 2, 299)]).astype(np.float32)
    x = np.concatenate([x, rng.uniform(-3, 3, 310)]).astype(np.float32)
    return x, y, z


def _mp_reference(x, y, z) -> dict[str, np.ndarray]:
    import mpmath

    mpmath.mp.prec = 120

    def each(fn, *cols):
        vals = []
        for row in zip(*(c.tolist() for c in cols)):
            vals.append(fn(*row))
        return np.array(vals, np.float64)

    def guard(fn):
        def run(*v):
            if any(math.isnan(a) for a in v) and not any(math.isinf(a) for a in v):
                return math.nan
            return fn(*[mpmath.mpf(a) for a in v])
        return run

    def as_float(v):
        return float(v)

    def sinpi(a):
        if mpmath.isinf(a):
            return math.nan
        return as_float(mpmath.sinpi(a))

    def cospi(a):
        if mpmath.isinf(a):
            return math.nan
        return as_float(mpmath.cospi(a))

    def rcbrt(a):
        return as_float(mpmath.sign(a) / mpmath.cbrt(abs(a)))

    def rhypot(a, b):
        if mpmath.isinf(a) or mpmath.isinf(b):
            return 0.0
        h = mpmath.sqrt(a * a + b * b)
        return math.inf if h == 0 else as_float(1 / h)

    def norm3(a, b, c):
        if any(mpmath.isinf(v) for v in (a, b, c)):
            return math.inf
        return as_float(mpmath.sqrt(a * a + b * b + c * c))

    def rnorm3(a, b, c):
        if any(mpmath.isinf(v) for v in (a, b, c)):
            return 0.0
        h = mpmath.sqrt(a * a + b * b + c * c)
        return math.inf if h == 0 else as_float(1 / h)

    def normcdf(a):
        return as_float(mpmath.erfc(-a / mpmath.sqrt(2)) / 2)

    def erfcx(a):
        if mpmath.isinf(a):
            return 0.0 if a > 0 else math.inf
        return as_float(mpmath.exp(a * a) * mpmath.erfc(a))

    def erfinv(a):
        if abs(a) > 1:
            return math.nan
        return as_float(mpmath.erfinv(a)) if abs(a) < 1 else math.copysign(math.inf, a)

    def erfcinv(a):
        if not 0 <= a <= 2:
            return math.nan
        if a in (0, 2):
            return math.inf if a == 0 else -math.inf
        return as_float(mpmath.erfinv(1 - a)) if a >= mpmath.mpf("0.5") else \
            as_float(mpmath.findroot(lambda t: mpmath.log(mpmath.erfc(t)) - mpmath.log(a), math.sqrt(-math.log(float(a)))))

    def normcdfinv(p):
        return as_float(-mpmath.sqrt(2) * erfcinv(2 * p)) if 0 < p < 1 else \
            (math.nan if not 0 <= p <= 1 else math.copysign(math.inf, p - 0.5))

    def lgamma(a):
        if mpmath.isinf(a) or (a <= 0 and a == mpmath.floor(a)):
            return math.inf
        return as_float(mpmath.loggamma(a).real) if a > 0 else as_float(mpmath.log(abs(mpmath.gamma(a))))

    def tgamma(a):
        if a == mpmath.inf:
            return math.inf
        if a == -mpmath.inf or (a < 0 and a == mpmath.floor(a)):
            return math.nan
        if a == 0:
            return math.inf  # the sign: set from x below
        return as_float(mpmath.gamma(a))

    sp = each(guard(sinpi), x)
    with np.errstate(all="ignore"):
        rc = np.where(np.isinf(x), np.copysign(0.0, x), np.where(x == 0, 1.0 / x, each(guard(rcbrt), np.where(
            np.isfinite(x) & (x != 0), x, 1.0))))  # CUDA: rcbrt(+-0) is +-inf, rcbrt(+-inf) is +-0
    sp = np.where(sp == 0, np.copysign(0.0, x), sp)  # C23's sinpi: a zero has x's sign (cospi: +0)
    cp = each(guard(cospi), x)
    ei = np.where(y == 0, y.astype(np.float64), each(guard(erfinv), y))  # erfinv(-0) is -0
    return {"sp": sp, "cp": cp, "ss": sp, "sc": cp, "rc": np.where(np.isnan(x), np.nan, rc),
            "rh": each(guard(rhypot), x, y), "n3": each(guard(norm3), x, y, z), "r3": each(guard(rnorm3), x, y, z),
            "nc": each(guard(normcdf), x), "ex": each(guard(erfcx), x), "ei": ei, "ec": each(guard(erfcinv), z),
            "ni": each(guard(normcdfinv), y * np.float32(0.5)), "lg": each(guard(lgamma), x),
            "tg": np.where(x == 0, np.copysign(np.inf, x), each(guard(tgamma), x))}


def _ulps(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in units of the float spacing at the exact value (inf where they differ in
    kind: NaN, infinity or sign of a zero)."""
    with np.errstate(over="ignore"):
        exact32 = exact.astype(np.float32)
    spacing = np.spacing(np.abs(exact32)).astype(np.float64)
    with np.errstate(all="ignore"):
        err = np.abs(got.astype(np.float64) - exact) / spacing
    same_kind = (np.isnan(got) & np.isnan(exact)) | ((got == exact) & (np.signbit(got) == np.signbit(exact))) | \
        (np.isinf(exact32) & (got == exact32))  # beyond float's range: the overflow to infinity
    finite = np.isfinite(got) & np.isfinite(exact) & ~((got == 0) & (exact == 0))
    return np.where(same_kind, 0.0, np.where(finite, err, np.inf))


@pytest.fixture(scope="module")
def approx_case():
    x, y, z = _approx_inputs()
    return x, y, z, _mp_reference(x, y, z)


@pytest.mark.parametrize("way", ["emulator", "c", "llvm"])
def test_float_functions_within_cuda_bounds(approx_case, way: str) -> None:
    x, y, z, want = approx_case
    n = x.size
    args = {"x": x, "y": y, "z": z, **{name: np.zeros(n, np.float32) for name in _BOUNDS}, "n": n}
    out = run_way(APPROX, "approx", (n + 127) // 128, 128, args, way)
    for name, bound in _BOUNDS.items():
        err = _ulps(out[name], want[name])
        if name == "lg":  # CUDA documents 6 ulp outside [-10.001, -2.264], a larger error inside
            with np.errstate(invalid="ignore"):
                err = np.where((x > -10.001) & (x < -2.264), np.minimum(err, np.abs(out[name] - want[name]) / 1e-6),
                               err)
        bad = np.flatnonzero(err > bound)
        assert bad.size == 0, (name, [(float(x[i]), float(y[i]), float(z[i]), float(out[name][i]), want[name][i])
                                      for i in bad[:4]])


CLASSIFY = """
#include <cmath>
__global__ void cls(const float* x, const double* y, int* b, float* r, long long* l, int* e, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    b[i] = (__isnanf(x[i]) != 0) + 2 * (__isinff(x[i]) != 0) + 4 * (__finitef(x[i]) != 0) + 8 * (__signbitf(x[i]) != 0)
         + 16 * (__isnan(y[i]) != 0) + 32 * (__isinf(y[i]) != 0) + 64 * (__finite(y[i]) != 0)
         + 128 * (__signbit(y[i]) != 0) + 256 * std::isnan(x[i]) + 512 * std::isinf(x[i]) + 1024 * std::isfinite(x[i]);
    r[i] = std::remainder(x[i], 0.75f);
    l[i] = std::lround(x[i]);
    e[i] = std::ilogb(x[i]);
  }
}
"""


@pytest.mark.parametrize("way", ["emulator", "c"])
def test_classification_functions_and_std_forms(way: str) -> None:
    """glibc's and CUDA's ``__isnanf``/``__finite``... (nonzero when true) and the ``std::`` forms."""
    x = np.array([0.0, -0.0, 1.5, -2.5, np.inf, -np.inf, np.nan, 3.0, -1e-40, 7.4], np.float32)
    y = x.astype(np.float64)[::-1].copy()
    n = x.size
    args = {"x": x, "y": y, "b": np.zeros(n, np.int32), "r": np.zeros(n, np.float32), "l": np.zeros(n, np.int64),
            "e": np.zeros(n, np.int32), "n": n}
    out = run_way(CLASSIFY, "cls", 1, 32, args, way)
    flags = [np.isnan(x), np.isinf(x), np.isfinite(x), np.signbit(x), np.isnan(y), np.isinf(y), np.isfinite(y),
             np.signbit(y), np.isnan(x), np.isinf(x), np.isfinite(x)]
    want_b = sum(f.astype(np.int32) << i for i, f in enumerate(flags))
    np.testing.assert_array_equal(out["b"], want_b)
    remainderf = _libm("remainderf", ctypes.c_float)
    want_r = np.array([remainderf(ctypes.c_float(v), ctypes.c_float(0.75)) for v in x.tolist()], np.float32)
    assert not _mismatches(out["r"], want_r).any(), (out["r"], want_r)
    ilogbf = _libm("ilogbf", ctypes.c_int)
    lroundf = _libm("llroundf", ctypes.c_longlong)
    # CUDA's conversion saturates an infinity and gives 0 for NaN (C leaves them unspecified).
    want_l = [lroundf(ctypes.c_float(v)) if math.isfinite(v) else 0 if math.isnan(v) else
              (2 ** 63 - 1 if v > 0 else -2 ** 63) for v in x.tolist()]
    np.testing.assert_array_equal(out["l"], np.array(want_l, np.int64))
    np.testing.assert_array_equal(out["e"], np.array([ilogbf(ctypes.c_float(v)) for v in x.tolist()], np.int32))


MIXED = """
#include <cmath>
__global__ void mixed(const float* x, double* d, double* lg, long long* lr, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    d[i] = std::remainder(x[i], 0.1) + std::nextafter(x[i], 2.0);
    double w = x[i];
    lg[i] = std::logb(w) + std::remainder(w, 0.75);
    lr[i] = std::lrint(w);
  }
}
"""


def test_std_double_forms_and_mixed_overloads() -> None:
    """libstdc++'s ``std::remainder(float, double)`` (a template returning double) is computed in
    double, as the C++ library defines it, not in the first argument's float; ``std::logb(double)``
    and the other ``std::`` double forms find the device functions (libstdc++'s ``using ::logb``
    sees the prelude's declaration)."""
    from frontend.clang_setup import header_mode

    if header_mode() != "system":
        pytest.skip("polypy's bundled <cmath> has no mixed-type templates (POLYPY_HEADERS=bundled)")
    x = np.array([0.0, -0.0, 1.5, -2.55, 7.4, 1e-40, 3e38, np.inf, np.nan], np.float32)
    x = x[np.isfinite(x) & (np.abs(x) < 1e18)]
    args = {"x": x, "d": np.zeros(x.size), "lg": np.zeros(x.size), "lr": np.zeros(x.size, np.int64), "n": x.size}
    out = run_way(MIXED, "mixed", 1, 32, args, "emulator")
    remainder = _libm("remainder", ctypes.c_double)
    nextafter = _libm("nextafter", ctypes.c_double)
    want = np.array([remainder(ctypes.c_double(v), ctypes.c_double(0.1)) +
                     nextafter(ctypes.c_double(v), ctypes.c_double(2.0)) for v in x.tolist()])
    assert not _mismatches(out["d"], want).any(), (out["d"], want)
    logb = _libm("logb", ctypes.c_double)
    llrint = _libm("llrint", ctypes.c_longlong)
    want_lg = np.array([logb(ctypes.c_double(v)) + remainder(ctypes.c_double(v), ctypes.c_double(0.75))
                        for v in x.tolist()])
    assert not _mismatches(out["lg"], want_lg).any(), (out["lg"], want_lg)
    np.testing.assert_array_equal(out["lr"], [llrint(ctypes.c_double(v)) for v in x.tolist()])


GRAD = """
__global__ void wrap(const double* x, const double* y, double* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    double r = remainder(x[i] * x[i], y[i]);
    int q;
    double s = remquo(x[i], 0.5 + y[i] * y[i], &q);
    out[i] = r * sin(x[i]) + s * q + nearbyint(y[i]) * x[i] + (double)lrint(y[i]) * y[i];
  }
}
"""


@pytest.mark.parametrize("grid,block", [((1,), (32,)), ((3,), (16,))])
def test_gradient_of_remainder_matches_finite_differences(tmp_path, grid, block) -> None:
    from autodiff.check import check_gradients
    from polypy.driver.gradients import grad_kernel

    path = tmp_path / "wrap.cu"
    path.write_text(GRAD)
    module = polypy.load(str(path))
    k_grad = grad_kernel(module, "wrap", wrt=["x", "y"])
    k_fwd = grad_kernel(module, "wrap", wrt=["x", "y"], mode="forward")
    n = grid[0] * block[0] - 3
    rng = np.random.default_rng(9)
    # Away from the jumps (x^2 / y and x / (0.5 + y^2) not near a half integer, y not near one).
    x = rng.uniform(0.5, 3.0, n)
    y = rng.uniform(0.3, 2.0, n)
    keep = (np.abs((x * x / y) % 1 - 0.5) > 0.05) & (np.abs((x / (0.5 + y * y)) % 1 - 0.5) > 0.05) & \
           (np.abs(y % 1 - 0.5) > 0.05)
    x, y = np.where(keep, x, 1.25), np.where(keep, y, 1.1)
    args = {"x": x, "y": y, "out": np.zeros(n), "n": n}
    result = check_gradients(module.kernel("wrap"), k_grad, grid, block, args, k_fwd=k_fwd)
    assert abs(result.finite_difference) > 1e-8
    assert result.error() < 1e-6, result
    assert result.forward_effect_error < 1e-12, result


def test_gradient_through_the_exponent_functions_is_refused_at_the_call(tmp_path) -> None:
    """``logb`` and ``nextafter`` are written on the bits (``bitcast``), which has no derivative
    rule: ``grad`` refuses with the source location, never a silent zero."""
    from polypy.driver.gradients import grad_kernel

    path = tmp_path / "bits.cu"
    path.write_text("__global__ void k(const double* x, double* o) {\n  int i = threadIdx.x;\n"
                    "  o[i] = nextafter(x[i], 2.0) * x[i];\n}\n")
    module = polypy.load(str(path))
    with pytest.raises(UserError) as info:
        grad_kernel(module, "k", wrt=["x"])
    assert "bits.cu:3:10: error: cannot differentiate the bit cast" in str(info.value), str(info.value)

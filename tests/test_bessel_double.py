"""The double ``y0``, ``y1``, ``jn``, ``yn`` in device code (issue 36; frontend/lower/bessel_y_double.py,
bessel_n.py): against mpmath at 200 bits (the exact value kept as a double and its relative rest, so
sub-ulp errors are measured) on the emulator, the C and the LLVM backend, within the bound polypy
measured (asserted) beside CUDA's documented one (CUDA C++ Programming Guide, Mathematical Functions
appendix: ``y0``, ``y1`` 7 ulp for |x| < 8, an absolute error of 5e-12 otherwise; ``jn`` an absolute
error of 5e-12 (documented for n = 128); ``yn`` 5e-12 absolute for |x| > 1.5n). Zeros, infinities,
NaN, subnormals, negative arguments, the doubles next to the zeros of ``Y_0``, ``Y_1`` and 0.02 from
them (where the Taylor windows end), tiny arguments; ``grad`` against the recurrences
``y0' = -y1``, ``y1' = y0 - y1/x``, ``Z_n' = (Z_(n-1) - Z_(n+1)) / 2``. The ``many_inputs`` tests are in
the extended tier."""
from __future__ import annotations

import math

import numpy as np
import pytest

from c_support import run_way
from test_math_library2 import exact_pair, ulps

mpmath = pytest.importorskip("mpmath")

BESSEL_Y = """
__global__ void by(const double* x, double* y0v, double* y1v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y0v[i] = y0(x[i]);
    y1v[i] = y1(x[i]);
  }
}
"""
Y_POLYPY = 2.5  # measured: 1.8 (y0 just below 2^-30), 1.4 (y1); CUDA: 7
FAR_ABSOLUTE = 1e-15  # measured: 3.2e-16 from 8 on; CUDA: 5e-12


def _hankel_reference(nu: int, a: float):
    """Y_nu far out (mpmath's series are slow there): Hankel's leading terms, exact enough past 1e7."""
    b = mpmath.mpf(a)
    chi = b - (2 * nu + 1) * mpmath.pi / 4
    mu = 4 * nu * nu
    p, q = 1 - (mu - 1) * (mu - 9) / (128 * b ** 2), (mu - 1) / (8 * b)
    return mpmath.sqrt(2 / (mpmath.pi * b)) * (p * mpmath.sin(chi) + q * mpmath.cos(chi))


def _y_inputs(count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    near = []
    for nu in (0, 1):
        for k in range(1, 8):
            root = float(mpmath.besselyzero(nu, k))
            near += [root, np.nextafter(root, 0.0), np.nextafter(root, 99.0), root + 0.0199, root - 0.0201,
                     root + 0.0201, root - 0.0199]
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 1e-310, 2.2250738585072014e-308, 1e-300, 1e-20,
               2.0 ** -30, np.nextafter(2.0 ** -30, 0.0), 7.999999999, 8.0, 15.999999999, 16.0, 1e5, 1e22, 1e300,
               1.7976931348623157e308, -1.0, -1e-300, 0.5, 1.0, 2.0, 1.1229189671337703]
    x = np.concatenate([special, near, rng.uniform(0, 8, count), rng.uniform(0, 40, count // 2),
                        10.0 ** rng.uniform(-12, 1.2, count // 4), -rng.uniform(0, 10, 8)])
    return x


def _y_reference(x: np.ndarray) -> dict[str, np.ndarray]:
    mpmath.mp.prec = 200
    want = {}
    for name, nu in (("y0v", 0), ("y1v", 1)):
        pairs = []
        for a in x.tolist():
            if math.isnan(a) or a < 0:
                v = math.nan
            elif a == 0:
                v = -math.inf
            elif math.isinf(a):
                v = 0.0
            elif a > 1e7:
                v = _hankel_reference(nu, a)
            else:
                v = mpmath.bessely(nu, mpmath.mpf(a))
            pairs.append(exact_pair(v))
        want[name] = np.array(pairs).T
    return want


def _check_y(way: str, count: int, seed: int) -> None:
    x = _y_inputs(count, seed)
    want = _y_reference(x)
    n = x.size
    out = run_way(BESSEL_Y, "by", (n + 127) // 128, 128, {"x": x, "y0v": np.zeros(n), "y1v": np.zeros(n), "n": n},
                  way, name="by.cu")
    for name in want:
        err = ulps(out[name], want[name])
        with np.errstate(invalid="ignore"):
            absolute = np.abs(out[name] - want[name][0])
        far = (x >= 8) & np.isfinite(x)  # CUDA bounds the absolute error there
        err = np.where(far & (absolute <= FAR_ABSOLUTE), 0.0, err)
        bad = np.flatnonzero(err > Y_POLYPY)
        assert bad.size == 0, (name, [(float(x[i]), float(out[name][i]), want[name][:, i].tolist(), float(err[i]))
                                      for i in bad[:4]])


@pytest.mark.parametrize("way", ["emulator", "c", "llvm"])
def test_double_y0_y1_within_bounds(way: str) -> None:
    _check_y(way, 60, 60)


@pytest.mark.parametrize("way", ["emulator", "c", "llvm"])
def test_double_y0_y1_many_inputs(way: str) -> None:
    _check_y(way, 1500, 61)


def test_double_y_special_values() -> None:
    """C99's and CUDA's special values, exactly: y(+-0) = -inf, y(x < 0) = NaN (-inf too), y(+inf) = +0,
    y(NaN) = NaN; y1 of the smallest subnormal overflows to -inf."""
    x = np.array([0.0, -0.0, -1e-300, -np.inf, np.inf, np.nan, 5e-324])
    n = x.size
    out = run_way(BESSEL_Y, "by", 1, 32, {"x": x, "y0v": np.zeros(n), "y1v": np.zeros(n), "n": n}, "emulator",
                  name="by.cu")
    for name in ("y0v", "y1v"):
        got = out[name]
        assert got[0] == -np.inf and got[1] == -np.inf, got
        assert np.isnan(got[2]) and np.isnan(got[3]) and np.isnan(got[5]), got
        assert got[4] == 0.0 and not np.signbit(got[4]), got
    assert out["y1v"][6] == -np.inf
    assert abs(out["y0v"][6] - float(2 / mpmath.pi * (mpmath.log(mpmath.mpf(5e-324) / 2) + mpmath.euler))) < 1e-13


BESSEL_N = """
__global__ void bn(const int* order, const double* x, double* jv, double* yv, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    jv[i] = jn(order[i], x[i]);
    yv[i] = yn(order[i], x[i]);
  }
}
"""
N_RELATIVE = 40  # ulp, below |x| = n (measured on 3,000 inputs: 24 for jn, 29 for yn); CUDA: none documented
N_ABSOLUTE = 2e-15  # from |x| = n on (measured: 7.5e-16, jn(16, -16.04)); CUDA: 5e-12


def _check_n(way: str, count: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    order = np.concatenate([[0, 1, 2, 5, -1, -3, 3, 2, 2, 2, 2, 2, 7, 30, 100, 128, 128, 2, 128, 128, 50, 50, 3, 1,
                             2, 3, 4, 3, 1, 5],
                            rng.integers(0, 60, count)]).astype(np.int32)
    x = np.concatenate([[1.5, -2.5, 3.0, 0.0, 1.0, 2.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -7.25, 1e-300, 31.0,
                         50.0, 128.0, 140.0, 1e6, 127.9, 192.5, 49.9, 75.1, 3.0000001, 5e-324, 1e-301, -1e-301,
                         1e-301, -np.inf, -3.5, -0.25],
                        rng.uniform(-60, 60, count // 2), 10.0 ** rng.uniform(-3, 2, count - count // 2)])
    mpmath.mp.prec = 200
    want = {"jv": [], "yv": []}
    for k, a in zip(order.tolist(), x.tolist()):
        for name in want:
            if k < 0 or math.isnan(a):
                v = math.nan
            elif name == "yv" and a < 0:
                v = math.nan
            elif name == "yv" and a == 0:
                v = -math.inf
            elif math.isinf(a):  # J_n odd for odd n: jn(n, -inf) = -0
                v = math.copysign(0.0, a) if name == "jv" and k % 2 else 0.0
            elif name == "jv" and a == 0:
                v = 1.0 if k == 0 else (a if k % 2 else 0.0)
            else:
                v = (mpmath.besselj if name == "jv" else mpmath.bessely)(k, mpmath.mpf(a))
            want[name].append(exact_pair(v))
    want = {k: np.array(v).T for k, v in want.items()}
    n = x.size
    out = run_way(BESSEL_N, "bn", (n + 127) // 128, 128, {"order": order, "x": x, "jv": np.zeros(n),
                                                         "yv": np.zeros(n), "n": n}, way, name="bn.cu")
    ax = np.abs(x)
    for name in want:
        err = ulps(out[name], want[name])
        with np.errstate(invalid="ignore"):
            absolute = np.abs(out[name] - want[name][0])
        # CUDA bounds the absolute error (yn: for |x| > 1.5n); polypy is also checked in ulps below n
        absolute_ok = np.isfinite(x) & (absolute <= N_ABSOLUTE) & ((ax >= order) if name == "jv" else (ax > order))
        err = np.where(absolute_ok, 0.0, err)
        bad = np.flatnonzero(err > N_RELATIVE)
        assert bad.size == 0, (name, [(int(order[i]), float(x[i]), float(out[name][i]), want[name][:, i].tolist(),
                                       float(err[i])) for i in bad[:4]])


@pytest.mark.parametrize("way", ["emulator", "c", "llvm"])
def test_double_bessel_of_any_order_within_bounds(way: str) -> None:
    _check_n(way, 80, 62)


@pytest.mark.parametrize("way", ["emulator", "c", "llvm"])
def test_double_bessel_of_any_order_many_inputs(way: str) -> None:
    _check_n(way, 1500, 63)


GRAD = """
__global__ void bg(const double* a, const double* b, const double* c, const double* d, const int* k, double* out,
                   int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = y0(a[i]) + y1(b[i]) + jn(k[i], c[i]) + yn(k[i], d[i]);
  }
}
"""


def test_gradients_follow_the_bessel_recurrences(tmp_path) -> None:
    """``grad`` differentiates the IR the functions are written in: reverse and forward derivatives
    against mpmath's ``y0' = -y1``, ``y1' = y0 - y1/x``, ``Z_n' = (Z_(n-1) - Z_(n+1)) / 2``
    (``Z_0' = -Z_1``), and against central differences."""
    from autodiff.check import check_gradients, shadow_pairs
    from polypy.driver.gradients import grad_kernel
    from polypy.emulator import emulate

    import polypy

    path = tmp_path / "bg.cu"
    path.write_text(GRAD)
    module = polypy.load(str(path))
    rng = np.random.default_rng(64)
    n = 24
    args = {"a": rng.uniform(0.2, 30.0, n), "b": rng.uniform(0.2, 30.0, n), "c": rng.uniform(-20.0, 20.0, n),
            "d": rng.uniform(0.5, 25.0, n), "k": rng.integers(0, 7, n).astype(np.int32), "out": np.zeros(n), "n": n}
    kernel = module.kernel("bg")
    k_grad = grad_kernel(module, "bg", wrt=["a", "b", "c", "d"])
    pairs = shadow_pairs(kernel, k_grad)
    g = {p.name: (args[p.name].copy() if isinstance(args[p.name], np.ndarray) else args[p.name])
         for p in kernel.params}
    for p in ("a", "b", "c", "d"):
        g[pairs[p]] = np.zeros(n)
    g[pairs["out"]] = np.ones(n)
    emulate(k_grad, (1,), (32,), g)
    mpmath.mp.prec = 100

    def derivative(fn, order: int, v: float) -> float:
        if order == 0:
            return -float(fn(1, v))
        return float((fn(order - 1, v) - fn(order + 1, v)) / 2)

    want = {"a": [derivative(mpmath.bessely, 0, v) for v in args["a"]],
            "b": [float(mpmath.bessely(0, v) - mpmath.bessely(1, v) / v) for v in args["b"]],
            "c": [derivative(mpmath.besselj, int(o), v) for o, v in zip(args["k"], args["c"])],
            "d": [derivative(mpmath.bessely, int(o), v) for o, v in zip(args["k"], args["d"])]}
    for p, values in want.items():
        np.testing.assert_allclose(g[pairs[p]], values, rtol=1e-9, atol=1e-12, err_msg=p)
    k_fwd = grad_kernel(module, "bg", wrt=["a", "b", "c", "d"], mode="forward")
    result = check_gradients(kernel, k_grad, (1,), (32,), args, k_fwd=k_fwd)
    assert abs(result.finite_difference) > 1e-2
    assert result.error() < 1e-7, result
    assert result.forward_effect_error < 1e-12, result

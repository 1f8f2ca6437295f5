"""The "numpy" variant: each kernel as idiomatic vectorized NumPy, in the kernel's precision.

What a NumPy user would write for the same computation (whole-array expressions, BLAS where the
computation is a matrix product), storing into the kernel's output arrays in place. NumPy runs
element-wise code on one core; only BLAS calls (matmul, backprop) use threads.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from bench.references import nbody_accelerations
from bench.runner import Runner, Skip
from samples.spec import Case, Sample

Args = dict[str, Any]


def saxpy(a: Args, case: Case) -> None:
    y = a["y"]
    y += a["a"] * a["x"]


def matmul_tiled(a: Args, case: Case) -> None:
    m, n, k = int(a["M"]), int(a["N"]), int(a["K"])
    np.matmul(a["A"].reshape(m, k), a["B"].reshape(k, n), out=a["C"].reshape(m, n))


def reduce_sum(a: Args, case: Case) -> None:
    a["out"][0] += a["in"].sum()


def transpose_tiled(a: Args, case: Case) -> None:
    rows, cols = int(a["rows"]), int(a["cols"])
    a["out"].reshape(cols, rows)[...] = a["in"].reshape(rows, cols).T


def stencil1d(a: Args, case: Case) -> None:
    x, w, out = a["in"], a["w"], a["out"]
    radius = (w.size - 1) // 2
    padded = np.pad(x, radius)
    out[...] = 0
    for k in range(w.size):
        out += w[k] * padded[k:k + x.size]


def jacobi2d(a: Args, case: Case) -> None:
    nx, ny = int(a["nx"]), int(a["ny"])
    u, out = a["in"].reshape(ny, nx), a["out"].reshape(ny, nx)
    out[...] = u
    out[1:-1, 1:-1] = np.float32(0.25) * (u[1:-1, :-2] + u[1:-1, 2:] + u[:-2, 1:-1] + u[2:, 1:-1])


def softmax_rows(a: Args, case: Case) -> None:
    cols = int(a["cols"])
    x, y = a["x"].reshape(-1, cols), a["y"].reshape(-1, cols)
    np.subtract(x, x.max(axis=1, keepdims=True), out=y)
    np.exp(y, out=y)
    y /= y.sum(axis=1, keepdims=True)


def histogram(a: Args, case: Case) -> None:
    bins = a["bins"]
    bins += np.bincount(a["data"][:int(a["n"])], minlength=bins.size).astype(bins.dtype)


def backprop_layerforward(a: Args, case: Case) -> None:
    height = case.block[1]
    hid = int(a["hid"])
    x = a["input"].reshape(-1, 1, height)
    w = a["weights"].reshape(-1, height, hid)
    np.matmul(x, w, out=a["partial_sums"].reshape(-1, 1, hid))


def nbody_step(a: Args, case: Case) -> None:
    dt = a["dt"]
    acc = nbody_accelerations(a["pos"], float(a["eps2"]), np.float32)
    new_vel, new_pos = a["new_vel"].reshape(-1, 4), a["new_pos"].reshape(-1, 4)
    new_vel[...] = a["vel"].reshape(-1, 4)
    new_vel[:, :3] += dt * acc
    new_pos[...] = a["pos"].reshape(-1, 4)
    new_pos[:, :3] += dt * new_vel[:, :3]


def prefix_scan(a: Args, case: Case) -> None:
    segment, nsegments = case.block[0], case.grid[0]
    x, n = a["in"], int(a["n"])
    padded = np.zeros(segment * nsegments, dtype=x.dtype)
    padded[:n] = x
    scanned = np.cumsum(padded.reshape(nsegments, segment), axis=1)
    a["out"][...] = scanned.reshape(-1)[:n]
    a["block_sums"][...] = scanned[:, -1]


def spmv_csr(a: Args, case: Case) -> None:
    row_ptr, y = a["row_ptr"], a["y"]
    products = a["vals"] * a["x"][a["col_idx"]]
    nonempty = row_ptr[1:] > row_ptr[:-1]  # reduceat would misread empty rows
    y[...] = 0
    y[nonempty] = np.add.reduceat(products, row_ptr[:-1][nonempty])


def conv2d(a: Args, case: Case) -> None:
    h, w = int(a["height"]), int(a["width"])
    mask, out = a["mask"], a["out"].reshape(h, w)
    taps = int(round(mask.size ** 0.5))
    radius = (taps - 1) // 2
    padded = np.pad(a["img"].reshape(h, w), radius)
    out[...] = 0
    for dy in range(taps):
        for dx in range(taps):
            out += mask[dy * taps + dx] * padded[dy:dy + h, dx:dx + w]


def layernorm(a: Args, case: Case) -> None:
    cols = int(a["cols"])
    x, y = a["x"].reshape(-1, cols), a["y"].reshape(-1, cols)
    mean = x.mean(axis=1, keepdims=True)
    np.subtract(x, mean, out=y)
    var = np.mean(y * y, axis=1, keepdims=True)
    y *= 1 / np.sqrt(var + a["eps"])
    y *= a["gamma"]
    y += a["beta"]


def _erfc(x: np.ndarray) -> np.ndarray:
    """erfc without SciPy (NumPy has none): Abramowitz & Stegun 7.1.26, |error| < 1.5e-7."""
    z = np.abs(x)
    t = 1 / (1 + np.float32(0.3275911) * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    e = (poly * np.exp(-z * z)).astype(x.dtype)
    return np.where(x >= 0, e, 2 - e)


def blackscholes(a: Args, case: Case) -> None:
    s, x, t, r, v = a["S"], a["X"], a["T"], a["R"], a["V"]
    sqrt_t = np.sqrt(t)
    d1 = (np.log(s / x) + (r + np.float32(0.5) * v * v) * t) / (v * sqrt_t)
    d2 = d1 - v * sqrt_t
    discount = x * np.exp(-r * t)
    half, k = np.float32(0.5), np.float32(0.70710678118654752440)
    a["call"][...] = s * half * _erfc(-d1 * k) - discount * half * _erfc(-d2 * k)
    a["put"][...] = discount * half * _erfc(d2 * k) - s * half * _erfc(d1 * k)


NUMPY_PORTS: dict[str, Callable[[Args, Case], None]] = {
    f.__name__: f for f in (saxpy, matmul_tiled, reduce_sum, transpose_tiled, stencil1d, jacobi2d, softmax_rows,
                            histogram, backprop_layerforward, nbody_step, prefix_scan, spmv_csr, conv2d, layernorm,
                            blackscholes)
}


def make_numpy_variant(sample: Sample, case: Case) -> Runner:
    """Run ``sample`` at ``case`` with its NumPy port."""
    port = NUMPY_PORTS.get(sample.name)
    if port is None:
        raise Skip(f"no NumPy port of {sample.name}")
    return lambda args: port(args, case)

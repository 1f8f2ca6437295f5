"""C++ in device code, third round (docs/cxx_device.md): a gradient through references chosen
at run time, device lambdas and an array of constructed records (reverse and forward mode
against central finite differences, the forward effect against NumPy), and a whole program
using them through ``run --emulate``, ``run`` and ``translate`` compiled natively."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

import polypy


# ---------------------------------------------------------------------------- gradients
GRAD_KERNEL = r"""
struct G3 {
  double x, y, z;
  __device__ G3() : G3(0.0, 0.0, 0.0) {}
  __device__ G3(double a, double b, double c) : x(a), y(b), z(c) {}
  __device__ double& operator[](int k) { switch (k) { case 0: return x; case 1: return y; default: return z; } }
};

__global__ void mixed(const double* p, double* e, double k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  G3 g[2];
  g[0] = G3(p[3 * i], p[3 * i + 1], p[3 * i + 2]);
  g[1][i % 3] = k;
  double s = 0.5;
  auto f = [&, s](auto v) { return v * v * s + k; };
  auto acc = [t = 0.0](double v) mutable { t += v; return t; };
  for (int j = 0; j < 3; j++) acc(f(g[0][j]) + g[1][j]);
  e[i] = acc(0.0) * sin(g[0][i % 3]);
}
"""


@pytest.mark.parametrize("grid,block", [((1,), (32,)), ((3,), (16,))])
def test_gradient_through_choices_lambdas_and_record_arrays(tmp_path, grid, block) -> None:
    from autodiff.check import check_gradients
    from polypy.driver.gradients import grad_kernel

    path = tmp_path / "mixed.cu"
    path.write_text(GRAD_KERNEL)
    module = polypy.load(str(path))
    k_grad = grad_kernel(module, "mixed", wrt=["p", "k"])
    k_fwd = grad_kernel(module, "mixed", wrt=["p", "k"], mode="forward")
    n = grid[0] * block[0] - 3
    rng = np.random.default_rng(5)
    p = rng.standard_normal(3 * n)
    args = {"p": p, "e": np.zeros(n), "k": 0.7, "n": n}
    result = check_gradients(module.kernel("mixed"), k_grad, grid, block, args, k_fwd=k_fwd)
    assert abs(result.finite_difference) > 1e-8
    assert result.error() < 1e-6, result
    assert result.forward_effect_error < 1e-12, result
    # the forward effect itself, against NumPy
    e = dict(args, e=np.zeros(n))
    polypy.emulate(module.kernel("mixed"), grid, block, e)
    q = p.reshape(n, 3)
    i = np.arange(n)
    total = (q * q * 0.5 + 0.7).sum(axis=1) + 0.7
    np.testing.assert_allclose(e["e"], total * np.sin(q[i, i % 3]), rtol=1e-12)


# ---------------------------------------------------------------------------- a whole program
PROGRAM = r"""#include <cstdio>
struct Acc {
  float sum;
  int count;
  __device__ Acc() : Acc(0.0f) {}
  __device__ Acc(float s) : sum(s), count(0) {}
  __device__ void add(float v) { sum += v; count++; }
};
struct V3 {
  float x, y, z;
  __device__ float& operator[](int k) { if (k == 0) return x; if (k == 1) return y; return z; }
};
struct MinMax { float lo, hi; };
__device__ MinMax range(const float* p, int m) {
  MinMax r{p[0], p[0]};
  for (int j = 1; j < m; j++) { r.lo = fminf(r.lo, p[j]); r.hi = fmaxf(r.hi, p[j]); }
  return r;
}
__global__ void stats(const float* x, float* out, int n, int m) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Acc acc[2];
  int calls = 0;
  auto bucket = [&calls, m](int j) { calls++; return (j * 2 < m) ? 0 : 1; };
  for (int j = 0; j < m; j++) acc[bucket(j)].add(x[i * m + j]);
  auto [lo, hi] = range(x + i * m, m);
  V3 v = {acc[0].sum, acc[1].sum, hi - lo};
  auto scale = [s = 0.5f](auto u) { return u * s; };
  v[i % 3] = scale(v[i % 3]);
  out[i] = v.x + 10.0f * v.y + 100.0f * v.z + acc[0].count + 1000 * calls;
}
int main() {
  const int n = 40, m = 6;
  float hx[n * m], ho[n];
  for (int k = 0; k < n * m; k++) hx[k] = (float)((k * 7) % 13) - 6.0f;
  float *x, *out;
  cudaMalloc(&x, sizeof(hx));
  cudaMalloc(&out, sizeof(ho));
  cudaMemcpy(x, hx, sizeof(hx), cudaMemcpyHostToDevice);
  stats<<<(n + 15) / 16, 16>>>(x, out, n, m);
  cudaMemcpy(ho, out, sizeof(ho), cudaMemcpyDeviceToHost);
  float total = 0.0f;
  for (int i = 0; i < n; i++) total += ho[i];
  printf("%.2f %.2f %.2f\n", total, ho[0], ho[n - 1]);
  cudaFree(x); cudaFree(out);
  return 0;
}
"""


def _program_expected() -> str:
    n, m = 40, 6
    x = ((np.arange(n * m) * 7) % 13 - 6.0).reshape(n, m)
    out = np.zeros(n)
    for i in range(n):
        v = [x[i, :3].sum(), x[i, 3:].sum(), x[i].max() - x[i].min()]
        v[i % 3] *= 0.5
        out[i] = v[0] + 10 * v[1] + 100 * v[2] + 3 + 1000 * m
    return f"{out.sum():.2f} {out[0]:.2f} {out[-1]:.2f}\n"


def test_a_program_run_emulated_and_translated(tmp_path: pathlib.Path) -> None:
    from c_support import need_compiler
    from codegen.c import find_compiler

    expected = _program_expected()
    path = tmp_path / "prog.cu"
    path.write_text(PROGRAM)
    cli = [sys.executable, "-m", "polypy.driver.cli"]
    emulated = subprocess.run(cli + ["run", str(path), "--emulate"], capture_output=True, text=True)
    assert emulated.returncode == 0, emulated.stderr
    assert emulated.stdout == expected
    ran = subprocess.run(cli + ["run", str(path)], capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout == expected, (ran.stdout, ran.stderr)
    need_compiler(cpp=True)
    out = tmp_path / "prog.cpp"
    done = subprocess.run(cli + ["translate", str(path), "-o", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    exe = tmp_path / "prog"
    built = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", str(out), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    native = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert native.returncode == 0 and native.stdout == expected, (native.stdout, native.stderr)

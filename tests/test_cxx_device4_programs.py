"""C++ in device code, issue 36's fourth round (docs/cxx_device.md): a whole program using a matrix
member of a by-value kernel parameter, range-based ``for`` (an array, ``std::array``), a returned
lambda, ``[*this]``, a record holding a lambda and ``std::max`` of records, through
``run --emulate``, ``run`` and ``translate`` compiled natively, against NumPy."""
from __future__ import annotations

import pathlib
import subprocess

import numpy as np
import pytest

from c_support import polypy_cli, translate_and_compile
from frontend.clang_setup import header_mode

PROGRAM = r"""#include <cstdio>
#include <algorithm>
#include <array>
struct M { float a[3][3]; };
struct Best {
  float v;
  int at;
  __device__ bool operator<(const Best& o) const { return v < o.v; }
};
struct Shift {
  float d;
  __device__ auto adder() const { return [*this](float u) { return u + d; }; }
};
template <class F> struct Twice { F f; __device__ float operator()(float u) const { return f(f(u)); } };
__device__ auto make_scale(float s) { return [s](float u) { return s * u; }; }

__global__ void mix(M m, const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  std::array<float, 3> v = {x[3 * i], x[3 * i + 1], x[3 * i + 2]};
  float y[3];
  for (int r = 0; r < 3; r++) {                 // y = m v
    y[r] = 0.0f;
    int c = 0;
    for (float e : v) y[r] += m.a[r][c++] * e;
  }
  Best best{y[0], 0};
  for (int r = 1; r < 3; r++) best = std::max(best, Best{y[r], r});
  Shift sh{1.5f};
  auto add = sh.adder();
  sh.d = 100.0f;                                // not seen by add
  auto scale = make_scale(2.0f);
  Twice<decltype(scale)> t{scale};
  float s = 0.0f;
  for (float e : y) s += add(e);
  out[i] = t(s) + 1000.0f * best.at;
}
int main() {
  const int n = 20;
  float hx[3 * n], ho[n];
  for (int k = 0; k < 3 * n; k++) hx[k] = (float)((k * 5) % 11) - 5.0f;
  M m;
  for (int r = 0; r < 3; r++) for (int c = 0; c < 3; c++) m.a[r][c] = (float)(r + 1) * (c == r ? 2.0f : 0.5f) - c;
  float *x, *out;
  cudaMalloc(&x, sizeof(hx));
  cudaMalloc(&out, sizeof(ho));
  cudaMemcpy(x, hx, sizeof(hx), cudaMemcpyHostToDevice);
  mix<<<(n + 7) / 8, 8>>>(m, x, out, n);
  cudaMemcpy(ho, out, sizeof(ho), cudaMemcpyDeviceToHost);
  float total = 0.0f;
  for (int i = 0; i < n; i++) total += ho[i];
  printf("%.2f %.2f %.2f\n", total, ho[0], ho[n - 1]);
  cudaFree(x); cudaFree(out);
  return 0;
}
"""


def _expected() -> str:
    n = 20
    x = ((np.arange(3 * n) * 5) % 11 - 5.0).reshape(n, 3)
    m = np.array([[(r + 1) * (2.0 if c == r else 0.5) - c for c in range(3)] for r in range(3)])
    out = np.zeros(n)
    for i in range(n):
        y = m @ x[i]
        at = 0
        for r in range(1, 3):
            if y[at] < y[r]:  # std::max(best, {y[r], r}): the second when best < it
                at = r
        s = (y + 1.5).sum()
        out[i] = 4 * s + 1000 * at
    return f"{out.sum():.2f} {out[0]:.2f} {out[-1]:.2f}\n"


def test_a_program_run_emulated_and_translated(tmp_path: pathlib.Path) -> None:
    if header_mode() != "system":
        pytest.skip("no system C++ headers (libstdc++'s <array>, <algorithm>): polypy's bundled ones declare less")
    expected = _expected()
    path = tmp_path / "prog.cu"
    path.write_text(PROGRAM)
    emulated = polypy_cli("run", str(path), "--emulate")
    assert emulated.returncode == 0 and emulated.stdout == expected, (emulated.stdout, emulated.stderr)
    ran = polypy_cli("run", str(path))
    assert ran.returncode == 0 and ran.stdout == expected, (ran.stdout, ran.stderr)
    exe = translate_and_compile(path)
    native = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert native.returncode == 0 and native.stdout == expected, (native.stdout, native.stderr)

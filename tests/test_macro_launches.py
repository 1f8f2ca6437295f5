"""Launches written in a macro's argument that the macro expands more than once, each expansion
with its own meaning of the launch's template arguments: the pattern of PyTorch's
``AT_DISPATCH_FLOATING_TYPES(t, "f", [&] { k<scalar_t><<<g, b>>>(...); })`` (one lambda per type).
The launch is replaced where it is written, and each expansion picks its kernel instance at
compile time (``__is_same(scalar_t, double)``)."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
from c_support import need_compiler

PROGRAM = r"""
#include <cuda_runtime.h>
#include <stdio.h>
#define DISPATCH(is_double, ...) \
  do { if (is_double) { using scalar_t = double; __VA_ARGS__(); } else { using scalar_t = float; __VA_ARGS__(); } } while (0)

template <typename T>
__global__ void third(int n, T* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = (T)i / 3;
}

template <typename T>
__global__ void twice(int n, T* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] *= 2;
}

void run(bool is_double, int n, void* out) {
  // two launches in one lambda, the lambda expanded twice
  DISPATCH(is_double, [&] {
    third<scalar_t><<<(n + 31) / 32, 32>>>(n, (scalar_t*)out);
    twice<scalar_t><<<(n + 31) / 32, 32>>>(n, (scalar_t*)out);
  });
}

int main() {
  double* d;
  float* f;
  cudaMallocManaged(&d, 100 * sizeof(double));
  cudaMallocManaged(&f, 100 * sizeof(float));
  run(true, 100, d);
  run(false, 100, f);
  cudaDeviceSynchronize();
  printf("%.17g %.9g\n", d[7], (double)f[7]);
  return 0;
}
"""


def test_launches_in_a_macro_argument_expanded_per_type(tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    src = tmp_path / "dispatch.cu"
    src.write_text(PROGRAM)
    out = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", str(src)], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    double, single = out.stdout.split()
    assert float(double) == (7 / 3) * 2  # %.17g: the double exactly
    assert np.float32(single) == np.float32(7) / np.float32(3) * np.float32(2)  # %.9g: the float exactly

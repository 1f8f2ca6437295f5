"""A lambda passed to a launching host function template ("parallel_for" wrapper) declared in a
namespace (nested, calling another wrapper): the closure's record and launcher are declared at
the file's global scope before the outermost namespace holding the wrapper
(``frontend.instance_places.closure_home``). Checked against the hand-computed output through
``run --emulate``, ``run`` (LLVM) and ``translate`` compiled natively."""
from __future__ import annotations

import pathlib
import subprocess
import sys

from c_support import assert_load_refused, need_compiler

PROGRAM = r"""#include <cstdio>
template <class F> __global__ void each(int n, F f) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) f(i);
}
namespace lib {
namespace detail {
template <class F> void launch(int n, F f) { each<<<(n + 31) / 32, 32>>>(n, f); }
}  // namespace detail
template <class F> void parallel_for(int n, const F& f) { detail::launch(n, f); }
}  // namespace lib
int main() {
  const int n = 70;
  float* d;
  cudaMalloc(&d, n * sizeof(float));
  float s = 0.5f;
  int k = 3;
  lib::parallel_for(n, [=] __device__ (int i) { d[i] = s * i + k; });
  lib::detail::launch(n, [=] __device__ (int i) { d[i] += (i % 2) * s; });
  float h[n];
  cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
  float t = 0.0f;
  for (int i = 0; i < n; i++) t += h[i];
  printf("%.2f %.2f %.2f\n", t, h[1], h[n - 1]);
  cudaFree(d);
  return 0;
}
"""


def _expected() -> str:
    h = [0.5 * i + 3 + (i % 2) * 0.5 for i in range(70)]
    return f"{sum(h):.2f} {h[1]:.2f} {h[-1]:.2f}\n"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True)


def test_wrappers_in_namespaces_emulated_and_run(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "ns.cu"
    path.write_text(PROGRAM)
    for how in (["--emulate"], []):
        done = _cli("run", str(path), *how)
        assert done.returncode == 0, done.stderr
        assert done.stdout == _expected(), (how, done.stdout)


def test_wrappers_in_namespaces_translated(tmp_path: pathlib.Path) -> None:
    from codegen.c import find_compiler

    need_compiler(cpp=True)
    path = tmp_path / "ns.cu"
    path.write_text(PROGRAM)
    out = tmp_path / "ns.cpp"
    done = _cli("translate", str(path), "-o", str(out))
    assert done.returncode == 0, done.stderr
    exe = tmp_path / "ns"
    built = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", str(out), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and ran.stdout == _expected(), (ran.stdout, ran.stderr)


def test_a_kernel_template_in_the_namespace_is_still_refused(tmp_path: pathlib.Path) -> None:
    # The kernel instance would have to follow the closure type, declared in main after it.
    assert_load_refused(tmp_path, "kernel_in_ns",
                        "namespace lib {\n"
                        "template <class F> __global__ void each(int n, F f) { if (threadIdx.x < n) f(threadIdx.x); }\n"
                        "template <class F> void parallel_for(int n, F f) { each<<<1, 32>>>(n, f); }\n"
                        "}\n"
                        "int main() { float* d; cudaMalloc(&d, 128); float s = 0.5f;\n"
                        "  lib::parallel_for(32, [=] __device__ (int i) { d[i] = s * i; }); return 0; }\n",
                        "takes a type declared after the template", (2, 36))

"""Expected-error tests: every construct the frontend refuses, with its message and location."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

import polypy
from polypy.errors import UserError

# (name, source, expected message fragment, (line, col) of the diagnostic)
CASES = [
    ("recursion-with-barrier",  # recursion itself is supported since issue 36 (tests/test_recursion.py)
     "__device__ int f(int n) { return n <= 0 ? 0 : f(n - 1) + (__syncthreads(), 1); }\n"
     "__global__ void k(int* x) { x[0] = f(3); }\n",
     "a collective operation (barrier, shuffle, vote) inside the recursive function 'f'", (1, 59)),
    ("function-pointer",  # no device function of its type has its address taken (docs/function_pointers.md)
     "typedef float (*op_t)(float);\n"
     "__device__ float sq(float v) { return v * v; }\n"
     "__global__ void k(float* x, op_t op) {\n"
     "  x[0] = op(x[0]);\n"
     "}\n",
     "can reach no device function", (4, 10)),
    ("goto",
     "__global__ void k(float* x) {\n"
     "  int i = 0;\n"
     "again:\n"
     "  i++;\n"
     "  if (i < 3) goto again;\n"
     "  x[0] = i;\n"
     "}\n",
     "goto is supported only forward", (5, 14)),  # a forward goto translates (test_gotos.py)
    ("inline-asm",
     "__global__ void k(unsigned* x) {\n"
     "  unsigned lane;\n"
     "  asm(\"mov.u32 %0, %%laneid;\" : \"=r\"(lane));\n"
     "  x[0] = lane;\n"
     "}\n",
     "inline assembly is not supported", (3, 3)),
    ("texture-2d-normalized-read",
     "texture<unsigned char, 2, cudaReadModeNormalizedFloat> tex;\n"
     "__global__ void k(float* x) { x[threadIdx.x] = tex2D(tex, threadIdx.x, 0.5f); }\n",
     "tex2D of a texture reference with cudaReadModeNormalizedFloat is not supported", (2, 54)),
    ("dynamic-parallelism-sync",
     "__global__ void child(float* x) { x[threadIdx.x] = 1.0f; }\n"
     "__global__ void parent(float* x) { child<<<1, 32>>>(x); cudaDeviceSynchronize(); }\n",
     "cudaDeviceSynchronize in device code (waiting for child grids) was removed in CUDA 12", (2, 57)),
    ("divergent-barrier",
     "__global__ void k(float* x) {\n"
     "  if (threadIdx.x < 16) {\n"
     "    x[threadIdx.x] = 0.0f;\n"
     "    __syncthreads();\n"
     "  }\n"
     "}\n",
     "__syncthreads() under thread-dependent control", (4, 5)),
    # (a plain `if (c) return;` at the top of the kernel is checked at run time instead:
    # tests/test_early_returns_and_defaults.py)
    ("barrier-after-divergent-return",
     "__global__ void k(float* x, int n) {\n"
     "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
     "  if (i >= n) { if (n > 0) return; }\n"
     "  x[i] = 1.0f;\n"
     "  __syncthreads();\n"
     "}\n",
     "__syncthreads() under thread-dependent control", (5, 3)),
    ("barrier-in-divergent-loop",
     "__global__ void k(float* x) {\n"
     "  for (int j = 0; j < threadIdx.x; ++j) {\n"
     "    x[j] += 1.0f;\n"
     "    __syncthreads();\n"
     "  }\n"
     "}\n",
     "__syncthreads() under thread-dependent control", (4, 5)),
    ("barrier-after-divergent-break",
     "__global__ void k(float* x) {\n"
     "  for (int j = 0; j < 8; ++j) {\n"
     "    if (x[threadIdx.x] > j) break;\n"
     "    __syncthreads();\n"
     "  }\n"
     "}\n",
     "__syncthreads() under thread-dependent control", (4, 5)),
    ("switch-duff",
     "__global__ void k(int* x, int n) {\n"
     "  int i = 0;\n"
     "  switch (n % 2) { case 0: do { x[i++] = 1; case 1: x[i++] = 2; } while (i < n); }\n"
     "}\n",
     "case label inside a nested statement of a switch", (3, 45)),
    ("printf",
     "#include <cstdio>\n"
     "__global__ void k(int* x) { printf(\"%p\\n\", x); }\n",
     "printf conversion '%p' is not supported", (2, 36)),
    ("host-variable",
     "float scale = 2.0f;\n"
     "__global__ void k(float* x) { x[0] *= scale; }\n",
     "host variable", (2, 39)),
    ("syntax-error",
     "__global__ void k(float* x) { x[0] = ; }\n",
     "expected expression", (1, 38)),
    ("pointer-to-pointer",
     "__global__ void k(float*** x) { x[0][0][0] = 1.0f; }\n",
     "pointer-to-pointer parameter 'x' is supported for pointers to scalars only", (1, 28)),
    ("heterogeneous-struct-memory",
     "struct P { float a; double* b; };\n"
     "__global__ void k(float* x) { __shared__ P s[4]; s[0].a = x[0]; }\n",
     "memory of type", (2, 44)),
    ("nan-payload",  # __threadfence is supported since issue 36 (tests/test_fences.py)
     "__global__ void k(float* x) { x[0] = __builtin_nanf(\"1\"); }\n",
     "'nanf' with a NaN payload is not supported", (1, 38)),
    ("recursion-through-two-by-reference",
     "__device__ int g(const int& n);\n"
     "__device__ int f(const int& n) { return n <= 0 ? 0 : g(n - 1); }\n"
     "__device__ int g(const int& n) { return f(n); }\n"
     "__global__ void k(int* x) { int v = x[0]; x[0] = f(v); }\n",
     "argument 'n' of the recursive function 'f' is not the place the outermost call's reference names", (3, 43)),
    ("virtual-member-function",
     "struct V { float a; __device__ virtual float twice() const { return 2.0f * a; } };\n"
     "__global__ void k(V v, float* x) { x[0] = v.twice(); }\n",
     "kernel parameter 'v' is an object of a class with virtual functions", (2, 21)),
    ("pointer-comparison",
     "__global__ void k(const float* a, float* x, int n) {\n"
     "  float s = 0.0f;\n"
     "  for (const float* p = a; p < x + n; ++p) s += *p;\n"
     "  x[0] = s;\n"
     "}\n",
     "comparing pointers into different buffers (or rows, or views) with '<' is not supported", (3, 28)),
]


@pytest.mark.parametrize("name,source,message,where", CASES, ids=[c[0] for c in CASES])
def test_refused(tmp_path: pathlib.Path, name: str, source: str, message: str, where: tuple[int, int]) -> None:
    path = tmp_path / f"{name}.cu"
    path.write_text(source)
    with pytest.raises(UserError) as info:
        polypy.load(path)
    err = info.value
    assert message in err.message
    assert err.loc is not None
    assert (err.loc.line, err.loc.col) == where, err.render()
    rendered = err.render().splitlines()
    assert rendered[0].startswith(f"{path}:{where[0]}:{where[1]}: error: ")
    # The source line and a caret under the column.
    assert rendered[1] == source.splitlines()[where[0] - 1]
    assert rendered[2] == " " * (where[1] - 1) + "^"


def test_cli_reports_error_without_traceback_or_output(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "bad.cu"
    src.write_text(CASES[0][1])
    out = tmp_path / "out.txt"
    proc = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(src), "--emit", "ir", "-o", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"{src}:1:59: error: a collective operation (barrier, shuffle, vote) inside the "
                                  "recursive function 'f'")
    assert not out.exists()

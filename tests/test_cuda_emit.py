"""The CUDA printer (``codegen.cuda``) and ``polypy grad --emit cuda`` output.

The printed source must mean what the IR means: read back by our own frontend it runs
bit-for-bit like the IR in the emulator; ``nvcc -c`` accepts it (when nvcc is installed); a host
program can ``#include`` it, and ``polypy translate`` turns that program into C++ that runs.
"""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import polypy
from codegen.cuda import format_const, format_expr, print_cuda_kernel
from polypy.driver.cli import main
from polypy.emulator import emulate
from polypy.driver.gradients import grad_kernel, gradient_source
from polypy.ir import nodes as n
from polypy.ir import parse_kernel
from polypy.ir.types import F32, F64, I8, I32, I64, U32, U64
from samples.spec import all_samples, sample

NVCC = shutil.which("nvcc")


def test_literals_keep_their_type() -> None:
    assert format_const(n.Const(1.5, F32)) == "1.5f"
    assert format_const(n.Const(0.1, F64)) == "0.1"
    assert format_const(n.Const(2.0, F64)) == "2.0"
    assert format_const(n.Const(7, U32)) == "7u"
    assert format_const(n.Const(-3, I64)) == "-3ll"
    assert format_const(n.Const(5, U64)) == "5ull"
    assert format_const(n.Const(-(1 << 31), I32)) == "(-2147483647 - 1)"
    assert format_const(n.Const(5, I8)) == "((signed char)5)"
    assert format_const(n.Const(float("inf"), F64)) == "(1.0 / 0.0)"
    assert format_const(n.Const(float("nan"), F32)) == "(0.0f / 0.0f)"


def test_expressions() -> None:
    x, y = n.Var("x", F32), n.Var("y", F64)
    assert format_expr(n.Call("exp", (x,), F32)) == "expf(x)"
    assert format_expr(n.Call("exp", (y,), F64)) == "exp(y)"
    assert format_expr(n.Call("rsqrt", (x,), F32)) == "rsqrtf(x)"
    assert format_expr(n.Call("saturate", (y,), F64)) == "fmin(fmax(y, 0.0), 1.0)"
    a, b = n.Var("a", I8), n.Var("b", I8)
    assert format_expr(n.Binary("add", a, b)) == "(signed char)(a + b)"  # C would promote to int
    i = n.Var("i", I32)
    assert format_expr(n.Binary("mul", n.Binary("add", i, n.Const(1, I32)), n.Const(2, I32))) == "(i + 1) * 2"
    assert format_expr(n.Cast(U32, n.Binary("add", i, i))) == "(unsigned int)(i + i)"
    assert format_expr(n.Binary("rem", y, y)) == "fmod(y, y)"  # C has no % on doubles


def test_while_with_update_and_continue() -> None:
    k = parse_kernel("""kernel w(x: f32*, n: i32) {
  var i: i32 = 0
  while (i < n) {
    if (i % 2 == 0) {
      continue
    }
    x[i] = 1.0f
  } update {
    x[0] = x[0] + 1.0f
    i = i + 1
  }
}
""")
    text = print_cuda_kernel(k)
    assert "goto polypy_continue_1;" in text and "polypy_continue_1:;" in text
    simple = parse_kernel("""kernel w(x: f32*, n: i32) {
  var i: i32 = 0
  while (i < n) {
    x[i] = 1.0f
  } update {
    i = i + 1
  }
}
""")
    assert "for (; i < n; i = i + 1) {" in print_cuda_kernel(simple)


ROUND_TRIP = sorted(s.name for s in all_samples() if s.differentiable)


def _arguments(kernel: n.Kernel, original: dict, rng: np.random.Generator, mode: str) -> dict:
    args = {}
    for p in kernel.params:
        if p.name in original:
            v = original[p.name]
            args[p.name] = v.copy() if isinstance(v, np.ndarray) else v
        else:
            base = original[p.name[2:]]
            if np.ndim(base):
                args[p.name] = rng.standard_normal(np.shape(base)).astype(base.dtype)
            elif mode == "reverse":
                args[p.name] = np.zeros(1, dtype=np.asarray(base).dtype)
            else:
                args[p.name] = np.asarray(rng.standard_normal(), dtype=np.asarray(base).dtype)[()]
    return args


@pytest.mark.parametrize("real", ["double", "float"])
@pytest.mark.parametrize("name", ROUND_TRIP)
def test_emitted_cuda_reads_back_to_the_same_kernel(tmp_path, name: str, real: str) -> None:
    s = sample(name)
    dtype = np.float64 if real == "double" else np.float32
    module = polypy.load(s.source, defines={"REAL": real})
    for mode in ("reverse", "forward"):
        g = grad_kernel(module, s.kernel, wrt=s.wrt, mode=mode)
        path = tmp_path / f"{name}_{mode}.cu"
        path.write_text(gradient_source(module, g, defines={"REAL": real}))
        again = polypy.load(path)
        assert {s.kernel, g.name} <= {k.name for k in again.kernels}
        if real == "float" and mode == "reverse":  # and polypy translate takes the file like any other
            assert main(["translate", str(path), "-o", str(tmp_path / f"{name}_{mode}.cpp")]) == 0
        g2 = again.kernel(g.name)
        case = s.cases[-1]
        rng = np.random.default_rng(0)
        args = _arguments(g, s.make_args(rng, case, dtype), rng, mode)
        copy = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        shmem = case.shmem * (2 if any(b.shape is None for b in g.buffers) else 1)
        emulate(g, case.grid, case.block, args, shmem=shmem)
        emulate(g2, case.grid, case.block, copy, shmem=shmem)
        for key, value in args.items():
            if isinstance(value, np.ndarray):
                np.testing.assert_array_equal(value, copy[key], err_msg=f"{name} {mode} {key}")


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
@pytest.mark.parametrize("mode", ["reverse", "forward"])
@pytest.mark.parametrize("name", sorted(s.name for s in all_samples() if s.differentiable))
def test_nvcc_compiles_the_emitted_cuda(tmp_path, name: str, mode: str) -> None:
    s = sample(name)
    module = polypy.load(s.source, defines={"REAL": "double"})
    g = grad_kernel(module, s.kernel, wrt=s.wrt, mode=mode)
    path = tmp_path / f"{name}.cu"
    path.write_text(gradient_source(module, g, defines={"REAL": "double"}))
    result = subprocess.run([NVCC, "-c", str(path), "-o", str(tmp_path / f"{name}.o")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


HOST = """#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include "saxpy_grad.cu"

int main()
{
    const int n = 100;
    size_t bytes = n * sizeof(double);
    double* h_x = (double*)malloc(bytes);
    double* h_y = (double*)malloc(bytes);
    double* h_dx = (double*)malloc(bytes);
    double* h_dy = (double*)malloc(bytes);
    for (int i = 0; i < n; ++i) {
        h_x[i] = 0.01 * i;
        h_y[i] = 1.0 - 0.02 * i;
        h_dx[i] = 0.0;
        h_dy[i] = 1.0;
    }
    double h_da = 0.0;
    double *x, *y, *dx, *dy, *da;
    cudaMalloc((void**)&x, bytes);
    cudaMalloc((void**)&y, bytes);
    cudaMalloc((void**)&dx, bytes);
    cudaMalloc((void**)&dy, bytes);
    cudaMalloc((void**)&da, sizeof(double));
    cudaMemcpy(x, h_x, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(y, h_y, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dx, h_dx, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dy, h_dy, bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(da, &h_da, sizeof(double), cudaMemcpyHostToDevice);
    saxpy_grad<<<(n + 63) / 64, 64>>>(n, 2.0, da, x, dx, y, dy);
    cudaMemcpy(&h_da, da, sizeof(double), cudaMemcpyDeviceToHost);
    cudaMemcpy(h_dx, dx, bytes, cudaMemcpyDeviceToHost);
    cudaMemcpy(h_y, y, bytes, cudaMemcpyDeviceToHost);
    double sum_dx = 0.0, sum_y = 0.0;
    for (int i = 0; i < n; ++i) {
        sum_dx += h_dx[i];
        sum_y += h_y[i];
    }
    printf("da %.6f\\n", h_da);
    printf("sum dx %.6f\\n", sum_dx);
    printf("sum y %.6f\\n", sum_y);
    return 0;
}
"""


def _host_program(tmp_path):
    assert main(["grad", str(sample("saxpy").source), "--kernel", "saxpy", "-D", "REAL=double",
                 "-o", str(tmp_path / "saxpy_grad.cu")]) == 0
    (tmp_path / "main.cu").write_text(HOST)
    return tmp_path / "main.cu"


def test_a_host_program_can_include_the_emitted_file(tmp_path) -> None:
    module = polypy.load(_host_program(tmp_path))
    assert module.host is not None
    assert {"saxpy", "saxpy_grad"} <= {k.name for k in module.kernels}


def test_translated_host_program_computes_the_gradient(tmp_path) -> None:
    import importlib.util
    compiler = shutil.which("c++") or shutil.which("g++")
    if importlib.util.find_spec("codegen.c") is None or compiler is None:
        pytest.skip("the C++ backend or a C++ compiler is not available")
    program = _host_program(tmp_path)
    out = tmp_path / "main.cpp"
    assert main(["translate", str(program), "--emit", "cpp", "-o", str(out)]) == 0
    exe = tmp_path / "main"
    built = subprocess.run([compiler, "-O1", "-fopenmp", str(out), "-o", str(exe), "-lm"], capture_output=True,
                           text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    # d(sum y)/da = sum x = 49.5; d/dx = a * dy = 2 each; y = 2x + y0
    assert run.stdout.split("\n")[:3] == ["da 49.500000", "sum dx 200.000000", "sum y 100.000000"]

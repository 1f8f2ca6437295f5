"""``polypy grad --emit cuda`` (gradhunt): device function pointers, and locals that hid functions.

In polypy's IR a device function pointer is the id polypy gives the function
(``frontend.function_ids``) and a call through it a dispatch over those ids. Written back as
CUDA, the gradient took the pointer parameter as ``long long`` (a launch passing a function
pointer does not compile against it) and compared the real pointers of a CUDA program with
polypy's ids, so every call faulted. Both are refused, located; ``--emit cpp`` (polypy's own
world of ids) still translates them.

A local of the gradient named like a function it calls (``normcdf``'s expansion holds
``erfc = erfc(z)``) hid the function in C++: neither nvcc nor polypy could read the output back.
The CUDA printer renames such locals (``erfc_``).
"""
from __future__ import annotations

import pathlib
import shutil
import subprocess

import numpy as np
import pytest

import polypy
from autodiff.check import shadow_pairs
from polypy.driver.cli import main
from polypy.driver.gradients import grad_kernel, gradient_source
from polypy.emulator import emulate

PARAMETER = """typedef double (*unary_t)(double);
__device__ double sq(double v) { return v * v; }
__device__ unary_t d_sq = sq;
__global__ void apply(unary_t f, const double* x, double* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = f(x[i]) * x[i];
}
"""

TABLE = """typedef double (*unary_t)(double);
__device__ double sq(double v) { return v * v; }
__device__ double cube(double v) { return v * v * v; }
__device__ unary_t d_ops[2] = {sq, cube};
__global__ void apply3(const int* which, const double* x, double* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { unary_t f = d_ops[which[i]]; y[i] = f(x[i]) * x[i]; }
}
"""


def _grad(tmp_path: pathlib.Path, source: str, kernel: str, *options: str) -> tuple[int, pathlib.Path]:
    src = tmp_path / f"{kernel}.cu"
    src.write_text(source)
    out = tmp_path / f"{kernel}_out.cu"
    return main(["grad", str(src), "--kernel", kernel, "-o", str(out), *options]), out


def test_a_function_pointer_parameter_is_refused_at_the_parameter(tmp_path, capsys) -> None:
    for mode in ("reverse", "forward"):
        code, out = _grad(tmp_path, PARAMETER, "apply", "--mode", mode)
        err = capsys.readouterr().err
        assert code == 1 and not out.exists(), err
        assert f"{tmp_path / 'apply.cu'}:4:31: error: the device function pointer parameter 'f' of kernel 'apply' " \
               "cannot be written back as CUDA source" in err, err
        assert "Traceback" not in err


def test_a_call_through_a_device_table_is_refused_at_the_call(tmp_path, capsys) -> None:
    code, out = _grad(tmp_path, TABLE, "apply3")
    err = capsys.readouterr().err
    assert code == 1 and not out.exists(), err
    assert f"{tmp_path / 'apply3.cu'}:7:52: error: a call through a device function pointer cannot be written " \
           "back as CUDA source" in err, err


def test_emit_cpp_still_translates_them(tmp_path, capsys) -> None:
    for source, kernel in ((PARAMETER, "apply"), (TABLE, "apply3")):
        code, out = _grad(tmp_path, source, kernel, "--emit", "cpp")
        assert code == 0, capsys.readouterr().err
        assert f"{kernel}_grad" in out.read_text()


GATE = """__global__ void gauss_gate(const double* x, double* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * normcdf(x[i]) + erfc(x[i]);
}
"""


def _gate_gradient(tmp_path: pathlib.Path, mode: str):
    src = tmp_path / "gate.cu"
    src.write_text(GATE)
    module = polypy.load(str(src))
    g = grad_kernel(module, "gauss_gate", mode=mode)
    text = gradient_source(module, g)
    assert "erfc_ = erfc(" in text
    out = tmp_path / "gate_grad.cu"
    out.write_text(text)
    return module, g, out


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_a_local_named_like_a_called_function_is_renamed(tmp_path, mode: str) -> None:
    module, g, out = _gate_gradient(tmp_path, mode)
    back = polypy.load(str(out)).kernel(g.name)  # old: "called object type 'double' is not a function"
    rng = np.random.default_rng(3)
    args = {"x": rng.standard_normal(70), "y": np.zeros(70), "n": np.int32(70)}
    for shadow in shadow_pairs(module.kernel("gauss_gate"), g).values():
        args[shadow] = rng.standard_normal(70)
    copies = [{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()} for _ in range(2)]
    emulate(g, (3,), (32,), copies[0])
    emulate(back, (3,), (32,), copies[1])
    for k, v in copies[0].items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(copies[1][k], v, err_msg=k)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_nvcc_compiles_the_renamed_local(tmp_path, mode: str) -> None:
    _, _, out = _gate_gradient(tmp_path, mode)
    # old: "expression preceding parentheses of apparent call must have (pointer-to-) function type"
    result = subprocess.run([shutil.which("nvcc"), "-arch=sm_80", "-c", str(out), "-o", str(tmp_path / "gate.o")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr

"""``polypy grad --emit cuda`` of kernels that use device function pointers (gradhunt).

In polypy's IR a device function pointer is the id polypy gives the function
(``frontend.function_ids``) and a call through it a dispatch over those ids. Written back as
CUDA, the gradient took the pointer parameter as ``long long`` (a launch passing a function
pointer does not compile against it) and compared the real pointers of a CUDA program with
polypy's ids, so every call faulted. Both are refused, located; ``--emit cpp`` (polypy's own
world of ids) still translates them.
"""
from __future__ import annotations

import pathlib

from polypy.driver.cli import main

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

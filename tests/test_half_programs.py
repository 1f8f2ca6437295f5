"""Half precision and bfloat16 at the edges of polypy: scalar arguments of the Python API and
polypy.torch tensors, whole programs whose host code uses __half (translated and compiled, and
in the emulator), a user's own cuda_fp16.h, and the located refusals (approximate functions,
16-bit atomics, gradients). The arithmetic itself: tests/test_half.py."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

import half_reference as R
import polypy
from c_support import need_compiler
from codegen.c import find_compiler
from polypy.driver.cli import main
from polypy.errors import UserError
from polypy.lowp import from_bfloat16, to_bfloat16


def test_scalar_half_arguments(tmp_path) -> None:
    src = tmp_path / "axpy.cu"
    src.write_text("#include <cuda_fp16.h>\n__global__ void axpy(__half alpha, const __half* x, __half* y, int n) {\n"
                   "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   "  if (i < n) y[i] = __hfma(alpha, x[i], y[i]);\n}\n")
    rng = np.random.default_rng(2)
    x = rng.standard_normal(300).astype(np.float16)
    y = rng.standard_normal(300).astype(np.float16)
    want = [R.fma(int(np.float16(0.3).view(np.uint16)), int(xi), int(yi), R.HALF)
            for xi, yi in zip(x.view(np.uint16), y.view(np.uint16))]
    polypy.compile(str(src)).axpy[3, 128](np.float16(0.3), x, y, 300)
    R.same_bits(y.view(np.uint16), np.array(want, np.uint16), R.HALF, "axpy")
    with pytest.raises(UserError, match="must have dtype uint16, got float32"):
        polypy.compile(str(src)).axpy[3, 128](0.3, x.astype(np.float32), y, 300)


HOST = r"""
#include <cstdio>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
__global__ void scale(const __half* x, __half* y, __nv_bfloat16* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = __hmul(x[i], __float2half(0.1f)) + x[i];
    b[i] = __float2bfloat16(__half2float(y[i]) * 3.0f);
  }
}
int main() {
  const int n = 1000;
  __half hx[n], hy[n];
  __nv_bfloat16 hb[n];
  for (int i = 0; i < n; ++i) hx[i] = __float2half((i - 500) * 0.37f);
  __half *dx, *dy;
  __nv_bfloat16* db;
  cudaMalloc(&dx, n * sizeof(__half));
  cudaMalloc(&dy, n * sizeof(__half));
  cudaMalloc(&db, n * sizeof(__nv_bfloat16));
  cudaMemcpy(dx, hx, n * sizeof(__half), cudaMemcpyHostToDevice);
  scale<<<(n + 127) / 128, 128>>>(dx, dy, db, n);
  cudaMemcpy(hy, dy, n * sizeof(__half), cudaMemcpyDeviceToHost);
  cudaMemcpy(hb, db, n * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost);
  unsigned long long sum = 0;
  for (int i = 0; i < n; ++i) sum = sum * 31 + __half_as_ushort(hy[i]) * 7 + __bfloat16_as_ushort(hb[i]);
  half h = hy[7] + hy[8];          /* host-side half arithmetic */
  printf("%llu %.6f %.6f %d\n", sum, __half2float(h), (float)hb[9], (int)(hy[3] < hy[4]));
  cudaFree(dx); cudaFree(dy); cudaFree(db);
  return 0;
}
"""


def _host_expected() -> str:
    n = 1000
    H, B = R.HALF, R.BFLOAT16
    hx = [R.round_to(R.Fraction(float(np.float32(i - 500) * np.float32(0.37))), H) if i != 500 else 0 for i in range(n)]
    tenth = R.round_to(R.Fraction(float(np.float32(0.1))), H)
    hy = [R.binary("+", R.binary("*", x, tenth, H), x, H) for x in hx]
    hb = []
    for y in hy:
        t = np.float32(R.to_float(y, H)) * np.float32(3.0)
        hb.append(R.round_to(R.Fraction(float(t)), B) if t != 0 else R._special(float(t), B))
    s = 0
    for y, b in zip(hy, hb):
        s = (s * 31 + y * 7 + b) % (1 << 64)
    h = R.to_float(R.binary("+", hy[7], hy[8], H), H)
    less = int(R.to_float(hy[3], H) < R.to_float(hy[4], H))
    return f"{s} {h:.6f} {R.to_float(hb[9], B):.6f} {less}\n"


def test_whole_program_with_half_host_code(tmp_path) -> None:
    need_compiler(cpp=True)
    src = tmp_path / "prog.cu"
    src.write_text(HOST)
    out = tmp_path / "prog.cpp"
    assert main(["translate", str(src), "-o", str(out)]) == 0
    exe = tmp_path / "prog"
    built = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", str(out), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == _host_expected()


def test_whole_program_in_the_emulator(tmp_path, capfd) -> None:
    need_compiler(cpp=True)
    src = tmp_path / "prog.cu"
    src.write_text(HOST)
    assert main(["run", str(src), "--emulate"]) == 0
    assert capfd.readouterr().out == _host_expected()


@pytest.mark.parametrize("call, what", [
    ("hexp(x[0])", "'hexp' is unavailable: polypy: CUDA's half-precision transcendental"),
    ("hrsqrt(x[0])", "'hrsqrt' is unavailable"),
    ("atomicAdd(x, x[1])", "atomics on __half and __half2 memory are not supported"),
])
def test_refusals_are_located(tmp_path, capsys, call: str, what: str) -> None:
    src = tmp_path / "bad.cu"
    src.write_text("#include <cuda_fp16.h>\n__global__ void k(__half* x) {\n"
                   f"  x[2] = {call};\n}}\n")
    assert main(["translate", str(src)]) == 1
    err = capsys.readouterr().err
    assert "bad.cu:3:" in err and what in err and "^" in err and "Traceback" not in err


def test_gradient_of_half_code_is_refused(tmp_path, capsys) -> None:
    src = tmp_path / "g.cu"
    src.write_text("#include <cuda_fp16.h>\n__global__ void k(const float* x, float* y) {\n"
                   "  int i = threadIdx.x;\n  __half h = __float2half(x[i]);\n"
                   "  y[i] = __half2float(__hmul(h, h));\n}\n")
    assert main(["grad", str(src), "--kernel", "k", "--wrt", "x"]) == 1
    err = capsys.readouterr().err
    assert "g.cu:4:10: error: kernel 'k' computes in half precision" in err and "Traceback" not in err


def test_a_users_cuda_fp16_h_comes_first(tmp_path) -> None:
    """A header of that name in a directory given with -I is the user's: polypy's never shadows it."""
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "cuda_fp16.h").write_text("typedef unsigned short __half;\n"
                                     "static __device__ __half __hadd(__half a, __half b) { return a + b + 1; }\n")
    src = tmp_path / "mine.cu"
    # (__half)2: CUDA also declares the integer __hadd(int, int), so an int argument would be ambiguous
    src.write_text("#include <cuda_fp16.h>\n"
                   "__global__ void k(__half* x) { x[threadIdx.x] = __hadd(x[threadIdx.x], (__half)2); }\n")
    x = np.arange(4, dtype=np.uint16)
    polypy.compile(str(src), include_dirs=[str(inc)]).k[1, 4](x)
    assert x.tolist() == [3, 4, 5, 6]  # integer arithmetic of the user's header, not binary16


def test_scalar_bfloat16_arguments_are_bits(tmp_path) -> None:
    src = tmp_path / "scale.cu"
    src.write_text("#include <cuda_bf16.h>\n__global__ void scale(__nv_bfloat16 s, __nv_bfloat16* y) {\n"
                   "  y[threadIdx.x] = y[threadIdx.x] * s;\n}\n")
    y = to_bfloat16(np.float32([1.0, -3.0, 1e30, 0.5]))
    want = to_bfloat16(from_bfloat16(y) * np.float32(1.5))  # the float product of two bfloat16 is exact
    mod = polypy.compile(str(src))
    mod.scale[1, 4](to_bfloat16(np.float32(1.5)), y)
    assert y.tolist() == want.tolist()
    with pytest.raises(UserError, match=r"takes bfloat16 bits as np.uint16 \(polypy.lowp.to_bfloat16\), got float64"):
        mod.scale[1, 4](1.5, y)


def test_torch_half_and_bfloat16_tensors(tmp_path) -> None:
    """polypy.torch.launch takes torch.float16 tensors for __half memory and torch.bfloat16 tensors
    for __nv_bfloat16 memory (their bits), in place."""
    torch = pytest.importorskip("torch", reason="polypy.torch needs PyTorch (the [torch] extra)")
    import polypy.torch as pt

    src = tmp_path / "t.cu"
    src.write_text("#include <cuda_bf16.h>\n__global__ void k(const __half* x, __half* y, __nv_bfloat16* b, int n) {\n"
                   "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   "  if (i < n) { y[i] = __hmul(x[i], x[i]); b[i] = __float2bfloat16(__half2float(y[i]) + 1.0f); }\n}\n")
    x = torch.linspace(-3, 3, 100, dtype=torch.float16)
    y = torch.zeros(100, dtype=torch.float16)
    b = torch.zeros(100, dtype=torch.bfloat16)
    pt.launch(polypy.compile(str(src)).k)[4, 32](x, y, b, 100)
    assert torch.equal(y, x * x)  # torch's float16 product rounds to nearest even too
    assert torch.equal(b, (y.float() + 1.0).to(torch.bfloat16))

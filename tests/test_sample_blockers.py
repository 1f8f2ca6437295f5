"""General features that single NVIDIA samples needed (issue 36), each checked on our own small
kernels against values computed here: CUDA's mixed-signedness min/max overloads, array members of
by-value record parameters indexed at run time, function template instances calling each other,
cooperative-groups shuffles of records, a pointer parameter compared with a null pointer."""
from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

import polypy
from polypy.emulator import emulate
from polypy.errors import UserError


def _program_output(tmp_path, src) -> list[str]:
    """The lines a whole program prints, translated by polypy and built with g++."""
    subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(src), "-o", str(tmp_path / "p.cpp")],
                   check=True, cwd=tmp_path)
    subprocess.run(["g++", "-O2", "-fopenmp", str(tmp_path / "p.cpp"), "-o", str(tmp_path / "p"), "-lm"],
                   check=True, cwd=tmp_path)
    return subprocess.run([str(tmp_path / "p")], capture_output=True, text=True, check=True).stdout.splitlines()

MINMAX = r"""
__global__ void k(int *out, unsigned *uo, long *lo, int w) {
  int t = threadIdx.x;
  out[t] = min(blockIdx.x * blockDim.x + threadIdx.x, w - 1);
  uo[t] = max(t - 3, 2u);
  lo[t] = min((long)t - 5, 1L) + max(0UL, (long)t);
  out[8 + t] = min(t, w) + max(t, 2);
}
"""


@pytest.mark.parametrize("w", [0, 3, 100])
def test_min_max_of_mixed_signedness_are_cudas_overloads(tmp_path, w):
    path = tmp_path / "k.cu"
    path.write_text(MINMAX)
    out, uo, lo = np.zeros(16, np.int32), np.zeros(8, np.uint32), np.zeros(8, np.int64)
    emulate(polypy.load(str(path)).kernel("k"), 1, 8, [out, uo, lo, w])
    t = np.arange(8)
    # min(unsigned, int): both unsigned (w - 1 = -1 is the largest unsigned number)
    assert out[:8].tolist() == [min(x, (w - 1) % 2 ** 32) for x in t]
    assert uo.tolist() == [max((x - 3) % 2 ** 32, 2) for x in t]
    assert lo.tolist() == [min(x - 5, 1) + x for x in t]
    assert out[8:].tolist() == [min(x, w) + max(x, 2) for x in t]
    compiled = np.zeros(16, np.int32), np.zeros(8, np.uint32), np.zeros(8, np.int64)
    polypy.compile(str(path)).k[1, 8](*compiled, w)
    assert compiled[0].tolist() == out.tolist() and compiled[1].tolist() == uo.tolist()
    assert compiled[2].tolist() == lo.tolist()


PARAM_ARRAYS = r"""
typedef struct { int n; float w[6]; int param[300]; } P;
__global__ void k(__grid_constant__ const P p, float *out, int *res) {
  int t = threadIdx.x + blockIdx.x * blockDim.x;
  int tmp = 0;
  for (int i = 0; i < 300; ++i) tmp += p.param[i];
  P q = p;
  res[t] = tmp + p.param[t] + q.param[2];
  out[t] = p.w[t % 6] * p.n + p.w[1];
}
"""
PARAM_ARRAYS_MAIN = r"""
#include <cstdio>
int main() {
  P p; p.n = 3;
  for (int i = 0; i < 6; i++) p.w[i] = i * 0.5f;
  for (int i = 0; i < 300; i++) p.param[i] = i * i;
  float *o; int *r; cudaMalloc(&o, 8 * 4); cudaMalloc(&r, 8 * 4);
  k<<<2, 4>>>(p, o, r);
  float ho[8]; int hr[8];
  cudaMemcpy(ho, o, sizeof ho, cudaMemcpyDeviceToHost); cudaMemcpy(hr, r, sizeof hr, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 8; i++) printf("%d %g\n", hr[i], ho[i]);
}
"""


def _param_arrays_expected():
    s = sum(i * i for i in range(300))
    return [s + t * t + 4 for t in range(8)], [(t % 6) * 0.5 * 3 + 0.5 for t in range(8)]


def test_array_member_of_a_record_parameter_indexed_by_a_loop(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(PARAM_ARRAYS)
    kernel = polypy.load(str(path)).kernel("k")
    assert [str(p.ptype) for p in kernel.params][:3] == ["i32", "f32* const", "i32* const"]
    dt = np.dtype([("n", np.int32), ("w", np.float32, 6), ("param", np.int32, 300)])
    p = np.zeros((), dt)
    p["n"], p["w"], p["param"] = 3, np.arange(6) * 0.5, np.arange(300) ** 2
    want_res, want_out = _param_arrays_expected()
    for grid, block in ((1, 8), (2, 4), (8, 1)):
        out, res = np.zeros(8, np.float32), np.zeros(8, np.int32)
        emulate(kernel, grid, block, {"p": p[()], "out": out, "res": res})
        assert res.tolist() == want_res and out.tolist() == want_out
        out, res = np.zeros(8, np.float32), np.zeros(8, np.int32)
        polypy.compile(str(path)).k[grid, block](p[()], out, res)
        assert res.tolist() == want_res and out.tolist() == want_out


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: whole programs cannot be compiled")
def test_array_member_of_a_record_parameter_in_a_whole_program(tmp_path):
    src = tmp_path / "p.cu"
    src.write_text(PARAM_ARRAYS + PARAM_ARRAYS_MAIN)
    want_res, want_out = _param_arrays_expected()
    assert _program_output(tmp_path, src) == [f"{r} {o:g}" for r, o in zip(want_res, want_out)]


LOCAL_RECORD = r"""
typedef struct { int n; int a[3]; } Q;
__global__ void k(Q p, int *res) {
  Q q = p;
  q.a[1] = q.a[2] * 10;
  res[threadIdx.x] = q.a[1] + p.a[1] + q.n;
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: whole programs cannot be compiled")
def test_constant_index_of_an_array_member_of_a_record_variable(tmp_path):
    src = tmp_path / "p.cu"
    src.write_text(LOCAL_RECORD + "#include <cstdio>\nint main() { Q p = {1, {4, 5, 6}}; int *r, h[2];\n"
                   "  cudaMalloc(&r, 8); k<<<1, 2>>>(p, r); cudaMemcpy(h, r, 8, cudaMemcpyDeviceToHost);\n"
                   "  printf(\"%d %d\\n\", h[0], h[1]); }\n")
    assert _program_output(tmp_path, src) == [f"{60 + 5 + 1} {60 + 5 + 1}"]


TEMPLATE_RECURSION = r"""
__constant__ float c_K[8];
template <int i> __device__ float rowsum(const float *x, int t) { return x[t + i] * c_K[i] + rowsum<i - 1>(x, t); }
template <> __device__ float rowsum<-1>(const float *x, int t) { return 0; }
template <int i> __device__ int fact() { return i * fact<i - 1>(); }
template <> __device__ int fact<0>() { return 1; }
__device__ int loop(int n) { return n <= 0 ? 0 : 1 + loop(n - 1); }
__global__ void k(const float *x, float *y, int *f) {
  y[threadIdx.x] = rowsum<3>(x, threadIdx.x);
  f[threadIdx.x] = fact<5>() + threadIdx.x;
}
__global__ void bad(int *f) { f[0] = loop(3); }
"""


def test_function_template_instances_calling_each_other_are_not_recursion(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(TEMPLATE_RECURSION)
    module = polypy.load(str(path))
    # a real recursion is a call machine (frontend/lower/recursion.py), the instances are inlined
    bad = np.zeros(1, np.int32)
    emulate(module.kernel("bad"), 1, 1, [bad])
    assert bad.tolist() == [3]
    assert not any(b.name.startswith("rret") for b in module.kernel("k").buffers)
    kernel = module.kernel("k")
    x = np.arange(12, dtype=np.float32)
    taps = np.array([0.5, -1, 2, 0.25, 0, 0, 0, 0], np.float32)
    y, f = np.zeros(8, np.float32), np.zeros(8, np.int32)
    emulate(kernel, 1, 8, [x, y, f], globals={"c_K": taps})
    want = [sum(np.float32(x[t + i]) * taps[i] for i in range(4)) for t in range(8)]
    assert np.allclose(y, want, rtol=1e-6) and f.tolist() == [120 + t for t in range(8)]


RECORD_SHUFFLE = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void k(const uint4 *in, uint4 *out, float2 *f) {
  auto tile = cg::tiled_partition<32>(cg::this_thread_block());
  uint4 v = in[threadIdx.x];
  v = tile.shfl_xor(v, 3);
  out[threadIdx.x] = v;
  float2 w = make_float2(threadIdx.x, -1.0f * threadIdx.x);
  f[threadIdx.x] = tile.shfl_down(w, 1);
}
"""


def test_cooperative_groups_shuffle_of_a_record(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(RECORD_SHUFFLE)
    data = np.arange(64 * 4, dtype=np.uint32).reshape(64, 4)
    out, f = np.zeros((64, 4), np.uint32), np.zeros((64, 2), np.float32)
    emulate(polypy.load(str(path)).kernel("k"), 1, 64, [data, out, f])
    lanes = np.arange(64)
    assert (out == data[lanes ^ 3]).all()
    src = np.where(lanes % 32 < 31, lanes + 1, lanes)  # shfl_down past the tile's end: the lane's own value
    assert (f[:, 0] == src).all() and (f[:, 1] == -src).all()


NULL_TEST = r"""
__global__ void k(int *data, int *partial, int n) {
  int i = threadIdx.x;
  data[i] = i;
  if (partial != NULL && i == n - 1) partial[0] = 100;
  if (0 == partial) data[i] += 1000;
  int *q = data + 1;
  if (q != nullptr) data[i] += 10;
}
"""


def test_a_pointer_parameter_compared_with_null(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(NULL_TEST)
    for run in (lambda d, p: emulate(polypy.load(str(path)).kernel("k"), 1, 4, [d, p, 4]),
                lambda d, p: polypy.compile(str(path)).k[1, 4](d, p, 4)):
        d, p = np.zeros(4, np.int32), np.zeros(1, np.int32)
        run(d, p)
        assert d.tolist() == [10, 11, 12, 13] and p.tolist() == [100]


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: whole programs cannot be compiled")
def test_a_null_pointer_argument_in_a_whole_program(tmp_path):
    src = tmp_path / "p.cu"
    src.write_text(NULL_TEST + r"""
#include <cstdio>
int main() {
  int *d, *p; cudaMalloc(&d, 16); cudaMalloc(&p, 4); cudaMemset(p, 0, 4);
  k<<<1, 4>>>(d, p, 4); int h[4], hp;
  cudaMemcpy(h, d, 16, cudaMemcpyDeviceToHost); cudaMemcpy(&hp, p, 4, cudaMemcpyDeviceToHost);
  printf("%d %d %d %d %d\n", h[0], h[1], h[2], h[3], hp);
  k<<<1, 4>>>(d, NULL, 4);
  cudaMemcpy(h, d, 16, cudaMemcpyDeviceToHost);
  printf("%d %d %d %d\n", h[0], h[1], h[2], h[3]);
}
""")
    assert _program_output(tmp_path, src) == ["10 11 12 13 100", "1010 1011 1012 1013"]


POINTER_TRUTH = r"""
__global__ void k(const unsigned *in, float *out, int n) {
  int i = threadIdx.x;
  if (in) out[i] = (float)in[i];   // a pointer as a condition: whether the argument is null
  else out[i] = -1.0f;
  if (!in && i == 0) out[n] = 7.0f;
  bool have = in;
  out[i] += (have && i % 2) ? 100.0f : 0.0f;
  const unsigned *shifted = in + 1;
  out[i] += shifted ? 0.5f : 0.0f;  // an offset keeps the argument's nullness (no null arithmetic in CUDA)
}
"""


def test_a_pointer_parameter_as_a_condition(tmp_path):
    """`if (p)`, `!p`, `bool b = p` of a pointer parameter test the argument (quasirandomGenerator's
    `if (d_Input)` chose between its two loops)."""
    path = tmp_path / "k.cu"
    path.write_text(POINTER_TRUTH)
    inp = np.arange(4, dtype=np.uint32) * 3
    want = [0.5, 103.5, 6.5, 109.5, 0.0]
    for run in (lambda o: emulate(polypy.load(str(path)).kernel("k"), 1, 4, [inp, o, 4]),
                lambda o: polypy.compile(str(path)).k[1, 4](inp, o, 4)):
        out = np.zeros(5, np.float32)
        run(out)
        assert out.tolist() == want


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: whole programs cannot be compiled")
def test_a_null_pointer_as_a_condition_in_a_whole_program(tmp_path):
    src = tmp_path / "p.cu"
    src.write_text(POINTER_TRUTH + r"""
#include <cstdio>
int main() {
  unsigned h_in[4] = {0, 3, 6, 9}; unsigned *d_in; float *d_out, h[5];
  cudaMalloc(&d_in, 16); cudaMalloc(&d_out, 20); cudaMemset(d_out, 0, 20);
  cudaMemcpy(d_in, h_in, 16, cudaMemcpyHostToDevice);
  k<<<1, 4>>>(d_in, d_out, 4);
  cudaMemcpy(h, d_out, 20, cudaMemcpyDeviceToHost);
  printf("%g %g %g %g %g\n", h[0], h[1], h[2], h[3], h[4]);
  k<<<1, 4>>>(NULL, d_out, 4);
  cudaMemcpy(h, d_out, 20, cudaMemcpyDeviceToHost);
  printf("%g %g %g %g %g\n", h[0], h[1], h[2], h[3], h[4]);
}
""")
    assert _program_output(tmp_path, src) == ["0.5 103.5 6.5 109.5 0", "-1 -1 -1 -1 7"]


NULL_INIT = r"""
__global__ void k(float *dst, int n) {
  float *p = NULL;
  for (int i = 0; i < n; i++) { p = dst + 2 * i; *p = i * 2.0f; }
}
__global__ void bad(float *dst) {
  float *p = nullptr;
  if (p == nullptr) dst[0] = 1.0f;
}
"""


def test_a_pointer_variable_initialized_to_null_is_pointed_by_its_first_assignment(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(NULL_INIT.split("__global__ void bad")[0])
    d = np.zeros(8, np.float32)
    emulate(polypy.load(str(path)).kernel("k"), 1, 1, [d, 4])
    assert d.tolist() == [0, 0, 2, 0, 4, 0, 6, 0]
    path.write_text(NULL_INIT)
    with pytest.raises(UserError) as info:  # the null value itself is never read
        polypy.load(str(path))
    assert "used before it is assigned" in str(info.value) and info.value.loc.line == 8

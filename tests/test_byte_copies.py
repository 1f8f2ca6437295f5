"""``memcpy`` and ``memset`` in device code (issue 41 item 7; NVIDIA's shfl_scan copies a local
array into a record with ``memcpy``): copies and fills of typed places, compiled and in the
emulator, and the located refusals of what has no exact typed meaning."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from c_support import need_compiler

PROGRAM = r"""
#include <cstdio>
#include <cstring>
struct Pair { uint4 a, b; };
__global__ void k(unsigned int* o, const float* x, float* y, int* z) {
  unsigned int r[8];
  for (int i = 0; i < 8; ++i) r[i] = threadIdx.x * 10 + i;
  Pair p;
  memcpy(&p, r, sizeof(p));                                   // a local array into a local record
  o[threadIdx.x] = p.a.x + p.a.w + p.b.y * 1000;
  float t[4];
  memcpy(t, x + 4 * threadIdx.x, 4 * sizeof(float));          // global memory into a local array
  memset(y + 4 * threadIdx.x, 0, 2 * sizeof(float));          // zero two floats
  y[4 * threadIdx.x + 3] = t[1] + t[3];
  memset(z + 2 * threadIdx.x, 0xff, sizeof(int));             // every byte 0xff: -1
  memset(z + 2 * threadIdx.x + 1, 1, sizeof(int));            // 0x01010101
  float f = x[4 * threadIdx.x + 1];
  unsigned int u;
  memcpy(&u, &f, sizeof u);                                   // a float's bits (a bit cast)
  int w[2] = {0x3fc00000, -1082130432};
  float g[2];
  memcpy(g, w, sizeof g);                                     // ints' bits as floats: 1.5, -1
  o[16 + threadIdx.x] = u + (unsigned int)(g[0] * 2 + g[1]);
}
int main() {
  unsigned int* o;
  float *x, *y;
  int* z;
  cudaMalloc(&o, 32 * sizeof(unsigned int));
  cudaMalloc(&x, 64 * sizeof(float));
  cudaMalloc(&y, 64 * sizeof(float));
  cudaMalloc(&z, 32 * sizeof(int));
  float hx[64];
  for (int i = 0; i < 64; ++i) hx[i] = (float)i;
  cudaMemcpy(x, hx, sizeof hx, cudaMemcpyHostToDevice);
  cudaMemcpy(y, hx, sizeof hx, cudaMemcpyHostToDevice);
  k<<<1, 16>>>(o, x, y, z);
  unsigned int h[32];
  int hz[32];
  cudaMemcpy(h, o, sizeof h, cudaMemcpyDeviceToHost);
  cudaMemcpy(hx, y, sizeof hx, cudaMemcpyDeviceToHost);
  cudaMemcpy(hz, z, sizeof hz, cudaMemcpyDeviceToHost);
  printf("%u %u %g %g %g %g %d %d %u\n", h[0], h[3], hx[4], hx[5], hx[6], hx[7], hz[2], hz[3], h[17]);
  return 0;
}
"""


def _run(tmp_path: pathlib.Path, source: str, *args: str) -> subprocess.CompletedProcess:
    src = tmp_path / "copies.cu"
    src.write_text(source)
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args, str(src)], capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)


@pytest.mark.parametrize("mode", [(), ("--emulate",)], ids=["compiled", "emulated"])
def test_memcpy_and_memset_of_typed_places(tmp_path: pathlib.Path, mode: tuple[str, ...]) -> None:
    """Thread 0: p = {0..7}: 0 + 3 + 5 * 1000; thread 3: 30 + 33 + 35 * 1000; thread 1's y[4..7]
    = 0, 0, 6, x[5] + x[7]; z: -1 and 0x01010101; thread 1's bits of x[5] = 5.0f plus 1.5 * 2 - 1."""
    need_compiler(cpp=True)
    r = _run(tmp_path, PROGRAM, "run", *mode)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == f"5003 35063 0 0 6 12 -1 {0x01010101} {0x40a00000 + 2}\n"


REFUSED = {
    "between sizes": ("double d; float f[2] = {1, 2}; memcpy(&d, f, sizeof(d)); o[0] = (float)d;",
                      "memcpy between f32 and f64 is not supported in device code"),
    "run-time size": ("float f[2] = {1, 2}, g[2]; memcpy(g, f, n * sizeof(float)); o[0] = g[0];",
                      "memcpy with a size known only at run time is not supported in device code"),
    "float fill": ("float f[2]; memset(f, 1, sizeof(f)); o[0] = f[0];",
                   "memset of floating-point values with a nonzero byte is not supported in device code"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_untyped_byte_copies_are_located_errors(tmp_path: pathlib.Path, case: str) -> None:
    body, message = REFUSED[case]
    r = _run(tmp_path, "#include <cstring>\n__global__ void k(float* o, int n) {\n  " + body + "\n}\n", "translate",
             "-o", str(tmp_path / "out.c"))
    assert r.returncode == 1
    assert "copies.cu:3:" in r.stderr and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "out.c").exists()

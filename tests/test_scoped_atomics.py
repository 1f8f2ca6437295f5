"""Scoped atomics (``atomicAdd_system``, ``atomicCAS_block``...) and ``__grid_constant__`` kernel
parameters (issue 41 item 7).

On one device with no peer or host thread touching device memory during a launch, the system
scope orders nothing beyond the device scope, and the plain (device-scope) atomic is a legal
implementation of the weaker block scope: each scoped atomic is the plain one. The program below
checks every operation's result and returned old values, compiled and in the emulator.
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

from c_support import need_compiler

PROGRAM = r"""
#include <cstdio>
struct Params { int base; int mul; float ratio; };

__global__ void scoped(int* acc, unsigned int* u, float* f, int* olds) {
  int t = threadIdx.x;
  atomicAdd_system(&acc[0], t);
  atomicAdd_block(&acc[1], 2 * t);
  atomicSub_system(&acc[2], t);
  atomicSub_block(&acc[3], 1);
  atomicMin_system(&acc[4], 100 - t);
  atomicMin_block(&acc[5], t - 7);
  atomicMax_system(&acc[6], t * 3);
  atomicMax_block(&acc[7], -t);
  atomicAnd_system(&acc[8], ~(1 << (t % 8)));
  atomicOr_block(&acc[9], 1 << (t % 16));
  atomicXor_system(&acc[10], 1 << (t % 4));
  atomicXor_block(&acc[11], t);
  atomicInc_system(&u[0], 5u);
  atomicDec_block(&u[1], 9u);
  atomicAdd_system(&f[0], 0.5f);
  atomicAdd_block(&f[1], 0.25f);
  if (t == 0) {
    olds[0] = atomicExch_system(&acc[12], 42);
    olds[1] = atomicExch_block(&acc[12], 43);
    olds[2] = atomicCAS_system(&acc[13], 5, 6);
    olds[3] = atomicCAS_block(&acc[13], 6, 8);
    olds[4] = atomicCAS_block(&acc[13], 6, 9);  /* no swap: acc[13] is 8 */
  }
}

__global__ void constant_params(__grid_constant__ const Params p, __grid_constant__ const int n, int* out) {
  const Params* q = &p;     /* the address of a grid constant may be taken */
  const int* m = &n;
  int t = threadIdx.x;
  if (t < *m) out[t] = q->base + q->mul * t + (int)(q->ratio * p.ratio * t);
}

int main() {
  int *acc, *olds, *out;
  unsigned int* u;
  float* f;
  cudaMalloc(&acc, 14 * sizeof(int));
  cudaMalloc(&olds, 5 * sizeof(int));
  cudaMalloc(&u, 2 * sizeof(unsigned int));
  cudaMalloc(&f, 2 * sizeof(float));
  cudaMalloc(&out, 64 * sizeof(int));
  int init[14] = {0, 0, 1000, 0, 1 << 20, 1 << 20, -1000, 1000, -1, 0, 0, 0, 7, 5};
  cudaMemcpy(acc, init, sizeof init, cudaMemcpyHostToDevice);
  cudaMemset(u, 0, 2 * sizeof(unsigned int));
  cudaMemset(f, 0, 2 * sizeof(float));
  cudaMemset(out, 0, 64 * sizeof(int));
  scoped<<<1, 64>>>(acc, u, f, olds);
  Params p = {10, 3, 0.5f};
  constant_params<<<1, 64>>>(p, 50, out);
  int h[14], o[5], r[64];
  unsigned int hu[2];
  float hf[2];
  cudaMemcpy(h, acc, sizeof h, cudaMemcpyDeviceToHost);
  cudaMemcpy(o, olds, sizeof o, cudaMemcpyDeviceToHost);
  cudaMemcpy(hu, u, sizeof hu, cudaMemcpyDeviceToHost);
  cudaMemcpy(hf, f, sizeof hf, cudaMemcpyDeviceToHost);
  cudaMemcpy(r, out, sizeof r, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 14; ++i) printf("%d ", h[i]);
  printf("\n%u %u %g %g\n", hu[0], hu[1], hf[0], hf[1]);
  for (int i = 0; i < 5; ++i) printf("%d ", o[i]);
  printf("\n");
  for (int i = 0; i < 64; ++i) printf("%d ", r[i]);
  printf("\n");
  return 0;
}
"""


def _expected() -> str:
    ts = range(64)
    acc = [sum(ts), sum(2 * t for t in ts), 1000 - sum(ts), -64, min(100 - t for t in ts), min(t - 7 for t in ts),
           max(3 * t for t in ts), max([1000] + [-t for t in ts]), 0, 0, 0, 0, 43, 8]
    and_v = -1
    for t in ts:
        and_v &= ~(1 << (t % 8))
    acc[8] = and_v
    or_v = 0
    for t in ts:
        or_v |= 1 << (t % 16)
    acc[9] = or_v
    x = 0
    for t in ts:
        x ^= 1 << (t % 4)
    acc[10] = x
    x = 0
    for t in ts:
        x ^= t
    acc[11] = x
    inc = 0
    for _ in ts:  # atomicInc: old >= 5 ? 0 : old + 1 (the order of the threads does not matter)
        inc = 0 if inc >= 5 else inc + 1
    dec = 0
    for _ in ts:  # atomicDec: (old == 0 || old > 9) ? 9 : old - 1
        dec = 9 if dec == 0 or dec > 9 else dec - 1
    out = [10 + 3 * t + int(0.25 * t) if t < 50 else 0 for t in ts]
    lines = [" ".join(str(v) for v in acc) + " ", f"{inc} {dec} 32 16", "7 42 5 6 8 ", " ".join(map(str, out)) + " "]
    return "\n".join(lines) + "\n"


def test_scoped_atomics_and_grid_constants(tmp_path: pathlib.Path) -> None:
    """Every scoped atomic has its plain atomic's result (final values, returned old values); a
    ``__grid_constant__`` struct and scalar are read through their addresses."""
    need_compiler(cpp=True)
    src = tmp_path / "scoped.cu"
    src.write_text(PROGRAM)
    expected = _expected()
    for mode in ((), ("--emulate",)):
        r = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", str(src), *mode], capture_output=True,
                           text=True, timeout=600, cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
        assert r.stdout == expected, mode

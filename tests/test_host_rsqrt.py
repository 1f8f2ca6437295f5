"""Host code that calls rsqrtf/rsqrt (a __host__ __device__ function, as the samples' helper_math.h
has under nvcc): polypy's runtime gives the host 1/sqrt in the argument's precision, the same
as device code computes; a whole program prints the same through the C++ build and the emulator."""
from __future__ import annotations

import subprocess
import sys

import numpy as np

PROGRAM = r"""#include <cstdio>
__host__ __device__ float inv(float x) { return rsqrtf(x); }
__global__ void k(float* y) { y[threadIdx.x] = inv(3.0f * (threadIdx.x + 1)); }
int main() {
  float h[4], *d;
  cudaMalloc(&d, sizeof h);
  k<<<1, 4>>>(d);
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  printf("%.9g %.9g %.9g %.9g host %.9g %.17g\n", h[0], h[1], h[2], h[3], inv(7.0f), rsqrt(0.3));
  cudaFree(d);
  return 0;
}
"""


def test_host_and_device_rsqrt_agree(tmp_path) -> None:
    src = tmp_path / "rsqrt.cu"
    src.write_text(PROGRAM)
    f = np.float32
    dev = [f(1) / np.sqrt(f(3 * (t + 1))) for t in range(4)]
    want = " ".join(f"{float(v):.9g}" for v in dev) + f" host {float(f(1) / np.sqrt(f(7))):.9g} " \
        f"{1.0 / np.sqrt(0.3):.17g}\n"
    for extra in ((), ("--emulate",)):
        result = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", str(src), *extra],
                                capture_output=True, text=True, timeout=600, cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout == want, extra

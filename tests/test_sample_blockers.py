"""General features that single NVIDIA samples needed (issue 36), each checked on our own small
kernels against values computed here: CUDA's mixed-signedness min/max overloads."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from polypy.emulator import emulate

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

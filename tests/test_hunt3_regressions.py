"""Regressions found by running unseen CUDA programs (hunt 3): each test is a minimized program
that polypy refused, crashed on or answered wrongly, checked on the emulator and the LLVM backend."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from polypy.errors import DeviceAssertError

ASSERT_MESSAGES = r"""
#include <cassert>
__global__ void k(const int *x, int *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    assert(x[i] >= 0 && "x must be non-negative");
    if (x[i] > 100) assert(!"unreachable: x > 100");
    y[i] = 2 * x[i];
  }
}
"""


@pytest.mark.parametrize("backend", ["emulate", "llvm"])
def test_assert_with_a_message_string(tmp_path, capfd, backend):
    # `assert(cond && "message")` and `assert(!"message")`: a string literal converted to bool is
    # true (its address is not null). polypy refused the literal ("string literals are not
    # supported in device code").
    (tmp_path / "a.cu").write_text(ASSERT_MESSAGES)
    mod = polypy.compile(str(tmp_path / "a.cu"))
    kernel = mod.k.emulate if backend == "emulate" else mod.k
    x = np.array([0, 5, 7], dtype=np.int32)
    y = np.zeros(3, dtype=np.int32)
    kernel[1, 4](x, y, 3)
    np.testing.assert_array_equal(y, [0, 10, 14])
    x[1] = -1
    with pytest.raises(DeviceAssertError, match='x must be non-negative'):
        kernel[1, 4](x, y, 3)
    assert "thread: [1,0,0] Assertion `x[i] >= 0 && \"x must be non-negative\"` failed." in capfd.readouterr().err
    x[1] = 101
    with pytest.raises(DeviceAssertError, match='unreachable'):
        kernel[1, 4](x, y, 3)
    assert "thread: [1,0,0] Assertion `!\"unreachable: x > 100\"` failed." in capfd.readouterr().err

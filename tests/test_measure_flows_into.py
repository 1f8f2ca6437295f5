"""A shared load in one branch of an ``if`` and a store to the same array later in the other branch
(Rodinia's hybridsort, ``bucketcount`` after its ``addOffset`` is inlined): the lockstep-warps
pass's "does the loaded value reach the store through locals" question compared the two
statements' positions as if both were in one list, and indexed the ``then`` list with the
``else`` statement's position: an internal error (IndexError) in ``polypy translate``. Two
branches are never one list: the load cannot reach the store through locals, the pair is asked as
any other."""
from __future__ import annotations

import numpy as np
import pytest

from c_support import run_way

SOURCE = """
__global__ void k(int* out, int flag) {
  __shared__ int s[64];
  int t = threadIdx.x;
  s[t] = t;
  __syncthreads();
  if (flag) {
    int v = s[t ^ 1];
    out[t] = v;
  } else {
    out[t] = 0;
    out[t + 64] = 1;
    s[t] = 5;
  }
}
"""


@pytest.mark.parametrize("way", ["emulator", "c", "llvm"])
@pytest.mark.parametrize("flag", [0, 1])
def test_a_load_and_a_store_in_the_two_branches_of_an_if(way: str, flag: int) -> None:
    out = run_way(SOURCE, "k", 1, 64, {"out": np.full(128, -7, np.int32), "flag": np.int32(flag)}, way,
                  name="branches.cu")["out"]
    t = np.arange(64)
    want = np.full(128, -7, np.int32)
    if flag:
        want[:64] = t ^ 1
    else:
        want[:64] = 0
        want[64:] = 1
    np.testing.assert_array_equal(out, want)

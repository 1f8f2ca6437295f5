"""Forward ``goto`` out of nested loops to a label later in an enclosing block (Rodinia's
mummergpu: ``goto RECORD_RESULT;`` from an inner loop, ``goto NEXT_SUBSTRING;``), lowered to
flags, breaks and guards (frontend/lower/gotos.py). Our own kernel against a Python reference
through the emulator, the LLVM JIT and the C backend on several launch shapes; the gotos polypy
does not model are located errors."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

from c_support import WAYS, run_way

GOTOS = r"""
__global__ void jumps(const int* a, int* out, int n, int m) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int acc = 0;
  for (int s = 0; s < 4; s++) {
    int j = 0;
    int skipped;                        // jumped over: declared without an initializer
    while (j < m) {
      int v = a[(i + s * 7 + j) % n];
      if (v < 0) {
        acc += 1000;
        goto SKIP;                      // out of the while loop
      }
      for (int r = 0; r < 3; r++) {
        if (v == r + 10) goto RECORD;   // out of two loops
      }
      acc += v;
      j++;
    }
    acc += 1;
RECORD:
    acc *= 3;
SKIP:
    acc -= 2;
  }
  if (acc > 100000) goto END;
  acc += 5;
END:
  out[i] = acc;
}
"""


def _reference(a: np.ndarray, n: int, m: int) -> np.ndarray:
    out = np.zeros(n, np.int64)
    for i in range(n):
        acc = 0
        for s in range(4):
            j, where = 0, "end"
            while j < m:
                v = int(a[(i + s * 7 + j) % n])
                if v < 0:
                    acc += 1000
                    where = "skip"
                    break
                if v in (10, 11, 12):
                    where = "record"
                    break
                acc += v
                j += 1
            if where == "end":
                acc += 1
            if where != "skip":
                acc *= 3
            acc -= 2
        out[i] = acc if acc > 100000 else acc + 5
    return out.astype(np.int32)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block", [(1, 32), (3, 64), (2, 48)])
def test_forward_gotos_out_of_nested_loops(way: str, grid: int, block: int) -> None:
    n = grid * block - 5
    rng = np.random.default_rng(grid)
    a = rng.integers(-3, 14, n).astype(np.int32)
    a[a < 0] = np.where(rng.random(int((a < 0).sum())) < 0.3, -1, 5)  # a few negatives: every path taken
    out = run_way(GOTOS, "jumps", grid, block, {"a": a, "out": np.zeros(n, np.int32), "n": n, "m": 6}, way)
    np.testing.assert_array_equal(out["out"], _reference(a, n, 6))


REFUSED = {
    "backwards": ("AGAIN:\n  o[t] += 1;\n  if (o[t] < 3) goto AGAIN;", "gotos.cu:5:17:",
                  "goto is supported only forward, to a label later in a block that holds the goto"),
    "into a block": ("goto IN;\n  if (t) {\n  IN:\n    o[t] = 1;\n  }", "gotos.cu:3:3:",
                     "goto is supported only forward, to a label later in a block that holds the goto"),
    "out of a switch": ("for (int k = 0; k < 2; k++) {\n    switch (t) { case 1: goto OUT; default: o[t] = 2; }\n"
                        "  OUT:\n    o[t] += 1;\n  }", "gotos.cu:4:26:", "goto out of a switch is not supported"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_gotos_polypy_does_not_model_are_located_errors(tmp_path: pathlib.Path, case: str) -> None:
    body, where, message = REFUSED[case]
    src = tmp_path / "gotos.cu"
    src.write_text("__global__ void k(int* o) {\n  int t = threadIdx.x;\n  " + body + "\n}\n")
    r = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(src), "-o",
                        str(tmp_path / "out.c")], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 1, r.stdout
    assert f"{where} error: {message}" in r.stderr and "^" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "out.c").exists()

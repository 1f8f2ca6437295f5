"""Block scopes (``polypy.poly.block_scope``) group accesses by the blocks they run in, to share
work between questions. The grouping tests two block sets for equality; for a halo load indexed
by a thread's ``k / 18`` and ``k % 18`` (a 16x16 block filling an 18x18 tile), the sets projected to
their blocks carry divisions, and one equality test took seconds: translating the kernel below took
over ten minutes (its lockstep and fusion passes build scopes). The test is now given a small isl
budget (``CLASS_BUDGET``); past it the set is a class of its own, which only shares less work."""
from __future__ import annotations

import numpy as np

BLUR = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void blur(float* out, const float* in, int w, int h) {
  __shared__ float s[18][18];
  cg::thread_block b = cg::this_thread_block();
  int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;
  for (int k = threadIdx.y * 16 + threadIdx.x; k < 18 * 18; k += 256) {
    int sx = blockIdx.x * 16 + k % 18 - 1, sy = blockIdx.y * 16 + k / 18 - 1;
    s[k / 18][k % 18] = (sx >= 0 && sx < w && sy >= 0 && sy < h) ? in[sy * w + sx] : 0.0f;
  }
  b.sync();
  if (x < w && y < h) {
    float acc = 0;
    for (int dy = 0; dy < 3; ++dy)
      for (int dx = 0; dx < 3; ++dx) acc += s[threadIdx.y + dy][threadIdx.x + dx] * (float)(1 + dx + 3 * dy);
    out[y * w + x] = acc;
  }
}
"""


def test_equal_block_sets_are_found_within_a_budget_and_the_halo_blur_runs_right(monkeypatch) -> None:
    import polypy
    import polypy.poly.block_scope as block_scope
    from c_support import assert_same_as_emulator
    from polypy.driver.source import load

    budgets: list[int] = []
    bounded = block_scope.bounded

    def spy(question, default, budget=None):
        budgets.append(budget)
        return bounded(question, default, budget)

    monkeypatch.setattr(block_scope, "bounded", spy)
    kernel = load(None, text=BLUR).kernel("blur")
    module = polypy.compile(None, text=BLUR)
    rng = np.random.default_rng(2)
    for w, h in ((40, 20), (16, 33)):
        src = rng.standard_normal(w * h).astype(np.float32)
        padded = np.pad(src.reshape(h, w).astype(np.float64), 1)
        want = sum((1 + dx + 3 * dy) * padded[dy:dy + h, dx:dx + w] for dy in range(3) for dx in range(3))
        grid, block = ((w + 15) // 16, (h + 15) // 16), (16, 16)
        got = assert_same_as_emulator(kernel, grid, block, {"out": np.zeros(w * h, np.float32), "in": src,
                                                            "w": w, "h": h})
        np.testing.assert_allclose(got["out"], want.reshape(-1), rtol=1e-5, atol=1e-5)
        out = np.zeros(w * h, np.float32)
        module.blur[grid, block](out, src, w, h)  # the LLVM backend
        np.testing.assert_array_equal(out, got["out"])
    # every equality test of two block sets that isl did not settle by their form ran under the budget
    assert budgets and set(budgets) == {block_scope.CLASS_BUDGET}

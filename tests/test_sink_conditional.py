"""Per-thread values kept across the loops ``sink-thread-loops`` interchanges, written only on
some paths of a part (under an if, in a loop that may not run): the part must start from the
value the thread holds, not from an undefined local (kmeans's nearest-centre index: every point
not nearest to the last centre got index 0 through LLVM and the emitted C).

Checked against NumPy and the emulator (which runs the GPU form: no sinking) through LLVM.
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy

SOURCE = r"""
__global__ void argmin(const float* x, const float* c, int* out, int n, int nc, int nf) {
  int p = blockIdx.x * blockDim.x + threadIdx.x;
  int index = -1;
  if (p < n) {
    float best = 3.0e38f;
    for (int i = 0; i < nc; i++) {
      float ans = 0.0f;
      for (int j = 0; j < nf; j++) { float d = x[j * n + p] - c[i * nf + j]; ans += d * d; }
      if (ans < best) { best = ans; index = i; }
    }
  }
  if (p < n) out[p] = index;
}

__global__ void last_hit(const int* x, int* out, int n, int m) {
  int p = blockIdx.x * blockDim.x + threadIdx.x;
  int hit = 7, count = 0;
  for (int i = 0; i < m; i++) {
    int s = 0;
    for (int j = 0; j < i; j++) s += x[(j * n + p) % (n * m)];
    if (s % 3 == 0) { if (s % 2 == 0) hit = i; else count += 2; }
    for (int k = 0; k < (p % 3); k++) count += k;
  }
  if (p < n) out[p] = hit * 1000 + count;
}
"""


def _argmin_reference(x, c, n, nc, nf):
    pts = x.reshape(nf, n).T
    return ((pts[:, None, :] - c.reshape(nc, nf)[None]) ** 2).sum(-1).argmin(1).astype(np.int32)


def _last_hit_reference(x, n, m):
    out = np.zeros(n, np.int32)
    for p in range(n):
        hit, count = 7, 0
        for i in range(m):
            s = sum(int(x[(j * n + p) % (n * m)]) for j in range(i))
            if s % 3 == 0:
                if s % 2 == 0:
                    hit = i
                else:
                    count += 2
            count += sum(range(p % 3))
        out[p] = hit * 1000 + count
    return out


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    path = tmp_path_factory.mktemp("sink") / "sink.cu"
    path.write_text(SOURCE)
    return polypy.compile(str(path)), polypy.load(str(path))


@pytest.mark.parametrize("n,block", [(300, 128), (97, 32), (64, 64)])
def test_index_set_under_an_if_in_a_loop_is_kept(modules, n, block) -> None:
    compiled, loaded = modules
    nc, nf = 4, 2
    p = np.arange(n)
    x = np.stack([(p * 7) % 13, (p * 5) % 11], 0).astype(np.float32).ravel()
    c = np.array([0, 0, 10, 0, 0, 10, 10, 10], np.float32)
    want = _argmin_reference(x, c, n, nc, nf)
    grid = (n + block - 1) // block
    out = np.full(n, -5, np.int32)
    compiled.argmin[grid, block](x, c, out, n, nc, nf)
    np.testing.assert_array_equal(out, want)
    emulated = np.full(n, -5, np.int32)
    polypy.emulate(loaded.kernel("argmin"), grid, block, {"x": x, "c": c, "out": emulated, "n": n, "nc": nc, "nf": nf})
    np.testing.assert_array_equal(emulated, want)


@pytest.mark.parametrize("n,m,block", [(40, 5, 32), (33, 4, 16)])
def test_values_written_on_some_paths_keep_the_others(modules, n, m, block) -> None:
    compiled, loaded = modules
    x = ((np.arange(n * m) * 5) % 7).astype(np.int32)
    want = _last_hit_reference(x, n, m)
    grid = (n + block - 1) // block
    out = np.zeros(n, np.int32)
    compiled.last_hit[grid, block](x, out, n, m)
    np.testing.assert_array_equal(out, want)
    emulated = np.zeros(n, np.int32)
    polypy.emulate(loaded.kernel("last_hit"), grid, block, {"x": x, "out": emulated, "n": n, "m": m})
    np.testing.assert_array_equal(emulated, want)

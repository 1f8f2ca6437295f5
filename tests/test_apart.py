"""Versions for arrays apart (``codegen.c.apart``): specialized versions with the written pointers
``restrict``, chosen at run time only where every written array is apart from the other arguments.
Checked: which kernels get the twin, the emitted C (the plain launcher never runs it), the kernel
library's choice of entry point (overlapping NumPy arguments run the plain one), the runtime's
allocation test, and results through the library and a whole program against references."""
from __future__ import annotations

import pathlib
import subprocess

import numpy as np

from c_support import need_compiler, run_against_runtime
from codegen.c import build_library, emit_kernels, find_compiler
from codegen.c.apart import apart_twin
from polypy.driver.cli import main
from polypy.driver.pipelines import lower_and_emit
from polypy.driver.source import load
from polypy.ir import nodes as n
from polypy.ir.types import PointerType
from polypy.passes.specialize import specialize_block_shape

# A 5 x 5 filter (written for this test): every thread reads all 25 taps of `mask`, more than
# localize-uniform-loads copies, and the store to `out` may alias them.
FILTER = r"""
__global__ void filter5(const float* img, const float* mask, float* out, int h, int w)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h)
        return;
    float acc = 0.0f;
    for (int dy = 0; dy < 5; ++dy)
        for (int dx = 0; dx < 5; ++dx)
            if (y + dy < h && x + dx < w)
                acc += mask[dy * 5 + dx] * img[(y + dy) * w + x + dx];
    out[y * w + x] = acc;
}
"""

COPY = r"""
__global__ void copy(const float* a, float* b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        b[i] = 2.0f * a[i];
}
"""


def _cpu(source: str, name: str) -> n.Kernel:
    return lower_and_emit(load(None, text=source), "cpu").kernel(name)


def _restrict(kernel: n.Kernel) -> set[str]:
    return {p.name for p in kernel.params if isinstance(p.ptype, PointerType) and p.ptype.restrict}


def _want(img: np.ndarray, mask: np.ndarray) -> np.ndarray:
    h, w = img.shape
    padded = np.zeros((h + 4, w + 4))
    padded[:h, :w] = img
    return sum(mask[dy, dx] * padded[dy:dy + h, dx:dx + w] for dy in range(5) for dx in range(5))


def test_twin_only_where_a_loop_reloads_what_a_store_may_alias() -> None:
    fine = specialize_block_shape(_cpu(FILTER, "filter5"), block=(32, 8, 1))
    twin = apart_twin(fine)
    assert twin is not None and _restrict(twin) == {"out"}  # only the written pointer
    assert twin.body == fine.body
    # a copy loads at the thread's own index: nothing the compiler must reload
    assert apart_twin(specialize_block_shape(_cpu(COPY, "copy"), block=(256, 1, 1))) is None


def test_library_c_keeps_the_plain_launcher_plain() -> None:
    text = emit_kernels([_cpu(FILTER, "filter5")], block_shapes={"filter5": [(32, 8, 1)]})
    assert "float* POLYPY_RESTRICT out" in text
    plain = text[text.index("POLYPY_EXPORT void filter5_launch("):text.index("POLYPY_EXPORT void filter5_launch_apart(")]
    apart = text[text.index("POLYPY_EXPORT void filter5_launch_apart("):]
    assert "_r(" not in plain and "filter5_launch_b32x8x1(" in plain
    assert "filter5_launch_b32x8x1_r(" in apart
    # no twin without a specialized version, nor where bounds are checked
    assert "_launch_apart" not in emit_kernels([_cpu(FILTER, "filter5")])
    assert "_launch_apart" not in emit_kernels([_cpu(FILTER, "filter5")], block_shapes={"filter5": [(32, 8, 1)]},
                                               check_bounds=True)


def test_library_runs_the_twin_only_for_arrays_apart() -> None:
    need_compiler()
    kernel = _cpu(FILTER, "filter5")
    rng = np.random.default_rng(3)
    h, w = 37, 70
    img = rng.standard_normal((h, w)).astype(np.float32)
    mask = rng.standard_normal((5, 5)).astype(np.float32)
    want = _want(img.astype(np.float64), mask.astype(np.float64))
    lib = build_library([kernel], block_shapes={"filter5": [(32, 8, 1)]})
    grid, block = ((w + 31) // 32, (h + 7) // 8), (32, 8)

    apart, plain = lib._function(kernel, "filter5_launch_apart"), lib._function(kernel, "filter5_launch")
    assert apart is not None and plain is not None

    out = np.zeros((h, w), np.float32)
    args = {"img": img, "mask": mask, "out": out, "h": h, "w": w}
    assert lib._launcher(kernel, {k: v for k, v in args.items() if isinstance(v, np.ndarray)}) is apart
    lib.launch("filter5", grid, block, args)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)

    # The taps inside the output's storage, past the part the kernel writes: two views of one
    # array, not apart (even though the views do not overlap).
    storage = np.zeros(h * w + 25, np.float32)
    storage[h * w:] = mask.ravel()
    args = {"img": img, "mask": storage[h * w:], "out": storage[:h * w], "h": h, "w": w}
    assert lib._launcher(kernel, {k: v for k, v in args.items() if isinstance(v, np.ndarray)}) is plain
    lib.launch("filter5", grid, block, args)
    np.testing.assert_allclose(storage[:h * w].reshape(h, w), want, rtol=1e-5, atol=1e-5)
    # the input read as the output: not apart either
    assert lib._launcher(kernel, {"img": out, "mask": mask, "out": out}) is plain


def test_runtime_tells_allocations_apart(tmp_path: pathlib.Path) -> None:
    out = run_against_runtime(tmp_path, "apart", r"""
#include <cstdio>
#include "cuda_runtime.h"
int main() {
  float *a, *b;
  cudaMalloc((void**)&a, 64 * sizeof(float));
  cudaMalloc((void**)&b, 64 * sizeof(float));
  static float host[4];
  printf("%d %d %d %d\n", polypy_rt_apart(a, b), polypy_rt_apart(a + 10, b + 63), polypy_rt_apart(a, a + 32),
         polypy_rt_apart(b, host));
  cudaFree(a);
  cudaFree(b);
  printf("%d\n", polypy_rt_apart(a, b));
  return 0;
}
""")
    first, second = out.splitlines()
    assert first.split() == ["1", "1", "0", "0"]  # two allocations; one; a host array the registry does not know
    assert second == "0"  # freed: the registry knows neither


PROGRAM = FILTER + r"""
#include <cstdio>
#include <cstdlib>
#include <cmath>
static int check(const float* out, const float* img, const float* mask, int h, int w) {
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      double acc = 0;
      for (int dy = 0; dy < 5; ++dy)
        for (int dx = 0; dx < 5; ++dx)
          if (y + dy < h && x + dx < w) acc += (double)mask[dy * 5 + dx] * img[(y + dy) * w + x + dx];
      if (std::fabs(acc - out[y * w + x]) > 1e-4 * (1 + std::fabs(acc))) return 0;
    }
  return 1;
}
int main() {
  const int h = 45, w = 100;
  float* img = (float*)malloc(h * w * sizeof(float));
  float mask[25];
  for (int i = 0; i < h * w; ++i) img[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  for (int i = 0; i < 25; ++i) mask[i] = (float)(i % 7) / 3.0f - 1.0f;
  float *d_img, *d_mask, *d_out, *d_both;
  cudaMalloc((void**)&d_img, h * w * sizeof(float));
  cudaMalloc((void**)&d_mask, 25 * sizeof(float));
  cudaMalloc((void**)&d_out, h * w * sizeof(float));
  cudaMalloc((void**)&d_both, (h * w + 25) * sizeof(float));
  cudaMemcpy(d_img, img, h * w * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(d_mask, mask, 25 * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(d_both + h * w, mask, 25 * sizeof(float), cudaMemcpyHostToDevice);
  dim3 block(32, 8);
  dim3 grid((w + 31) / 32, (h + 7) / 8);
  float* out = (float*)malloc(h * w * sizeof(float));
  filter5<<<grid, block>>>(d_img, d_mask, d_out, h, w);  // three allocations: apart
  cudaMemcpy(out, d_out, h * w * sizeof(float), cudaMemcpyDeviceToHost);
  printf("apart %s\n", check(out, img, mask, h, w) ? "ok" : "wrong");
  filter5<<<grid, block>>>(d_img, d_both + h * w, d_both, h, w);  // taps and output in one allocation
  cudaMemcpy(out, d_both, h * w * sizeof(float), cudaMemcpyDeviceToHost);
  printf("shared %s\n", check(out, img, mask, h, w) ? "ok" : "wrong");
  return 0;
}
"""


def test_program_chooses_by_allocation(tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    src = tmp_path / "filter.cu"
    src.write_text(PROGRAM)
    cpp = tmp_path / "filter.cpp"
    assert main(["translate", str(src), "-o", str(cpp)]) == 0
    text = cpp.read_text()
    assert "if (polypy_rt_apart(out, img) && polypy_rt_apart(out, mask)) {" in text
    exe = tmp_path / "filter"
    built = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", str(cpp), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[:2] == ["apart ok", "shared ok"]

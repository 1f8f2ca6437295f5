"""Versions for arrays apart (``polypy.passes.apart_twins``): specialized versions with the written pointers
``restrict``, chosen at run time only where every written array is apart from the other arguments.
Checked: which kernels get the twin, the emitted C (the plain launcher never runs it), the kernel
library's choice of entry point (overlapping NumPy arguments run the plain one), the runtime's
allocation test, and results through the library and a whole program against references."""
from __future__ import annotations

import pathlib
import subprocess

import numpy as np

from c_support import need_compiler, run_against_runtime
from codegen.c import find_compiler
from polypy.driver.library import build_library, emit_kernels
from polypy.passes.apart_twins import apart_twin, restricted
from polypy.driver.cli import main
from polypy.driver.pipelines import lower_and_emit
from polypy.driver.source import load
from polypy.ir import nodes as n
from polypy.passes.specialize import specialize_block_shape
from samples.spec import sample

# conv2d: every thread reads all 25 taps of `mask`, more than localize-uniform-loads copies, and
# its store to `out` may alias them.
CONV2D = sample("conv2d")


def _cpu(name: str) -> n.Kernel:
    """The sample ``name``'s kernel in CPU form."""
    return lower_and_emit(load(sample(name).source), "cpu").kernel(sample(name).kernel)


def _conv2d() -> n.Kernel:
    return _cpu("conv2d")


def test_twin_only_where_a_loop_reloads_what_a_store_may_alias() -> None:
    fine = specialize_block_shape(_conv2d(), block=(32, 8, 1))
    twin = apart_twin(fine)
    assert twin is not None and restricted(twin) == {"out"}  # only the written pointer
    assert twin.body == fine.body
    # saxpy loads at the thread's own index: nothing the compiler must reload
    assert apart_twin(specialize_block_shape(_cpu("saxpy"), block=(256, 1, 1))) is None


def test_library_c_keeps_the_plain_launcher_plain() -> None:
    text = emit_kernels([_conv2d()], block_shapes={"conv2d": [(32, 8, 1)]})
    assert "float* POLYPY_RESTRICT out" in text
    plain = text[text.index("POLYPY_EXPORT void conv2d_launch("):text.index("POLYPY_EXPORT void conv2d_launch_apart(")]
    apart = text[text.index("POLYPY_EXPORT void conv2d_launch_apart("):]
    assert "_r(" not in plain and "conv2d_launch_b32x8x1(" in plain
    assert "conv2d_launch_b32x8x1_r(" in apart
    # no twin without a specialized version, nor where bounds are checked
    assert "_launch_apart" not in emit_kernels([_conv2d()])
    assert "_launch_apart" not in emit_kernels([_conv2d()], block_shapes={"conv2d": [(32, 8, 1)]}, check_bounds=True)


def test_library_runs_the_twin_only_for_arrays_apart() -> None:
    need_compiler()
    kernel = _conv2d()
    case = CONV2D.cases[0]
    args = CONV2D.make_args(np.random.default_rng(3), case, np.float32)
    h, w = int(args["height"]), int(args["width"])
    want = CONV2D.reference(args, case)["out"]
    lib = build_library([kernel], block_shapes={"conv2d": [tuple(case.block) + (1,)]})
    apart, plain = lib._function(kernel, "conv2d_launch_apart"), lib._function(kernel, "conv2d_launch")
    assert apart is not None and plain is not None

    def arrays(a: dict) -> dict:
        return {k: v for k, v in a.items() if isinstance(v, np.ndarray) and v.ndim}

    assert lib._launcher(kernel, arrays(args)) is apart
    lib.launch("conv2d", case.grid, case.block, args)
    np.testing.assert_allclose(args["out"], want, rtol=1e-5, atol=1e-5)

    # The taps inside the output's storage, past the part the kernel writes: two views of one
    # array, not apart (even though the views do not overlap).
    storage = np.zeros(h * w + 25, np.float32)
    storage[h * w:] = args["mask"]
    shared = {**args, "mask": storage[h * w:], "out": storage[:h * w]}
    assert lib._launcher(kernel, arrays(shared)) is plain
    lib.launch("conv2d", case.grid, case.block, shared)
    np.testing.assert_allclose(storage[:h * w], want, rtol=1e-5, atol=1e-5)
    # the input read as the output: not apart either
    assert lib._launcher(kernel, {"img": args["out"], "mask": args["mask"], "out": args["out"]}) is plain


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


# conv2d's kernel (the sample's source) launched from a host program of ours: once on three
# allocations, once with the taps in the output's allocation, each checked against a host loop.
MAIN = r"""
#include <cstdio>
#include <cstdlib>
#include <cmath>
static int check(const float* out, const float* img, const float* mask, int h, int w) {
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      double acc = 0;
      for (int dy = -2; dy <= 2; ++dy)
        for (int dx = -2; dx <= 2; ++dx)
          if (y + dy >= 0 && y + dy < h && x + dx >= 0 && x + dx < w)
            acc += (double)mask[(dy + 2) * 5 + dx + 2] * img[(y + dy) * w + x + dx];
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
  conv2d<<<grid, block>>>(d_img, d_mask, d_out, h, w);  // three allocations: apart
  cudaMemcpy(out, d_out, h * w * sizeof(float), cudaMemcpyDeviceToHost);
  printf("apart %s\n", check(out, img, mask, h, w) ? "ok" : "wrong");
  conv2d<<<grid, block>>>(d_img, d_both + h * w, d_both, h, w);  // taps and output in one allocation
  cudaMemcpy(out, d_both, h * w * sizeof(float), cudaMemcpyDeviceToHost);
  printf("shared %s\n", check(out, img, mask, h, w) ? "ok" : "wrong");
  return 0;
}
"""


def test_program_chooses_by_allocation(tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    src = tmp_path / "conv2d_main.cu"
    src.write_text(pathlib.Path(CONV2D.source).read_text() + MAIN)
    cpp = tmp_path / "conv2d_main.cpp"
    assert main(["translate", str(src), "-o", str(cpp)]) == 0
    text = cpp.read_text()
    assert "if (polypy_rt_apart(out, img) && polypy_rt_apart(out, mask)) {" in text
    exe = tmp_path / "conv2d_main"
    built = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", str(cpp), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[:2] == ["apart ok", "shared ok"]


# Rodinia b+tree's search, one level: the launch's block shape is known only at run time, so the
# kernel has no block-shape version; the default gets the twin. Each block's thread whose interval
# holds the query writes its position; the loads of `rows[b]` and `queries[b]`, the same in every
# iteration of the loop over threads, may be changed by the store to `found` unless it is restrict.
SEARCH = r"""
#include <cstdio>
#include <cstdlib>
__global__ void search(const int* keys, const int* queries, long* rows, long* found, int width) {
  int t = threadIdx.x, b = blockIdx.x;
  if (keys[rows[b] * width + t] <= queries[b] && keys[rows[b] * width + t + 1] > queries[b])
    found[b] = rows[b] * width + t;
}
static int run(int threads, int blocks, bool shared) {
  int width = threads + 1;
  int* keys = (int*)malloc(sizeof(int) * blocks * width);
  int* queries = (int*)malloc(sizeof(int) * blocks);
  long* rows = (long*)malloc(sizeof(long) * blocks);
  long* found = (long*)malloc(sizeof(long) * blocks);
  for (int b = 0; b < blocks; ++b) {
    rows[b] = (b * 7) % blocks;
    queries[b] = 3 * (b % threads) + 1;
    for (int t = 0; t < width; ++t) keys[b * width + t] = 3 * t;
  }
  int *d_keys, *d_queries;
  long *d_rows, *d_found, *d_both = 0;
  cudaMalloc(&d_keys, sizeof(int) * blocks * width);
  cudaMalloc(&d_queries, sizeof(int) * blocks);
  if (shared) {  // rows and found in one allocation: not apart
    cudaMalloc(&d_both, 2 * sizeof(long) * blocks);
    d_rows = d_both;
    d_found = d_both + blocks;
  } else {
    cudaMalloc(&d_rows, sizeof(long) * blocks);
    cudaMalloc(&d_found, sizeof(long) * blocks);
  }
  cudaMemcpy(d_keys, keys, sizeof(int) * blocks * width, cudaMemcpyHostToDevice);
  cudaMemcpy(d_queries, queries, sizeof(int) * blocks, cudaMemcpyHostToDevice);
  cudaMemcpy(d_rows, rows, sizeof(long) * blocks, cudaMemcpyHostToDevice);
  cudaMemset(d_found, 0xff, sizeof(long) * blocks);
  search<<<blocks, threads>>>(d_keys, d_queries, d_rows, d_found, width);
  cudaMemcpy(found, d_found, sizeof(long) * blocks, cudaMemcpyDeviceToHost);
  int wrong = 0;
  for (int b = 0; b < blocks; ++b) wrong += found[b] != rows[b] * width + b % threads;
  if (shared) cudaFree(d_both); else { cudaFree(d_rows); cudaFree(d_found); }
  cudaFree(d_keys); cudaFree(d_queries);
  free(keys); free(queries); free(rows); free(found);
  return wrong;
}
int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 37;  // a block shape known only at run time
  printf("apart %s\n", run(threads, 50, false) ? "wrong" : "ok");
  printf("shared %s\n", run(threads, 50, true) ? "wrong" : "ok");
  return 0;
}
"""


def test_program_twins_the_default_of_a_run_time_block_shape(tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    src = tmp_path / "search.cu"
    src.write_text(SEARCH)
    cpp = tmp_path / "search.cpp"
    assert main(["translate", str(src), "-o", str(cpp)]) == 0
    text = cpp.read_text()
    assert "long long* POLYPY_RESTRICT found," in text
    # a call once a block: GCC would forget the restrict promise inlined into the launcher
    assert "POLYPY_RESTRICT_BLOCK static void search_block__r(" in text and "\nstatic void search_block(" in text
    launcher = text[text.index("static inline void search_launch("):]
    launcher = launcher[:launcher.index("\n}\n")]
    # the twin is chosen at run time, by allocation; every other launch runs the plain kernel
    assert "if (polypy_rt_apart((long long*)found, keys) && polypy_rt_apart((long long*)found, queries) && " \
           "polypy_rt_apart((long long*)found, (long long*)rows)) {" in launcher
    assert "search_launch__r(grid, block" in launcher and "search_launch_generic(grid, block" in launcher
    exe = tmp_path / "search"
    built = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", str(cpp), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    for threads in ("37", "64"):
        run = subprocess.run([str(exe), threads], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        assert run.stdout.split("\n")[:2] == ["apart ok", "shared ok"]

"""bench/cuda_samples.py reads a samples tree as the CUDA samples lay it out (our own small tree
here, never NVIDIA's files): which samples a CPU can run, their sources and include directories,
and the row a sample gets when it passes, fails its self-check, or is refused."""
from __future__ import annotations

import pathlib
import sys

import pytest

from bench.cuda_samples import find_samples, measure, summary
from c_support import need_compiler

CMAKE = """project({name} LANGUAGES C CXX CUDA)
include_directories(../../../Common)
add_executable({name} {sources})
{extra}
"""


def _sample(root: pathlib.Path, name: str, files: dict[str, str], *, sources: str, extra: str = "") -> None:
    d = root / "Samples" / "0_Intro" / name
    d.mkdir(parents=True)
    (d / "CMakeLists.txt").write_text(CMAKE.format(name=name, sources=sources, extra=extra))
    for f, text in files.items():
        (d / f).parent.mkdir(parents=True, exist_ok=True)
        (d / f).write_text(text)


KERNEL = """#include <cstdio>
#include <helper_cuda.h>
__global__ void fill(int* a) { a[threadIdx.x] = threadIdx.x; }
int main() {
  int *d, h[8];
  checkCudaErrors(cudaMalloc(&d, sizeof h));
  fill<<<1, 8>>>(d);
  checkCudaErrors(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  printf("%d\\n", h[7]);
  return h[7] == WANT ? 0 : 1;
}
"""


@pytest.fixture
def tree(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "samples"
    (root / "Common").mkdir(parents=True)
    (root / "Common" / "helper_cuda.h").write_text(
        "#pragma once\n#include <cuda_runtime.h>\n#define checkCudaErrors(x) do { if ((x) != cudaSuccess) return 3; } while (0)\n")
    _sample(root, "good", {"good.cu": "#define WANT 7\n" + KERNEL}, sources="good.cu")
    _sample(root, "wrong", {"wrong.cu": "#define WANT 6\n" + KERNEL}, sources="wrong.cu")
    _sample(root, "refused", {"refused.cu": "#include <cuda_runtime.h>\nint main() { cudaGraph_t g = 0; "
                                            "cudaGraphDebugDotPrint(g, \"g.dot\", 0); return 0; }\n"},
            sources="refused.cu")
    _sample(root, "withinc", {"src/main.cu": '#include "extra.h"\n#define WANT EXTRA\n' + KERNEL,
                              "inc/extra.h": "#define EXTRA 7\n"},
            sources="src/main.cu", extra="target_include_directories(withinc PRIVATE\n    inc\n)")
    _sample(root, "gl", {"gl.cu": "int main() { return 0; }\n"}, sources="gl.cu",
            extra="target_link_libraries(gl PRIVATE OpenGL::GL)")
    _sample(root, "blas", {"blas.cu": '#include <cublas_v2.h>\nint main() { return 0; }\n'}, sources="blas.cu")
    return root


def test_samples_are_classified_from_cmake_and_sources(tree: pathlib.Path) -> None:
    samples = {s.name: s for s in find_samples(tree)}
    assert samples["gl"].blocker == "graphics interop"
    assert samples["blas"].blocker == "vendor library"
    assert [n for n, s in sorted(samples.items()) if s.blocker is None] == ["good", "refused", "withinc", "wrong"]
    assert samples["withinc"].sources == ("src/main.cu",)
    assert samples["withinc"].include_dirs == ((tree / "Common").resolve(), (tree / "Samples/0_Intro/withinc/inc").resolve())


def test_rows_of_passing_failing_and_refused_samples(tree: pathlib.Path, tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    samples = {s.name: s for s in find_samples(tree)}
    polypy = (sys.executable, "-m", "polypy.driver.cli")
    rows = {name: measure(samples[name], tree, tmp_path / "work" / name, polypy)
            for name in ("good", "wrong", "refused", "withinc", "gl")}
    assert (rows["good"].result, rows["withinc"].result) == ("pass", "pass")
    assert rows["wrong"].result == "FAIL" and rows["wrong"].blocker.startswith("exit 1")
    assert rows["refused"].result == "translate"
    assert "refused.cu:2:" in rows["refused"].blocker and "'cudaGraphDebugDotPrint' is unavailable" in rows["refused"].blocker
    assert (rows["gl"].result, rows["gl"].blocker) == ("n/a", "graphics interop")
    assert summary(list(rows.values())) == {"samples": 5, "applicable": 4, "pass": 2, "FAIL": 1, "translate": 1,
                                            "n/a": 1}


def test_a_sample_of_several_cu_files_links(tmp_path: pathlib.Path) -> None:
    """A sample whose kernel is launched in main.cu and defined in kernels.cu, and whose main.cu
    kernel calls a device function defined in kernels.cu (CUDA_SEPARABLE_COMPILATION ON: nvcc
    -rdc=true): each .cu is translated as a part of the program (with the others as its
    --device-sources), the objects linked, and the sample passes its own check."""
    need_compiler(cpp=True)
    root = tmp_path / "samples"
    (root / "Common").mkdir(parents=True)
    header = "#pragma once\n__global__ void fill(int* a);\n__device__ int twice(int x);\n"
    kernels = ('#include <cuda_runtime.h>\n#include "k.h"\n__device__ int twice(int x) { return 2 * x; }\n'
               "__global__ void fill(int* a) { a[threadIdx.x] = twice(threadIdx.x); }\n")
    main = ('#include <cuda_runtime.h>\n#include "k.h"\n__global__ void add(int* a) { a[threadIdx.x] += twice(1); }\n'
            "int main() {\n  int *d, h[8];\n  cudaMalloc(&d, sizeof h);\n  fill<<<1, 8>>>(d);\n  add<<<1, 8>>>(d);\n"
            "  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);\n  return h[7] == 16 ? 0 : 1;\n}\n")
    _sample(root, "multi", {"k.h": header, "kernels.cu": kernels, "main.cu": main}, sources="main.cu kernels.cu",
            extra="set_target_properties(multi PROPERTIES CUDA_SEPARABLE_COMPILATION ON)")
    (sample,) = find_samples(root)
    assert sample.separable and sample.sources == ("main.cu", "kernels.cu")
    row = measure(sample, root, tmp_path / "work", (sys.executable, "-m", "polypy.driver.cli"))
    assert (row.result, row.blocker) == ("pass", "")

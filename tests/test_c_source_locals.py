"""Named source locals in the emitted C/C++ (issue 15, item 8): ``int row = blockIdx.y * 16 + ty;``
is forwarded into its uses for the analyses, noted in ``Kernel.source_locals``, and named again
by the C renderer (``const int row = ...;`` and ``row`` at each use). The IR stays exactly what
it was; the C code computes the same results."""
from __future__ import annotations

import dataclasses
import pathlib
import re

import numpy as np

from c_support import assert_same_as_emulator, copy_args, gpu_kernel
from codegen.c import emit_kernel
from codegen.c.kernel import Options
from polypy.driver.pipelines import lower_and_emit, to_cpu
from polypy.driver.source import load
from polypy.ir.printer import print_kernel
from samples.spec import sample

ROOT = pathlib.Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"


def _block_function(text: str, kernel: str) -> str:
    start = text.index(f"static void {kernel}_block(")
    return text[start:text.index("\n}\n", start)]


def _without_notes(module):
    return dataclasses.replace(module, kernels=tuple(dataclasses.replace(k, source_locals=())
                                                     for k in module.kernels))


def test_matmul_names_row_col_and_uses_them_in_indices() -> None:
    body = _block_function(lower_and_emit(load(SAMPLES / "matmul_tiled.cu"), "cpp"), "matmul_tiled")
    # Per nest, in that nest's counters; each name declared at the top of an innermost body.
    assert re.search(r"const int row = \(int\)\(blockIdx\.y \* 16u \+ ty\d\);", body)
    assert re.search(r"const int col = \(int\)\(blockIdx\.x \* 16u \+ tx\d\);", body)
    assert "if (row < M && col < N) {" in body
    assert "C[row * N + col] = " in body
    assert "A[row * K + ka]" in body and "B[kb * N + col]" in body
    # No thread index in it: named once, at the top of the block function, and used as the bound.
    assert body.count("const int ntiles = (K + 15) / 16;") == 1
    assert "for (int t = 0; t < ntiles; ++t) {" in body
    # The names replace their expressions: none is spelled out where a name is in scope.
    for line in body.splitlines():
        if "const int row = " not in line:
            assert not re.search(r"\(int\)\(blockIdx\.y \* 16u \+ ty[25]\)", line), line


def test_a_named_value_is_used_inside_another() -> None:
    body = _block_function(lower_and_emit(load(SAMPLES / "bitonic_step.cu"), "cpp"), "bitonic_step")
    assert re.search(r"const unsigned int i = blockIdx\.x \* blockDim\.x \+ tx\d?;", body)
    assert "const unsigned int partner = i ^ (unsigned int)j;" in body
    assert "if (partner > i) {" in body and "data[partner] = " in body


def test_saxpy_index() -> None:
    body = _block_function(lower_and_emit(load(SAMPLES / "saxpy.cu"), "cpp"), "saxpy")
    assert re.search(r"const int i = \(int\)\(blockIdx\.x \* blockDim\.x \+ tx\d?\);", body)
    assert "y[i] = a * x[i] + y[i];" in body


def test_ir_is_unchanged_by_the_notes() -> None:
    """The notes take no part in the IR: its text, the CPU form's text and equality are the same
    without them, and the C code without them spells every value out as before."""
    for path in sorted(SAMPLES.glob("*.cu")):
        module = load(path)
        bare = _without_notes(module)
        assert module == bare
        assert lower_and_emit(module, "cpu-ir") == lower_and_emit(bare, "cpu-ir"), path.name
        for k in module.kernels:
            assert print_kernel(k) == print_kernel(dataclasses.replace(k, source_locals=()))
    matmul = load(SAMPLES / "matmul_tiled.cu")
    assert [x.name for x in matmul.kernels[0].source_locals][:2] == ["row", "col"]
    plain = _block_function(lower_and_emit(_without_notes(matmul), "cpp"), "matmul_tiled")
    assert "row" not in plain and "const int" not in plain


# Notes: only source-named locals declared by every thread, with a value worth a name.
NOTES = """kernel k(x: f32*, n: i32) {
  var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  var c: i32 = 4
  var tid: i32 = (i32)threadIdx.x
  var j: i32 = i
  var p_off: i32 = i + 1
  if (i < n) {
    var q: i32 = i * 2
    x[q] = 1.0f
  }
  x[j + c + p_off + tid] = 2.0f
}"""


def test_which_locals_are_noted() -> None:
    kernel = gpu_kernel(NOTES)
    assert [x.name for x in kernel.source_locals] == ["i"]


# `q` reads the loop counter `j` of a loop inside the thread loop: its value changes in the
# body, so it is not computed at the top of it; `i` is.
INNER_LOOP = """kernel k(x: f32*, n: i32) {
  var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  for j: i32 = 0 to 4 step 1 {
    var q: i32 = i * 4 + j
    if (q < n) {
      x[q] = x[q] + 1.0f
    }
  }
}"""


def test_values_that_change_in_the_body_are_not_named_and_results_stay() -> None:
    kernel = gpu_kernel(INNER_LOOP)
    assert [x.name for x in kernel.source_locals] == ["i", "q"]
    body = _block_function(emit_kernel(to_cpu(kernel), Options()).text, "k")
    assert re.search(r"const int i = \(int\)\(blockIdx\.x \* blockDim\.x \+ tx\d?\);", body)
    assert "const int q" not in body
    assert re.search(r"x\[i \* 4 \+ j(_\d+)?\] = x\[i \* 4 \+ j(_\d+)?\] \+ 1\.0f;", body)
    x = np.arange(256, dtype=np.float32)
    assert_same_as_emulator(kernel, (2, 1, 1), (32, 1, 1), {"x": x, "n": 250})


def test_samples_with_named_locals_match_numpy_and_the_emulator() -> None:
    for s in (sample("matmul_tiled"), sample("bitonic_step"), sample("histogram")):
        module = load(s.source, defines=dict(s.defines))
        kernel = module.kernel(s.kernel)
        code = _block_function(emit_kernel(to_cpu(kernel), Options(cpp=True)).text, s.kernel)
        names = [x.name for x in kernel.source_locals]
        assert any(re.search(rf"const (unsigned )?int {name} = ", code) for name in names), s.name
        case = s.cases[0]
        args = s.make_args(np.random.default_rng(7), case, np.float32)
        expected = s.reference(copy_args(args), case)
        got = assert_same_as_emulator(kernel, case.grid, case.block, args, shmem=case.shmem, rtol=s.rtol,
                                      atol=s.atol, cpp=True)
        for out in s.outputs:
            np.testing.assert_allclose(np.asarray(got[out], dtype=np.float64),
                                       np.asarray(expected[out], dtype=np.float64), rtol=s.rtol, atol=s.atol,
                                       err_msg=f"{s.name}: {out}")


# The warp exchange buffer is sized `nt * blockDim.z` (`nt`'s value): the launcher that
# allocates it spells the value out, since the block function's names are not in scope there.
SHUFFLE = """kernel k(out: u32*) {
  var nt: u32 = blockDim.x * blockDim.y
  var w: u32 = threadIdx.x + nt
  var t: u32
  t = shfl.xor(4294967295u, w, 1u, 32)
  out[blockIdx.x * nt + threadIdx.x] = w + t
}"""


def test_names_stay_in_the_block_function() -> None:
    kernel = gpu_kernel(SHUFFLE)
    text = emit_kernel(to_cpu(kernel), Options()).text
    body = _block_function(text, "k")
    assert "const unsigned int nt = blockDim.x * blockDim.y;" in body
    launcher = text[text.index("k_launch("):]
    assert not re.search(r"\bnt\b", launcher)
    out = np.zeros(64, np.uint32)
    assert_same_as_emulator(kernel, (2, 1, 1), (32, 1, 1), {"out": out})


def test_names_on_the_fast_path_of_a_specialized_version() -> None:
    """A whole program's version for its launches' block shape (16x16) names the source's ``y``
    in the fast thread loops too: the notes are specialized with the kernel (16u, not
    blockDim.y), so the C code finds the value as the version spells it."""
    text = lower_and_emit(load(SAMPLES / "programs" / "jacobi_solver.cu"), "cpp")
    start = text.index("static void sweep_block_b16x16x1(")
    body = text[start:text.index("\n}\n", start)]
    assert "const int y = (int)(blockIdx.y * 16u + ty);" in body
    assert "dst[(long long)(y * nx) + " in body
    assert "(int)(blockIdx.y * 16u + ty) * nx" not in body  # spelled out nowhere once named

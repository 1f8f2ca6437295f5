"""Named source locals in the emitted C/C++ (issue 15, item 8; issue 39, item 4):
``int row = blockIdx.y * 16 + ty;`` stays in the IR as a binding (``let row: i32 = ...``), which
the lowering keeps (copied into each nest that reads it, widened once to 64 bits where indices
need it) and the C renderer prints ``const int row = ...;`` under the source's name, with
``row`` at each use. The C code computes the same results."""
from __future__ import annotations

import pathlib
import re

import numpy as np

from c_support import assert_same_as_emulator, copy_args, gpu_kernel
from codegen.c import emit_kernel
from codegen.c.kernel import Options
from polypy.driver.pipelines import lower_and_emit, to_cpu
from polypy.driver.source import load
from polypy.ir import nodes as n
from polypy.ir.parser import parse_kernel
from polypy.ir.printer import print_kernel
from polypy.ir.visitor import walk_only
from samples.spec import sample

ROOT = pathlib.Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"


def _block_function(text: str, kernel: str) -> str:
    start = text.index(f"static void {kernel}_block(")
    return text[start:text.index("\n}\n", start)]


def test_matmul_names_row_col_and_uses_them_in_indices() -> None:
    body = _block_function(lower_and_emit(load(SAMPLES / "matmul_tiled.cu"), "cpp"), "matmul_tiled")
    # Per nest, in that nest's counters; each name declared at the top of an innermost body.
    assert re.search(r"const int row = \(int\)\(blockIdx\.y \* 16u \+ ty\d\);", body)
    assert re.search(r"const int col = \(int\)\(blockIdx\.x \* 16u \+ tx\d\);", body)
    assert "if (row < M && col < N) {" in body
    assert "C[row * N + col] = " in body
    assert "A[row * K + ka]" in body and "B[kb * N + col]" in body
    # The fast loops (64-bit indices): the bindings widened once, the indices read them.
    assert re.search(r"const long long col = \(long long\)\(blockIdx\.x \* 16u\) \+ \(long long\)tx\d;", body)
    assert "A[(long long)(row * K) + ka]" in body and "B[(long long)(kb * N) + col]" in body
    # No thread index in it: named once, at the top of the block function, and used as the bound.
    assert body.count("const int ntiles = (K + 15) / 16;") == 1
    assert "for (int t = 0; t < ntiles; ++t) {" in body
    # The names replace their expressions: none is spelled out outside its binding.
    for line in body.splitlines():
        if "const int row = " not in line:
            assert not re.search(r"\(int\)\(blockIdx\.y \* 16u \+ ty\d\)", line), line


def test_a_named_value_is_used_inside_another() -> None:
    body = _block_function(lower_and_emit(load(SAMPLES / "bitonic_step.cu"), "cpp"), "bitonic_step")
    assert re.search(r"const unsigned int i = blockIdx\.x \* blockDim\.x \+ tx\d?;", body)
    assert "const unsigned int partner = i ^ (unsigned int)j;" in body
    assert "if (partner > i) {" in body and "data[partner] = " in body


def test_saxpy_index() -> None:
    body = _block_function(lower_and_emit(load(SAMPLES / "saxpy.cu"), "cpp"), "saxpy")
    assert re.search(r"const int i = \(int\)\(blockIdx\.x \* blockDim\.x \+ tx\d?\);", body)
    assert "y[i] = a * x[i] + y[i];" in body


def test_lets_in_the_ir_are_the_source_locals_worth_a_name() -> None:
    """Only source-named locals with a value worth a name become lets, under an ``if`` too; a
    constant, a plain copy, a cast of a register and a compiler temporary are forwarded."""
    kernel = gpu_kernel(NOTES)
    lets = [x.name for x in walk_only(kernel.body, n.Decl) if x.let]
    assert lets == ["i", "q"]
    assert {x.name for x in walk_only(kernel.body, n.Decl)} == {"i", "q"}
    text = print_kernel(kernel)
    assert "let i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)" in text
    assert "x[i * 2] = 1.0f" not in text and "x[q] = 1.0f" in text
    assert parse_kernel(text) == kernel  # `let` read back


def test_matmul_lets_survive_lowering() -> None:
    matmul = load(SAMPLES / "matmul_tiled.cu")
    assert [x.name for x in walk_only(matmul.kernels[0].body, n.Decl) if x.let][:2] == ["row", "col"]
    cpu = lower_and_emit(matmul, "cpu-ir")
    assert re.search(r"let row(_\d+)?: i32 = \(i32\)\(blockIdx\.y \* 16u \+ ty(_\d+)?\)", cpu)
    assert re.search(r"let col(_\d+)?: i64 = \(i64\)\(blockIdx\.x \* 16u\) \+ \(i64\)tx(_\d+)?", cpu)


# Lets: only source-named locals, with a value worth a name.
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


# `q` reads the loop counter `j` of a loop inside the thread loop: its binding is where the
# source has it, inside that loop; `i` is named at the top of the thread loop's body.
INNER_LOOP = """kernel k(x: f32*, n: i32) {
  var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  for j: i32 = 0 to 4 step 1 {
    var q: i32 = i * 4 + j
    if (q < n) {
      x[q] = x[q] + 1.0f
    }
  }
}"""


def test_a_binding_inside_a_loop_stays_there_and_results_stay() -> None:
    kernel = gpu_kernel(INNER_LOOP)
    assert [x.name for x in walk_only(kernel.body, n.Decl) if x.let] == ["i", "q"]
    body = _block_function(emit_kernel(to_cpu(kernel), Options()).text, "k")
    assert re.search(r"const int i = \(int\)\(blockIdx\.x \* blockDim\.x \+ tx\d?\);", body)
    assert re.search(r"for \(int j(_\d+)? = 0; j(_\d+)? < 4; \+\+j(_\d+)?\) \{\n\s+const int q = i \* 4 \+ j", body)
    assert "x[q] = x[q] + 1.0f;" in body
    x = np.arange(256, dtype=np.float32)
    assert_same_as_emulator(kernel, (2, 1, 1), (32, 1, 1), {"x": x, "n": 250})


def test_samples_with_named_locals_match_numpy_and_the_emulator() -> None:
    for s in (sample("matmul_tiled"), sample("bitonic_step"), sample("histogram")):
        module = load(s.source, defines=dict(s.defines))
        kernel = module.kernel(s.kernel)
        code = _block_function(emit_kernel(to_cpu(kernel), Options(cpp=True)).text, s.kernel)
        names = [x.name for x in walk_only(kernel.body, n.Decl) if x.let]
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
    """A whole program's version for its launches' block shape (16x16) names the source's ``x``,
    ``y`` and ``c`` in the fast thread loops: ``x`` and ``c`` computed once in 64 bits (the
    bindings widened, not their values spelled out in every index), ``y`` as the source has it."""
    text = lower_and_emit(load(SAMPLES / "programs" / "jacobi_solver.cu"), "cpp")
    start = text.index("static void sweep_block_b16x16x1(")
    body = text[start:text.index("\n}\n", start)]
    assert "const long long x = (long long)(blockIdx.x * 16u) + (long long)tx;" in body
    assert "const int y = (int)(blockIdx.y * 16u + ty);" in body
    assert "const long long c = (long long)(y * nx) + x;" in body
    assert "dst[c] = 0.25f * (src[c - 1LL] + src[c + 1LL] + src[c - (long long)nx] + src[c + (long long)nx]);" in body
    assert "(int)(blockIdx.y * 16u + ty) * nx" not in body  # spelled out nowhere
    assert "blockIdx.x * 16u) + (long long)tx]" not in body


def test_a_binding_recomputed_in_a_sunk_part_stays_a_binding() -> None:
    """gemm's thread loop is cut around its k loop (sink-thread-loops): ``j`` and ``i`` are
    recomputed in the part inside the loop, as bindings there too (``const``, the source's
    name), not as mutable copies (``long long j_1 = ...``)."""
    body = _block_function(lower_and_emit(load(SAMPLES / "gemm.cu"), "cpp"), "gemm")
    inner = body[body.index("for (int k = 0; k < nk; ++k) {"):]
    assert re.search(r"const long long j = \(long long\)\(blockIdx\.x \* blockDim\.x\) \+ \(long long\)tx\d*;", inner)
    assert not re.search(r"\n\s*(long long|int) [ij]_\d+ = ", body)

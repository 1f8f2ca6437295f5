"""substitute-inductions: a local a loop steps by a fixed amount (``c += xy`` in Rodinia
hotspot3D's walk down a column) becomes a function of the loop's counter.

Golden IR for the two shapes (the local declared in the loop's block: no copy, a new local for the
value after the loop; declared further out: its value on entry copied, assigned after the loop)
and for what is left alone; the same bits as the original loop in the emulator, wrap-around,
loops that do not run and unsigned locals included; and the point of the pass on the CPU form:
hotspot3D's column loop keeps no per-thread buffer for its indices and runs as vector lanes,
with the same results as NumPy through the emulator, C and LLVM on several launch shapes.
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from codegen.lanes import vector_loop
from gpu2cpu.thread_loops import let_definitions
from polypy.driver.pipelines import to_cpu
from polypy.emulator import emulate
from polypy.ir import nodes as n
from polypy.ir import parse_kernel, print_kernel
from polypy.ir.queries import substitute_lets
from polypy.ir.visitor import walk, walk_block
from polypy.passes.substitute_inductions import substitute_inductions
from tests.c_support import cuda_source, run_c


def _golden(before: str, after: str) -> None:
    result = substitute_inductions(parse_kernel(textwrap.dedent(before)))
    assert print_kernel(result) == textwrap.dedent(after).lstrip("\n")


def test_a_local_declared_in_the_loops_block_needs_no_copy() -> None:
    _golden("""
    kernel k(n: i32, xy: i32, x: f32*) {
      var c: i32
      x[0] = 0.0f
      c = (i32)threadIdx.x + xy
      for k: i32 = 1 to n step 1 {
        x[c] = x[c + xy]
        c = c + xy
        x[c] = 1.0f
      }
      x[c] = 2.0f
    }
    """, """
    kernel k(n: i32, xy: i32, x: f32*) {
      x[0] = 0.0f
      var c: i32 = (i32)threadIdx.x + xy
      for k: i32 = 1 to n step 1 {
        var c_1: i32 = (i32)((i64)c + ((i64)k - (i64)1) * (i64)xy)
        x[c_1] = x[c_1 + xy]
        var c_2: i32 = c_1 + xy
        x[c_2] = 1.0f
      }
      var c_3: i32 = (i32)((i64)c + ((i64)n - (i64)1 > 0l ? (i64)n - (i64)1 : 0l) * (i64)xy)
      x[c_3] = 2.0f
    }
    """)


def test_a_local_declared_further_out_is_copied_and_assigned_after_the_loop() -> None:
    _golden("""
    kernel k(n: i32, d: u32, x: u32*) {
      var v: u32 = 7u
      if (n > 2) {
        for k: i32 = 0 to n step 1 {
          v = v - d
          x[k] = v
        }
      }
      x[0] = v
    }
    """, """
    kernel k(n: i32, d: u32, x: u32*) {
      var v: u32 = 7u
      if (n > 2) {
        var v_1: u32 = v
        for k: i32 = 0 to n step 1 {
          var v_2: u32 = (u32)((u64)v_1 - (u64)((i64)k - (i64)0) * (u64)d)
          var v_3: u32 = v_2 - d
          x[k] = v_3
        }
        v = (u32)((u64)v_1 - (u64)((i64)n - (i64)0 > 0l ? (i64)n - (i64)0 : 0l) * (u64)d)
      }
      x[0] = v
    }
    """)


@pytest.mark.parametrize("body", [
    "if (k > 1) {\n  c = c + 2\n}",  # not every iteration
    "c = c + 2\nc = c + 1",  # written twice
    "c = c + k",  # the step varies
    "c = c + e\ne = e * 2",  # the step's operand is written in the loop
    "c = c + x[0]",  # the step reads memory
    "c = c * 2",  # not a sum
    "c = c + 2\nif (c > 9) {\n  break\n}",  # the loop may end early
])
def test_what_is_not_an_induction_is_left_alone(body: str) -> None:
    text = textwrap.dedent("""
    kernel k(n: i32, x: i32*) {
      var c: i32 = 0
      var e: i32 = 1
      for k: i32 = 0 to n step 1 {
    %s
      }
      x[0] = c
    }
    """) % textwrap.indent(body, "    ")
    kernel = parse_kernel(text)
    assert substitute_inductions(kernel) is kernel


@pytest.mark.parametrize("header", [
    "for k: i32 = 0 to n step 2",  # a step other than 1
    "for k: i64 = 0l to (i64)n step 1l",  # a 64-bit counter
    "for k: i32 = 0 to x[1] step 1",  # a bound read from memory
])
def test_loops_it_does_not_take_are_left_alone(header: str) -> None:
    kernel = parse_kernel(textwrap.dedent("""
    kernel k(n: i32, x: i32*) {
      var c: i32 = 0
      %s {
        c = c + 3
        x[0] = c
      }
      x[2] = c
    }
    """) % header)
    assert substitute_inductions(kernel) is kernel


SEMANTICS = """
kernel k(start: i32, stop: i32, v0: {t}, d: {t}, x: {t}*) {{
  var v: {t}
  x[0] = v0
  v = v0
  for k: i32 = start to stop step 1 {{
    x[1] = x[1] + v
    v = v {op} d
    x[2] = x[2] + v
  }}
  x[3] = v
}}
"""


@pytest.mark.parametrize("t", ["i32", "u32"])
@pytest.mark.parametrize("op", ["+", "-"])
@pytest.mark.parametrize("start,stop,v0,d", [
    (0, 10, 5, 3), (2, 3, -1, 7), (4, 4, 9, 1), (9, 1, 3, 3), (-7, 8, 100, -13),
    (0, 40, 2147483000, 123456789),  # wraps around (a signed overflow CUDA wraps too)
    (-2147483648, -2147483600, -2147483648, -2147483648),  # the extremes of both types
])
def test_same_bits_as_the_loop(t: str, op: str, start: int, stop: int, v0: int, d: int) -> None:
    before = parse_kernel(SEMANTICS.format(t=t, op=op))
    after = substitute_inductions(before)
    assert after is not before
    assert not any(isinstance(x, n.Assign) and x.name == "v" for f in after.body if isinstance(f, n.For)
                   for x in walk(f))
    dtype = np.int32 if t == "i32" else np.uint32
    results = []
    for kernel in (before, after):
        x = np.zeros(4, dtype)
        emulate(kernel, 1, 1, [start, stop, np.int64(v0).astype(dtype), np.int64(d).astype(dtype), x],
                check_races=False)
        results.append(x.tolist())
    assert results[0] == results[1]


# Rodinia hotspot3D's kernel (opt1.cu), as its column walk is written: the indices of the cell
# and of its four neighbours move down one layer per iteration.
SOURCE = r"""
__global__ void column(const float* p, const float* tIn, float* tOut, float sdc, int nx, int ny, int nz,
                       float ce, float cw, float cn, float cs, float ct, float cb, float cc) {
  float amb_temp = 80.0f;
  int i = blockDim.x * blockIdx.x + threadIdx.x;
  int j = blockDim.y * blockIdx.y + threadIdx.y;
  int c = i + j * nx;
  int xy = nx * ny;
  int W = (i == 0) ? c : c - 1;
  int E = (i == nx - 1) ? c : c + 1;
  int N = (j == 0) ? c : c - nx;
  int S = (j == ny - 1) ? c : c + nx;
  float temp1, temp2, temp3;
  temp1 = temp2 = tIn[c];
  temp3 = tIn[c + xy];
  tOut[c] = cc * temp2 + cw * tIn[W] + ce * tIn[E] + cs * tIn[S] + cn * tIn[N] + cb * temp1 + ct * temp3
            + sdc * p[c] + ct * amb_temp;
  c += xy; W += xy; E += xy; N += xy; S += xy;
  for (int k = 1; k < nz - 1; ++k) {
    temp1 = temp2;
    temp2 = temp3;
    temp3 = tIn[c + xy];
    tOut[c] = cc * temp2 + cw * tIn[W] + ce * tIn[E] + cs * tIn[S] + cn * tIn[N] + cb * temp1 + ct * temp3
              + sdc * p[c] + ct * amb_temp;
    c += xy; W += xy; E += xy; N += xy; S += xy;
  }
  temp1 = temp2;
  temp2 = temp3;
  tOut[c] = cc * temp2 + cw * tIn[W] + ce * tIn[E] + cs * tIn[S] + cn * tIn[N] + cb * temp1 + ct * temp3
            + sdc * p[c] + ct * amb_temp;
}
"""
COEFFS = dict(sdc=0.5, ce=0.1, cw=0.11, cn=0.12, cs=0.13, ct=0.14, cb=0.15, cc=0.2)


def _reference(p: np.ndarray, t: np.ndarray, nx: int, ny: int, nz: int) -> np.ndarray:
    c = {k: np.float32(v) for k, v in COEFFS.items()}
    y = np.arange(ny)[:, None]
    x = np.arange(nx)
    out = np.empty_like(t)
    for k in range(nz):
        below, above = t[max(k - 1, 0)], t[min(k + 1, nz - 1)]  # the kernel's temp1 and temp3
        here = t[k]
        w = here[:, np.maximum(x - 1, 0)]
        e = here[:, np.minimum(x + 1, nx - 1)]
        n_ = here[np.maximum(y[:, 0] - 1, 0)]
        s = here[np.minimum(y[:, 0] + 1, ny - 1)]
        out[k] = (c["cc"] * here + c["cw"] * w + c["ce"] * e + c["cs"] * s + c["cn"] * n_ + c["cb"] * below
                  + c["ct"] * above + c["sdc"] * p[k] + c["ct"] * np.float32(80.0))
    return out


@pytest.fixture(scope="module")
def column(tmp_path_factory):
    return cuda_source(tmp_path_factory.mktemp("inductions"), "column.cu", SOURCE, "column")


def test_the_column_loop_keeps_no_index_buffer_and_runs_as_vector_lanes(column) -> None:
    _, kernel = column
    cpu = to_cpu(kernel)
    # Only the three temperatures carried from one layer to the next live in per-thread buffers;
    # the five indices are recomputed from the thread index and the layer.
    buffers = {b.name for b in cpu.buffers if b.space == "local"}
    assert buffers and all(name.startswith("temp") for name in buffers), buffers
    layer_loops = [x for x in walk(cpu) if isinstance(x, n.For) and x.kind == "serial" and x.var == "k"]
    # (in the versions that tighten-thread-bounds makes: with and without the clamps of W and E)
    inner = [y for loop in layer_loops for y in walk_block(loop.body) if isinstance(y, n.For) and y.kind == "threads"]
    assert inner and all(vector_loop(cpu, y) is not None for y in inner)


def test_the_column_loop_reads_its_neighbours_with_vector_loads(column) -> None:
    """tighten-thread-bounds on the substituted indices: where neither W's nor E's select acts
    (``i == 0``, ``i == nx - 1``: split on the longer side of their point), the layer loop's
    thread loop indexes every access by the counter plus a row offset (N, S: a select on the
    row, the same for the whole loop; the layer's: a 64-bit product of two 32-bit values):
    vector loads and stores, not gathers and a scatter."""
    _, kernel = column
    cpu = to_cpu(kernel)

    def direct(access, counter: str, values) -> bool:
        index = substitute_lets(access.index[0], values)  # the thread's named indices (`c_1`) looked through
        on_counter = [y for y in walk(index) if isinstance(y, n.Select)
                      and any(isinstance(v, n.Var) and v.name == counter for v in walk(y.cond))]
        return not on_counter and any(isinstance(v, n.Var) and v.name == counter for v in walk(index))

    clean = []
    for layer in (x for x in walk(cpu) if isinstance(x, n.For) and x.kind == "serial" and x.var == "k"):
        for loop in (x for x in walk(layer) if isinstance(x, n.For) and x.kind == "threads"):
            accesses = [x for x in walk(loop) if isinstance(x, (n.Load, n.Store)) and x.buffer in ("tIn", "tOut", "p")]
            values = let_definitions(loop.body, len(loop.body))
            if len(accesses) >= 7 and all(direct(a, loop.var, values) for a in accesses):  # 5 reads of tIn, p, tOut
                clean.append(loop)
    assert clean, "no thread loop in the layer loop reads tIn and writes tOut at affine indices"


@pytest.mark.parametrize("nx,ny,nz,block", [(64, 8, 6, (32, 4)), (96, 12, 3, (32, 2)), (48, 6, 8, (16, 3))])
def test_the_column_kernel_against_numpy_through_every_backend(column, nx: int, ny: int, nz: int, block) -> None:
    compiled, kernel = column
    rng = np.random.default_rng(nx * ny + nz)
    p = rng.random((nz, ny, nx), dtype=np.float32)
    t = (300 + 20 * rng.random((nz, ny, nx))).astype(np.float32)
    want = _reference(p, t, nx, ny, nz)
    grid = (nx // block[0], ny // block[1])
    args = dict(p=p.ravel(), tIn=t.ravel(), tOut=np.zeros(t.size, np.float32), **COEFFS, nx=nx, ny=ny, nz=nz)
    order = ["p", "tIn", "tOut", "sdc", "nx", "ny", "nz", "ce", "cw", "cn", "cs", "ct", "cb", "cc"]
    out = np.zeros(t.size, np.float32)
    compiled.column[grid, block](*[out if k == "tOut" else args[k] for k in order])
    np.testing.assert_allclose(out.reshape(t.shape), want, rtol=1e-5)
    emulated = dict(args, tOut=np.zeros(t.size, np.float32))
    emulate(kernel, grid, block, emulated)
    np.testing.assert_allclose(emulated["tOut"].reshape(t.shape), want, rtol=1e-5)
    got = run_c(kernel, grid, block, dict(args, tOut=np.zeros(t.size, np.float32)))
    np.testing.assert_allclose(got["tOut"].reshape(t.shape), want, rtol=1e-5)

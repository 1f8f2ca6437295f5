"""Regressions for constructs that were once translated with another meaning (issue 35): each
kernel here runs through the emulator, the LLVM JIT and the C backend against values computed by
hand, and each construct polypy cannot translate exactly is refused with a located error.

- string literals as array initializers (local, ``__constant__``, rows of 2-D arrays), and brace
  lists that leave out elements of nested rows (they used to shift the next row's values);
- pointer punning that views bytes (``((char*)&f)[1]``, ``*(short*)&i``, a record as a scalar):
  refused, never converted by value; unions of other sizes read their bytes (a pool,
  docs/typed_views.md), never converted by value. Punning between a local scalar and a type of its
  size and the other kind (``*(int*)&f``) is an exact bit cast: ``test_bit_casts.py``.
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import run_c, run_emulated
from polypy.errors import UserError

TABLES = r"""
__constant__ char alphabet[] = "ACGT";
__constant__ unsigned char high[] = "\xff" "A";
__constant__ char rows[2][4] = {"ab", "cde"};
__constant__ int ragged[2][3] = {{1}, {2, 3}};

__global__ void tables(int* out, int n) {
  const char tab[] = "WXYZ";
  char padded[8] = "xy";
  signed char two[2][3] = {"p", "qr"};
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = tab[i % 5] + 1000 * alphabet[i % 4] + 100000 * padded[i % 8] + 1000000 * high[i % 3]
           + 7 * two[i % 2][i % 3] + 13 * rows[i % 2][i % 4] + 17 * ragged[i % 2][i % 3];
  }
}
"""


def _tables_ref(n: int) -> np.ndarray:
    tab = b"WXYZ\0"
    alphabet = b"ACGT"
    padded = b"xy" + bytes(6)
    high = [255, 65, 0]
    two = [b"p\0\0", b"qr\0"]
    rows = [b"ab\0\0", b"cde\0"]
    ragged = [[1, 0, 0], [2, 3, 0]]
    out = [tab[i % 5] + 1000 * alphabet[i % 4] + 100000 * padded[i % 8] + 1000000 * high[i % 3]
           + 7 * two[i % 2][i % 3] + 13 * rows[i % 2][i % 4] + 17 * ragged[i % 2][i % 3] for i in range(n)]
    return np.array(out, np.int32)


@pytest.fixture(scope="module")
def tables_source(tmp_path_factory):
    path = tmp_path_factory.mktemp("tables") / "tables.cu"
    path.write_text(TABLES)
    return path


@pytest.mark.parametrize("grid,block", [(1, 40), (3, 16), (6, 7)])
def test_string_literal_tables_on_every_backend(tables_source, grid, block):
    n = 40
    want = _tables_ref(n)
    module = polypy.load(str(tables_source))
    kernel = module.kernel("tables")
    args = {"out": np.zeros(n, np.int32), "n": n}
    emulated = run_emulated(kernel, grid, block, args)["out"]
    np.testing.assert_array_equal(emulated, want)
    jit = args["out"].copy()
    polypy.compile(str(tables_source)).tables[grid, block](jit, n)
    np.testing.assert_array_equal(jit, want)
    np.testing.assert_array_equal(run_c(kernel, grid, block, args, globals_=module.globals)["out"], want)


# Views of other sizes (bytes, halves), of another size through a void*, and records. Views of the
# same size and the other kind (``*(int*)&f``) are bit casts: tests/test_bit_casts.py.
PUNNING = {
    "byte_view": ("float v = x[i]; out[i] = ((char*)&v)[1];", "char *"),
    "half_view": ("int v = i; out[i] = *(short*)&v;", "short *"),
    "wider_view": ("float v = x[i]; void* p = &v; out[i] = *(double*)p;", "double *"),
    "narrower_view": ("double d = x[i]; out[i] = *reinterpret_cast<const float*>(&d);", "const float *"),
    "record_as_scalar": ("struct P { float a, b; } p; p.a = x[i]; p.b = 1; out[i] = ((float*)&p)[0];", "float *"),
}


@pytest.mark.parametrize("case", sorted(PUNNING))
def test_pointer_punning_is_refused_where_written(tmp_path, case):
    body, spelled = PUNNING[case]
    src = tmp_path / "pun.cu"
    src.write_text("__global__ void k(float* out, const float* x, int n) {\n"
                   "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   f"  if (i < n) {{ {body} }}\n}}\n")
    with pytest.raises(UserError) as err:
        polypy.load(str(src))
    assert err.value.loc is not None and err.value.loc.line == 3
    assert "pointer punning" in err.value.message and f"'{spelled}'" in err.value.message


def test_union_of_other_sizes_reads_the_bytes_not_the_value(tmp_path):
    """A local union of members of other sizes is a pool of its bytes (docs/typed_views.md): a
    float member read after a double was written is the double's low 4 bytes, never a value
    conversion."""
    src = tmp_path / "union.cu"
    src.write_text("union U { float f; double d; };\n"
                   "__global__ void k(float* out, const double* x) {\n"
                   "  U u; u.d = x[threadIdx.x];\n"
                   "  out[threadIdx.x] = u.f;\n}\n")
    x = np.array([1.0, -2.5, 1e-300, np.pi], np.float64)
    want = x.view(np.uint32)[0::2].view(np.float32)
    got = run_emulated(polypy.load(str(src)).kernel("k"), 1, 4, {"out": np.zeros(4, np.float32), "x": x})["out"]
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_union_member_reads_are_the_bits_not_the_value(tmp_path):
    src = tmp_path / "union.cu"
    src.write_text("union U { float f; int i; };\n"
                   "__global__ void k(float* out, const float* x) {\n"
                   "  U u; u.f = x[threadIdx.x];\n"
                   "  out[threadIdx.x] = u.i;\n}\n")
    x = np.array([1.0, -2.5, 1e-40, 3.0], np.float32)
    want = x.view(np.int32).astype(np.float32)
    got = run_emulated(polypy.load(str(src)).kernel("k"), 1, 4, {"out": np.zeros(4, np.float32), "x": x})["out"]
    np.testing.assert_array_equal(got, want)


def test_same_width_integer_views_read_the_bits(tmp_path):
    """``*(unsigned*)&int_var`` reads the same bits: the value conversion is exact there."""
    src = tmp_path / "ints.cu"
    src.write_text("__global__ void k(unsigned* out, const int* x, int n) {\n"
                   "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   "  if (i < n) { int v = x[i]; unsigned* p = (unsigned*)&v; out[i] = *p >> 28; }\n}\n")
    x = np.array([-1, -8, 5, 1 << 30, -(1 << 31)], np.int32)
    out = np.zeros(5, np.uint32)
    polypy.compile(str(src)).k[1, 8](out, x, 5)
    np.testing.assert_array_equal(out, x.view(np.uint32) >> 28)


def test_escaped_string_that_may_hide_a_nul_is_refused(tmp_path):
    src = tmp_path / "nul.cu"
    src.write_text('__global__ void k(char* out) {\n  const char t[] = "a\\0b";\n  out[threadIdx.x] = t[threadIdx.x % 4];\n}\n')
    with pytest.raises(UserError) as err:
        polypy.load(str(src))
    assert err.value.loc.line == 2 and "string literal" in err.value.message


# ---------------------------------------------------------------- implicit warp-synchronous code
# Code written for the lanes of a warp stepping together (before Volta) runs with that lockstep
# meaning (gpu2cpu.lockstep_warps); today's code ran such threads one after another.
WARP_SCAN = r"""
__global__ void scan(int* out, const int* in) {
  volatile __shared__ int s[256];
  int t = threadIdx.x, lane = t & 31;
  s[t] = in[blockIdx.x * blockDim.x + t];
  if (lane >= 1) s[t] += s[t - 1];
  if (lane >= 2) s[t] += s[t - 2];
  if (lane >= 4) s[t] += s[t - 4];
  if (lane >= 8) s[t] += s[t - 8];
  if (lane >= 16) s[t] += s[t - 16];
  out[blockIdx.x * blockDim.x + t] = s[t];
}
"""

# The classic reduction: a tree with barriers down to one warp, then the last warp unrolled in a
# device function without barriers (volatile). Today's code summed 64 floats to 1.5e10, not 2016.
LAST_WARP = r"""
__device__ void warp_reduce(volatile float* v, int t) {
  v[t] += v[t + 32];
  v[t] += v[t + 16];
  v[t] += v[t + 8];
  v[t] += v[t + 4];
  v[t] += v[t + 2];
  v[t] += v[t + 1];
}
__global__ void reduce(float* out, const float* in, int n) {
  extern __shared__ float s[];
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 32; k >>= 1) {
    if (t < k) s[t] += s[t + k];
    __syncthreads();
  }
  if (t < 32) warp_reduce(s, t);
  if (t == 0) out[blockIdx.x] = s[0];
}
"""


def _backends(src, name, grid, block, args, shmem=0):
    """``args`` run by the LLVM JIT and by the C backend: both results."""
    module = polypy.load(str(src))
    jit = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    getattr(polypy.compile(str(src)), name)[grid, block, shmem](*jit.values())
    c = run_c(module.kernel(name), grid, block, args, shmem=shmem)
    return jit, c


@pytest.mark.parametrize("grid,block", [(1, 32), (3, 64), (2, 256)])
def test_warp_scan_runs_in_lockstep(tmp_path, grid, block):
    src = tmp_path / "scan.cu"
    src.write_text(WARP_SCAN)
    x = np.random.default_rng(5).integers(-100, 100, grid * block).astype(np.int32)
    want = np.cumsum(x.reshape(-1, 32), axis=1).reshape(-1).astype(np.int32)  # a scan per warp
    for got in _backends(src, "scan", grid, block, {"out": np.zeros_like(x), "in": x}):
        np.testing.assert_array_equal(got["out"], want)


@pytest.mark.parametrize("grid,block", [(1, 64), (4, 128), (3, 256)])
def test_reduction_last_warp_runs_in_lockstep(tmp_path, grid, block):
    src = tmp_path / "reduce.cu"
    src.write_text(LAST_WARP)
    n = grid * block - 5
    x = np.random.default_rng(6).integers(-8, 8, n).astype(np.float32)  # integers: every order sums alike
    want = np.add.reduceat(np.concatenate([x, np.zeros(5, np.float32)]), np.arange(0, grid * block, block))
    for got in _backends(src, "reduce", grid, block, {"out": np.zeros(grid, np.float32), "in": x, "n": n},
                         shmem=4 * block):
        np.testing.assert_array_equal(got["out"], want)


LOOP_SCAN = r"""
__global__ void lscan(int* out, const int* in) {
  volatile __shared__ int v[256];
  int t = threadIdx.x, lane = t & 31;
  v[t] = in[blockIdx.x * blockDim.x + t];
  for (int off = 1; off < 32; off <<= 1) {
    if (lane >= off) v[t] += v[t - off];
  }
  out[blockIdx.x * blockDim.x + t] = v[t];
}
"""


@pytest.mark.parametrize("block", [32, 128])
def test_warp_scan_written_as_a_loop_runs_in_lockstep(tmp_path, block):
    """The pre-Volta SDK's warp scan: a loop isl only counts (``off <<= 1``), so the race is not
    proved, only possible; before, 61254 of 65536 elements came out wrong."""
    src = tmp_path / "lscan.cu"
    src.write_text(LOOP_SCAN)
    x = np.random.default_rng(7).integers(-50, 50, 2 * block).astype(np.int32)
    want = np.cumsum(x.reshape(-1, 32), axis=1).reshape(-1).astype(np.int32)
    for got in _backends(src, "lscan", 2, block, {"out": np.zeros_like(x), "in": x}):
        np.testing.assert_array_equal(got["out"], want)


LANE_EXCHANGE = r"""
__global__ void exchange(float* out, const float* in, int rounds) {
  volatile __shared__ float s[256];
  int t = threadIdx.x;
  s[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (int r = 0; r < rounds; ++r) {
    if (t < 32) {
      float partner = s[t ^ 1];
      float mine = s[t];
      s[t] = partner + 2.0f * mine;
    }
    __syncthreads();
  }
  out[blockIdx.x * blockDim.x + t] = s[t];
}
"""


@pytest.mark.parametrize("block,rounds", [(32, 1), (64, 3), (256, 2)])
def test_lanes_exchanging_through_locals_run_in_lockstep(tmp_path, block, rounds):
    """Each lane of the first warp loads its partner's element (an index isl cannot read) into a
    local and stores with another statement: in lockstep every lane loads before any stores.
    Before, the possible race was looked for within one statement only, and lane 1 read lane 0's
    new value (1, 3, 7, 13 instead of 1, 2, 7, 8)."""
    src = tmp_path / "exchange.cu"
    src.write_text(LANE_EXCHANGE)
    x = np.random.default_rng(8).integers(-20, 20, 2 * block).astype(np.float32)
    want = x.reshape(2, block).copy()
    for _ in range(rounds):
        lanes = np.arange(32)
        want[:, :32] = want[:, lanes ^ 1] + 2.0 * want[:, :32]
    for got in _backends(src, "exchange", 2, block, {"out": np.zeros_like(x), "in": x, "rounds": rounds}):
        np.testing.assert_array_equal(got["out"], want.reshape(-1))


# LLVM 22.1's loop vectorizer reads x[b * N + (i + 1) % N] (N a power of two) as x[b * N + i + 1]:
# the last lane read the next row. codegen.llvm keeps such loops scalar (wraps_by_power_of_two).
ROTATE = r"""
__global__ void rotate(const int* x, int* out) {
  int b = blockIdx.x * blockDim.x;
  out[b + threadIdx.x] = x[b + (threadIdx.x + 1) % blockDim.x];
}
__global__ void rotate_rows(const int* x, int* out) {
  int b = blockIdx.x * 64;
  if (threadIdx.x == 0)
    for (int i = 0; i < 64; ++i) out[b + i] = x[b + ((i + 5) & 63)];
}
"""


@pytest.mark.parametrize("block", [16, 32, 48, 256])
def test_rotations_by_a_power_of_two_on_every_backend(tmp_path, block):
    """``(tx + 1) % blockDim.x`` with the block shape specialized (a constant power of two) and a
    user loop over ``(i + 5) & 63``: every lane reads its own row, compiled by LLVM and by C."""
    src = tmp_path / "rotate.cu"
    src.write_text(ROTATE)
    grid = 3
    x = (np.arange(grid * max(block, 64)) * 7).astype(np.int32)
    rows = x[:grid * block].reshape(grid, block)
    want = rows[:, (np.arange(block) + 1) % block].reshape(-1)
    for got in _backends(src, "rotate", grid, block, {"x": x, "out": np.zeros(grid * block, np.int32)}):
        np.testing.assert_array_equal(got["out"], want)
    rows = x[:grid * 64].reshape(grid, 64)
    want = rows[:, (np.arange(64) + 5) & 63].reshape(-1)
    for got in _backends(src, "rotate_rows", grid, block, {"x": x, "out": np.zeros(grid * 64, np.int32)}):
        np.testing.assert_array_equal(got["out"], want)


def test_lockstep_is_reported(tmp_path, capsys):
    from polypy.driver.cli import main

    src = tmp_path / "scan.cu"
    src.write_text(WARP_SCAN)
    assert main(["translate", str(src), "--report", "-o", str(tmp_path / "scan.cpp")]) == 0
    assert "implicit warp-synchronous code): its statements run in lockstep order" in capsys.readouterr().err


def test_warp_synchronous_code_it_cannot_lower_is_refused(tmp_path, capsys):
    """Lanes racing inside a loop each thread runs its own number of times: no lockstep order
    polypy can make with barriers, so a located refusal, from every command."""
    from polypy.driver.cli import main

    src = tmp_path / "ragged.cu"
    src.write_text("__global__ void ragged(int* out) {\n"
                   "  volatile __shared__ int s[32];\n"
                   "  int t = threadIdx.x;\n"
                   "  s[t] = t;\n"
                   "  for (int j = 0; j < t; j++) s[t] += s[t - 1];\n"
                   "  out[t] = s[t];\n}\n")
    with pytest.raises(UserError) as err:
        polypy.compile(str(src))
    assert err.value.loc.line in (4, 5) and "of one warp race on shared" in err.value.message
    assert "warp-synchronous" in err.value.message
    out = tmp_path / "ragged.cpp"
    for argv in (["translate", str(src), "-o", str(out)], ["translate", str(src), "--no-opt", "-o", str(out)],
                 ["grad", str(src), "--kernel", "ragged", "-o", str(out)]):
        assert main(argv) == 1
        assert not out.exists()
        text = capsys.readouterr().err
        assert f"{src}:" in text and "note: the other access" in text and "Traceback" not in text


def test_race_between_warps_is_a_report_warning(tmp_path, capsys):
    """Threads of different warps racing on shared memory: one legal schedule runs (no refusal);
    ``translate --report`` warns with both places, as the emulator reports the race."""
    from polypy.driver.cli import main

    src = tmp_path / "between.cu"
    src.write_text(r"""#include <cstdio>
__global__ void k(float* out, const float* in) {
  __shared__ float s[256];
  int t = threadIdx.x;
  s[t] = in[t];
  if (t >= 64) out[t] = s[t - 64];
}
int main() {
  float *a, *b;
  cudaMalloc(&a, 1024); cudaMalloc(&b, 1024);
  k<<<1, 128>>>(a, b);
  cudaDeviceSynchronize();
  printf("ok\n");
  return 0;
}
""")
    out = tmp_path / "between.cpp"
    assert main(["translate", str(src), "--report", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"{src}:5:3: warning: threads (tx=0) and (tx=64) of one block race on shared" in err
    assert f"{src}:6:25: note: the other access" in err
    with pytest.raises(UserError, match="data race on shared memory"):
        polypy.emulate(polypy.load(str(src)).kernel("k"), 1, 128,
                       {"out": np.zeros(128, np.float32), "in": np.ones(128, np.float32)})


# ---------------------------------------------------------------- gradients of racy kernels
def test_grad_gives_the_race_warning_translate_report_gives(tmp_path, capsys):
    from polypy.driver.cli import main

    src = tmp_path / "race.cu"
    src.write_text("__global__ void sq(float* y, const float* x, int n) {\n"
                   "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   "  if (i < n) y[0] = x[i] * x[i];\n}\n")
    assert main(["translate", str(src), "--report", "-o", str(tmp_path / "t.cpp")]) == 0
    translated = [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]
    assert translated == [f"{src}:3:14: warning: threads (tx=0, bx=0) and (tx=1, bx=0) both write 'y[0]' "
                          "without an atomic in kernel sq"]
    for extra in ([], ["--report"], ["--emit", "cpp"]):
        assert main(["grad", str(src), "--kernel", "sq", "-o", str(tmp_path / "g.cu")] + extra) == 0
        assert [line for line in capsys.readouterr().err.splitlines() if "warning:" in line] == translated


# ---------------------------------------------------------------- spin waits
SPIN = r"""
__global__ void k(volatile int* flags, int* out, const int* next, int n, int* lock) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  BODY
  out[i] += 1;
  flags[i] = 1;
}
"""

SPINS = {  # loops only another thread's (or block's) store can end: refused where they start
    "do_while_neighbour": "int seen; do { seen = flags[i + 1]; } while (seen == 0);",
    "break_on_flag": "while (true) { if (flags[i] > 0) break; }",
    "grid_barrier": "if (threadIdx.x == 0) { atomicAdd(lock, 1); while (atomicAdd(lock, 0) < gridDim.x) ; }",
    "through_local": "int v = flags[0]; while (v == 0) { v = flags[0]; }",
}

ENDS_BY_ITSELF = {  # loops that step, chase, or write what they wait on: translated and right
    "pointer_chase": ("int j = next[i]; while (j != -1) { out[i] += 2; j = next[j]; }", None),
    "search": ("int k = 0; while (k < n && next[k] != -1) k++; out[i] += 10 * k;", None),
    "cas_retry": ("int old = out[i], assumed; do { assumed = old; old = atomicCAS(&out[i], assumed, assumed + 5); }"
                  " while (assumed != old);", None),
}


@pytest.mark.parametrize("case", sorted(SPINS))
def test_spin_waits_are_refused_where_the_loop_is(tmp_path, capsys, case):
    from polypy.driver.cli import main

    src = tmp_path / "spin.cu"
    src.write_text(SPIN.replace("BODY", SPINS[case]))
    out = tmp_path / "spin.cpp"
    assert main(["translate", str(src), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{src}:5:" in err and "spin wait" in err and "Traceback" not in err
    assert not out.exists()
    with pytest.raises(UserError, match="spin wait"):
        polypy.compile(str(src))


@pytest.mark.parametrize("case", sorted(ENDS_BY_ITSELF))
def test_loops_that_end_by_themselves_are_translated(tmp_path, case):
    src = tmp_path / "loop.cu"
    src.write_text(SPIN.replace("BODY", ENDS_BY_ITSELF[case][0]))
    n = 6
    nxt = np.array([1, 2, -1, 4, -1, -1], np.int32)  # chains 0->1->2, 3->4, 5
    want = np.zeros(n, np.int32)
    for i in range(n):
        if case == "pointer_chase":
            j = nxt[i]
            while j != -1:
                want[i] += 2
                j = nxt[j]
        elif case == "search":
            want[i] += 10 * 2  # next[0], next[1] are not -1; next[2] is
        else:
            want[i] += 5
        want[i] += 1
    args = {"flags": np.zeros(n, np.int32), "out": np.zeros(n, np.int32), "next": nxt, "n": n,
            "lock": np.zeros(1, np.int32)}
    kernel = polypy.load(str(src)).kernel("k")
    np.testing.assert_array_equal(run_emulated(kernel, 2, 4, args)["out"], want)
    np.testing.assert_array_equal(run_c(kernel, 2, 4, args)["out"], want)
    jit = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    polypy.compile(str(src)).k[2, 4](*jit.values())
    np.testing.assert_array_equal(jit["out"], want)


def test_lanes_storing_with_one_statement_are_not_warp_synchronous(tmp_path, capsys):
    """``s = n`` by every thread: some lane's value wins in lockstep as well, so no lockstep
    lowering (and no refusal); a write-write race ``--report`` warns about."""
    from polypy.driver.cli import main

    src = tmp_path / "same.cu"
    src.write_text("__global__ void k(int* y, int n) {\n  __shared__ int s;\n  s = n;\n  __syncthreads();\n"
                   "  y[threadIdx.x] = s;\n}\n")
    assert main(["translate", str(src), "--report", "-o", str(tmp_path / "same.cpp")]) == 0
    err = capsys.readouterr().err
    assert "lockstep" not in err and f"{src}:3:3: warning: threads (tx=0) and (tx=1) of one block race" in err
    y = np.zeros(64, np.int32)
    polypy.compile(str(src)).k[1, 64](y, 15)
    np.testing.assert_array_equal(y, np.full(64, 15))


def test_polypy_grad_warns_about_races_as_the_cli_does(tmp_path):
    src = tmp_path / "race.cu"
    src.write_text("__global__ void sq(double* y, const double* x, int n) {\n"
                   "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   "  if (i < n) y[0] = x[i] * x[i];\n}\n")
    report: list = []
    with pytest.warns(RuntimeWarning, match=r"race\.cu:3:14: warning: threads \(tx=0, bx=0\) and \(tx=1, bx=0\) "
                                            r"both write 'y\[0\]'"):
        polypy.grad(polypy.compile(str(src)).sq, wrt=["x"], report=report)
    assert any("both write 'y[0]'" in entry.format() for entry in report)

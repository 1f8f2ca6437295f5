"""Issue 11, fast inner loops: cheap thread-index values recomputed instead of stored, accumulators
kept in registers, vector-friendly thread loops -- each checked for its structure (what the CPU
IR or the emitted C++ holds) and for exact results against the emulator."""
from __future__ import annotations

import numpy as np
import pytest

from c_support import assert_same_as_emulator, run_c, run_emulated
from polypy.driver.library import emit_kernels
from polypy.driver.pipelines import to_cpu
from polypy.driver.source import load
from polypy.ir import nodes as n
from polypy.ir import parse_kernel
from polypy.ir.printer import format_expr
from polypy.ir.visitor import walk, walk_block

# A pathfinder-style sweep (Rodinia's dynproc kernel, written anew and smaller): the west/east
# neighbour indices are clamped once, before the loop with barriers, and read in every step.
PYRAMID = r"""
#define BS 64
__global__ void pyramid(const int* wall, const int* src, int* dst, int cols, int steps, int border)
{
    __shared__ int prev[BS];
    __shared__ int next[BS];
    int tx = threadIdx.x;
    int small = BS - steps * 2;
    int x0 = small * (int)blockIdx.x - border;
    int lo = x0 < 0 ? -x0 : 0;
    int hi = x0 + BS - 1 > cols - 1 ? BS - 1 - (x0 + BS - cols) : BS - 1;
    int W = tx - 1;
    int E = tx + 1;
    W = W < lo ? lo : W;
    E = E > hi ? hi : E;
    int x = x0 + tx;
    if (x >= 0 && x < cols)
        prev[tx] = src[x];
    __syncthreads();
    for (int i = 0; i < steps; i++) {
        bool on = tx >= i + 1 && tx <= BS - i - 2 && tx >= lo && tx <= hi;
        if (on) {
            int m = min(prev[W], prev[tx]);
            next[tx] = min(m, prev[E]) + wall[i * cols + x];
        }
        __syncthreads();
        if (on)
            prev[tx] = next[tx];
        __syncthreads();
    }
    if (tx >= steps && tx < BS - steps && x >= 0 && x < cols)
        dst[x] = prev[tx];
}
"""

# W is assigned under a thread-dependent condition: not straight-line code, so neither W nor the
# clamp computed from it is recomputed (they stay in a buffer), and the results stay exact.
REASSIGNED = r"""
__global__ void reassigned(const int* a, int* out, int n)
{
    __shared__ int s[64];
    int W = (int)threadIdx.x - 1;
    if (threadIdx.x % 3 == 1)
        W = W + 7;
    W = W < 0 ? 0 : (W > 63 ? 63 : W);
    s[threadIdx.x] = a[blockIdx.x * 64 + threadIdx.x];
    __syncthreads();
    out[blockIdx.x * 64 + threadIdx.x] = s[W];
}
"""


def _kernel(text: str, name: str) -> n.Kernel:
    return load(None, text=text).kernel(name)


def _local_buffers(kernel: n.Kernel) -> set[str]:
    return {b.name for b in kernel.buffers if b.space == "local"}


def test_clamped_neighbour_indices_are_recomputed_not_stored():
    cpu = to_cpu(_kernel(PYRAMID, "pyramid"))
    buffers = _local_buffers(cpu)
    assert not any(b.startswith(("W_", "E_")) for b in buffers), buffers
    # ... and no thread loop reads a per-thread buffer to index prev with
    gathers = [x for x in walk(cpu) if isinstance(x, n.Load) and x.buffer == "prev"
               and any(isinstance(y, n.Load) for i in x.index for y in walk(i))]
    assert not gathers


def test_clamped_neighbour_indices_recomputed_exactly():
    kernel = _kernel(PYRAMID, "pyramid")
    rng = np.random.default_rng(7)
    for cols, steps in ((150, 1), (150, 3), (61, 2)):
        small = 64 - 2 * steps
        grid = (cols + small - 1) // small
        args = dict(wall=rng.integers(0, 10, size=steps * cols).astype(np.int32),
                    src=rng.integers(0, 10, size=cols).astype(np.int32),
                    dst=np.full(cols, -1, np.int32), cols=cols, steps=steps, border=steps)
        assert_same_as_emulator(kernel, (grid, 1, 1), (64, 1, 1), args, cpp=True)


def _pyramid_reference(wall: np.ndarray, src: np.ndarray, steps: int) -> np.ndarray:
    """The dynamic program the pyramid kernel computes: each step, the cheapest of a column's
    own and its two neighbours' costs (clamped at the ends of the row) plus the wall."""
    prev = src.astype(np.int64)
    cols = len(src)
    for i in range(steps):
        left = np.concatenate(([prev[0]], prev[:-1]))
        right = np.concatenate((prev[1:], [prev[-1]]))
        prev = np.minimum(np.minimum(left, prev), right) + wall[i * cols:(i + 1) * cols]
    return prev.astype(np.int32)


def test_clamped_neighbour_reads_are_contiguous_where_no_clamp_acts():
    """tighten-thread-bounds step 2c: the step loop runs the threads where neither clamp acts
    with prev[tx - 1] and prev[tx + 1] (vector loads); the threads at the valid range's ends
    keep the selects (gathers there only)."""
    cpu = to_cpu(_kernel(PYRAMID, "pyramid"))
    reads = [x for x in walk(cpu) if isinstance(x, n.Load) and x.buffer == "prev"]
    clamped = [x for x in reads if any(isinstance(y, n.Select) for i in x.index for y in walk(i))]
    shifted = [x for x in reads if not clamped.count(x) and "tx" in format_expr(x.index[0])
               and format_expr(x.index[0]).startswith(("-1l + ", "1l + "))]
    assert clamped, "the threads at the ends of the valid range keep their clamps"
    assert len(shifted) >= 4, [format_expr(x.index[0]) for x in reads]  # W and E, in two loops


@pytest.mark.parametrize("cols,steps", [(150, 1), (150, 3), (61, 2), (300, 5), (7, 2)])
def test_pyramid_matches_numpy_through_every_backend(cols, steps):
    import polypy

    rng = np.random.default_rng(cols * 10 + steps)
    wall = rng.integers(0, 10, size=steps * cols).astype(np.int32)
    src = rng.integers(0, 10, size=cols).astype(np.int32)
    want = _pyramid_reference(wall, src, steps)
    small = 64 - 2 * steps
    grid = ((cols + small - 1) // small, 1, 1)
    args = dict(wall=wall, src=src, dst=np.full(cols, -1, np.int32), cols=cols, steps=steps, border=steps)
    kernel = _kernel(PYRAMID, "pyramid")
    np.testing.assert_array_equal(run_emulated(kernel, grid, (64, 1, 1), args)["dst"], want)
    np.testing.assert_array_equal(run_c(kernel, grid, (64, 1, 1), args, cpp=True)["dst"], want)
    for specialize in (False, True):
        got = dict(args, dst=np.full(cols, -1, np.int32))
        polypy.compile(None, text=PYRAMID, specialize=specialize).pyramid[grid, (64, 1, 1)](**got)
        np.testing.assert_array_equal(got["dst"], want)


# A hotspot-style 2D stencil (Rodinia hotspot's calculate_temp, written anew and smaller): the
# x clamps split the tx loop into four copies of a long statement; the ty guard around them must
# still become the bounds of the ty loop.
HOT = r"""
__global__ void hot(const float* src, const float* power, float* dst, int n, float k)
{
    __shared__ float t[16][16];
    int tx = threadIdx.x, ty = threadIdx.y;
    int x0 = (int)blockIdx.x * 14 - 1, y0 = (int)blockIdx.y * 14 - 1;
    int x = x0 + tx, y = y0 + ty;
    int lo = x0 < 0 ? -x0 : 0;
    int hi = x0 + 15 > n - 1 ? 15 - (x0 + 16 - n) : 15;
    int loy = y0 < 0 ? -y0 : 0;
    int hiy = y0 + 15 > n - 1 ? 15 - (y0 + 16 - n) : 15;
    if (x >= 0 && x < n && y >= 0 && y < n)
        t[ty][tx] = src[y * n + x];
    __syncthreads();
    int W = tx - 1, E = tx + 1, N = ty - 1, S = ty + 1;
    W = W < lo ? lo : W;
    E = E > hi ? hi : E;
    N = N < loy ? loy : N;
    S = S > hiy ? hiy : S;
    if (tx >= 1 && tx <= 14 && ty >= 1 && ty <= 14 && tx >= lo && tx <= hi && ty >= loy && ty <= hiy)
        dst[y * n + x] = t[ty][tx] + k * (power[y * n + x] + (t[N][tx] + t[S][tx] - 2.0 * t[ty][tx]) * 0.25
                         + (t[ty][E] + t[ty][W] - 2.0 * t[ty][tx]) * 0.5 + (80.0f - t[ty][tx]) * 0.125f
                         + (t[N][W] + t[S][E]) * 0.0625f);
}
"""


def _hot_reference(src: np.ndarray, power: np.ndarray, n_: int, k: float) -> np.ndarray:
    """One step of the stencil, neighbours clamped at the array's edges, in float64 as the
    kernel computes (its constants are doubles) and rounded to float32."""
    t32 = src.reshape(n_, n_)
    north = np.vstack([t32[:1], t32[:-1]])
    south = np.vstack([t32[1:], t32[-1:]])
    west = np.hstack([t32[:, :1], t32[:, :-1]])
    east = np.hstack([t32[:, 1:], t32[:, -1:]])
    t, p = t32.astype(np.float64), power.reshape(n_, n_).astype(np.float64)
    vertical = (north + south).astype(np.float64)  # float + float, then double, as in C
    horizontal = (east + west).astype(np.float64)
    far = ((np.float32(80.0) - t32) * np.float32(0.125)).astype(np.float64)
    nw_, se = np.hstack([north[:, :1], north[:, :-1]]), np.hstack([south[:, 1:], south[:, -1:]])
    corners = ((nw_ + se) * np.float32(0.0625)).astype(np.float64)
    out = t + float(np.float32(k)) * (p + (vertical - 2.0 * t) * 0.25 + (horizontal - 2.0 * t) * 0.5 + far + corners)
    return out.astype(np.float32).ravel()


def test_a_guard_around_a_large_body_still_becomes_the_bounds_of_its_loop():
    report: list = []
    to_cpu(_kernel(HOT, "hot"), report=report)
    guard = HOT.splitlines().index(next(x for x in HOT.splitlines() if "if (tx >= 1" in x)) + 1
    lines = [d.message for d in report if d.loc is not None and d.loc.line >= guard]
    assert any("clamped index(es) unclamped" in x for x in lines), lines
    assert any(x.startswith("thread loop over ty") and "decided by the range of ty" in x for x in lines), lines


@pytest.mark.parametrize("n_", [40, 29, 14, 3])
def test_hot_matches_numpy_through_every_backend(n_):
    import polypy

    rng = np.random.default_rng(n_)
    src = (300 + 20 * rng.random(n_ * n_)).astype(np.float32)
    power = rng.random(n_ * n_).astype(np.float32)
    k = np.float32(0.01)
    want = _hot_reference(src, power, n_, k)
    grid = ((n_ + 13) // 14, (n_ + 13) // 14, 1)
    args = dict(src=src, power=power, dst=np.zeros(n_ * n_, np.float32), n=n_, k=k)
    kernel = _kernel(HOT, "hot")
    np.testing.assert_array_equal(run_emulated(kernel, grid, (16, 16, 1), args)["dst"], want)
    np.testing.assert_array_equal(run_c(kernel, grid, (16, 16, 1), args, cpp=True)["dst"], want)
    for specialize in (False, True):
        got = dict(args, dst=np.zeros(n_ * n_, np.float32))
        polypy.compile(None, text=HOT, specialize=specialize).hot[grid, (16, 16, 1)](**got)
        np.testing.assert_array_equal(got["dst"], want)


# A flag computed from a load, read after the barrier: kept in a per-thread buffer of 32-bit
# ints, not bytes, so that a compiler vectorizes the loop that loads it and stores under it.
FLAG = r"""
__global__ void keep(const float* a, float* out, int n, float t)
{
    __shared__ float s[64];
    int i = blockIdx.x * 64 + threadIdx.x;
    bool big = false;
    s[threadIdx.x] = 0.0f;
    if (i < n) {
        float v = a[i];
        big = v > t;
        s[threadIdx.x] = v * 2.0f;
    }
    __syncthreads();
    if (big)
        out[i] = s[threadIdx.x ^ 1u];
}
"""


def test_a_flag_kept_across_a_barrier_is_a_32_bit_buffer_and_exact():
    import polypy
    from polypy.ir.types import I32

    kernel = _kernel(FLAG, "keep")
    cpu = to_cpu(kernel)
    flags = [b for b in cpu.buffers if b.name.startswith("big")]
    assert flags and all(b.elem == I32 for b in flags), [(b.name, b.elem) for b in cpu.buffers]
    rng = np.random.default_rng(5)
    n_ = 150
    a = rng.standard_normal(192).astype(np.float32)
    want = np.full(192, -7.0, np.float32)
    pairs = np.arange(192) ^ 1
    chosen = (np.arange(192) < n_) & (a > 0.25)
    ok = pairs < n_
    want[chosen] = np.where(ok[chosen], a[pairs[chosen]] * 2.0, 0.0).astype(np.float32)
    args = dict(a=a, out=np.full(192, -7.0, np.float32), n=n_, t=np.float32(0.25))
    np.testing.assert_array_equal(run_emulated(kernel, (3, 1, 1), (64, 1, 1), args)["out"], want)
    np.testing.assert_array_equal(run_c(kernel, (3, 1, 1), (64, 1, 1), args, cpp=True)["out"], want)
    got = dict(args, out=np.full(192, -7.0, np.float32))
    polypy.compile(None, text=FLAG).keep[(3, 1, 1), (64, 1, 1)](**got)
    np.testing.assert_array_equal(got["out"], want)


def test_value_reassigned_after_a_barrier_stays_stored_and_exact():
    kernel = _kernel(REASSIGNED, "reassigned")
    cpu = to_cpu(kernel)
    assert any(b.startswith("W_") for b in _local_buffers(cpu)), _local_buffers(cpu)
    rng = np.random.default_rng(3)
    args = dict(a=rng.integers(-50, 50, size=3 * 64).astype(np.int32), out=np.zeros(3 * 64, np.int32), n=3 * 64)
    assert_same_as_emulator(kernel, (3, 1, 1), (64, 1, 1), args)


# ---- #pragma omp simd on thread loops whose iterations touch different elements -------------

def _emitted_cpp(path: str) -> str:
    from polypy.driver.pipelines import lower_and_emit

    return lower_and_emit(load(path), "cpp", program=False)


def _loop_after(text: str, marker: str) -> str:
    """The pragma line just before the first `for` line that contains ``marker``'s statement."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if marker in line)
    loop = max(i for i in range(at) if lines[i].lstrip().startswith("for ("))
    return lines[loop - 1].strip()


def test_stencil_and_saxpy_thread_loops_are_simd():
    from samples.spec import all_samples

    paths = {s.name: str(s.source) for s in all_samples()}
    jacobi = _emitted_cpp(paths["jacobi2d"])
    assert _loop_after(jacobi, "= 0.25f * (") == "#pragma omp simd"
    saxpy = _emitted_cpp(paths["saxpy"])
    assert "#pragma omp simd" in saxpy


def test_lowered_block_atomic_loop_is_not_simd():
    from samples.spec import all_samples

    dp = _emitted_cpp(next(str(s.source) for s in all_samples() if s.name == "dp_sweep"))
    # atomicMin on the shared row minimum became a plain update of row_min[0]: every thread
    # updates the same element, so that loop must stay scalar
    assert _loop_after(dp, "row_min[0] = row_min_old") == "POLYPY_THREAD_LOOP"
    assert _loop_after(dp, "row_min[0] = 2147483647") == "POLYPY_THREAD_LOOP"


STRIDED_ATOMIC = r"""
__global__ void strided(const int* a, int* out, int k)
{
    __shared__ int s[64];
    s[threadIdx.x] = 0;
    __syncthreads();
    atomicAdd(&s[threadIdx.x * k], a[blockIdx.x * 64 + threadIdx.x]);
    atomicAdd(&s[(threadIdx.x + 1) % 64], 1);
    if (threadIdx.x < 63) {
        atomicAdd(&s[threadIdx.x], 2);
        atomicAdd(&s[threadIdx.x + 1], 3);
    }
    __syncthreads();
    out[blockIdx.x * 64 + threadIdx.x] = s[threadIdx.x];
}
"""


@pytest.mark.parametrize("k", [0, 1])
def test_strided_block_atomics_stay_scalar_and_exact(k):
    from codegen.lanes import independent_lanes

    cpu = to_cpu(_kernel(STRIDED_ATOMIC, "strided"))
    # the loops holding the plain updates the atomics became: a load of s, then a store to s
    loops = [x for x in walk(cpu) if isinstance(x, n.For) and x.kind == "threads"
             and any(isinstance(y, n.Load) and y.buffer == "s" for y in walk(x))
             and any(isinstance(y, n.Store) and y.buffer == "s" for y in walk(x))]
    assert loops and not any(independent_lanes(x, {"s"}) for x in loops)
    rng = np.random.default_rng(k)
    args = dict(a=rng.integers(-9, 9, size=2 * 64).astype(np.int32), out=np.zeros(2 * 64, np.int32), k=k)
    assert_same_as_emulator(_kernel(STRIDED_ATOMIC, "strided"), (2, 1, 1), (64, 1, 1), args, cpp=True)


def test_affine_strides():
    from codegen.lanes import affine_in
    from polypy.ir.types import I32, U32

    tx, k = n.Var("tx", U32), n.Var("k", I32)
    c = lambda v, t=U32: n.Const(v, t)  # noqa: E731
    assert affine_in(n.Binary("add", n.Binary("mul", k, k), n.Cast(I32, tx)), "tx")
    assert affine_in(n.Binary("mul", c(4), n.Binary("sub", c(7), tx)), "tx")
    assert not affine_in(n.Binary("mul", tx, n.Cast(U32, k)), "tx")  # stride known only at run time
    assert not affine_in(n.Binary("mul", tx, c(0)), "tx")
    assert not affine_in(n.Binary("rem", tx, c(16)), "tx")
    assert not affine_in(n.Binary("sub", tx, tx), "tx")
    assert not affine_in(c(3), "tx")


# ---- accumulators in registers (gpu2cpu.promote_accumulators) --------------------------------

GEMM = r"""
__global__ void gemm(int ni, int nj, int nk, float alpha, float beta, float* RESTRICT_A a,
                     float* RESTRICT_B b, float* RESTRICT_C c)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < ni && j < nj) {
        c[i * nj + j] *= beta;
        int k;
        for (k = 0; k < nk; k++)
            c[i * nj + j] += alpha * a[i * nk + k] * b[k * nj + j];
    }
}
"""


def _gemm(restrict: bool) -> n.Kernel:
    word = "__restrict__" if restrict else ""
    text = GEMM.replace("RESTRICT_A", word).replace("RESTRICT_B", word).replace("RESTRICT_C", word)
    return _kernel(text, "gemm")


def _serial_loops(kernel: n.Kernel) -> list[n.Stmt]:
    """Serial loops not containing thread loops (per-thread code)."""
    return [x for x in walk(kernel) if (isinstance(x, n.While) or (isinstance(x, n.For) and x.kind == "serial"))
            and not any(isinstance(y, n.For) and y.kind == "threads" for y in walk(x))]


@pytest.mark.parametrize("restrict", [False, True])
def test_gemm_accumulator_is_not_reloaded_in_the_k_loop(restrict):
    cpu = to_cpu(_gemm(restrict))
    loops = _serial_loops(cpu)
    assert loops
    for loop in loops:
        assert not any(isinstance(x, n.Load) and x.buffer == "c" for x in walk(loop))
        stores = [x for x in walk(loop) if isinstance(x, n.Store) and x.buffer == "c"]
        # with a and b possibly aliasing c, memory is kept current in each iteration; with
        # __restrict__ the element is stored once, after the loop
        assert bool(stores) != restrict


@pytest.mark.parametrize("restrict", [False, True])
@pytest.mark.parametrize("block", [(8, 4, 1), (16, 16, 1), (5, 3, 1)])
def test_gemm_accumulator_exact(restrict, block):
    rng = np.random.default_rng(11)
    ni, nj, nk = 13, 19, 7
    args = dict(ni=ni, nj=nj, nk=nk, alpha=np.float32(1.5), beta=np.float32(0.5),
                a=rng.standard_normal(ni * nk).astype(np.float32), b=rng.standard_normal(nk * nj).astype(np.float32),
                c=rng.standard_normal(ni * nj).astype(np.float32))
    grid = (-(-nj // block[0]), -(-ni // block[1]), 1)
    assert_same_as_emulator(_gemm(restrict), grid, block, args, cpp=True)


@pytest.mark.parametrize("restrict", [False, True])
def test_gemm_accumulator_exact_through_llvm(restrict):
    import polypy
    from c_support import run_emulated

    word = "__restrict__" if restrict else ""
    text = GEMM.replace("RESTRICT_A", word).replace("RESTRICT_B", word).replace("RESTRICT_C", word)
    rng = np.random.default_rng(13)
    ni, nj, nk = 9, 21, 6
    args = dict(ni=ni, nj=nj, nk=nk, alpha=np.float32(0.75), beta=np.float32(2.0),
                a=rng.standard_normal(ni * nk).astype(np.float32), b=rng.standard_normal(nk * nj).astype(np.float32),
                c=rng.standard_normal(ni * nj).astype(np.float32))
    want = run_emulated(_kernel(text, "gemm"), (3, 3, 1), (8, 4, 1), args)
    for specialize in (False, True):
        got = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        polypy.compile(None, text=text, specialize=specialize).gemm[(3, 3, 1), (8, 4, 1)](**got)
        np.testing.assert_array_equal(got["c"], want["c"])


# An array of structs updated in a serial loop (Rodinia lavaMD's force accumulation): the four
# members of one element are four registers; two elements that may be the same stay in memory.
AOS = r"""
__global__ void forces(const double* __restrict__ q, double* __restrict__ f, int n, int other)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    for (int j = 0; j < n; j++) {
        f[t * 4] += q[j];
        f[t * 4 + 1] += q[j] * 2.0;
        f[t * 4 + 2] -= q[j] * q[j];
        f[t * 4 + 3] += 1.0;
    }
    for (int j = 0; j < n; j++) {
        f[t * 4] += q[j];
        f[other * 4] += 1.0;
    }
}
"""


def test_members_of_one_struct_are_promoted_together_and_exact():
    kernel = _kernel(AOS, "forces")
    loops = _serial_loops(to_cpu(kernel))
    mixed = [loop for loop in loops if any(isinstance(x, n.Var) and x.name == "other" for x in walk(loop))]
    assert mixed and len(mixed) < len(loops)
    for loop in loops:
        stores = sum(isinstance(x, n.Store) and x.buffer == "f" for x in walk(loop))
        # f[t * 4] and f[other * 4] may be one element: nothing promoted in the second loop
        assert stores == (2 if loop in mixed else 0)
    rng = np.random.default_rng(3)
    for other in (0, 5, 31):  # the thread's own element (a race only with other threads), or another
        args = dict(q=rng.standard_normal(7), f=rng.standard_normal(4 * 32), n=7, other=other)
        assert_same_as_emulator(kernel, (1, 1, 1), (1, 1, 1), args, cpp=True)


SELF_ALIAS = r"""
__global__ void running(const float* a, float* c, int n)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < n; k++)
        c[t] = c[t] * 0.5f + a[k % 2];
}
"""


def test_accumulator_exact_when_a_load_aliases_it():
    """a and c are one array, one thread: every other iteration reads, through a, the value c[0]
    got in the iteration before (more threads would race on the array)."""
    from c_support import need_compiler
    from polypy.driver.library import build_library
    from polypy.emulator import emulate

    need_compiler(cpp=True)
    kernel = _kernel(SELF_ALIAS, "running")
    cpu = to_cpu(kernel)
    (loop,) = _serial_loops(cpu)
    assert not any(isinstance(x, n.Load) and x.buffer == "c" for x in walk(loop))
    base = np.random.default_rng(5).standard_normal(4).astype(np.float32)
    want = base.copy()
    emulate(kernel, (1, 1, 1), (1, 1, 1), {"a": want, "c": want, "n": 9})
    got = base.copy()
    build_library([cpu], cpp=True).launch("running", (1, 1, 1), (1, 1, 1), {"a": got, "c": got, "n": 9})
    np.testing.assert_array_equal(got, want)
    # the aliasing mattered: with separate arrays the result differs
    apart = base.copy()
    emulate(kernel, (1, 1, 1), (1, 1, 1), {"a": base.copy(), "c": apart, "n": 9})
    assert not np.array_equal(apart, want)


def test_thread_loop_around_a_constant_serial_loop_is_simd():
    """matmul_tiled's `for k < 16` inside the loop over tx: simd on the tx loop (the compiler
    unrolls k and vectorizes over tx); gemm's k loop runs to a kernel argument: no simd there."""
    from samples.spec import all_samples

    text = _emitted_cpp(next(str(s.source) for s in all_samples() if s.name == "matmul_tiled"))
    lines = text.splitlines()
    k_loop = next(i for i, line in enumerate(lines) if "for (int k = 0; k < 16; ++k)" in line)
    tx_loop = max(i for i in range(k_loop) if lines[i].lstrip().startswith("for (unsigned int tx"))
    assert lines[tx_loop - 1].strip() == "#pragma omp simd"
    from codegen.lanes import independent_lanes

    cpu = to_cpu(_gemm(True))
    around = [x for x in walk(cpu) if isinstance(x, n.For) and x.kind == "threads"
              and any(isinstance(y, n.While) or (isinstance(y, n.For) and y.kind == "serial") for y in walk(x))]
    assert around and not any(independent_lanes(x, set()) for x in around)


def test_a_tile_row_loop_inside_the_thread_loop_keeps_it_simd():
    """transpose_tiled's `for j` (rows of the tile) inside the loop over tx stores
    `tile[ty + j][tx]`: the index moving with tx varies with nothing else, so lanes never share an
    element (simd); `s[tx + j]`, whose moving index also varies with j, is not."""
    from codegen.lanes import independent_lanes
    from samples.spec import all_samples

    source = next(s.source for s in all_samples() if s.name == "transpose_tiled")
    cpu = to_cpu(load(source).kernel("transpose_tiled"))
    rows = [x for x in walk(cpu) if isinstance(x, n.For) and x.kind == "threads" and x.var.startswith("tx")
            and any(isinstance(y, n.Store) and y.buffer == "tile" for y in walk(x))
            and any(isinstance(y, n.For) and y.kind == "serial" for y in walk(x))]
    assert rows and all(independent_lanes(x, {"tile"}) for x in rows)
    shifted = to_cpu(parse_kernel("""kernel k(x: f32*) {
  shared s: f32[64]
  for j: i32 = 0 to 4 step 1 {
    s[(i32)threadIdx.x + j] = x[(i32)threadIdx.x]
  }
  barrier
  x[(i32)threadIdx.x] = s[(i32)threadIdx.x]
}"""))
    loops = [x for x in walk(shifted) if isinstance(x, n.For) and x.kind == "threads"
             and any(isinstance(y, n.Store) and y.buffer == "s" for y in walk(x))]
    assert loops and not any(independent_lanes(x, {"s"}) for x in loops)


def test_a_column_read_of_a_tile_puts_the_short_row_loop_outside_the_thread_loop():
    """transpose_tiled's write-back reads `tile[tx][ty + j]` (down a column) in a loop of four rows:
    GCC does not vectorize the loop over tx around that short loop, so the loop over tx goes inside
    it (a gather from the tile, stride-1 stores to `out`); the tile-filling loop, whose reads and
    writes are rows, keeps the short loop inside. Values: through C against the emulator."""
    from samples.spec import all_samples

    sample = next(s for s in all_samples() if s.name == "transpose_tiled")
    kernel = load(sample.source).kernel("transpose_tiled")
    cpu = to_cpu(kernel)

    def column_reads(loop: n.For) -> bool:
        return any(isinstance(y, n.Load) and y.buffer == "tile" and isinstance(y.index[0], n.Var)
                   and y.index[0].name == loop.var for y in walk(loop))

    inner = [x for x in walk(cpu) if isinstance(x, n.For) and x.kind == "threads" and x.var.startswith("tx")
             and column_reads(x) and not any(isinstance(y, n.For) and y.kind == "serial" for y in walk_block(x.body))]
    outer = [x for x in walk(cpu) if isinstance(x, n.For) and x.kind == "serial"
             and any(isinstance(y, n.For) and y.kind == "threads" and column_reads(y) for y in walk_block(x.body))]
    assert inner and outer, "the row loop of the write-back is outside the loop over tx"
    rng = np.random.default_rng(11)
    for rows, cols, block in ((70, 45, (32, 8)), (33, 64, (32, 8)), (96, 100, (32, 8))):
        grid = ((cols + 31) // 32, (rows + 31) // 32)
        args = {"in": rng.standard_normal(rows * cols).astype(np.float32),
                "out": np.zeros(rows * cols, np.float32), "rows": rows, "cols": cols}
        got = assert_same_as_emulator(kernel, grid, block, args)
        np.testing.assert_array_equal(got["out"].reshape(cols, rows), args["in"].reshape(rows, cols).T)


def test_short_copy_loops_stay_loops_not_memcpy_calls():
    """GCC would turn a block's row copies (global -> shared, 128 bytes) into calls of memcpy,
    each costing more than the copy; the emitted file's opening pragma turns that off for every
    function in it. Checked on the assembly GCC makes of transpose_tiled and prefix_scan with the
    documented build line, and on LLVM's optimized IR of the same kernels."""
    import pathlib
    import subprocess
    import tempfile

    from c_support import need_compiler
    from codegen.c import find_compiler
    from polypy.driver.pipelines import lower_and_emit
    from samples.spec import all_samples

    need_compiler()
    for name, block in (("transpose_tiled", (32, 8, 1)), ("prefix_scan", (512, 1, 1))):
        sample = next(s for s in all_samples() if s.name == name)
        module = load(sample.source)
        cpu = lower_and_emit(module, "cpu").kernel(name)
        text = emit_kernels([cpu], module.globals, source=str(sample.source), block_shapes={name: [block]})
        assert '#pragma GCC optimize("fp-contract=off", "no-tree-loop-distribute-patterns", "no-strict-aliasing")' in text
        with tempfile.TemporaryDirectory() as tmp:
            src = pathlib.Path(tmp) / f"{name}.c"
            src.write_text(text)
            asm = pathlib.Path(tmp) / f"{name}.s"
            subprocess.run([find_compiler(False), "-O3", "-march=native", "-fopenmp", "-S", str(src), "-o", str(asm)],
                           check=True)
            calls = [line for line in asm.read_text().splitlines() if "call" in line and "mem" in line]
        assert not [c for c in calls if "memcpy" in c or "memmove" in c], calls
        # LLVM: the kernel functions carry no-builtin-memcpy/-memmove/-memset, so its loop idiom
        # recognition leaves the loops alone too
        from codegen.llvm import emit_llvm_ir
        optimized = emit_llvm_ir(lower_and_emit(module, "cpu"), optimize=True)
        assert "@llvm.memcpy" not in optimized and "@llvm.memmove" not in optimized and "@memcpy" not in optimized


# ---- selects decided by the range of the counter (tighten_thread_bounds, index-set splitting) ----

HALO = r"""
#define R 2
__global__ void halo(const float* in, float* out, int n, float edge)
{
    __shared__ float tile[64 + 2 * R];
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x + R] = (g < n) ? in[g] : edge;
    if (threadIdx.x < R) {
        tile[threadIdx.x] = (g - R >= 0) ? in[g - R] : edge;
        tile[threadIdx.x + blockDim.x + R] = (g + (int)blockDim.x < n) ? in[g + blockDim.x] : edge;
    }
    __syncthreads();
    float t = (threadIdx.x >= 1) ? tile[threadIdx.x] : -1.0f;
    if (g < n)
        out[g] = tile[threadIdx.x] + 2.0f * tile[threadIdx.x + R] + tile[threadIdx.x + 2 * R] + t;
}
"""


def test_a_select_on_the_counter_splits_the_loop_instead_of_masking_loads():
    """``tile[l] = (g < n) ? in[g] : edge`` (stencil1d, conv2d, tiled matmul): one loop storing
    ``in[g]`` over the threads below the edge, one storing ``edge`` over the rest (the bulk of
    the threads copies with plain loads, no masked ones), and every array agrees with the
    emulator."""
    report: list = []
    kernel = _kernel(HALO, "halo")
    cpu = to_cpu(kernel, report=report)
    assert any("condition g < n decided by the range" in d.format() for d in report)  # g: the source's let
    fast = [s for s in cpu.body if isinstance(s, n.If) and s.orelse]  # run-time checks: fast path, original
    loops = [x for check in fast for s in check.then for x in walk(s) if isinstance(x, n.For) and x.kind == "threads"]
    bulk = [x for x in loops if any(isinstance(y, n.Load) and y.buffer == "in" for y in walk(x))
            and not any(isinstance(y, n.Select) for y in walk(x))]
    assert bulk  # the threads inside the array copy in[g] with plain loads
    # ... over the whole block where no thread is past the end (bounds a block shape makes constant)
    whole = [x for check in fast for s in check.then for x in walk(s) if isinstance(x, n.If)
             and isinstance(x.cond, n.Binary) and x.cond.op == "eq" and isinstance(x.cond.b, n.BlockDim)]
    assert whole
    for version in whole:  # no loop bound there depends on where the array ends
        bounds = [e for s in version.then for y in walk(s) if isinstance(y, n.For) for e in (y.start, y.stop)]
        assert bounds and not any(isinstance(v, n.Var) and v.name.startswith("tx_hi") for e in bounds for v in walk(e))
    rng = np.random.default_rng(7)
    for nelem, block in ((200, 64), (64, 64), (37, 16), (5, 32)):
        args = dict(**{"in": rng.standard_normal(nelem).astype(np.float32)}, out=np.zeros(nelem, np.float32),
                    n=nelem, edge=np.float32(0.5))
        assert_same_as_emulator(kernel, (-(-nelem // block), 1, 1), (block, 1, 1), args, cpp=True)


SCAN = r"""
__global__ void scan(const float* in, float* out, int n)
{
    __shared__ float s[256];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    s[tid] = (i < n) ? in[i] : 0.0f;
    __syncthreads();
    for (int offset = 1; offset < blockDim.x; offset <<= 1) {
        float t = (tid >= offset) ? s[tid - offset] : 0.0f;
        __syncthreads();
        s[tid] += t;
        __syncthreads();
    }
    if (i < n)
        out[i] = s[tid];
}
"""


def test_a_select_reading_shared_memory_on_the_counter_splits_too():
    """A Hillis-Steele scan's ``(tid >= offset) ? s[tid - offset] : 0``: the threads below
    ``offset`` store 0, the others read the tile with plain loads, not masked ones (prefix_scan
    through C 0.62x -> 0.76x of the OpenMP port). Values against the emulator, several blocks."""
    report: list = []
    kernel = _kernel(SCAN, "scan")
    cpu = to_cpu(kernel, report=report)
    assert any("decided by the range" in d.format() and "offset" in d.format() for d in report)
    shared_selects = [x for x in walk(cpu) if isinstance(x, n.Select)
                      and any(isinstance(y, n.Load) and y.buffer == "s" for y in walk(x))]
    plain = [x for x in walk(cpu) if isinstance(x, n.For) and x.kind == "threads"
             and any(isinstance(y, n.Load) and y.buffer == "s" for y in walk(x))
             and not any(isinstance(y, n.Select) for y in walk(x))]
    assert plain, "a loop reads the tile without a select"
    assert len(shared_selects) <= 1  # at most the original loop of a run-time check's fallback
    rng = np.random.default_rng(9)
    for nelem, block in ((1000, 256), (256, 128), (77, 32), (300, 64)):
        args = {"in": rng.standard_normal(nelem).astype(np.float32), "out": np.zeros(nelem, np.float32), "n": nelem}
        assert_same_as_emulator(kernel, (-(-nelem // block), 1, 1), (block, 1, 1), args)


# A per-thread array written in a tap loop, then read back in another (a gradient's tape has this
# shape): written anew for this test.
PER_THREAD = r"""
__global__ void taps(const float* x, float* out, int n)
{
    float t[5];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i + 4 < n) {
        for (int k = 0; k < 5; k++)
            t[k] = x[i + k] * (float)(k + 1);
        float acc = 0.0f;
        for (int k = 0; k < 5; k++)
            acc = acc + t[4 - k] * t[k];
        out[i] = acc;
    }
}
"""


@pytest.mark.parametrize("block", [32, 64, 100])
def test_per_thread_arrays_written_in_a_serial_loop_leave_the_thread_loop_simd(block):
    """t[k][tz][ty][tx]: each lane writes its own copy whatever k is, so the loop over tx is a
    vector loop; the store's index mentions the inner counter k, which the general rule refuses."""
    from codegen.lanes import independent_lanes

    cpu = to_cpu(_kernel(PER_THREAD, "taps"))
    local = {b.name for b in cpu.buffers if b.space == "local"}
    private = local | {b.name for b in cpu.buffers if b.space == "shared"}
    loops = [x for x in walk(cpu) if isinstance(x, n.For) and x.kind == "threads"
             and any(isinstance(y, n.Store) and y.buffer == "t" for y in walk(x))
             and not any(isinstance(y, n.For) and y.kind == "threads" for y in walk_block(x.body))]
    assert loops and all(independent_lanes(x, private, (), local) for x in loops)
    assert not any(independent_lanes(x, private) for x in loops)  # without the exemption: not provable
    assert "#pragma omp simd" in emit_kernels([cpu], cpp=True)
    rng = np.random.default_rng(block)
    n_ = 300
    x = rng.standard_normal(n_).astype(np.float32)
    args = dict(x=x, out=np.zeros(n_, np.float32), n=np.int32(n_))
    assert_same_as_emulator(_kernel(PER_THREAD, "taps"), (-(-n_ // block), 1, 1), (block, 1, 1), args, cpp=True)


# Rodinia nw's write-back, written anew: a tile goes back to rows of global memory `cols` apart
# in a short loop over the rows.
ROWS_BACK = r"""
#define B 16
__global__ void rows_back(const int* in, int* out, int cols)
{
    __shared__ int tile[B][B];
    int tx = threadIdx.x;
    int base = blockIdx.x * B;
    for (int ty = 0; ty < B; ty++)
        tile[ty][tx] = in[base + ty * cols + tx] * 3;
    __syncthreads();
    for (int ty = 0; ty < B; ty++)
        out[base + ty * cols + tx] = tile[B - 1 - ty][tx] + ty;
}
"""


def test_stores_to_rows_of_global_memory_in_a_short_loop_keep_the_thread_loop_simd(tmp_path):
    """`out[base + ty * cols + tx]` in a loop over ty: lanes write different elements at each step
    of ty, and an element two lanes would write at different steps is a data race between two
    threads; simd, and exact against the emulator (rows as wide as the grid's columns, or wider).
    A shared array's `s[tx + j]` stays scalar
    (test_a_tile_row_loop_inside_the_thread_loop_keeps_it_simd)."""
    src = tmp_path / "rows_back.cu"
    src.write_text(ROWS_BACK)
    lines = _emitted_cpp(str(src)).splitlines()
    store = next(i for i, line in enumerate(lines) if "out[" in line)
    tx_loop = max(i for i in range(store) if lines[i].lstrip().startswith("for (unsigned int tx"))
    assert lines[tx_loop - 1].strip() == "#pragma omp simd"
    kernel = _kernel(ROWS_BACK, "rows_back")
    rng = np.random.default_rng(5)
    for blocks, cols in ((3, 48), (2, 40), (4, 70)):
        n_in = (blocks - 1) * 16 + 15 * cols + 16
        args = {"in": rng.integers(-50, 50, n_in).astype(np.int32), "out": np.zeros(n_in, np.int32), "cols": cols}
        assert_same_as_emulator(kernel, (blocks,), (16,), args)


# A forward substitution on a tile, one column per thread (Rodinia lud's perimeter rows, written
# anew): the loop over rows is short and constant, the one inside it runs to the row.
TRIANGULAR = r"""
#define B 16
__global__ void lower_solve(const float* L, float* X, int n)
{
    __shared__ float l[B][B];
    __shared__ float x[B][B];
    int tx = threadIdx.x;
    for (int i = 0; i < B; i++) {
        l[i][tx] = L[i * B + tx];
        x[i][tx] = X[i * n + blockIdx.x * B + tx];
    }
    __syncthreads();
    for (int i = 1; i < B; i++)
        for (int j = 0; j < i; j++)
            x[i][tx] -= l[i][j] * x[j][tx];
    __syncthreads();
    for (int i = 0; i < B; i++)
        X[i * n + blockIdx.x * B + tx] = x[i][tx];
}
"""


def test_a_short_loop_around_a_triangular_loop_goes_outside_the_thread_loop(tmp_path):
    """The row loop has 15 iterations, but the loop inside it runs to the row (`j < i`): no
    compiler unrolls that nest whole, so the loop over tx would stay scalar around it. It goes
    inside the `j` loop instead (stride-1 over the tile's columns). Exact against the emulator."""
    kernel = _kernel(TRIANGULAR, "lower_solve")
    cpu = to_cpu(kernel)
    solve = [x for x in walk(cpu) if isinstance(x, n.For) and x.kind == "threads" and x.var.startswith("tx")
             and any(isinstance(y, n.Store) and y.buffer == "x" for y in walk(x))
             and any(isinstance(y, n.Load) and y.buffer == "l" and len(y.index) == 2 for y in walk(x))]
    assert solve and not any(isinstance(y, n.For) and y.kind != "threads" for s in solve for y in walk_block(s.body)), \
        "the loop over tx is innermost in the solve"
    rng = np.random.default_rng(3)
    lower = np.tril(rng.uniform(-0.2, 0.2, (16, 16))).astype(np.float32)
    for blocks in (1, 3):
        n_cols = blocks * 16
        args = {"L": lower.ravel(), "X": rng.standard_normal(16 * n_cols).astype(np.float32), "n": n_cols}
        assert_same_as_emulator(kernel, (blocks,), (16,), args)


# Rodinia backprop's layer kernel, written anew and smaller: thread 0 of each row stages the
# row's input while every thread stages its weight, then each thread scales its weight by it.
ROW_SCALE_FIRST = r"""
#define W 16
__global__ void row_scale_first(const float* in, const float* w, float* out, int cols)
{
    __shared__ float node[W];
    __shared__ float tile[W][W];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * blockDim.y + ty;
    int col = blockIdx.x * blockDim.x + tx;
    if (tx == 0)
        node[ty] = in[row];
    tile[ty][tx] = w[row * cols + col];
    __syncthreads();
    tile[ty][tx] = tile[ty][tx] * node[ty];
    __syncthreads();
    out[row * cols + col] = tile[ty][tx] + tile[ty][0];
}
"""


def test_the_first_threads_own_statement_runs_before_a_loop_over_every_thread():
    """`if (tx == 0) S` first in the fused nest: S of thread 0 runs before the loop, which then
    covers all the threads (index-set splitting would peel thread 0 and leave 15 of 16). Exact
    against the emulator, also for blocks of one thread along x."""
    kernel = _kernel(ROW_SCALE_FIRST, "row_scale_first")
    cpu = to_cpu(kernel)
    scale = [x for x in walk(cpu) if isinstance(x, n.For) and x.kind == "threads" and x.var.startswith("tx")
             and any(isinstance(y, n.Store) and y.buffer == "tile" for y in walk(x))]
    # The two intervals fused in the threads' order (gpu2cpu.fuse_thread_loops), fast version
    # (the run-time check's `else` is the loop as written, guard inside).
    assert any(loop.ordered and isinstance(loop.start, n.Const) and loop.start.value == 0 and loop.stop == n.BlockDim(0)
               and not any(isinstance(y, n.Store) and y.buffer == "node" for y in walk(loop)) for loop in scale), \
        "thread 0's store is outside a loop over every tx"
    # Its iterations now touch disjoint memory (each stores tile[ty][tx] only): vector lanes,
    # though the loop runs in order (codegen.lanes.disjoint_iterations).
    from codegen.lanes import vector_loop

    fast = [loop for loop in scale if loop.ordered and loop.stop == n.BlockDim(0)
            and not any(isinstance(y, n.Store) and y.buffer == "node" for y in walk(loop))]
    assert all(vector_loop(cpu, loop) == [] for loop in fast)
    guarded = [loop for loop in scale if loop.ordered and any(isinstance(y, n.Store) and y.buffer == "node"
                                                              for y in walk(loop))]
    assert guarded and all(vector_loop(cpu, loop) is None for loop in guarded), \
        "where thread 0's store is still inside, the order matters"
    rng = np.random.default_rng(7)
    for grid, block in (((2, 3), (16, 4)), ((3, 2), (1, 8)), ((1, 1), (16, 16))):
        cols = grid[0] * block[0]
        rows = grid[1] * block[1]
        args = {"in": rng.standard_normal(rows).astype(np.float32),
                "w": rng.standard_normal(rows * cols).astype(np.float32),
                "out": np.zeros(rows * cols, np.float32), "cols": cols}
        assert_same_as_emulator(kernel, grid, block, args)

"""Pointers that may point into one of several buffers (issue 36 item 1, docs/typed_views.md):
``c ? A + x : B + y``, a pointer variable re-pointed into another buffer (in branches, in loops:
the ping-pong ``tmp = in; in = out; out = tmp;`` of device code, over global and over shared
buffers), a device function returning pointers into different buffers, typed views through such a
pointer, and the comparisons C defines on them. Each kernel is our own, checked against a NumPy
reference through the emulator (with its race check), the LLVM JIT and the C backend on several
launch shapes; what polypy does not model is a located error.
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import copy_args, run_c
from polypy.emulator import emulate
from polypy.errors import MisalignedAddressError, UserError
from polypy.ir import nodes as n
from polypy.ir.visitor import walk_block

WAYS = ["emulator", "llvm", "c"]
SHAPES = [(1, 32), (3, 64), (2, 48)]


def _run(tmp_path, source: str, kernel: str, grid, block, args: dict, way: str) -> dict:
    src = tmp_path / f"{kernel}.cu"
    src.write_text(source)
    if way == "emulator":
        out = copy_args(args)
        emulate(polypy.load(str(src)).kernel(kernel), grid, block, out, check_races=True)
        return out
    if way == "c":
        module = polypy.load(str(src))
        return run_c(module.kernel(kernel), grid, block, args, globals_=module.globals)
    out = copy_args(args)
    getattr(polypy.compile(str(src)), kernel)[grid, block](*out.values())
    return out


def _check(out: dict, want: dict) -> None:
    for name, value in want.items():
        np.testing.assert_array_equal(out[name], value, err_msg=name)


# --------------------------------------------------------------------------- ?: between buffers

CHOOSE = r"""
__global__ void choose(const float* a, const float* b, float* out, float* left, float* right, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float* p = (i % 3 == 0) ? a + i : b + (n - 1 - i);   // a local
    float v = *p * 2.0f + p[0];
    v += *((i & 1) ? a + i : b + i);                            // a direct use
    *(i < n / 2 ? left + i : right + (i - n / 2)) = v;          // a store through ?:
    out[i] = v;
  }
}
"""


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block", SHAPES)
def test_conditional_between_two_buffers(tmp_path, way: str, grid: int, block: int) -> None:
    n = grid * block - 5
    rng = np.random.default_rng(1)
    args = {"a": rng.standard_normal(n).astype(np.float32), "b": rng.standard_normal(n).astype(np.float32),
            "out": np.zeros(n, np.float32), "left": np.zeros(n // 2, np.float32),
            "right": np.zeros(n - n // 2, np.float32), "n": n}
    i = np.arange(n)
    p = np.where(i % 3 == 0, args["a"], args["b"][n - 1 - i])
    v = (p * np.float32(2) + p) + np.where(i & 1, args["a"], args["b"])
    out = _run(tmp_path, CHOOSE, "choose", grid, block, args, way)
    _check(out, {"out": v, "left": v[: n // 2], "right": v[n // 2:]})


# --------------------------------------------------------------------------- re-pointing

REPOINT = r"""
__device__ float* pick(float* a, float* b, int c) {   // pointers into different buffers returned
  if (c) return a + 1;
  return b;
}

__global__ void repoint(float* x, float* y, float* z, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n - 1) return;
  float* p = x;
  if (i % 4 == 1) p = y;            // re-pointed in a branch
  else if (i % 4 == 2) p = z + 1;
  p[i] += 10.0f;                    // a read and a store through it
  float* q;
  q = (i & 1) ? y : z;
  pick(q, x, i % 3 == 0)[i] *= 3.0f;
}
"""


def _repoint_reference(a: dict) -> dict:
    x, y, z, n = a["x"].copy(), a["y"].copy(), a["z"].copy(), a["n"]
    for i in range(n - 1):
        if i % 4 == 1:
            y[i] += 10
        elif i % 4 == 2:
            z[i + 1] += 10
        else:
            x[i] += 10
    for i in range(n - 1):  # each thread's second update touches an element no other thread does
        if i % 3 == 0:
            (y if i & 1 else z)[i + 1] *= 3
        else:
            x[i] *= 3
    return {"x": x, "y": y, "z": z}


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block", SHAPES[:2])
def test_re_pointing_in_branches_and_a_function_returning_either(tmp_path, way: str, grid: int, block: int) -> None:
    n = grid * block
    args = {"x": np.arange(n, dtype=np.float32), "y": np.arange(n, dtype=np.float32) * 2,
            "z": np.arange(n, dtype=np.float32) * -1, "n": n}
    out = _run(tmp_path, REPOINT, "repoint", grid, block, args, way)
    want = _repoint_reference(args)
    # Threads i and i + 1 (i % 4 == 2 writes z[i + 1], i % 3 == 0 may too): the reference runs the
    # program's order; no element is updated twice by the first statement.
    _check(out, want)


PINGPONG = r"""
__global__ void pingpong(float* x, float* y, int n, int steps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float* in = x;
  float* out = y;
  for (int s = 0; s < steps; s++) {
    out[i] = in[i] * 0.5f + (float)s;
    float* tmp = in; in = out; out = tmp;
  }
}
"""


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("steps", [0, 3, 4])
def test_ping_pong_of_global_buffers(tmp_path, way: str, steps: int) -> None:
    n = 100
    x0 = np.linspace(-3, 3, n).astype(np.float32)
    bufs = [x0.copy(), np.zeros(n, np.float32)]
    for s in range(steps):
        bufs[(s + 1) % 2] = bufs[s % 2] * np.float32(0.5) + np.float32(s)
    args = {"x": x0, "y": np.zeros(n, np.float32), "n": n, "steps": steps}
    out = _run(tmp_path, PINGPONG, "pingpong", 2, 64, args, way)
    _check(out, {"x": bufs[0], "y": bufs[1]})


ROTATE = r"""
__global__ void rotate(float* a, float* b, float* c, float* d, int n, int steps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float *p0 = a, *p1 = b, *p2 = c, *p3 = d;
  for (int s = 0; s < steps; s++) {    // four buffers in turn: each pointer learns them one by one
    p1[i] = p0[i] * 2.0f + p3[i];
    float* t = p0; p0 = p1; p1 = p2; p2 = p3; p3 = t;
  }
}
"""


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("steps", [1, 6])
def test_four_buffers_in_turn(tmp_path, way: str, steps: int) -> None:
    n = 70
    rng = np.random.default_rng(6)
    bufs = [rng.standard_normal(n).astype(np.float32) for _ in range(4)]
    args = {"a": bufs[0], "b": bufs[1], "c": bufs[2], "d": bufs[3], "n": n, "steps": steps}
    want = [x.copy() for x in bufs]
    order = [0, 1, 2, 3]
    for _ in range(steps):
        want[order[1]] = want[order[0]] * np.float32(2) + want[order[3]]
        order = order[1:] + order[:1]
    out = _run(tmp_path, ROTATE, "rotate", 2, 64, args, way)
    _check(out, dict(zip("abcd", want)))


# --------------------------------------------------------------------------- shared memory

SMOOTH = r"""
__global__ void smooth(const float* in, float* out, int steps) {
  __shared__ float a[128];
  __shared__ float b[128];
  int t = threadIdx.x, n = blockDim.x;
  a[t] = in[blockIdx.x * n + t];
  __syncthreads();
  float* src = a;
  float* dst = b;
  for (int s = 0; s < steps; s++) {
    dst[t] = 0.25f * src[(t + n - 1) % n] + 0.5f * src[t] + 0.25f * src[(t + 1) % n];
    __syncthreads();                  // the next step reads what its neighbours wrote
    float* tmp = src; src = dst; dst = tmp;
  }
  out[blockIdx.x * n + t] = src[t] + (src == a ? 0.0f : 100.0f) + (src != dst ? 0.0f : 1000.0f);
}
"""


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block", SHAPES)
def test_double_buffered_shared_arrays_keep_their_barrier(tmp_path, way: str, grid: int, block: int) -> None:
    steps = 5
    rng = np.random.default_rng(2)
    x = rng.standard_normal(grid * block).astype(np.float32)
    rows = x.reshape(grid, block)
    for _ in range(steps):
        rows = (np.float32(0.25) * np.roll(rows, 1, axis=1) + np.float32(0.5) * rows) + \
            np.float32(0.25) * np.roll(rows, -1, axis=1)
    want = rows.reshape(-1) + np.float32(100.0 if steps % 2 else 0.0)
    args = {"in": x, "out": np.zeros_like(x), "steps": steps}
    out = _run(tmp_path, SMOOTH, "smooth", grid, block, args, way)
    np.testing.assert_allclose(out["out"], want, rtol=1e-6, atol=1e-6)


def test_the_barrier_between_reads_and_writes_through_a_re_pointed_pointer_stays(tmp_path) -> None:
    src = tmp_path / "smooth.cu"
    src.write_text(SMOOTH)
    kernel = polypy.load(str(src)).kernel("smooth")
    barriers = [s for s in walk_block(kernel.body) if isinstance(s, n.Barrier)]
    assert len(barriers) == 2


MIXED = r"""
__global__ void mixed(const float* g, float* out, int n) {
  __shared__ float s[64];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? g[i] * 3.0f : 0.0f;
  __syncthreads();
  const float* src = (t & 1) ? s : g + blockIdx.x * blockDim.x;   // shared or global
  if (i < n) out[i] = src[(t ^ 1) < blockDim.x ? (t ^ 1) : t] + (src == s ? 1.0f : 0.0f);
}
"""


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block", [(1, 32), (3, 64), (2, 47)])
def test_conditional_between_shared_and_global(tmp_path, way: str, grid: int, block: int) -> None:
    n = grid * block - 3
    g = np.linspace(1, 2, grid * block).astype(np.float32)  # the global candidate is read past n
    want = np.zeros(n, np.float32)
    for i in range(n):
        b, t = divmod(i, block)
        j = t ^ 1 if (t ^ 1) < block else t
        k = b * block + j
        if t & 1:
            want[i] = (g[k] * np.float32(3) if k < n else np.float32(0)) + np.float32(1)
        else:
            want[i] = g[k]
    args = {"g": g, "out": np.zeros(n, np.float32), "n": n}
    out = _run(tmp_path, MIXED, "mixed", grid, block, args, way)
    _check(out, {"out": want})


# --------------------------------------------------------------------------- typed views

VIEWS = r"""
__global__ void views(const float* a, const int* b, unsigned* bits, uint4* quads, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int w = i / 8, lane = i % 8;
  // The candidates are a float buffer and an int buffer seen as floats (a typed view).
  const float* src = (w % 2 == 0) ? a + 32 * w : (const float*)b + 32 * w;
  if (i < n) {
    bits[i] = ((const unsigned*)src)[lane];                  // a same-size view through the choice
    quads[i] = *((const uint4*)(src + 8 * (lane / 2)) + lane % 2);   // a wider one, at an offset
  }
}
"""


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block", [(1, 32), (2, 64)])
def test_typed_views_through_a_choice_of_buffers(tmp_path, way: str, grid: int, block: int) -> None:
    n = grid * block
    rng = np.random.default_rng(4)
    a = rng.standard_normal(4 * n + 32).astype(np.float32)
    b = rng.integers(-2 ** 31, 2 ** 31, 4 * n + 32, dtype=np.int64).astype(np.int32)
    want_bits = np.zeros(n, np.uint32)
    want_quads = np.zeros((n, 4), np.uint32)
    for i in range(n):
        w, lane = divmod(i, 8)
        words = (a if w % 2 == 0 else b).view(np.uint32)[32 * w:]
        want_bits[i] = words[lane]
        start = 8 * (lane // 2) + 4 * (lane % 2)
        want_quads[i] = words[start:start + 4]
    args = {"a": a, "b": b, "bits": np.zeros(n, np.uint32), "quads": np.zeros((n, 4), np.uint32), "n": n}
    out = _run(tmp_path, VIEWS, "views", grid, block, args, way)
    _check(out, {"bits": want_bits, "quads": want_quads})


STREAM = r"""
__global__ void stream(const float* A, const float* B, uint4* out, int K) {
  // The tensor-core GEMMs' copy: each warp picks A or B, each lane a 16-byte piece of a row,
  // and the pointer steps down the rows through a cast back to the element type.
  int warp = threadIdx.x / 8, lane = threadIdx.x % 8;
  const float* warp_ptr = (warp % 2 == 0) ? (&A[blockIdx.x * 4 * K] + 4 * (warp / 2))
                                          : (&B[blockIdx.x * 4 * K] + 4 * (warp / 2));
  const uint4* lane_ptr = (const uint4*)(warp_ptr + (lane / 4) * K) + lane % 4;
  for (int i = 0; i < 2; i++) {
    out[(blockIdx.x * blockDim.x + threadIdx.x) * 2 + i] = *lane_ptr;
    lane_ptr = (const uint4*)((const float*)lane_ptr + 2 * K);
  }
}
"""


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block", [(1, 32), (2, 32), (3, 16)])
def test_the_tensor_core_gemms_copy_through_a_choice(tmp_path, way: str, grid: int, block: int) -> None:
    K = 16
    rng = np.random.default_rng(8)
    a, b = (rng.standard_normal(grid * 4 * K + 4 * K).astype(np.float32) for _ in range(2))
    want = np.zeros((grid * block * 2, 4), np.uint32)
    for blk in range(grid):
        for t in range(block):
            warp, lane = divmod(t, 8)
            words = (a if warp % 2 == 0 else b).view(np.uint32)
            start = blk * 4 * K + 4 * (warp // 2) + (lane // 4) * K + 4 * (lane % 4)
            for i in range(2):
                at = start + 2 * K * i
                want[(blk * block + t) * 2 + i] = words[at:at + 4]
    args = {"A": a, "B": b, "out": np.zeros_like(want), "K": K}
    out = _run(tmp_path, STREAM, "stream", grid, block, args, way)
    _check(out, {"out": want})


@pytest.mark.parametrize("way", ["emulator", "llvm"])
def test_a_misaligned_view_through_a_choice_faults_at_the_cast(tmp_path, way: str) -> None:
    K = 15  # rows of 15 floats: the second row's pieces are not on 16 bytes
    args = {"A": np.zeros(8 * K, np.float32), "B": np.zeros(8 * K, np.float32),
            "out": np.zeros((64, 4), np.uint32), "K": K}
    with pytest.raises(MisalignedAddressError) as info:
        _run(tmp_path, STREAM, "stream", 1, 32, args, way)
    assert (info.value.loc.line, info.value.loc.col) == (8, 27)


# --------------------------------------------------------------------------- comparisons, null

COMPARE = r"""
__global__ void compare(const float* a, float* out, int n) {
  __shared__ float s[64];
  __shared__ float t[64];
  int i = threadIdx.x;
  s[i] = 1.0f; t[i] = 2.0f;
  const float* p = (i & 1) ? s + i : t + i;
  const float* q = (i & 2) ? s + (i ^ 2) : t + i;
  const float* g = (i & 4) ? a : s;      // a parameter or a shared array
  float r = 0.0f;
  if (p == q) r += 1.0f;                 // equal only into one buffer at one element
  if (p != s + i) r += 10.0f;
  if ((i & 1) == 0 && p < t + 2) r += 20.0f;   // ordered where both point into t
  if (i & 2) r += 10000.0f * (float)(q - s);   // a difference where both point into s
  if (g != 0) r += 100.0f;               // into the parameter: null when its argument is
  if (p) r += 1000.0f;
  if (i < n) out[i] = r;
}
"""


@pytest.mark.parametrize("way", WAYS)
def test_comparisons_of_pointers_into_several_buffers(tmp_path, way: str) -> None:
    block = 32
    i = np.arange(block)
    p_in_s = (i & 1) == 1
    q_in_s = (i & 2) == 2
    same = np.where(p_in_s & q_in_s, i == (i ^ 2), ~p_in_s & ~q_in_s)
    want = same * 1.0 + (~p_in_s) * 10.0 + (~p_in_s & (i < 2)) * 20.0 + q_in_s * 10000.0 * (i ^ 2) + 100.0 + 1000.0
    args = {"a": np.ones(8, np.float32), "out": np.zeros(block, np.float32), "n": block}
    out = _run(tmp_path, COMPARE, "compare", 1, block, args, way)
    _check(out, {"out": want.astype(np.float32)})


ATOMIC = r"""
__global__ void histogram(const int* keys, int* even, int* odd, int* old, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int k = keys[i];
    int* bins = (k & 1) ? odd : even;
    atomicAdd(bins + k / 2, 1);                       // the atomic on the buffer it points into
    old[i] = atomicMax((k & 2) ? even : odd, 0) >= 0; // its old value comes back
  }
}
"""


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block", SHAPES)
def test_atomics_through_a_choice_of_buffers(tmp_path, way: str, grid: int, block: int) -> None:
    n = grid * block - 1
    keys = np.random.default_rng(5).integers(0, 16, n).astype(np.int32)
    even = np.bincount(keys[keys % 2 == 0] // 2, minlength=8).astype(np.int32)
    odd = np.bincount(keys[keys % 2 == 1] // 2, minlength=8).astype(np.int32)
    args = {"keys": keys, "even": np.zeros(8, np.int32), "odd": np.zeros(8, np.int32),
            "old": np.zeros(n, np.int32), "n": n}
    out = _run(tmp_path, ATOMIC, "histogram", grid, block, args, way)
    _check(out, {"even": even, "odd": odd, "old": np.ones(n, np.int32)})


# --------------------------------------------------------------------------- gradients

GRAD_CHOOSE = r"""
__global__ void k(const float* a, const float* b, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float* p = (i & 1) ? a : b;
    y[i] = p[i] * p[i];
  }
}
"""

GRAD_PINGPONG = r"""
__global__ void k(float* a, float* b, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float* in = a;
  float* out = b;
  for (int s = 0; s < 3; s++) {
    out[i] = in[i] * in[i];
    float* t = in; in = out; out = t;
  }
  y[i] = in[i];
}
"""


def test_the_gradient_through_a_conditional_between_buffers(tmp_path) -> None:
    src = tmp_path / "g.cu"
    src.write_text(GRAD_CHOOSE)
    g = polypy.grad(polypy.compile(str(src)).k, wrt=["a", "b", "y"])
    n = 50
    rng = np.random.default_rng(0)
    a, b, dy = (rng.random(n).astype(np.float32) for _ in range(3))
    da, db = np.zeros_like(a), np.zeros_like(b)
    g[2, 32](a, da, b, db, np.zeros(n, np.float32), dy.copy(), np.int32(n))
    odd = (np.arange(n) & 1) == 1
    np.testing.assert_allclose(da, np.where(odd, 2 * a * dy, 0), rtol=1e-6)
    np.testing.assert_allclose(db, np.where(odd, 0, 2 * b * dy), rtol=1e-6)


def test_the_gradient_through_ping_pong_buffers(tmp_path) -> None:
    # a, b and y end as a0^4, a0^8 and a0^8: the seeds of all three flow back into a.
    src = tmp_path / "g.cu"
    src.write_text(GRAD_PINGPONG)
    g = polypy.grad(polypy.compile(str(src)).k, wrt=["a", "b", "y"])
    n = 50
    rng = np.random.default_rng(1)
    a = (0.5 + rng.random(n)).astype(np.float32)
    sa, sb, sy = (rng.random(n).astype(np.float32) for _ in range(3))
    out = {"a": a.copy(), "da": sa.copy(), "b": np.zeros(n, np.float32), "db": sb.copy(),
           "y": np.zeros(n, np.float32), "dy": sy.copy()}
    g[2, 32](*out.values(), np.int32(n))
    x = a.astype(np.float64)
    np.testing.assert_allclose(out["a"], x ** 4, rtol=1e-6)
    np.testing.assert_allclose(out["y"], x ** 8, rtol=1e-6)
    np.testing.assert_allclose(out["da"], sa * 4 * x ** 3 + (sb + sy) * 8 * x ** 7, rtol=1e-5)
    np.testing.assert_array_equal(out["db"], np.zeros(n, np.float32))  # b's first contents are overwritten


# --------------------------------------------------------------------------- refused

REFUSED = [
    ("elements-of-two-types",
     "__global__ void k(float* x, double* d, int c) {\n"
     "  void* v = c ? (void*)x : (void*)d;\n"
     "  ((float*)v)[0] = 1.0f;\n}\n",
     "a pointer that may point into several buffers must point to elements of one type", (2, 13)),
    ("equality-of-two-parameters",
     "__global__ void k(float* x, float* y, int* r, int c) {\n"
     "  float* p = c ? x : y;\n"
     "  r[0] = p == x;\n}\n",
     "'==' of pointers that may point into 'y' and 'x' (which may be one allocation", (3, 10)),
    ("records-of-mixed-members",
     "struct R { float f; int i; };\n"
     "__global__ void k(R* a, R* b, int c) { R* p = c ? a : b; p->f = 1.0f; }\n",
     "a pointer to records of mixed member types that may point into several buffers is not supported",
     (2, 47)),
    ("difference-never-defined",
     "__global__ void k(long long* r, int c) {\n"
     "  __shared__ float s[4]; __shared__ float t[4]; __shared__ float u[4];\n"
     "  float* p = c ? s : t;\n"
     "  r[0] = p - u;\n  s[0] = t[0] + u[0];\n}\n",
     "'-' of pointers into different buffers is not defined", (4, 10)),
]


@pytest.mark.parametrize("name,source,message,where", REFUSED, ids=[c[0] for c in REFUSED])
def test_what_polypy_does_not_model_is_a_located_error(tmp_path, name, source, message, where) -> None:
    src = tmp_path / f"{name}.cu"
    src.write_text(source)
    with pytest.raises(UserError) as info:
        polypy.load(str(src))
    assert message in info.value.message
    assert (info.value.loc.line, info.value.loc.col) == where

"""Recursive device functions (issue 36; docs/cxx_device.md, "Recursion").

The outermost call of a function that recurs is lowered as a call machine (per-thread stacks of
the callers' locals, frontend/lower/recursion.py). Checked against Python on the emulator, the
LLVM backend and the C backend, on several launch shapes: direct and mutual recursion, a
recursive quicksort writing through its pointer argument, a tree walk with the call in a loop, a
local array per call, a recursive member function, a recursive function inlined into another
one; a barrier after the recursion; the depth bound (a located device fault, never a host crash);
a whole program through ``polypy translate``, ``polypy run`` and ``run --emulate``; ``grad``
refused; what is not supported refused, located.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

import polypy
from c_support import WAYS, assert_load_refused, need_compiler, polypy_cli, run_way
from polypy.errors import DeviceAssertError, UserError

KERNELS = r"""
__device__ int fib(int n) {
  if (n < 2) return n;
  return fib(n - 1) + fib(n - 2);
}
__device__ long long fact(int n) { return n <= 1 ? 1LL : n * fact(n - 1); }

__device__ bool is_odd(unsigned n);
__device__ bool is_even(unsigned n) { return n == 0 ? true : is_odd(n - 1); }
__device__ bool is_odd(unsigned n) { return n == 0 ? false : is_even(n - 1); }

__device__ void swap_at(float* a, int i, int j) { float t = a[i]; a[i] = a[j]; a[j] = t; }
__device__ void quicksort(float* a, int lo, int hi) {
  if (lo >= hi) return;
  float pivot = a[(lo + hi) / 2];
  int i = lo, j = hi;
  while (i <= j) {
    while (a[i] < pivot) i++;
    while (a[j] > pivot) j--;
    if (i <= j) { swap_at(a, i, j); i++; j--; }
  }
  quicksort(a, lo, j);
  quicksort(a + i, 0, hi - i);   // a pointer moved into the same array
}

// a tree encoded in arrays: the children of `node` are first[node] .. first[node] + count[node] - 1
__device__ int subtree(const int* first, const int* count, const int* val, int node, int cap) {
  int s = val[node];
  for (int c = 0; c < count[node]; ++c) {
    s += subtree(first, count, val, first[node] + c, cap);
    if (s > cap) break;
  }
  return s;
}

// a local array: each call has its own
__device__ int digits(int v, int depth) {
  int loc[3];
  loc[0] = v % 10; loc[1] = depth; loc[2] = v;
  if (v < 10) return loc[0] + loc[1];
  int below = digits(v / 10, depth + 1);
  return below * 100 + loc[0] * 10 + loc[1] + (loc[2] == v);
}

struct Walker {
  const int* next;
  int limit;
  __device__ int walk(int node, int steps) const {
    if (node < 0 || steps >= limit) return steps;
    return walk(next[node], steps + 1);
  }
};

// g recurs inside f's recursion: both are out of line
__device__ int g(int n) { return n <= 0 ? 0 : g(n - 1) + 2; }
__device__ int f(int n) { return n <= 0 ? 1 : f(n - 1) + g(n); }

__global__ void k(const unsigned* u, int* ints, long long* facts, float* data, int seg, const int* first,
                  const int* count, const int* val, Walker w, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned v = u[i];
  ints[6 * i] = fib(v % 16);
  facts[i] = fact(v % 21);
  ints[6 * i + 1] = is_even(v) ? 2 : (is_odd(v) ? 1 : 0);
  quicksort(data + i * seg, 0, seg - 1);
  ints[6 * i + 2] = subtree(first, count, val, i % 7, 12 + i);
  ints[6 * i + 3] = digits(v * 37 + 5, 0);
  ints[6 * i + 4] = w.walk(i, 0);
  ints[6 * i + 5] = f(v % 9);
}

// the recursion, then a barrier every thread reaches
__global__ void reduce(const int* x, int* out) {
  __shared__ int s[64];
  s[threadIdx.x] = fib(x[threadIdx.x]);
  __syncthreads();
  if (threadIdx.x == 0) {
    int t = 0;
    for (int j = 0; j < blockDim.x; ++j) t += s[j];
    out[blockIdx.x] = t;
  }
}

__device__ int depth(int n) { return n <= 0 ? 0 : 1 + depth(n - 1); }
__global__ void deep(const int* x, int* y) { y[threadIdx.x] = depth(x[threadIdx.x]); }
"""

SHAPES = [((3,), (8,)), ((1,), (32,)), ((20,), (1,))]
N, SEG = 20, 9
FIRST = np.array([1, 3, 5, 0, 0, 6, 0], np.int32)
COUNT = np.array([2, 2, 1, 0, 0, 1, 0], np.int32)
VAL = np.array([1, 2, 3, 4, 5, 6, 7], np.int32)


def _fib(n: int) -> int:
    return n if n < 2 else _fib(n - 1) + _fib(n - 2)


def _subtree(node: int, cap: int) -> int:
    s = int(VAL[node])
    for c in range(COUNT[node]):
        s += _subtree(int(FIRST[node]) + c, cap)
        if s > cap:
            break
    return s


def _digits(v: int, depth: int) -> int:
    if v < 10:
        return v % 10 + depth
    return _digits(v // 10, depth + 1) * 100 + (v % 10) * 10 + depth + 1


def _walk(nxt, node: int, steps: int) -> int:
    return steps if node < 0 or steps >= 20 else _walk(nxt, int(nxt[node]), steps + 1)


def _g(n: int) -> int:
    return 0 if n <= 0 else _g(n - 1) + 2


def _f(n: int) -> int:
    return 1 if n <= 0 else _f(n - 1) + _g(n)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block", SHAPES)
def test_recursive_functions_match_python(grid, block, way) -> None:
    rng = np.random.default_rng(5)
    u = rng.integers(0, 60, N).astype(np.uint32)
    data = rng.standard_normal(N * SEG).astype(np.float32)
    nxt = rng.integers(-1, N, N).astype(np.int32)
    args = {"u": u, "ints": np.full(6 * N, -1, np.int32), "facts": np.zeros(N, np.int64), "data": data,
            "seg": SEG, "first": FIRST, "count": COUNT, "val": VAL, "w": {"next": nxt, "limit": 20}, "n": N}
    out = run_way(KERNELS, "k", grid, block, args, way, name="recursion.cu")
    ints = out["ints"].reshape(N, 6)
    assert ints[:, 0].tolist() == [_fib(int(v) % 16) for v in u]
    assert out["facts"].tolist() == [math.factorial(int(v) % 21) for v in u]
    assert ints[:, 1].tolist() == [2 if v % 2 == 0 else 1 for v in u]
    np.testing.assert_array_equal(out["data"], np.sort(data.reshape(N, SEG), axis=1).ravel())
    assert ints[:, 2].tolist() == [_subtree(i % 7, 12 + i) for i in range(N)]
    assert ints[:, 3].tolist() == [int(np.int32(_digits(int(v) * 37 + 5, 0))) for v in u]
    assert ints[:, 4].tolist() == [_walk(nxt, i, 0) for i in range(N)]
    assert ints[:, 5].tolist() == [_f(int(v) % 9) for v in u]


EDGES = r"""
#include <cstdio>
#include <cassert>
__device__ int sw(int n) {
  switch (n % 3) {
    case 0: if (n == 0) return 0; return 1 + sw(n - 1);
    case 1: { int r = sw(n - 1); return r * 2; }
    default: break;
  }
  int acc = 0;
  do { acc += sw(n - 1); n -= 2; } while (n > 2);
  return acc + 3;
}
__device__ int loops(int n) {
  if (n <= 0) return 1;
  int s = 0;
  for (int i = 0; i < 3; ++i) {
    if (i == 1) continue;
    s += loops(n - 1 - i);
    if (s > 50) return s;   // a return from inside a loop
  }
  return s;
}
__device__ double dsum(const double* a, int n) { return n == 0 ? 0.0 : a[0] + dsum(a + 1, n - 1); }
__device__ float walkp(const float* p, int n) {
  float s = 0.0f;
  while (n > 0) { s += *p++; if (n % 4 == 0) return s + walkp(p, n - 1) * 0.5f; n--; }
  return s;
}
struct Counter {
  int calls;
  __device__ int f(int n) { calls++; return n ? f(n - 1) + 1 : 0; }
};
__device__ int checked(int n, int* hits) {
  atomicAdd(hits, 1);
  assert(n < 100);
  if (n == 3) printf("at three %d\n", n);
  return n <= 0 ? 0 : checked(n - 1, hits) + n;
}
__device__ int twice(int v) { auto sq = [](int x) { return x * x; }; return v <= 0 ? 0 : sq(v) + twice(v - 1); }
__global__ void k(const int* x, int* out, const double* d, const float* p, int* hits) {
  int i = threadIdx.x;
  int v = x[i];
  out[10 * i] = sw(v);
  out[10 * i + 1] = loops(v);
  int t = 0;
  for (int j = 0; j < 3; ++j) t += loops(j + v % 3);   // a machine in a loop
  out[10 * i + 2] = t;
  out[10 * i + 3] = (int)(dsum(d + i, 5) * 10.0);
  out[10 * i + 4] = (int)(walkp(p + i, 6) * 100.0f);
  Counter c{0};
  out[10 * i + 5] = c.f(v % 7);
  out[10 * i + 6] = c.calls;
  out[10 * i + 7] = checked(p[i] > 5.0f ? 200 : v % 5, hits);
  out[10 * i + 8] = twice(v % 6);
}
"""


def _sw(n: int) -> int:
    if n % 3 == 0:
        return 0 if n == 0 else 1 + _sw(n - 1)
    if n % 3 == 1:
        return _sw(n - 1) * 2
    acc = 0
    while True:  # do ... while
        acc += _sw(n - 1)
        n -= 2
        if n <= 2:
            return acc + 3


def _loops(n: int) -> int:
    if n <= 0:
        return 1
    s = 0
    for i in (0, 2):
        s += _loops(n - 1 - i)
        if s > 50:
            return s
    return s


def _walkp(p, k: int, n: int) -> np.float32:
    s = np.float32(0)
    while n > 0:
        s = np.float32(s + p[k])
        k += 1
        if n % 4 == 0:
            return np.float32(s + np.float32(_walkp(p, k, n - 1) * np.float32(0.5)))
        n -= 1
    return s


def _dsum(d, k: int, n: int) -> float:
    return 0.0 if n == 0 else float(d[k]) + _dsum(d, k + 1, n - 1)  # (right to left, as the recursion adds)


@pytest.mark.parametrize("way", WAYS)
def test_switch_loops_returns_in_loops_asserts_printf_atomics_lambdas(tmp_path, way, capfd) -> None:
    n = 8
    x = np.array([0, 1, 2, 5, 7, 9, 11, 4], np.int32)
    d = np.linspace(0.1, 2, 16)
    p = np.linspace(-1, 1, 16).astype(np.float32)
    args = {"x": x, "out": np.zeros(10 * n, np.int32), "d": d, "p": p, "hits": np.zeros(1, np.int32)}
    out = run_way(EDGES, "k", (1,), (n,), args, way, name="edges.cu")
    want = np.zeros((n, 10), np.int64)
    for i, v in enumerate(x.tolist()):
        want[i, :9] = [_sw(v), _loops(v), sum(_loops(j + v % 3) for j in range(3)), int(_dsum(d, i, 5) * 10.0),
                       int(np.float32(_walkp(p, i, 6) * np.float32(100))), v % 7, v % 7 + 1,
                       sum(range(v % 5 + 1)), sum(k * k for k in range(v % 6 + 1))]
    np.testing.assert_array_equal(out["out"].reshape(n, 10), want)
    assert out["hits"].tolist() == [sum(v % 5 + 1 for v in x.tolist())]
    assert capfd.readouterr().out.count("at three 3\n") == 2
    if way != "c":  # (a file of kernels built by the C backend does not report device faults to Python)
        with pytest.raises(DeviceAssertError, match="n < 100"):
            run_way(EDGES, "k", (1,), (n,), dict(args, p=np.where(np.arange(16) == 5, 10.0, p).astype(np.float32)),
                    way, name="edges.cu")


REFERENCES = r"""
struct Stats { int count; float sum; };
__device__ void visit(const int* next, int node, int& count, float& sum, const float* w) {
  if (node < 0) return;
  count++;
  sum += w[node];
  visit(next, next[node], count, sum, w);
}
__device__ void gather(Stats& s, int n) { if (n > 0) { s.count += n; s.sum += 0.5f * n; gather(s, n - 1); } }
__global__ void k(const int* next, const float* w, int* c, float* s) {
  int i = threadIdx.x;
  int count = 0; float sum = 0.0f;
  visit(next, i, count, sum, w);
  Stats st = {0, 0.0f};
  gather(st, i);
  c[2 * i] = count; s[2 * i] = sum;
  c[2 * i + 1] = st.count; s[2 * i + 1] = st.sum;
}
"""


@pytest.mark.parametrize("way", WAYS)
def test_reference_parameters_passed_along_name_the_outermost_call_s_places(way) -> None:
    nxt = np.array([3, 5, -1, 2, 0, -1, 1, 4], np.int32)
    w = np.linspace(1, 2, 8).astype(np.float32)
    args = {"next": nxt, "w": w, "c": np.zeros(16, np.int32), "s": np.zeros(16, np.float32)}
    out = run_way(REFERENCES, "k", (1,), (8,), args, way, name="references.cu")
    for i in range(8):
        count, total, node = 0, np.float32(0), i
        while node >= 0:  # (the walks of this table end)
            count, total, node = count + 1, np.float32(total + w[node]), int(nxt[node])
        assert (out["c"][2 * i], out["s"][2 * i]) == (count, total)
        assert (out["c"][2 * i + 1], out["s"][2 * i + 1]) == (i * (i + 1) // 2, np.float32(0.25 * i * (i + 1)))


MIXED = r"""
struct Tree {
  const int* first; const int* count;
  __device__ int size(int node) const;
};
__device__ int size_of(const Tree& t, int node) {
  int s = 1;
  for (int c = 0; c < t.count[node]; ++c) s += t.size(t.first[node] + c);
  return s;
}
__device__ int Tree::size(int node) const { return size_of(*this, node); }
__device__ int twice(const Tree& t, int node, int d);
__device__ int depth(const Tree& t, int node, int d) { return t.count[node] == 0 ? d : twice(t, t.first[node], d + 1); }
__device__ int twice(const Tree& t, int node, int d) { return depth(t, node, d); }
__global__ void k(Tree t, int* out) {
  out[2 * threadIdx.x] = t.size(threadIdx.x);
  out[2 * threadIdx.x + 1] = depth(t, threadIdx.x, 0);
}
"""


@pytest.mark.parametrize("way", WAYS)
def test_member_function_and_free_functions_through_references_to_the_object(way) -> None:
    out = run_way(MIXED, "k", (1,), (7,),
                  {"t": {"first": FIRST, "count": COUNT}, "out": np.zeros(14, np.int32)}, way, name="mixed.cu")

    def size(node: int) -> int:
        return 1 + sum(size(int(FIRST[node]) + c) for c in range(COUNT[node]))

    def depth(node: int, d: int) -> int:
        return d if COUNT[node] == 0 else depth(int(FIRST[node]), d + 1)

    assert out["out"].tolist() == [v for i in range(7) for v in (size(i), depth(i, 0))]


RECORDS = r"""
struct P { int lo; float v; };
__device__ P best(P a, const float* x, int n) {
  if (n < 0) return a;
  P here = {n, x[n]};
  P rest = best(x[n] > a.v ? here : a, x, n - 1);
  return rest;
}
__global__ void k(const float* x, int* at, float* val, int n) {
  P start = {-1, -1e30f};
  P r = best(start, x + threadIdx.x * n, n - 1);
  at[threadIdx.x] = r.lo; val[threadIdx.x] = r.v;
}
"""


@pytest.mark.parametrize("way", WAYS)
def test_records_by_value_as_parameters_and_results(way) -> None:
    x = np.random.default_rng(3).standard_normal(4 * 9).astype(np.float32)
    out = run_way(RECORDS, "k", (1,), (4,),
                  {"x": x, "at": np.zeros(4, np.int32), "val": np.zeros(4, np.float32), "n": 9}, way, name="records.cu")
    rows = x.reshape(4, 9)
    assert out["at"].tolist() == rows.argmax(axis=1).tolist()  # (the first of equal maxima, as the recursion keeps)
    np.testing.assert_array_equal(out["val"], rows.max(axis=1))


@pytest.mark.parametrize("way", WAYS)
def test_barrier_after_the_recursion(way) -> None:
    x = (np.arange(64, dtype=np.int32) * 7) % 19
    out = run_way(KERNELS, "reduce", (2,), (32,), {"x": x, "out": np.zeros(2, np.int32)}, way, name="recursion.cu")
    assert out["out"].tolist() == [sum(_fib(int(v)) for v in x[:32])] * 2


@pytest.mark.parametrize("way", ("emulator", "llvm"))
def test_depth_bound_is_a_located_device_fault(way, capfd) -> None:
    def deep(x):
        return run_way(KERNELS, "deep", (1,), (4,), {"x": np.array(x, np.int32), "y": np.zeros(4, np.int32)}, way,
                       name="recursion.cu")["y"].tolist()

    with pytest.raises(DeviceAssertError) as info:
        deep([5, 100000, 7, 0])
    found = re.search(r"stack overflow: more than (\d+) nested recursive calls of 'depth'", str(info.value))
    assert found, str(info.value)
    assert info.value.loc is not None and info.value.loc.line == KERNELS[:KERNELS.index("__device__ int depth")].count(
        "\n") + 1
    assert "thread: [1,0,0]" in capfd.readouterr().err
    limit = int(found.group(1))
    assert limit >= 1024  # (a frame of `depth` saves nothing but its return: 8 KiB hold 2048)
    assert deep([5, limit, 7, 0]) == [5, limit, 7, 0]
    with pytest.raises(DeviceAssertError):
        deep([limit + 1, 0, 0, 0])


PROGRAM = r"""
#include <cstdio>
struct Node { int left, right, key; };
// the height of a binary tree stored in an array (-1: no child)
__device__ int height(const Node* t, int at) {
  if (at < 0) return 0;
  int l = height(t, t[at].left), r = height(t, t[at].right);
  return 1 + (l > r ? l : r);
}
// counts the paths of a flood fill of length <= budget from (x, y) over the free cells
__device__ int paths(const unsigned char* grid, int w, int h, int x, int y, int budget) {
  if (x < 0 || y < 0 || x >= w || y >= h || grid[y * w + x] || budget == 0) return 0;
  int n = 1;
  n += paths(grid, w, h, x + 1, y, budget - 1);
  n += paths(grid, w, h, x, y + 1, budget - 1);
  return n;
}
__device__ int down(int n) { return n == 0 ? 0 : 1 + down(n - 1); }
__global__ void tree(const Node* t, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = height(t, i);
}
__global__ void fill(const unsigned char* g, int* out) {
  out[threadIdx.x] = paths(g, 4, 3, threadIdx.x % 4, threadIdx.x / 4, 4);
}
__global__ void too_deep(int* out, int n) { out[threadIdx.x] = down(n); }
int main() {
  Node h[7] = {{1, 2, 0}, {3, 4, 1}, {5, -1, 2}, {-1, -1, 3}, {6, -1, 4}, {-1, -1, 5}, {-1, -1, 6}};
  Node* t; int* out; unsigned char* g;
  cudaMalloc(&t, sizeof h); cudaMalloc(&out, 12 * sizeof(int)); cudaMalloc(&g, 12);
  cudaMemcpy(t, h, sizeof h, cudaMemcpyHostToDevice);
  tree<<<2, 4>>>(t, out, 7);
  int r[12];
  cudaMemcpy(r, out, 7 * sizeof(int), cudaMemcpyDeviceToHost);
  printf("heights:");
  for (int i = 0; i < 7; ++i) printf(" %d", r[i]);
  unsigned char cells[12] = {0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0};
  cudaMemcpy(g, cells, 12, cudaMemcpyHostToDevice);
  fill<<<1, 12>>>(g, out);
  cudaMemcpy(r, out, sizeof r, cudaMemcpyDeviceToHost);
  printf("\npaths:");
  for (int i = 0; i < 12; ++i) printf(" %d", r[i]);
  too_deep<<<1, 2>>>(out, 100);
  cudaError_t ok = cudaDeviceSynchronize();
  too_deep<<<1, 2>>>(out, 5000);
  cudaError_t bad = cudaDeviceSynchronize();
  printf("\ndepth 100: %s, depth 5000: %s\n", ok == cudaSuccess ? "ok" : "failed",
         bad == cudaSuccess ? "ok" : "failed");
  return 0;
}
"""


def _paths(cells, x: int, y: int, budget: int) -> int:
    if x < 0 or y < 0 or x >= 4 or y >= 3 or cells[y * 4 + x] or budget == 0:
        return 0
    return 1 + _paths(cells, x + 1, y, budget - 1) + _paths(cells, x, y + 1, budget - 1)


def _program_output() -> str:
    cells = [0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0]
    heights = [4, 3, 2, 1, 2, 1, 1]
    return (f"heights: {' '.join(map(str, heights))}\n"
            f"paths: {' '.join(str(_paths(cells, i % 4, i // 4, 4)) for i in range(12))}\n"
            "depth 100: ok, depth 5000: failed\n")


@pytest.mark.parametrize("how", ("run", "emulate"))
def test_whole_program_through_polypy_run(tmp_path, how) -> None:
    if how == "run":
        need_compiler(cpp=True)
    src = tmp_path / "recursive.cu"
    src.write_text(PROGRAM)
    proc = polypy_cli("run", str(src), *(("--emulate",) if how == "emulate" else ()), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == _program_output()
    assert re.search(r"stack overflow: more than \d+ nested recursive calls of 'down'", proc.stderr)


def test_grad_of_a_recursive_kernel_is_refused_located(tmp_path) -> None:
    from polypy.driver.gradients import grad_kernel

    path = tmp_path / "pw.cu"
    path.write_text("__device__ float pw(float v, int n) { return n == 0 ? 1.0f : v * pw(v, n - 1); }\n"
                    "__global__ void g(const float* x, float* y) { y[threadIdx.x] = pw(x[threadIdx.x], 3); }\n")
    with pytest.raises(UserError) as info:
        grad_kernel(polypy.load(str(path)), "g", wrt=["x"])
    assert "cannot differentiate kernel 'g'" in info.value.message
    assert info.value.loc is not None and info.value.loc.line == 2


REFUSED = [
    ("barrier",
     "__device__ int f(int n) { __syncthreads(); return n <= 0 ? 0 : f(n - 1); }\n"
     "__global__ void k(int* x) { x[0] = f(3); }\n",
     "a collective operation (barrier, shuffle, vote) inside the recursive function 'f' is not supported", (1, 27)),
    ("shuffle",
     "__device__ int f(int n, int v) {\n"
     "  return n <= 0 ? v : f(n - 1, __shfl_down_sync(0xffffffffu, v, 1));\n}\n"
     "__global__ void k(int* x) { x[threadIdx.x] = f(3, threadIdx.x); }\n",
     "a collective operation (barrier, shuffle, vote) inside the recursive function 'f'", (2, 32)),
    ("reference-to-another-place",
     "__device__ void f(int& a, int& b, int n) { if (n > 0) { a += n; f(b, a, n - 1); } }\n"
     "__global__ void k(int* x) { int u = 0, v = 0; f(u, v, x[0]); x[0] = u; x[1] = v; }\n",
     "argument 'a' of the recursive function 'f' is not the place the outermost call's reference names", (1, 67)),
    ("reference-to-a-temporary",
     "__device__ int f(const int& n) { return n <= 0 ? 0 : f(n - 1); }\n"
     "__global__ void k(int* x) { x[0] = f(x[0] + 1); }\n",
     "reference parameter 'n' of the recursive function 'f' bound to a temporary", (2, 36)),
    ("record-holding-a-pointer",
     "struct P { int* a; int b; };\n"
     "__device__ int f(P p, int n) { return n <= 0 ? p.b : f(p, n - 1); }\n"
     "__global__ void k(P p, int* x) { x[0] = f(p, 3); }\n",
     "is a record holding pointers, which is not supported", (3, 41)),
    ("another-array",
     "__device__ void f(float* a, float* b, int n) { if (n > 0) { a[n] = b[n]; f(b, a, n - 1); } }\n"
     "__global__ void k(float* x, float* y) { f(x, y, 3); }\n",
     "points into another array than the outermost call's", (1, 76)),
    ("local-array-argument",
     "__device__ int f(int* a, int n) { int mine[4] = {n, n, n, n}; return n <= 0 ? a[0] : f(mine, n - 1) + a[1]; }\n"
     "__global__ void k(int* x) { x[0] = f(x, 3); }\n",
     "points into a local array of a recursive call", (1, 88)),
    ("another-object",
     "struct T { int v; __device__ int f(const T* o, int n) const { return n <= 0 ? v : o->f(o, n - 1); } };\n"
     "__global__ void k(const T* t, int* x) { x[0] = t[0].f(t + 1, 3); }\n",
     "on another object than the outermost call's", (1, 83)),
]


@pytest.mark.parametrize("name,source,message,where", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_located(tmp_path, name, source, message, where) -> None:
    assert_load_refused(tmp_path, name, source, message, where)

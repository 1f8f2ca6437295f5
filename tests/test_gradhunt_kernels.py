"""Gradients of kernels written as CUDA code is written today (gradhunt, issues 36/38).

Each kernel below is one the hunt for wrong gradients checked (docs/gradients_real.md, "Gradient
hunt"): reverse (``K_grad``) and forward (``K_fwd``) mode against central finite differences in
float64 along random directions (``autodiff.check.check_gradients``, the emulator as the
oracle), on launches with a partial last block, and forward against reverse (the dot-product
test). They cover what the samples do not: positions allocated with ``atomicAdd`` (stream
compaction), an atomically accumulated sum read back after a barrier, in-place updates of an
in/out buffer through shared memory over several iterations, a ``while`` on a shared flag,
one ``extern __shared__`` buffer carved into two arrays, operators and member functions of a
vector type with scattered atomics, a warp scan with ``__shfl_up_sync``, and
``__syncthreads_count``/``__syncthreads_or`` of active comparisons.

Online-softmax attention with ``cache="recompute"`` (``polypy grad --cache recompute``) was an
internal error: the dot product ``s``, recomputed by replaying its loop inside the reversed loop
over ``acc``, was then memoized and read after that loop, where its copy is undeclared.
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from autodiff.check import check_gradients
from polypy.driver.gradients import grad_kernel

SPRINGS = r'''
struct V3 { double x, y, z;
  __device__ V3 operator+(const V3& o) const { return {x + o.x, y + o.y, z + o.z}; }
  __device__ V3 operator-(const V3& o) const { return {x - o.x, y - o.y, z - o.z}; }
  __device__ V3 operator*(double s) const { return {x * s, y * s, z * s}; }
  __device__ double dot(const V3& o) const { return x * o.x + y * o.y + z * o.z; }
  __device__ double norm() const { return sqrt(dot(*this)); }
};
__device__ V3 load3(const double* p, int i) { return {p[3*i], p[3*i+1], p[3*i+2]}; }
__global__ void springs(const double* pos, const int* a, const int* b, const double* rest, double k, double* force, int m) {
  int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= m) return;
  V3 pa = load3(pos, a[e]), pb = load3(pos, b[e]);
  V3 d = pb - pa;
  double len = d.norm();
  V3 f = d * (k * (len - rest[e]) / len);
  atomicAdd(&force[3*a[e]], f.x); atomicAdd(&force[3*a[e]+1], f.y); atomicAdd(&force[3*a[e]+2], f.z);
  atomicAdd(&force[3*b[e]], -f.x); atomicAdd(&force[3*b[e]+1], -f.y); atomicAdd(&force[3*b[e]+2], -f.z);
}
'''


def _springs(rng):
    n, m = 20, 70
    a = rng.integers(0, n, m).astype(np.int32)
    b = ((a + 1 + rng.integers(0, n - 1, m)) % n).astype(np.int32)
    return {"pos": rng.standard_normal(3 * n), "a": a, "b": b, "rest": rng.uniform(0.5, 1.5, m), "k": 1.3,
            "force": rng.standard_normal(3 * n), "m": np.int32(m)}


COMPACT = r'''
__global__ void compact(const double* x, double* out, int* count, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && x[i] > 0.0) { int pos = atomicAdd(count, 1); out[pos] = x[i] * x[i]; }
}
'''

ATOMIC_THEN_READ = r'''
__global__ void atomic_norm(const double* x, double* sum, double* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  double e = exp(x[i]);
  atomicAdd(&sum[blockIdx.x], e);
  __syncthreads();
  y[i] = e / sum[blockIdx.x];
}
'''

INPLACE = r'''
__global__ void smooth_inplace(double* x, int iters) {
  __shared__ double s[34];
  int t = threadIdx.x, i = blockIdx.x * 32 + t;
  for (int k = 0; k < iters; ++k) {
    s[t + 1] = x[i];
    if (t == 0) { s[0] = s[1]; s[33] = x[blockIdx.x * 32 + 31]; }
    __syncthreads();
    double v = (s[t] + s[t + 1] + s[t + 2]) / 3.0;
    x[i] = v + (v > 0.0) * 0.1 * v * v;
    __syncthreads();
  }
}
'''

FLAG_WHILE = r'''
__global__ void relax(const double* x, double* y, int maxit) {
  __shared__ double s[32];
  __shared__ int done;
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * 32 + t];
  if (t == 0) done = 0;
  __syncthreads();
  int it = 0;
  while (!done && it < maxit) {
    double v = 0.5 * s[t] + 0.25 * (s[(t + 31) % 32] + s[(t + 1) % 32]);
    __syncthreads();
    s[t] = v;
    __syncthreads();
    if (t == 0 && fabs(s[0]) < 0.05) done = 1;
    __syncthreads();
    ++it;
  }
  y[blockIdx.x * 32 + t] = s[t];
}
'''

CARVED = r'''
__global__ void carve(const double* x, const double* w, double* y, int n) {
  extern __shared__ double sm[];
  double* a = sm; double* b = sm + blockDim.x;
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  a[t] = i < n ? x[i] : 0.0;
  b[t] = i < n ? w[i] * x[i] : 0.0;
  __syncthreads();
  int u = (t + 1) % blockDim.x;
  if (i < n) y[i] = a[u] * b[t] + b[u];
}
'''

WARP_SCAN = r'''
__global__ void wscan(const double* x, double* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
  double v = i < n ? x[i] : 0.0;
  for (int o = 1; o < 32; o <<= 1) {
    double u = __shfl_up_sync(0xffffffff, v, o);
    if (lane >= o) v += u;
  }
  if (i < n) y[i] = v * v;
}
'''

SYNC_COUNT = r'''
__global__ void cnt(const double* x, double* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  double v = x[i];
  int c = __syncthreads_count(v > 0.0);
  int any = __syncthreads_or(v > 2.0);
  y[i] = v * c + (any ? v * v : 0.0);
}
'''

ATTENTION = r'''
__global__ void attn(const double* Q, const double* K, const double* V, double* O, int L, int D) {
  int q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= L) return;
  double m = -1e300, l = 0.0, acc[8];
  for (int d = 0; d < D; ++d) acc[d] = 0.0;
  for (int k = 0; k < L; ++k) {
    double s = 0.0;
    for (int d = 0; d < D; ++d) s += Q[q * D + d] * K[k * D + d];
    double mn = fmax(m, s), c = exp(m - mn), p = exp(s - mn);
    l = l * c + p;
    for (int d = 0; d < D; ++d) acc[d] = acc[d] * c + p * V[k * D + d];
    m = mn;
  }
  for (int d = 0; d < D; ++d) O[q * D + d] = acc[d] / l;
}
'''


def _attention(rng):
    L, D = 11, 4
    return {"Q": rng.standard_normal(L * D), "K": rng.standard_normal(L * D), "V": rng.standard_normal(L * D),
            "O": np.zeros(L * D), "L": np.int32(L), "D": np.int32(D)}


CASES = {
    "springs": (SPRINGS, (3,), (32,), 0, _springs),
    "compact": (COMPACT, (2,), (32,), 0, lambda rng: {
        "x": rng.standard_normal(50), "out": np.zeros(50), "count": np.zeros(1, np.int32), "n": np.int32(50)}),
    "atomic_norm": (ATOMIC_THEN_READ, (2,), (16,), 0, lambda rng: {
        "x": rng.standard_normal(32), "sum": rng.uniform(0.5, 1, 2), "y": np.zeros(32)}),
    "smooth_inplace": (INPLACE, (2,), (32,), 0, lambda rng: {"x": rng.standard_normal(64), "iters": np.int32(4)}),
    "relax": (FLAG_WHILE, (2,), (32,), 0, lambda rng: {
        "x": rng.standard_normal(64), "y": np.zeros(64), "maxit": np.int32(12)}),
    "carve": (CARVED, (2,), (32,), 2 * 32 * 8, lambda rng: {
        "x": rng.standard_normal(50), "w": rng.standard_normal(50), "y": np.zeros(50), "n": np.int32(50)}),
    "wscan": (WARP_SCAN, (2,), (64,), 0, lambda rng: {
        "x": rng.standard_normal(100), "y": np.zeros(100), "n": np.int32(100)}),
    "cnt": (SYNC_COUNT, (2,), (32,), 0, lambda rng: {"x": rng.standard_normal(64), "y": np.zeros(64)}),
    "attn": (ATTENTION, (2,), (8,), 0, _attention),
}
OPTIONS = {"attn": {"cache": "recompute"}}


@pytest.mark.parametrize("name", sorted(CASES))
def test_reverse_and_forward_match_finite_differences(tmp_path, name: str) -> None:
    source, grid, block, shmem, make = CASES[name]
    path = tmp_path / f"{name}.cu"
    path.write_text(source)
    module = polypy.load(str(path))
    kernel = module.kernel(name)
    options = OPTIONS.get(name, {})
    k_grad = grad_kernel(module, name, **options)
    k_fwd = grad_kernel(module, name, mode="forward", **options)
    dynamic = any(b.space == "shared" and b.shape is None for b in kernel.buffers)
    args = make(np.random.default_rng(100))
    result = check_gradients(kernel, k_grad, grid, block, args, k_fwd=k_fwd, shmem=shmem,
                             grad_shmem=shmem * (2 if dynamic else 1), seed=1)
    assert abs(result.finite_difference) > 1e-3, result
    assert result.error() < 1e-6, result
    assert result.forward is not None
    assert abs(result.forward - result.reverse) <= 1e-9 * max(1.0, abs(result.reverse)), result
    assert result.forward_effect_error <= 1e-12 * max(1.0, max(float(np.max(np.abs(v))) for v in args.values()
                                                               if isinstance(v, np.ndarray))), result

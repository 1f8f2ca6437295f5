"""sum-uniform-atomics (gpu2cpu) and the interchange of short loops holding atomic adds
(sink-thread-loops): every thread's atomic add to one element becomes a sum in a register,
reassociable by the backends. Checked: where the pass applies and where it must not, the report,
the C (``reduction(+:...)``) and LLVM (``fadd reassoc``) output, results against NumPy and the
emulator through both backends on several block shapes, and the gradients it was built for
(conv2d, stencil1d, matmul_tiled) against finite differences in float64."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import polypy
from c_support import assert_same_as_emulator, run_c
from polypy.driver.library import emit_kernels
from codegen.llvm import emit_llvm_ir
from gpu2cpu.sum_uniform_atomics import sum_uniform_atomics
from polypy.driver.pipelines import to_cpu
from polypy.driver.source import load
from polypy.ir import nodes as n
from polypy.ir.visitor import walk, walk_block
from samples.spec import sample


def _kernel(text: str, name: str) -> n.Kernel:
    return load(None, text=text).kernel(name)


# Each thread adds its value, weighted per tap, to every tap's shared total: the shape of a
# weight's adjoint in a gradient (written anew for this test).
TAPS = r"""
#ifndef T
#define T float
#endif
__global__ void taps(const T* x, T* out, int n)
{
    __shared__ T s[4];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x < 4) s[threadIdx.x] = 0;
    __syncthreads();
    if (i < n)
        for (int j = 0; j < 4; j++)
            atomicAdd(&s[j], x[i] * (T)(j + 1));
    __syncthreads();
    if (threadIdx.x < 4) out[blockIdx.x * 4 + threadIdx.x] = s[threadIdx.x];
}
"""

# The shared total is also read in the same loop: nothing may be summed aside.
READ_BACK = r"""
__global__ void read_back(const int* x, int* out, int n)
{
    __shared__ int s[1];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x == 0) s[0] = 0;
    __syncthreads();
    if (i < n) {
        atomicAdd(&s[0], x[i]);
        out[i] = atomicAdd(&s[0], 0);
    }
}
"""


def _sum_locals(kernel: n.Kernel) -> list[str]:
    return [x.name for x in walk(kernel) if isinstance(x, n.Decl) and x.name in kernel.order_free_sums]


def _innermost_thread_loops(kernel: n.Kernel) -> list[n.For]:
    return [x for x in walk(kernel) if isinstance(x, n.For) and x.kind == "threads"
            and not any(isinstance(y, n.For) and y.kind == "threads" for y in walk_block(x.body))]


def test_a_short_loop_of_atomic_adds_is_interchanged_and_each_uniform_add_becomes_a_sum():
    report: list = []
    cpu = to_cpu(_kernel(TAPS, "taps"), report=report)
    assert _sum_locals(cpu), "no sum made"
    # The loops over tx that add to the sums touch s no more; the adds to s follow them.
    summing = [loop for loop in _innermost_thread_loops(cpu)
               if any(isinstance(x, n.Assign) and x.name in cpu.order_free_sums for x in walk_block(loop.body))]
    assert summing
    for loop in summing:
        assert not any(isinstance(x, (n.AtomicRMW, n.Load, n.Store)) and x.buffer == "s" for x in walk_block(loop.body))
    # (the add after the loop: an atomic on shared memory, made a plain update by lower-block-atomics)
    adds = [x for x in walk(cpu) if isinstance(x, n.Store) and x.buffer == "s"
            and any(isinstance(v, n.Var) and v.name in cpu.order_free_sums for v in walk(x.value))]
    assert adds
    lines = [d.format() for d in report if "summed in registers" in d.format()]
    assert lines and all("atomic adds to one element of s" in line for line in lines)


def test_adds_to_an_element_the_loop_also_reads_are_left_alone():
    cpu = to_cpu(_kernel(READ_BACK, "read_back"))
    assert not cpu.order_free_sums
    # the pass alone on the CPU form gives the kernel back unchanged
    assert sum_uniform_atomics(cpu) is cpu


TOTAL = r"""
__global__ void total(const float* RX x, float* RX acc, float* RX twice, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(&acc[0], x[i]);
        AFTER
    }
}
"""


def _total(restrict: str, after: str) -> n.Kernel:
    return _kernel(TOTAL.replace("RX", restrict).replace("AFTER", after), "total")


def test_adds_to_an_array_the_loop_may_read_through_another_pointer_after_the_add_are_left_alone():
    """acc may be x's storage (two plain pointers): a thread that reads x[i] after its own add to
    acc[0] must see it, so those adds stay in the loop; with __restrict__ they become one sum.
    Reads before the add do not matter: every thread reading first and adding afterwards is an
    order the GPU may pick, so a plain-pointer sum is made too."""
    read_after = "twice[i] = 2.0f * x[i];"
    assert not to_cpu(_total("", read_after)).order_free_sums
    assert to_cpu(_total("__restrict__", read_after)).order_free_sums
    assert to_cpu(_total("", "")).order_free_sums
    # a store through a pointer that may be acc's storage: it could overwrite an add
    assert not to_cpu(_total("", "twice[i] = 2.0f;")).order_free_sums
    n_ = 1000
    x = np.random.default_rng(2).standard_normal(n_).astype(np.float32)
    for restrict in ("", "__restrict__"):
        args = dict(x=x, acc=np.zeros(1, np.float32), twice=np.zeros(n_, np.float32), n=np.int32(n_))
        got = run_c(_total(restrict, "twice[i] = 2.0f * x[i];"), (8, 1, 1), (128, 1, 1), args)
        np.testing.assert_allclose(got["acc"][0], x.astype(np.float64).sum(), rtol=1e-5)
        np.testing.assert_array_equal(got["twice"], 2.0 * x)
        mod = polypy.compile(None, text=TOTAL.replace("RX", restrict).replace("AFTER", ""))
        acc = np.zeros(1, np.float32)
        mod.total[8, 128](x, acc, np.zeros(n_, np.float32), n_)
        np.testing.assert_allclose(acc[0], x.astype(np.float64).sum(), rtol=1e-5)


def test_the_c_output_declares_the_reduction_and_the_llvm_ir_reassociates_it():
    cpu = to_cpu(_kernel(TAPS, "taps"))
    names = cpu.order_free_sums
    text = emit_kernels([cpu], cpp=True)
    assert any(f"#pragma omp simd reduction(+:{name})" in text for name in names), text
    assert "fadd reassoc" in emit_llvm_ir(n.Module((cpu,)))
    # without the note, no reassociation
    plain = emit_llvm_ir(n.Module((dataclasses.replace(cpu, order_free_sums=()),)))
    assert "reassoc" not in plain


@pytest.mark.parametrize("block", [(32, 1, 1), (24, 1, 1), (64, 1, 1), (256, 1, 1)])
@pytest.mark.parametrize("real", ["float", "double", "int"])
def test_sums_equal_numpy_through_both_backends(block, real):
    dtype = {"float": np.float32, "double": np.float64, "int": np.int32}[real]
    text = f"#define T {real}\n" + TAPS
    rng = np.random.default_rng(11)
    n_ = 301
    x = (rng.integers(-50, 50, n_) if real == "int" else rng.standard_normal(n_)).astype(dtype)
    nblocks = -(-n_ // block[0])
    padded = np.zeros(nblocks * block[0], np.float64)
    padded[:n_] = x
    want = (padded.reshape(nblocks, block[0]).sum(axis=1)[:, None] * np.arange(1, 5)).ravel()
    args = dict(x=x, out=np.zeros(nblocks * 4, dtype), n=np.int32(n_))
    grid = (nblocks, 1, 1)
    tol = dict(rtol=0, atol=0) if real == "int" else dict(rtol=1e-5 if real == "float" else 1e-12, atol=1e-5)
    got = assert_same_as_emulator(_kernel(text, "taps"), grid, block, args, **tol)
    np.testing.assert_allclose(got["out"], want, **tol)
    np.testing.assert_allclose(run_c(_kernel(text, "taps"), grid, block, args, cpp=True)["out"], want, **tol)
    for specialize in (False, True):
        out = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        getattr(polypy.compile(None, text=text, specialize=specialize), "taps")[grid, block](**out)
        np.testing.assert_allclose(out["out"], want, **tol)


@pytest.mark.parametrize("name", ["conv2d", "stencil1d", "matmul_tiled"])
def test_the_gradients_it_was_built_for_sum_their_weights_adjoints(name):
    """The weights' adjoints of these gradients (conv2d's mask, stencil1d's w, matmul's tiles)
    become sums; ``test_grad_api`` checks the compiled gradients against the emulated ones, and
    ``test_grad_samples`` the emulated ones against finite differences."""
    s = sample(name)
    g = polypy.grad(getattr(polypy.compile(s.source, defines={**s.defines, "REAL": "double"}), s.kernel), wrt=list(s.wrt))
    assert to_cpu(g.gpu).order_free_sums


def test_vecnorms_gradient_sums_the_adds_of_its_reversed_loop():
    """vecnorm's gradient: every thread adds d_s * 2 in[j] to d_in[j] for every j, reading in[j]
    (which may be d_in's storage) before its add: the loop over the threads sums them."""
    s = sample("vecnorm")
    mod = polypy.compile(s.source, defines={**s.defines, "REAL": "double"})
    grad = polypy.grad(mod.vecnorm, wrt=list(s.wrt))
    assert grad.compiled.cpu.order_free_sums
    n_ = 300
    rng = np.random.default_rng(5)
    x, seed = rng.standard_normal(n_), rng.standard_normal(n_)
    args = {"in": x, "d_in": np.zeros(n_), "out": np.zeros(n_), "d_out": seed.copy(), "n": n_}
    grad[(3, 1, 1), (128, 1, 1)](**args)
    norm = np.sqrt(np.sum(x * x))
    want = seed / norm - x * np.dot(seed, x) / norm ** 3  # d/dx of <seed, x / |x|>
    np.testing.assert_allclose(args["d_in"], want, rtol=1e-10, atol=1e-12)

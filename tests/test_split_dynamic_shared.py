"""split-dynamic-shared (gpu2cpu): an extern shared array addressed as ``e * q + c`` becomes one
array per residue ``c`` (``Buffer.part``). Checked: where it applies and where it must not, the
IR text of a part, results against the emulator through both backends on several block shapes
and dynamic shared sizes (``N`` not a multiple of ``q`` included), bounds faults reported in the
split array's own indices, and the gradient it was built for (stencil1d's interleaved shadow)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import polypy
from c_support import assert_same_as_emulator
from gpu2cpu.split_dynamic_shared import split_dynamic_shared
from polypy.driver.pipelines import to_cpu
from polypy.driver.source import load
from polypy.errors import InternalError
from polypy.ir import nodes as n
from polypy.ir import parse_kernel
from polypy.ir.printer import print_kernel
from polypy.ir.types import I32
from polypy.ir.verifier import verify_kernel
from polypy.ir.visitor import walk
from polypy.poly.alias import alias_kind
from samples.spec import sample

# Complex numbers as (re, im) pairs in dynamic shared memory; each thread multiplies its own by
# its mirror's (written anew for this test).
PAIRS = r"""
__global__ void pairs(const float* re, const float* im, float* out_re, float* out_im, int n)
{
    extern __shared__ float s[];
    int t = threadIdx.x;
    int g = blockIdx.x * blockDim.x + t;
    s[2 * t] = g < n ? re[g] : 0.0f;
    s[t * 2 + 1] = g < n ? im[g] : 0.0f;
    __syncthreads();
    int m = blockDim.x - 1 - t;
    float a = s[2 * m], b = s[2 * m + 1];
    if (g < n) {
        out_re[g] = a * s[2 * t] - b * s[2 * t + 1];
        out_im[g] = a * s[2 * t + 1] + b * s[2 * t];
    }
}
"""

# Records of three ints; one read goes through a data-dependent index isl cannot bound.
TRIPLES = r"""
__global__ void triples(const int* x, const int* pick, int* out)
{
    extern __shared__ int r[];
    int t = threadIdx.x;
    r[3 * t] = x[t];
    r[3 * t + 1] = 2 * x[t];
    r[3 * t + 2] = t;
    __syncthreads();
    out[t] = r[3 * t] + r[3 * t + 1] + r[3 * pick[t] + 2];
}
"""

# One access that is not of the form e * 2 + c.
MIXED = r"""
__global__ void mixed(const float* x, float* out)
{
    extern __shared__ float s[];
    int t = threadIdx.x;
    s[2 * t] = x[t];
    s[2 * t + 1] = -x[t];
    __syncthreads();
    out[t] = s[t];
}
"""


def _kernel(text: str, name: str) -> n.Kernel:
    return load(None, text=text).kernel(name)


def _parts(kernel: n.Kernel) -> dict[str, tuple[int, int]]:
    return {b.name: b.part for b in kernel.buffers if b.part is not None}


def _extern_indices(kernel: n.Kernel) -> list[n.Expr]:
    extern = {b.name for b in kernel.buffers if b.shape is None}
    return [x.index[0] for x in walk(kernel) if isinstance(x, (n.Load, n.Store, n.AtomicRMW)) and x.buffer in extern]


def test_interleaved_pairs_become_two_parts_addressed_with_unit_stride():
    report: list = []
    cpu = to_cpu(_kernel(PAIRS, "pairs"), report=report)
    assert _parts(cpu) == {"s": (0, 2), "s_1": (1, 2)}
    assert all(b.symbol == "s" for b in cpu.buffers if b.part is not None)
    for e in _extern_indices(cpu):  # no access multiplies by 2 any more
        assert not any(isinstance(x, n.Const) and x.value == 2 for x in walk(e)), e
    assert alias_kind(cpu, "s", "s_1") is None and alias_kind(cpu, "s_1", "s_1") == "same"
    messages = [d.format() for d in report if "split into" in d.format()]
    assert len(messages) == 1 and "i * 2 + c" in messages[0] and "s_1" in messages[0]


def test_a_part_prints_and_parses_back():
    cpu = split_dynamic_shared(to_cpu(_kernel(TRIPLES, "triples"), optimize=False))
    text = print_kernel(cpu)
    assert "extern shared r_2: i32[] part 2/3 in r" in text
    again = parse_kernel(text)
    assert _parts(again) == {"r": (0, 3), "r_1": (1, 3), "r_2": (2, 3)}
    assert print_kernel(again) == text


def test_not_split_where_an_access_has_another_form():
    assert _parts(to_cpu(_kernel(MIXED, "mixed"))) == {}


def test_not_split_beside_another_extern_array():
    # Extern arrays share their first bytes: splitting one would separate it from the other. (The
    # frontend makes one array of all of a kernel's; IR may have several.)
    cpu = to_cpu(_kernel(PAIRS, "pairs"), optimize=False)
    other = n.Buffer("k", cpu.buffer("s").elem, None, "shared")
    two = dataclasses.replace(cpu, buffers=cpu.buffers + (other,))
    assert split_dynamic_shared(two) is two
    assert _parts(split_dynamic_shared(cpu)) == {"s": (0, 2), "s_1": (1, 2)}


@pytest.mark.parametrize("block, extra", [(32, 0), (64, 4), (96, 12), (7, 8)])
def test_pairs_through_c_and_llvm_match_the_emulator(block, extra):
    kernel = _kernel(PAIRS, "pairs")
    rng = np.random.default_rng(block)
    n_ = 3 * block - 5
    grid = 3
    args = {"re": rng.standard_normal(n_).astype(np.float32), "im": rng.standard_normal(n_).astype(np.float32),
            "out_re": np.zeros(n_, np.float32), "out_im": np.zeros(n_, np.float32), "n": n_}
    shmem = 2 * block * 4 + extra  # extra bytes: N larger than the records need, odd N included
    want = assert_same_as_emulator(kernel, grid, block, args, shmem=shmem)
    mod = polypy.compile(None, text=PAIRS)
    got = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    mod.pairs[grid, block, shmem](**got)
    assert "s_1" in {b.name for b in mod.pairs.cpu.buffers}
    for k in ("out_re", "out_im"):
        np.testing.assert_array_equal(got[k], want[k])


@pytest.mark.parametrize("block, extra", [(32, 4), (33, 8), (64, 0)])
def test_triples_with_n_not_a_multiple_of_three_match_the_emulator(block, extra):
    kernel = _kernel(TRIPLES, "triples")
    rng = np.random.default_rng(7)
    args = {"x": rng.integers(-50, 50, block).astype(np.int32),
            "pick": rng.permutation(block).astype(np.int32), "out": np.zeros(block, np.int32)}
    shmem = 3 * block * 4 + extra
    want = assert_same_as_emulator(kernel, 1, block, args, shmem=shmem)
    mod = polypy.compile(None, text=TRIPLES)
    got = {k: v.copy() for k, v in args.items()}
    mod.triples[1, block, shmem](**got)
    np.testing.assert_array_equal(got["out"], want["out"])


def test_a_fault_in_a_part_is_reported_in_the_split_arrays_indices():
    mod = polypy.compile(None, text=TRIPLES)
    block = 32
    pick = np.arange(block, dtype=np.int32)
    pick[5] = block  # r[3 * 32 + 2] = r[98], past 3 * 32 elements
    args = {"x": np.ones(block, np.int32), "pick": pick, "out": np.zeros(block, np.int32)}
    shmem = 3 * block * 4
    with pytest.raises(polypy.UserError) as info:
        mod.triples[1, block, shmem](**args)
    text = str(info.value)
    assert "read index 98 of dynamic shared array 'r' of 96 elements" in text, text
    assert f"launched with {shmem} bytes of dynamic shared memory" in text
    assert "r_2" in {b.name for b in mod.triples.cpu.buffers}


def test_stencil1d_gradient_keeps_its_shadow_in_a_part_of_its_own():
    s = sample("stencil1d")
    mod = polypy.compile(s.source, defines={**s.defines, "REAL": "double"})
    grad = polypy.grad(mod.stencil1d, wrt=list(s.wrt))
    parts = _parts(grad.compiled.cpu)
    assert sorted(parts.values()) == [(0, 2), (1, 2)]
    n_ = 1000
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal(n_), rng.standard_normal(7)
    seed = rng.standard_normal(n_)
    block, grid = 64, (n_ + 63) // 64
    shmem = (block + 6) * 8
    args = {"in": x, "d_in": np.zeros(n_), "w": w, "d_w": np.zeros(7), "out": np.zeros(n_), "d_out": seed.copy(),
            "n": n_}
    grad[grid, block, shmem](**args)
    emulated = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    emulated.update({"d_in": np.zeros(n_), "d_w": np.zeros(7), "d_out": seed.copy()})
    grad.emulate[grid, block, shmem](**emulated)
    np.testing.assert_allclose(args["d_in"], emulated["d_in"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(args["d_w"], emulated["d_w"], rtol=1e-12, atol=1e-12)
    # The exact gradient of a linear stencil: out[g] reads in[g + k], so d_in[g + k] gets
    # w[k + 3] * seed[g] for every g with g + k in range.
    want = np.zeros(n_)
    for k in range(-3, 4):
        lo, hi = max(0, -k), min(n_, n_ - k)
        want[lo + k:hi + k] += w[k + 3] * seed[lo:hi]
    np.testing.assert_allclose(args["d_in"], want, rtol=1e-12, atol=1e-12)



@pytest.mark.parametrize("change", [{"symbol": None}, {"part": (2, 2)}, {"shape": (n.Const(8, I32),)}])
def test_the_verifier_refuses_a_part_that_views_nothing_is_out_of_range_or_has_a_shape(change):
    cpu = split_dynamic_shared(to_cpu(_kernel(PAIRS, "pairs"), optimize=False))
    verify_kernel(cpu)
    bad = tuple(dataclasses.replace(b, **change) if b.name == "s_1" else b for b in cpu.buffers)
    with pytest.raises(InternalError, match="may be a part"):
        verify_kernel(dataclasses.replace(cpu, buffers=bad))

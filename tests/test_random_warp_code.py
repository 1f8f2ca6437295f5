"""Random implicit warp-synchronous kernels against a lockstep model in NumPy (issue 35 item 3).

Each kernel scans, reduces and shuffles values through a ``volatile __shared__`` array with no
barrier, inside each warp, the way code for GPUs before Volta did. Its meaning is the lockstep
one: every statement runs for all active lanes of a warp at once, every lane's reads before any
lane's store. The model below computes exactly that; the LLVM JIT and the C backend must give
the same bits (``gpu2cpu.lockstep_warps``), on blocks of one, two and four warps. Reads stay
inside the reading lane's warp, so the warps of a block never race and the answer is unique.

Statements, over ``unsigned`` values (wrapping, no undefined behaviour):

* ``if (lane >= k) s[t] = s[t] OP s[t - k];``   (a scan step)
* ``if (lane < k) s[t] = s[t] OP s[t + k];``    (a reduction step, k <= 16)
* ``if ((lane & m) == r) s[t] = s[t] OP c;``     (lanes of a pattern)
* ``s[t] = s[t ^ k] OP s[t];``                   (a butterfly: isl cannot read ``t ^ k``, so the
  race is only possible to it, which is enough to run the code in lockstep)

The first statement makes a race (a pattern alone would not).
"""
from __future__ import annotations

import random

import numpy as np
import pytest

import polypy
from c_support import run_c

KERNELS = 24
PER_MODULE = 12
OPS = {"+": lambda a, b: a + b, "^": lambda a, b: a ^ b, "-": lambda a, b: a - b,
       "|": lambda a, b: a | b}


def _statement(r: random.Random, first: bool) -> tuple[str, tuple]:
    kind = r.choice(["scan", "reduce", "butterfly"] if first else ["scan", "reduce", "pattern", "butterfly"])
    op = r.choice(list(OPS))
    k = r.choice([1, 2, 4, 8, 16])
    if kind == "scan":
        return f"if (lane >= {k}) s[t] = s[t] {op} s[t - {k}];", (kind, op, k)
    if kind == "reduce":
        return f"if (lane < {k}) s[t] = s[t] {op} s[t + {k}];", (kind, op, k)
    if kind == "pattern":
        m = r.choice([1, 3, 7]); rest = r.randint(0, m); c = r.randint(1, 1000)
        return f"if ((lane & {m}) == {rest}) s[t] = s[t] {op} {c}u;", (kind, op, (m, rest, c))
    return f"s[t] = s[t ^ {k}] {op} s[t];", (kind, op, k)


def _kernel(seed: int) -> tuple[str, list[tuple]]:
    r = random.Random(seed)
    stmts = [_statement(r, i == 0) for i in range(r.randint(2, 7))]
    body = "\n  ".join(text for text, _ in stmts)
    source = f"""
__global__ void warp{seed}(unsigned* out, const unsigned* in) {{
  volatile __shared__ unsigned s[128];
  int t = threadIdx.x, lane = t & 31;
  s[t] = in[blockIdx.x * blockDim.x + t];
  {body}
  out[blockIdx.x * blockDim.x + t] = s[t];
}}
"""
    return source, [meaning for _, meaning in stmts]


def _lockstep(meanings: list[tuple], x: np.ndarray, block: int) -> np.ndarray:
    """The kernel's result with the lanes of each warp in lockstep (warps never interact)."""
    out = x.astype(np.uint32).copy()
    lane = np.arange(32)
    with np.errstate(over="ignore"):
        for start in range(0, len(x), 32):
            s = out[start:start + 32].copy()
            for kind, op, arg in meanings:
                f = OPS[op]
                if kind == "scan":
                    on, other = lane >= arg, np.maximum(lane - arg, 0)
                    new = f(s, s[other])
                elif kind == "reduce":
                    on, other = lane < arg, np.minimum(lane + arg, 31)
                    new = f(s, s[other])
                elif kind == "pattern":
                    m, rest, c = arg
                    on, new = (lane & m) == rest, f(s, np.uint32(c))
                else:
                    on, new = np.ones(32, bool), f(s[lane ^ arg], s)
                s = np.where(on, new, s).astype(np.uint32)  # every read above came before any store
            out[start:start + 32] = s
    return out


def _modules():
    for first in range(0, KERNELS, PER_MODULE):
        yield [(seed, *_kernel(seed)) for seed in range(first, first + PER_MODULE)]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = []
    for i, kernels in enumerate(_modules()):
        src = tmp_path_factory.mktemp("warps") / f"warps{i}.cu"
        src.write_text("".join(source for _, source, _ in kernels))
        out.append((polypy.compile(str(src)), polypy.load(str(src)), kernels))
    return out


@pytest.mark.parametrize("block", [32, 64, 128])
def test_random_warp_code_runs_in_lockstep(built, block):
    grid = 2
    rng = np.random.default_rng(block)
    for compiled, loaded, kernels in built:
        for seed, source, meanings in kernels:
            x = rng.integers(0, 1 << 32, grid * block, dtype=np.uint64).astype(np.uint32)
            want = _lockstep(meanings, x, block)
            jit = np.zeros_like(x)
            getattr(compiled, f"warp{seed}")[grid, block](jit, x)
            assert np.array_equal(jit, want), f"LLVM JIT, block {block}, kernel:\n{source}"
            if seed % 4 == 0:  # the C backend on a quarter of them (a C++ build each)
                c = run_c(loaded.kernel(f"warp{seed}"), grid, block, {"out": np.zeros_like(x), "in": x})["out"]
                assert np.array_equal(c, want), f"C backend, block {block}, kernel:\n{source}"


def test_the_model_is_not_the_threads_in_turn():
    """The lockstep model differs from running the threads one after another (what polypy did):
    otherwise these tests could not fail."""
    meanings = [("scan", "+", 1)]
    x = np.arange(32, dtype=np.uint32)
    in_turn = x.copy()
    for t in range(1, 32):
        in_turn[t] += in_turn[t - 1]
    assert not np.array_equal(_lockstep(meanings, x, 32), in_turn)
    np.testing.assert_array_equal(_lockstep(meanings, x, 32), x + np.concatenate([[0], x[:-1]]))

"""Property test: random small kernels, lowered and compiled, compute what the emulator computes.

Kernels are generated as IR text from segments that each write their own part of the output:
elementwise integer/float expressions, thread-divergent ifs and loops, shared-memory staging
across a barrier, barriers in block-uniform loops, tree reductions, global and shared atomics,
warp shuffles (also under a warp-uniform condition) and votes -- also run in coarse blocks
(``gpu2cpu.coarsen_blocks``, a forced factor). Every generated kernel is
race-free by construction (the emulator's race detector checks it), so the C backend must agree
bit for bit: float expressions use only exactly rounded operations.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from c_support import assert_same_as_emulator, copy_args, gpu_kernel, need_compiler, run_emulated
from codegen.c import find_compiler
from polypy.driver.library import build_library
from gpu2cpu.coarsen_blocks import plan_coarsening
from polypy.driver.coarsen import block_coarsener
from polypy.driver.pipelines import to_cpu
from polypy.ir import nodes as n
from polypy.ir.visitor import walk

pytestmark = pytest.mark.skipif(find_compiler(False) is None, reason="no C compiler (cc/gcc/clang) on this machine")

MAX_THREADS = 128
SEGMENTS = ("elem", "float", "diverge", "stage", "uniform_loop", "reduce", "atomics", "shuffle", "vote")


class _Gen:
    """Draws one kernel; ``u32()``/``f32()`` draw expressions, the segment methods statements."""

    def __init__(self, data: st.DataObject, warps: bool):
        self.data = data
        self.warps = warps
        self.locals: list[str] = []  # u32 locals of the current segment, usable in expressions
        self.count = 0

    def draw(self, strategy):
        return self.data.draw(strategy)

    def fresh(self, base: str) -> str:
        self.count += 1
        return f"{base}_{self.count}"

    def u32(self, depth: int = 0) -> str:
        leaves = ["b[g]", "(u32)a[g]", "tid", "g", "blockIdx.x", "nt", *self.locals]
        if depth >= 2 or self.draw(st.booleans()):
            if self.draw(st.integers(0, 4)) == 0:
                return f"{self.draw(st.integers(0, 100))}u"
            return self.draw(st.sampled_from(leaves))
        kind = self.draw(st.sampled_from(["bin", "bin", "shift", "divc", "select", "minmax"]))
        x, y = self.u32(depth + 1), self.u32(depth + 1)
        if kind == "bin":
            op = self.draw(st.sampled_from(["+", "-", "*", "&", "|", "^"]))
            return f"({x} {op} {y})"
        if kind == "shift":
            return f"({x} {self.draw(st.sampled_from(['<<', '>>']))} {self.draw(st.integers(0, 31))}u)"
        if kind == "divc":
            return f"({x} {self.draw(st.sampled_from(['/', '%']))} {self.draw(st.integers(1, 9))}u)"
        if kind == "select":
            cmp = self.draw(st.sampled_from(["<", "<=", "==", "!=", ">"]))
            return f"(({x} {cmp} {y}) ? {self.u32(depth + 1)} : {self.u32(depth + 1)})"
        return f"{self.draw(st.sampled_from(['min', 'max']))}({x}, {y})"

    def f32(self, depth: int = 0) -> str:
        leaves = ["f[g]", "(f32)tid", "(f32)a[g]", "0.5f", "3.0f", "-1.25f"]
        if depth >= 2 or self.draw(st.booleans()):
            return self.draw(st.sampled_from(leaves))
        kind = self.draw(st.sampled_from(["+", "-", "*", "/", "fmin", "fmax", "select"]))
        x, y = self.f32(depth + 1), self.f32(depth + 1)
        if kind == "/":
            return f"({x} / {self.draw(st.sampled_from(['2.0f', '0.25f', '-4.0f']))})"
        if kind in ("fmin", "fmax"):
            return f"{kind}({x}, {y})"
        if kind == "select":
            return f"(({x} < {y}) ? {x} : {y})"
        return f"({x} {kind} {y})"

    def cond(self) -> str:
        return f"{self.u32(1)} {self.draw(st.sampled_from(['<', '>', '==', '!=']))} {self.u32(1)}"

    # -- segments: each writes out[k * T + g] (and outf), so segments never conflict
    def segment(self, kind: str, k: int) -> list[str]:
        self.locals = []
        slot = f"{k}u * total + g"
        return getattr(self, "seg_" + kind)(slot)

    def seg_elem(self, slot: str) -> list[str]:
        v = self.fresh("v")
        lines = [f"var {v}: u32 = {self.u32()}"]
        self.locals.append(v)
        return lines + [f"out[{slot}] = {self.u32()}"]

    def seg_float(self, slot: str) -> list[str]:
        return [f"outf[{slot}] = {self.f32()}"]

    def seg_diverge(self, slot: str) -> list[str]:
        acc, j = self.fresh("acc"), self.fresh("j")
        return [
            f"if ({self.cond()}) {{", f"  out[{slot}] = {self.u32()}", f"}} else if ({self.cond()}) {{",
            f"  outf[{slot}] = {self.f32()}", "} else {",
            f"  var {acc}: u32 = 0u",
            f"  for {j}: u32 = 0u to b[g] % 5u step 1u {{", f"    {acc} = {acc} * 3u + {j}", "  }",
            f"  out[{slot}] = {acc}", "}",
        ]

    def seg_stage(self, slot: str) -> list[str]:
        v, t = self.fresh("v"), self.fresh("t")
        shift = self.draw(st.integers(1, MAX_THREADS))
        lines = [f"var {v}: u32 = {self.u32()}", f"sh[tid] = {self.u32()}", "barrier"]
        self.locals.append(v)
        lines += [f"var {t}: u32 = sh[(tid + {shift}u) % nt]", f"out[{slot}] = {t} ^ {self.u32()}", "barrier"]
        return lines

    def seg_uniform_loop(self, slot: str) -> list[str]:
        v, r = self.fresh("v"), self.fresh("r")
        rounds = self.draw(st.integers(1, 3))
        return [
            f"var {v}: u32 = {self.u32()}",
            f"for {r}: i32 = 0 to {rounds} step 1 {{", f"  sh[tid] = {v}", "  barrier",
            f"  {v} = {v} + sh[(tid + 1u) % nt] * (u32)({r} + 1)", "  barrier", "}",
            f"out[{slot}] = {v}",
        ]

    def seg_reduce(self, slot: str) -> list[str]:
        s = self.fresh("s")
        op = self.draw(st.sampled_from(["+", "^", "max"]))
        combine = f"max(sh[tid], sh[tid + {s}])" if op == "max" else f"sh[tid] {op} sh[tid + {s}]"
        return [
            f"sh[tid] = {self.u32()}", "barrier", f"var {s}: u32 = 64u", f"while ({s} > 0u) {{",
            f"  if (tid < {s} && tid + {s} < nt) {{", f"    sh[tid] = {combine}", "  }", "  barrier",
            f"}} update {{\n  {s} = {s} >> 1u\n}}",
            "if (tid == 0u) {", f"  out[{slot}] = sh[0]", "}", "barrier",
        ]

    def seg_atomics(self, slot: str) -> list[str]:
        return [
            f"atomic.add hist[{self.u32()} % 32u], 1u",
            f"atomic.max hist[32u + g % 8u], {self.u32()}",
            "if (tid < 16u) {", "  sh16[tid] = 0u", "}", "barrier",
            f"atomic.add sh16[{self.u32()} % 8u], {self.u32()}",  # add and or on separate slots:
            f"atomic.or sh16[8u + tid % 4u], {self.u32()}",        # together they would not commute
            "barrier", "if (tid < 16u) {", "  atomic.add hist[48u + tid], sh16[tid]", "}", "barrier",
            f"out[{slot}] = 1u",
        ]

    def seg_shuffle(self, slot: str) -> list[str]:
        if not self.warps:
            return self.seg_elem(slot)
        w, o, t = self.fresh("w"), self.fresh("o"), self.fresh("t")
        mode = self.draw(st.sampled_from(["xor", "down", "up", "idx"]))
        arg = f"(u32){o}" if mode != "idx" else f"(u32){o} + tid"
        loop = [
            f"var {o}: i32 = 16", f"while ({o} > 0) {{", f"  var {t}: u32",
            f"  {t} = shfl.{mode}(4294967295u, {w}, {arg}, 32)", f"  {w} = {w} + {t}",
            f"}} update {{\n  {o} = {o} >> 1\n}}",
        ]
        lines = [f"var {w}: u32 = {self.u32()}"]
        if self.draw(st.booleans()):  # under a condition that is uniform per warp only
            lines += [f"if (tid / 32u % 2u == {self.draw(st.integers(0, 1))}u) {{"] + ["  " + x for x in loop] + ["}"]
        else:
            lines += loop
        return lines + [f"out[{slot}] = {w}"]

    def seg_vote(self, slot: str) -> list[str]:
        if not self.warps:
            return self.seg_elem(slot)
        p, r = self.fresh("p"), self.fresh("r")
        mode = self.draw(st.sampled_from(["ballot", "any", "all"]))
        rtype = "u32" if mode == "ballot" else "i32"
        return [f"var {p}: bool = {self.cond()}", f"var {r}: {rtype}", f"{r} = vote.{mode}(4294967295u, {p})",
                f"out[{slot}] = (u32){r}"]


def _kernel_text(gen: _Gen, kinds: list[str]) -> str:
    body = [
        "var tid: u32 = threadIdx.y * blockDim.x + threadIdx.x",
        "var nt: u32 = blockDim.x * blockDim.y",
        "var g: u32 = blockIdx.x * nt + tid",
        "var total: u32 = gridDim.x * nt",
    ]
    for k, kind in enumerate(kinds):
        body += gen.segment(kind, k)
    params = "n: i32, a: const i32*, b: const u32*, f: const f32*, out: u32*, outf: f32*, hist: u32*"
    return (f"kernel fuzz({params}) {{\n  shared sh: u32[{MAX_THREADS}]\n  shared sh16: u32[16]\n"
            + "\n".join("  " + line for line in "\n".join(body).splitlines()) + "\n}")


def _inputs(rng: np.random.Generator, total: int, outputs: int, *, b_max: int = 1 << 32) -> dict:
    """Arguments of a generated kernel: ``total`` threads' inputs, ``outputs`` output slots."""
    return {
        "n": total, "a": rng.integers(-1000, 1000, total).astype(np.int32),
        "b": rng.integers(0, b_max, total, dtype=np.uint64).astype(np.uint32),
        "f": rng.integers(-64, 64, total).astype(np.float32) / np.float32(8),
        "out": np.zeros(outputs, np.uint32), "outf": np.zeros(outputs, np.float32),
        "hist": np.zeros(64, np.uint32),
    }


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_random_kernels_match_the_emulator(data: st.DataObject) -> None:
    need_compiler()
    block = data.draw(st.sampled_from([(32, 1), (64, 1), (96, 1), (16, 4), (48, 1), (8, 5)]))
    grid = data.draw(st.integers(1, 3))
    threads = block[0] * block[1]
    gen = _Gen(data, warps=threads % 32 == 0)
    kinds = data.draw(st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=4))
    text = _kernel_text(gen, kinds)
    kernel = gpu_kernel(text)
    total = grid * threads
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    args = _inputs(rng, total, total * len(kinds))
    try:
        assert_same_as_emulator(kernel, grid, block, args)
    except AssertionError as exc:  # show the kernel that failed
        raise AssertionError(f"{exc}\n--- kernel (grid {grid}, block {block}):\n{text}") from None


@pytest.mark.parametrize("kind", SEGMENTS)
def test_each_segment_kind_alone(kind: str) -> None:
    """One deterministic kernel per segment kind, so that every kind runs on every test run."""
    need_compiler()

    @settings(max_examples=1, deadline=None, database=None, derandomize=True)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        gen = _Gen(data, warps=True)
        text = _kernel_text(gen, [kind])
        rng = np.random.default_rng(7)
        total = 2 * 64
        args = _inputs(rng, total, total, b_max=1000)
        assert_same_as_emulator(gpu_kernel(text), 2, 64, args)

    run()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_random_kernels_in_coarse_blocks_match_the_emulator(data: st.DataObject) -> None:
    """The same kernels with blocks merged into coarse blocks (``gpu2cpu.coarsen_blocks``, a forced
    factor, grids that leave a partial coarse block): still bit for bit the emulator's results,
    or coarsening refused by the plan (and the kernel run as it is)."""
    need_compiler()
    block = data.draw(st.sampled_from([(32, 1), (64, 1), (16, 4), (48, 1), (8, 5)]))
    block3 = (block[0], block[1], 1)
    factor = data.draw(st.integers(2, 3))
    grid = data.draw(st.integers(1, 7))
    threads = block[0] * block[1]
    gen = _Gen(data, warps=threads % 32 == 0)
    kinds = data.draw(st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=4))
    text = _kernel_text(gen, kinds)
    kernel = gpu_kernel(text)
    total = grid * threads
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    args = _inputs(rng, total, total * len(kinds))
    plan = plan_coarsening(kernel, block=block3, factor=factor)
    if any(isinstance(x, (n.Shuffle, n.Vote)) for s in kernel.body for x in walk(s)) and block[1] > 1:
        assert plan.factor == 1 and "warp" in plan.why
    library = build_library([to_cpu(kernel)], block_shapes={kernel.name: [block3]}, specialize=False,
                            coarsen=block_coarsener(n.Module((kernel,)), factor=factor))
    want = run_emulated(kernel, grid, block, args)
    got = copy_args(args)
    library.launch(kernel.name, grid, block, got)
    for name, value in want.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(got[name], value, err_msg=f"{name} (coarsened by {plan.factor}, grid {grid}, "
                                                                    f"block {block}):\n{text}")

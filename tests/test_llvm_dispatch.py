"""The LLVM backend compiles a kernel's versions (``polypy.ir.versions.KernelVersions``) with the
function that chooses one (``codegen.llvm.dispatch``: ``K_select``): its guards lowered from their
one IR definition give the answers Python's ``Guard.holds`` gives on many launches, and launches
through it compute what the C backend's launcher (the same value, printed as C) computes."""
from __future__ import annotations

import numpy as np
import pytest

from c_support import need_compiler
from codegen.llvm import compile_module, emit_llvm_ir
from polypy.driver.pipelines import lower_and_emit
from polypy.driver.source import load
from polypy.ir.versions import (ArraysApart, BlockShapeIs, BoundsUnproven, EnoughCoarseBlocks, Facts, Guard,
                                KernelVersions)
from polypy.passes.versions import build_versions
from test_llvm_support import isolated_cache

pytestmark = pytest.mark.usefixtures("isolated_cache")
assert isolated_cache

SOURCE = """
__global__ void taps(int n, const float* mask, const float* in, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float s = 0.0f;
    for (int k = 0; k < 9; k++) s += mask[k] * in[i + k];
    out[i] = s + (float)blockDim.x;
  }
}
"""


@pytest.fixture(scope="module")
def cpu():
    return lower_and_emit(load(None, text=SOURCE), "cpu")


GUARDS = [
    Guard((BlockShapeIs((32, 8, 1)),)),
    Guard((BlockShapeIs((64, 1, 1)), EnoughCoarseBlocks((4, 1, 1), 8))),
    Guard((EnoughCoarseBlocks((3, 1, 1), 2),)),
    Guard((BlockShapeIs((256, 1, 1)), ArraysApart((("out", "in"), ("out", "mask"))))),
    Guard((BoundsUnproven(("in", "out"), ("in", "mask", "out")),)),
    Guard((BlockShapeIs((64, 1, 1)),)),
]
LAUNCHES = [((g, gy, 1), b, w) for g in (1, 3, 31, 32, 33, 96, 97, 4096) for gy in (1, 7)
            for b in ((32, 8, 1), (64, 1, 1), (256, 1, 1), (8, 8, 4)) for w in (1, 3, 16)]
FACTS = [dict(apart=lambda a, b: True, unproven=frozenset()),
         dict(apart=lambda a, b: (a, b) != ("out", "mask"), unproven=frozenset({"out"})),
         dict(apart=False, unproven=frozenset({"out", "mask"})),
         dict(apart=True, unproven=frozenset({"in"}))]


@pytest.mark.parametrize("default", [True, False])
def test_select_function_agrees_with_the_guards(cpu, default) -> None:
    """``K_select`` of a value whose versions have every kind of guard answers, launch by launch,
    the index of the version ``KernelVersions.select`` picks (the default: ``len``; none: -1)."""
    kernel = cpu.kernel("taps")
    versions = KernelVersions(kernel if default else None, tuple((g, kernel) for g in GUARDS))
    jit = compile_module(cpu, versions=[versions], use_cache=False)
    select = jit.dispatch["taps"]
    assert select.abi.versions[:2] == ("taps__b32x8x1", "taps__b64x1x1_c4x1x1")
    seen = set()
    for grid, block, workers in LAUNCHES:
        for known in FACTS:
            facts = Facts(grid=grid, block=block, workers=workers, **known)
            guard, _ = versions.select(facts)
            want = len(GUARDS) if guard is None and default else -1 if guard is None else GUARDS.index(guard)
            assert select.index(facts) == want, (grid, block, workers, known)
            seen.add(want)
    assert seen == set(range(len(GUARDS))) | {len(GUARDS) if default else -1}


def test_llvm_text_holds_each_version_and_the_select_function(cpu) -> None:
    versions = build_versions(cpu.kernel("taps"), shapes=[(128, 1, 1)])
    text = emit_llvm_ir(cpu, versions=[versions])
    for name in ("taps__b128x1x1_r_worker", "taps__b128x1x1_worker", "taps_worker", "taps_select"):
        assert f'define i32 @"{name}"' in text
    twin = text.split('define i32 @"taps__b128x1x1_r_worker"')[1].split("\n")[0]
    assert "noalias" in twin  # the restrict pointer of the twin for arrays apart
    assert emit_llvm_ir(cpu) == emit_llvm_ir(cpu, versions=[])  # no versions: the module as it was


def test_launches_through_the_dispatch_compute_what_the_c_launcher_computes(cpu) -> None:
    """The same value compiled by LLVM (launched through ``K_select``) and by the C backend (its
    launcher): every launch shape -- each shape's version, its twin for arrays apart, the default
    -- gives the same arrays; the version chosen is the one ``KernelVersions.select`` names."""
    need_compiler(cpp=False)
    from polypy.driver.library import build_library

    kernel = cpu.kernel("taps")
    shapes = [(128, 1, 1), (64, 1, 1)]
    versions = build_versions(kernel, shapes=shapes)
    jit = compile_module(cpu, versions=[versions], use_cache=False)
    lib = build_library([kernel], block_shapes={"taps": shapes}, specialize=False)
    rng = np.random.default_rng(3)
    n = 1000
    mask = rng.random(9, dtype=np.float32)
    x = rng.random(n + 9, dtype=np.float32)
    for block in (128, 64, 32):
        grid = -(-n // block)
        for apart in (True, False):
            if apart:
                out_c, out_llvm = np.zeros(n, np.float32), np.zeros(n, np.float32)
                masks = (mask, mask)
            else:  # `mask` inside the output array, past what the kernel writes: not apart
                out_c, out_llvm = np.zeros(n + 9, np.float32), np.zeros(n + 9, np.float32)
                out_c[n:] = mask
                out_llvm[n:] = mask
                masks = (out_c[n:], out_llvm[n:])
            lib.launch("taps", grid, block, (n, masks[0], x, out_c))
            arrays = {"mask": masks[1], "in": x, "out": out_llvm}
            facts = Facts(grid=(grid, 1, 1), block=(block, 1, 1), workers=2,
                          apart=lambda a, b: not np.may_share_memory(arrays[a], arrays[b]))
            guard, _ = versions.select(facts)
            chosen = jit.dispatch["taps"].select(facts)
            assert chosen.name == ("taps" if guard is None else f"taps__{guard.suffix()}")
            assert (guard is not None and guard.find(ArraysApart) is not None) == (apart and block != 32)
            jit.dispatch["taps"].run((grid, 1, 1), (block, 1, 1), 0, arrays,
                                     {"n": np.int32(n)}, threads=2)
            np.testing.assert_array_equal(out_llvm, out_c)
            np.testing.assert_allclose(out_c[:n], sum(mask[j] * x[j:j + n] for j in range(9)) + block, rtol=1e-5)


def test_a_whole_programs_llvm_has_the_versions_of_its_c_translation(tmp_path) -> None:
    """``--emit llvm`` of a whole program compiles the value its C translation prints: the same
    versions (here one block shape's, its twin for arrays apart, no default: every launch has the
    shape) and the function choosing one."""
    import re

    program = load(None, text=SOURCE + """
int main() {
  float *m, *x, *y;
  cudaMalloc(&m, 9 * sizeof(float));
  cudaMalloc(&x, 1033 * sizeof(float));
  cudaMalloc(&y, 1024 * sizeof(float));
  taps<<<8, 128>>>(1024, m, x, y);
  cudaDeviceSynchronize();
  return 0;
}
""")
    llvm = lower_and_emit(program, "llvm", optimize=False)
    cpp = lower_and_emit(program, "cpp")
    in_llvm = set(re.findall(r'define i32 @"taps__(\w+)_worker"', llvm))
    in_c = set(re.findall(r"void taps_launch_(\w+)\(", cpp))
    assert in_llvm == in_c == {"b128x1x1", "b128x1x1_r"}
    assert 'define i32 @"taps_select"' in llvm and 'define i32 @"taps_worker"' not in llvm

"""Versions of accessor kernels for unit last strides (``version-unit-strides``,
``polypy.passes.unit_strides``): the versions made and their guards, and each backend's launches
taking the unit-stride version exactly when every accessor's last stride is 1, with results equal
for contiguous tensors and for transposed and sliced views (the emulator, the LLVM JIT through the
Python API and through ``K_select``, the C backend's launcher)."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import need_compiler
from polypy.ir.printer import print_kernel
from polypy.ir.types import I32
from polypy.ir.versions import BlockShapeIs, Facts, Guard, UnitStrides
from polypy.passes.unit_strides import last_strides, specialize_unit_strides
from polypy.passes.versions import build_versions, version_unit_strides
from polypy.sources import SystemIncludeDir
from test_torch_accessors import PRELUDE, TORCH_INCLUDE, _accessor

SOURCE = PRELUDE + r"""
__global__ void gate(const Acc32<float, 2> x, const Acc32<float, 2> h, Acc32<float, 2> out, float a) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int r = blockIdx.y;
  if (c < x.size(1)) out[r][c] = a * x[r][c] + expf(h[r][c]);
}

__global__ void plain(int n, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
"""
BLOCK = (64, 1, 1)
ROWS, COLS = 3, 150
UNIT = UnitStrides((("x_stride1", I32), ("h_stride1", I32), ("out_stride1", I32)))


@pytest.fixture(scope="module")
def mod(tmp_path_factory):
    path = tmp_path_factory.mktemp("unit_strides") / "gate.cu"
    path.write_text(SOURCE)
    return polypy.compile(path, include_dirs=(SystemIncludeDir(str(TORCH_INCLUDE)),))


def _inputs(layout: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x, h, out of shape (ROWS, COLS): contiguous, or views whose last stride is not 1."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    h = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    out = np.zeros((ROWS, COLS), np.float32)
    if layout == "transposed x":
        x = np.ascontiguousarray(x.T).T  # strides (1, ROWS)
    elif layout == "sliced h":
        wide = np.zeros((ROWS, 2 * COLS), np.float32)
        wide[:, ::2] = h
        h = wide[:, ::2]  # last stride 2
    elif layout == "transposed out":
        out = np.zeros((COLS, ROWS), np.float32).T
    return x, h, out


def _args(x, h, out) -> dict:
    return {**_accessor("x", x), **_accessor("h", h), **_accessor("out", out), "a": np.float32(0.75)}


LAYOUTS = ["contiguous", "transposed x", "sliced h", "transposed out"]
GRID = ((COLS + BLOCK[0] - 1) // BLOCK[0], ROWS, 1)


def test_versions_for_unit_last_strides(mod) -> None:
    k = mod.gate
    versions = k.versions(BLOCK)
    assert [g for g, _ in versions.versions] == [Guard((BlockShapeIs(BLOCK), UNIT)), Guard((BlockShapeIs(BLOCK),)),
                                                 Guard((UNIT,))]
    assert [g.suffix() for g, _ in versions.versions] == ["b64x1x1_s1", "b64x1x1", "_s1"]
    assert UNIT.expr() == Guard((UNIT,)).expr()
    assert versions.versions[0][0].text().endswith("(x_stride1 == 1 && h_stride1 == 1 && out_stride1 == 1)")
    unit, shape, generic = (print_kernel(kv) for _, kv in versions.versions)
    for name in ("x_stride1 *", "h_stride1 *", "out_stride1 *"):
        assert name in shape and name not in unit and name not in generic.split("stage cpu")[1], name
    assert "x_stride0 *" in unit  # only the last stride is 1
    assert last_strides(k.cpu) == UNIT.strides
    made = versions.versions[0][1]
    assert last_strides(made) == () and specialize_unit_strides(made) is made  # nothing left to do
    assert version_unit_strides(versions) is versions  # made already
    # a kernel of plain pointers has no such version; without block shapes, only the default's
    plain = build_versions(mod.plain.cpu, shapes=[BLOCK])
    assert [g.suffix() for g, _ in plain.versions] == ["b64x1x1"]
    assert [g.suffix() for g, _ in build_versions(k.cpu).versions] == ["_s1"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_api_takes_the_unit_stride_version_only_for_unit_strides(mod, layout) -> None:
    k = mod.gate
    x, h, out = _inputs(layout)
    args = _args(x, h, out)
    ints = {name: int(v) for name, v in args.items() if isinstance(v, (int, np.integer))}
    guard, _ = k.select(GRID, BLOCK, None, arguments=ints)
    assert (guard.find(UnitStrides) is not None) == (layout == "contiguous"), guard
    k[GRID, BLOCK](**args)
    want = np.float32(0.75) * x + np.exp(h)
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=1e-6)
    # the same values, bit for bit, as the generic layout's and the emulator's
    x2, h2, out2 = _inputs("transposed out" if layout == "contiguous" else "contiguous")
    k[GRID, BLOCK](**_args(x2, h2, out2))
    np.testing.assert_array_equal(out, out2)
    x3, h3, out3 = _inputs(layout)
    k.emulate[GRID, BLOCK](**_args(x3, h3, out3))
    np.testing.assert_allclose(out3, out, rtol=2e-6, atol=1e-6)
    if layout == "contiguous":
        assert (BLOCK, "b64x1x1_s1") in k.compiled_versions


def test_llvm_select_function_reads_the_strides(mod) -> None:
    from codegen.llvm import compile_module

    k = mod.gate
    versions = k.versions(BLOCK)
    jit = compile_module(k.module.cpu, versions=[versions], use_cache=False)
    select = jit.dispatch["gate"]
    for block in (BLOCK, (32, 1, 1)):
        for layout in LAYOUTS:
            args = _args(*_inputs(layout))
            ints = {name: int(v) for name, v in args.items() if isinstance(v, (int, np.integer))}
            facts = Facts(grid=GRID, block=block, workers=2, arguments=ints)
            guard, _ = versions.select(facts)
            guards = [g for g, _ in versions.versions]
            assert select.index(facts) == (len(guards) if guard is None else guards.index(guard))
            found = guard or Guard()
            assert (found.find(UnitStrides) is not None) == (layout == "contiguous")
            assert (found.find(BlockShapeIs) is not None) == (block == BLOCK)
    x, h, out = _inputs("sliced h")
    args = _args(x, h, out)
    arrays = {name: v for name, v in args.items() if isinstance(v, np.ndarray)}
    select.run(GRID, BLOCK, 0, arrays, {name: v for name, v in args.items() if name not in arrays}, threads=2)
    np.testing.assert_allclose(out, np.float32(0.75) * x + np.exp(h), rtol=2e-6, atol=1e-6)


def test_c_launcher_takes_the_unit_stride_version_only_for_unit_strides(mod) -> None:
    import codegen.c
    from polypy.driver.library import build_library, library_versions

    kernel = mod.gate.cpu
    made = library_versions([kernel], block_shapes={"gate": [BLOCK]})
    text = codegen.c.emit_kernels([kernel], versions=made)
    assert "gate_launch_b64x1x1_s1(" in text and "gate_launch__s1(" in text and "gate_launch_generic(" in text
    assert "x_stride1 == 1" in text
    need_compiler(cpp=False)
    lib = build_library([kernel], block_shapes={"gate": [BLOCK]}, specialize=False)  # (32, 1, 1): the default's
    results = []
    for layout in LAYOUTS:
        for block in (BLOCK, (32, 1, 1)):
            x, h, out = _inputs(layout)
            grid = ((COLS + block[0] - 1) // block[0], ROWS, 1)
            lib.launch("gate", grid, block, _args(x, h, out))
            np.testing.assert_allclose(out, np.float32(0.75) * x + np.exp(h), rtol=2e-6, atol=1e-6)
            results.append(np.array(out))
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


# ---- the gradient's launches (polypy.grad's tap launches, polypy.driver.gathered) and
# ---- polypy.distributed's block ranges select the unit-stride version as a local launch does

MIX = PRELUDE + r"""
__global__ void mix(const double* w, const Acc64<double, 2> a, double* out, int n) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int r = blockIdx.y;
  if (c < n - 1) out[r * n + c] = (w[r * n + c] - 2.0 * w[r * n + c + 1]) * a[r][c];
}
"""


@pytest.fixture(scope="module")
def mix(tmp_path_factory):
    path = tmp_path_factory.mktemp("unit_strides_mix") / "mix.cu"
    path.write_text(MIX)
    return polypy.compile(path, include_dirs=(SystemIncludeDir(str(TORCH_INCLUDE)),)).mix


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_gathered_taps_take_the_unit_stride_version(mix, layout) -> None:
    from polypy.driver.gathered import PhasedGradient

    rows, n = ROWS, 150
    rng = np.random.default_rng(7)
    w = rng.standard_normal(rows * n)
    a = rng.standard_normal((rows, n)) if layout == "contiguous" else np.ascontiguousarray(
        rng.standard_normal((n, rows))).T
    d_out = rng.standard_normal(rows * n)
    g = polypy.grad(mix, wrt=["w"])
    assert isinstance(g, PhasedGradient) and len(g.taps) == 1
    # the tap and the rest have the forward's accessor, so their versions for unit strides
    for k in (g.taps[0], g.rest.compiled):
        assert [s.suffix() for s, _ in k.versions(BLOCK).versions] == ["b64x1x1_s1", "b64x1x1", "_s1"]
    d_w = np.zeros_like(w)
    grid = ((n + BLOCK[0] - 1) // BLOCK[0], rows, 1)
    g[grid, BLOCK](w=w, d_w=d_w, **_accessor("a", a), out=np.zeros(rows * n), d_out=d_out.copy(), n=np.int32(n))
    unit = (BLOCK, "b64x1x1_s1")
    assert (unit in g.taps[0].compiled_versions) == (layout == "contiguous")
    assert (unit in g.rest.compiled.compiled_versions) == (layout == "contiguous")
    # d out[r, c] / d w[r, c] = a[r, c], d out[r, c - 1] / d w[r, c] = -2 a[r, c - 1] (c < n - 1 written)
    want = np.zeros((rows, n))
    dy = d_out.reshape(rows, n)
    want[:, :n - 1] += dy[:, :n - 1] * a[:, :n - 1]
    want[:, 1:n] += -2.0 * dy[:, :n - 1] * a[:, :n - 1]
    np.testing.assert_allclose(d_w.reshape(rows, n), want, rtol=1e-14, atol=1e-14)


def test_distributed_block_ranges_take_the_unit_stride_version(tmp_path) -> None:
    from polypy.distributed import block_range_code
    from polypy.poly.block_footprint import BlockRange

    path = tmp_path / "gate.cu"
    path.write_text(SOURCE)
    k = polypy.compile(path, include_dirs=(SystemIncludeDir(str(TORCH_INCLUDE)),), coarsen=4).gate
    cols = 40 * BLOCK[0]
    rows, grid = 2, (40, 1, 1)  # ranges along x: one row of blocks (a second row of data: strides)
    for layout in ("contiguous", "transposed x"):
        rng = np.random.default_rng(11)
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        if layout != "contiguous":
            x = np.ascontiguousarray(x.T).T
        h = rng.standard_normal((rows, cols)).astype(np.float32)
        out = np.zeros((rows, cols), np.float32)
        args = _args(x, h, out)
        ints = {name: int(v) for name, v in args.items() if isinstance(v, (int, np.integer))}
        arrays = {name: v for name, v in args.items() if isinstance(v, np.ndarray)}
        scalars = {name: v for name, v in args.items() if name not in arrays}
        unit = layout == "contiguous"
        # aligned to coarse blocks: the coarse code, for unit strides its unit-stride version
        before = set(k.compiled_versions)
        code, ids = block_range_code(k, grid, BLOCK, BlockRange(0, 0, 20), arguments=ints)
        assert code.abi.coarsen == (4, 1, 1) and ids == (0, 5)
        code.run(grid, BLOCK, 0, arrays, scalars, threads=1, blocks=ids)
        assert set(k.compiled_versions) - before == {(BLOCK, "b64x1x1_c4x1x1_s1" if unit else "b64x1x1_c4x1x1")}
        # a range that splits a coarse block: single blocks, for unit strides still unit-stride
        before = set(k.compiled_versions)
        for lo, hi in ((20, 21), (21, 40)):
            code, ids = block_range_code(k, grid, BLOCK, BlockRange(0, lo, hi), arguments=ints)
            assert code.abi.coarsen == (1, 1, 1) and ids == (lo, hi)
            code.run(grid, BLOCK, 0, arrays, scalars, threads=1, blocks=ids)
        assert set(k.compiled_versions) - before == {(BLOCK, "b64x1x1_s1" if unit else "b64x1x1")}
        np.testing.assert_allclose(out[0], np.float32(0.75) * x[0] + np.exp(h[0]), rtol=2e-6, atol=1e-6)
        assert not out[1].any()

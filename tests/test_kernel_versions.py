"""Kernel versions as an IR value (``polypy.ir.versions.KernelVersions``), made by the registered
passes of ``polypy.passes.versions`` through ``run_pipeline``: the value built for a few kernels
(guards, order, count), its dump, a version's selection, and each guard's C text (printed by the C
backend) and Python evaluation (the JIT's) agreeing on launch shapes."""
from __future__ import annotations

import io
import subprocess

import pytest

from c_support import need_compiler
from codegen.c import find_compiler
from polypy.driver.library import emit_kernels
from codegen.c.kernel import Options
from codegen.c.versions import guard_text
from polypy.driver.cli import main
from polypy.driver.coarsen import block_coarsener
from polypy.driver.pipelines import PASSES, lower_and_emit, make_pass
from polypy.driver.source import load
from polypy.ir.versions import (ArraysApart, BlockShapeIs, EnoughCoarseBlocks, Facts, GridWithin, Guard,
                                KernelVersions, print_versions)
from polypy.passes import run_pipeline
from polypy.passes.versions import build_versions, version_passes

SOURCE = """
__global__ void scale(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}

__global__ void taps(int n, const float* mask, const float* in, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float s = 0.0f;
    for (int k = 0; k < 9; k++) s += mask[k] * in[i + k];
    out[i] = s;
  }
}
"""


@pytest.fixture(scope="module")
def module():
    return load(None, text=SOURCE)


@pytest.fixture(scope="module")
def cpu(module):
    return lower_and_emit(module, "cpu")


def test_block_shapes_and_default(cpu) -> None:
    kernel = cpu.kernel("scale")
    versions = build_versions(kernel, shapes=[(256, 1, 1), (128, 1, 1), (256, 1, 1)])
    assert versions.default is kernel and versions.name == "scale"
    assert [g for g, _ in versions.versions] == [Guard((BlockShapeIs((256, 1, 1)),)),
                                                 Guard((BlockShapeIs((128, 1, 1)),))]
    assert [g.suffix() for g, _ in versions.versions] == ["b256x1x1", "b128x1x1"]
    assert all(k.stage == "cpu" and k is not kernel for _, k in versions.versions)
    # no shapes: the kernel alone; no default: a whole program's promise
    assert build_versions(kernel) == KernelVersions(kernel)
    assert build_versions(kernel, shapes=[(64, 1, 1)], default=False).default is None


def test_coarse_versions_come_first_and_are_selected_by_the_grid(module, cpu) -> None:
    kernel = cpu.kernel("scale")
    versions = build_versions(kernel, shapes=[(64, 1, 1)], coarsen=block_coarsener(module))
    (guard_c, coarse), (guard_f, fine) = versions.versions
    enough = guard_c.find(EnoughCoarseBlocks)
    assert guard_c.conditions[0] == BlockShapeIs((64, 1, 1)) and enough is not None
    assert enough.factor == coarse.coarsen and coarse.coarsen[0] > 1 and enough.blocks_per_worker == 8
    assert guard_f == Guard((BlockShapeIs((64, 1, 1)),))
    assert guard_c.suffix() == f"b64x1x1_c{'x'.join(map(str, coarse.coarsen))}"
    f = coarse.coarsen[0]
    many = Facts(grid=(8 * 4 * f, 1, 1), block=(64, 1, 1), workers=4)
    few = Facts(grid=(8 * 4 * f - f, 1, 1), block=(64, 1, 1), workers=4)
    other = Facts(grid=(10_000, 1, 1), block=(32, 1, 1), workers=4)
    assert versions.select(many) == (guard_c, coarse)
    assert versions.select(few) == (guard_f, fine)
    assert versions.select(other) == (None, kernel)


def test_arrays_apart_twins(cpu) -> None:
    kernel = cpu.kernel("taps")
    versions = build_versions(kernel, shapes=[(128, 1, 1)])
    guards = [g for g, _ in versions.versions]
    apart = ArraysApart((("out", "mask"), ("out", "in")))
    assert guards == [Guard((BlockShapeIs((128, 1, 1)), apart)), Guard((BlockShapeIs((128, 1, 1)),))]
    twin, fine = (k for _, k in versions.versions)
    assert {p.name for p in twin.params if getattr(p.ptype, "restrict", False)} == {"out"}
    assert twin.body == fine.body
    assert versions.select(Facts(block=(128, 1, 1), apart=lambda a, b: True))[1] is twin
    assert versions.select(Facts(block=(128, 1, 1), apart=lambda a, b: (a, b) != ("out", "in")))[1] is fine
    # bounds-checked code gets no twin
    assert len(build_versions(kernel, shapes=[(128, 1, 1)], check_bounds=True).versions) == 1
    # the C launcher prints the same guard with the launcher's argument names
    text = emit_kernels([kernel], block_shapes={"taps": [(128, 1, 1)]})
    assert "if (polypy_rt_apart" not in text.split("taps_launch_apart(")[0].split("void taps_launch(")[-1]


def test_version_passes_are_registered_and_dumped(cpu) -> None:
    steps = version_passes(shapes=[(256, 1, 1)], default=False)
    assert [p.name for p in steps] == ["version-block-shapes", "version-coarse-blocks", "version-arrays-apart",
                                       "version-without-default", "version-unit-strides"]
    assert all(p.name in PASSES for p in steps)
    out = io.StringIO()
    versions = run_pipeline(KernelVersions(cpu.kernel("scale")), steps, print_after="version-block-shapes",
                            stream=out)
    text = out.getvalue()
    assert text.startswith("// ----- IR after version-block-shapes (scale)\n// versions of scale: 1 guarded, and a default")
    assert "// when blockDim.x == 256u && blockDim.y == 1u && blockDim.z == 1u  (version b256x1x1)" in text
    assert "// otherwise  (version generic)" in text
    assert versions.default is None
    assert "no version (a launch of another block shape aborts)" in print_versions(versions)


def test_dump_after_a_version_pass_in_translate(tmp_path, capsys) -> None:
    src = tmp_path / "p.cu"
    src.write_text(SOURCE + """
int main() {
  float *x, *y;
  cudaMalloc(&x, 512 * sizeof(float));
  cudaMalloc(&y, 512 * sizeof(float));
  scale<<<2, 256>>>(512, 2.0f, x, y);
  cudaDeviceSynchronize();
  return 0;
}
""")
    assert main(["translate", str(src), "--dump-after", "version-without-default", "-o", str(tmp_path / "p.cpp")]) == 0
    err = capsys.readouterr().err
    assert "// ----- IR after version-without-default (scale)" in err
    assert "// when blockDim.x == 256u && blockDim.y == 1u && blockDim.z == 1u  (version b256x1x1)" in err
    assert "// otherwise: no version" in err  # every launch of scale has that shape
    # the launcher has no generic version to fall back on
    assert "scale_launch_generic" not in (tmp_path / "p.cpp").read_text()


def test_dump_after_names_every_version_pass_even_one_that_did_not_run(tmp_path, capsys) -> None:
    """--dump-after of the grid bounds prints the versions with their grid guard; of a registered
    pass that translate does not run (bounds-checked versions are the API's), a line saying so."""
    src = tmp_path / "p.cu"
    src.write_text(SOURCE + """
int main() {
  float *x, *y;
  cudaMalloc(&x, 512 * sizeof(float));
  cudaMalloc(&y, 512 * sizeof(float));
  scale<<<2, 256>>>(512, 2.0f, x, y);
  cudaDeviceSynchronize();
  return 0;
}
""")
    names = "version-grid-bounds,version-bounds-checks,specialize-block-shape"
    assert main(["translate", str(src), "--dump-after", names, "-o", str(tmp_path / "p.cpp")]) == 0
    err = capsys.readouterr().err
    assert "// ----- IR after version-grid-bounds (scale)" in err
    assert ("// when blockDim.x == 256u && blockDim.y == 1u && blockDim.z == 1u && (gridDim.x <= 2u && "
            "gridDim.y <= 1u && gridDim.z <= 1u)  (version b256x1x1)") in err
    assert "// ----- IR after specialize-block-shape (scale)" in err
    assert "// ----- no IR after version-bounds-checks: the pass did not run (the Python API makes" in err
    assert "no IR after version-grid-bounds" not in err


GUARDS = [
    Guard((BlockShapeIs((32, 8, 1)),)),
    Guard((BlockShapeIs((64, 1, 1)), GridWithin((64, 2, 1)))),
    Guard((BlockShapeIs((64, 1, 1)), EnoughCoarseBlocks((4, 1, 1), 8))),
    Guard((EnoughCoarseBlocks((3, 1, 1), 2),)),
    Guard((BlockShapeIs((256, 1, 1)), EnoughCoarseBlocks((32, 1, 1), 8))),
]
LAUNCHES = [((g, gy, 1), b, w) for g in (1, 3, 31, 32, 33, 64, 95, 96, 97, 1000, 4096) for gy in (1, 2, 7)
            for b in ((32, 8, 1), (64, 1, 1), (256, 1, 1), (8, 8, 4)) for w in (1, 2, 3, 16)]


def test_guard_c_text_and_python_evaluation_agree(tmp_path) -> None:
    """Each guard's C text (the launcher's) compiled into a program that prints its value over many
    launches, against ``Guard.holds`` (the JIT's) on the same launches."""
    need_compiler(cpp=True)
    options = Options(cpp=True, threads=0)
    checks = "\n".join(f"  std::printf(\"%d\", ({guard_text(g, options)}) ? 1 : 0);" for g in GUARDS)
    rows = ",\n".join(f"  {{{g[0]}u, {g[1]}u, {g[2]}u, {b[0]}u, {b[1]}u, {b[2]}u, {w}}}" for g, b, w in LAUNCHES)
    program = f"""#include <cstdio>
struct dim3 {{ unsigned x, y, z; }};
static int workers;
#define POLYPY_WORKERS() workers
static const unsigned launches[][7] = {{
{rows}
}};
int main() {{
  for (const auto& l : launches) {{
    dim3 grid = {{l[0], l[1], l[2]}}, block = {{l[3], l[4], l[5]}};
    workers = (int)l[6];
{checks}
    std::printf("\\n");
  }}
  return 0;
}}
"""
    (tmp_path / "guards.cpp").write_text(program)
    exe = tmp_path / "guards"
    subprocess.run([find_compiler(True), "-O1", str(tmp_path / "guards.cpp"), "-o", str(exe)], check=True)
    lines = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    expected = ["".join("1" if g.holds(Facts(grid=grid, block=block, workers=w)) else "0" for g in GUARDS)
                for grid, block, w in LAUNCHES]
    assert lines == expected
    assert all({line[i] for line in lines} == {"0", "1"} for i in range(len(GUARDS)))


def test_api_selects_versions_by_their_guards() -> None:
    """The Python API takes its versions from the same stage and evaluates their guards per launch:
    the twin for arrays apart (LLVM ``noalias``) only where the arguments share no memory, the
    coarse version only where the grid has enough coarse blocks; results as NumPy's."""
    import numpy as np

    import polypy

    rng = np.random.default_rng(7)
    n = 4096
    mask = rng.random(9, dtype=np.float32)
    x = rng.random(n + 9, dtype=np.float32)
    ref = sum(mask[j] * x[j:j + n] for j in range(9))
    k = polypy.compile(None, text=SOURCE, threads=2, coarsen=False).taps
    out = np.zeros(n, np.float32)
    k[n // 128, 128](n, mask, x, out)
    np.testing.assert_allclose(out, ref, rtol=1e-5)
    assert ((128, 1, 1), "b128x1x1_r") in k.compiled_versions
    guard, twin = k.select((n // 128, 1, 1), (128, 1, 1), {"mask": mask, "in": x, "out": out})
    assert guard.suffix() == "b128x1x1_r" and guard.find(ArraysApart) is not None
    # `out` is one array with `mask` inside it: not apart, the plain version runs
    buf = np.zeros(n + 9, np.float32)
    buf[n:] = mask
    arrays = {"mask": buf[n:], "in": x, "out": buf}
    assert k.select((n // 128, 1, 1), (128, 1, 1), arrays)[0].suffix() == "b128x1x1"
    k[n // 128, 128](n, buf[n:], x, buf)
    np.testing.assert_allclose(buf[:n], ref, rtol=1e-5)
    # coarse blocks of a forced factor: every launch of the shape; of the model's: enough blocks only
    forced = polypy.compile(None, text=SOURCE, threads=2, coarsen=4).scale
    assert forced.select((3, 1, 1), (64, 1, 1))[0].suffix() == "b64x1x1_c4x1x1"
    model = polypy.compile(None, text=SOURCE, threads=2).scale
    few, many = (2, 1, 1), (4096, 1, 1)
    assert model.select(few, (64, 1, 1))[0].suffix() == "b64x1x1"
    factor = model.coarsened[(64, 1, 1)]
    assert factor > 1 and model.select(many, (64, 1, 1))[0].suffix() == f"b64x1x1_c{factor}x1x1"
    y = np.zeros(64 * 4096, np.float32)
    xs = rng.random(64 * 4096, dtype=np.float32)
    model[many, 64](64 * 4096, 2.0, xs, y)
    np.testing.assert_allclose(y, 2 * xs, rtol=1e-6)
    assert ((64, 1, 1), f"b64x1x1_c{factor}x1x1") in model.compiled_versions


def test_bounds_checked_versions_are_guards_of_the_value(module, cpu) -> None:
    """``version-bounds-checks``: before every version, its bounds-checked kernel for launches that
    leave exactly some of the named arrays unproven; idempotent, printed by the dump, kept in front
    by the other version passes, the checks printed and parsed back with the kernel."""
    from polypy.ir.parser import parse_module
    from polypy.ir.printer import print_kernel
    from polypy.ir.verifier import verify_kernel
    from polypy.ir.versions import BoundsUnproven
    from polypy.passes.versions import version_bounds_checks, version_coarse_blocks

    kernel = cpu.kernel("scale")
    plain = build_versions(kernel, shapes=[(64, 1, 1)])
    versions = run_pipeline(plain, (make_pass("version-bounds-checks", arrays=("y",), among=("x", "y")),))
    (g_fine, k_fine), (g_default, k_default), (g_plain, k_plain) = versions.versions
    unproven = BoundsUnproven(("y",), ("x", "y"))
    assert g_fine == Guard((BlockShapeIs((64, 1, 1)), unproven)) and g_default == Guard((unproven,))
    assert g_plain == plain.versions[0][0] and k_plain is plain.versions[0][1] and versions.default is kernel
    assert k_fine.bounds_checks == ("y",) and k_fine.body == k_plain.body and k_default.bounds_checks == ("y",)
    assert k_default.body == kernel.body and g_fine.suffix() == "b64x1x1_ky"
    # the one definition: some of `arrays` unproven, none of the others
    assert g_fine.text() == ("blockDim.x == 64u && blockDim.y == 1u && blockDim.z == 1u && "
                             "(polypy_rt_unproven(y) && !polypy_rt_unproven(x))")
    shape = (64, 1, 1)
    assert versions.select(Facts(block=shape, unproven=frozenset({"y"}))) == (g_fine, k_fine)
    assert versions.select(Facts(block=shape, unproven=frozenset())) == (g_plain, k_plain)
    assert versions.select(Facts(block=(32, 1, 1), unproven=frozenset({"y"}))) == (g_default, k_default)
    assert versions.select(Facts(block=shape, unproven=frozenset({"x", "y"})))[0] == g_plain  # another set: not this one
    # idempotent; a second set comes after the first
    assert version_bounds_checks(versions, arrays=("y",), among=("x", "y")) is versions
    both = version_bounds_checks(versions, arrays=("x", "y"), among=("x", "y"))
    assert [g.suffix() for g, _ in both.versions] == ["b64x1x1_ky", "_ky", "b64x1x1_kx_y", "_kx_y", "b64x1x1"]
    assert both.select(Facts(block=shape, unproven=frozenset({"x", "y"})))[1].bounds_checks == ("x", "y")
    # a coarse version added later goes after the checked ones; checking again adds its checked twin first
    coarse = version_coarse_blocks(versions, coarsen=block_coarsener(module))
    assert [g.find(BoundsUnproven) is not None for g, _ in coarse.versions] == [True, True, False, False]
    again = version_bounds_checks(coarse, arrays=("y",), among=("x", "y"))
    suffixes = [g.suffix() for g, _ in again.versions]
    factor = "x".join(map(str, coarse.versions[2][1].coarsen))
    assert suffixes == [f"b64x1x1_c{factor}_ky", "b64x1x1_ky", "_ky", f"b64x1x1_c{factor}", "b64x1x1"]
    assert again.versions[1][1] is k_fine and again.versions[0][1].coarsen == coarse.versions[2][1].coarsen
    # the dump and the kernel's text: checks printed, parsed back, verified
    text = print_versions(versions)
    assert "// when blockDim.x == 64u && blockDim.y == 1u && blockDim.z == 1u && (polypy_rt_unproven(y) && " \
           "!polypy_rt_unproven(x))  (version b64x1x1_ky)" in text
    assert "stage cpu checks (y) {" in print_kernel(k_fine)
    parsed = parse_module(print_kernel(k_fine)).kernels[0]
    assert parsed.bounds_checks == ("y",) and parsed.body == k_fine.body and parsed.params == k_fine.params
    import dataclasses

    from polypy.errors import InternalError

    with pytest.raises(InternalError, match="bounds checks of 'z', which is no array"):
        verify_kernel(dataclasses.replace(k_fine, bounds_checks=("z",)))


def test_api_runs_the_bounds_checked_version_of_the_value() -> None:
    """A launch isl cannot prove in bounds runs the value's bounds-checked version (its guard
    holding for the launch's unproven arrays), compiled from the kernel's checks."""
    import numpy as np

    import polypy
    from polypy.ir.versions import BoundsUnproven

    src = """
__global__ void guard(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i * i < n * n) out[i] = 1;
}
"""
    k = polypy.compile(None, text=src, threads=2).guard
    out = np.zeros(16, np.int32)
    k[2, 256](out, 16)  # in bounds, which isl cannot tell
    assert (out == 1).all()
    guard, kernel = k.versions((256, 1, 1)).versions[0]
    assert guard.find(BoundsUnproven) == BoundsUnproven(("out",), ("out",)) and kernel.bounds_checks == ("out",)
    assert ((256, 1, 1), "b256x1x1_kout") in k.compiled_versions
    assert k.bounds_checked == (((256, 1, 1), frozenset({"out"})),)
    with pytest.raises(polypy.UserError, match="kernel guard wrote index .* of array 'out' of 16 elements"):
        k[2, 256](out, 512)
    # the generic code's value (no specialization): its own checked version
    plain = polypy.compile(None, text=src, threads=2, specialize=False).guard
    plain[2, 256](np.zeros(16, np.int32), 16)
    assert plain.bounds_checked == ((None, frozenset({"out"})),)
    assert (None, "_kout") in plain.compiled_versions


def test_a_librarys_versions_come_from_the_stage(cpu) -> None:
    """A kernel library (``polypy.driver.library``) compiles the values of the versions stage: the
    shapes known in advance (``library_versions``, printed by ``codegen.c`` as given) and, on the
    first launch with another shape, that shape's value from the same stage (its twin for arrays
    apart included); results as NumPy's."""
    import numpy as np

    import codegen.c
    from polypy.driver.library import build_library, library_versions

    kernel = cpu.kernel("taps")
    made = library_versions([kernel, cpu.kernel("scale")], block_shapes={"taps": [(128, 1, 1)]})
    assert list(made) == ["taps"] and made["taps"] == build_versions(kernel, shapes=[(128, 1, 1)])
    text = codegen.c.emit_kernels([kernel], versions=made)
    assert "taps_launch_b128x1x1_r(" in text and "taps_launch_b128x1x1(" in text and "taps_launch_generic(" in text
    assert emit_kernels([kernel], block_shapes={"taps": [(128, 1, 1)]}) == text
    with pytest.raises(TypeError):
        codegen.c.emit_kernels([kernel], block_shapes={"taps": [(128, 1, 1)]})  # codegen makes no versions
    need_compiler(cpp=False)
    lib = build_library([kernel])
    rng = np.random.default_rng(5)
    n = 1000
    mask = rng.random(9, dtype=np.float32)
    x = rng.random(n + 9, dtype=np.float32)
    out = np.zeros(n, np.float32)
    lib.launch("taps", 8, 128, (n, mask, x, out))
    np.testing.assert_allclose(out, sum(mask[j] * x[j:j + n] for j in range(9)), rtol=1e-5)
    assert lib.specializations == {"taps": [(128, 1, 1)]}
    shape_lib = lib._specialized[("taps", (128, 1, 1))]
    assert shape_lib._function(kernel, "taps_launch_apart") is not None  # the stage's twin, compiled in
    plain = build_library([kernel], specialize=False)
    plain.launch("taps", 8, 128, (n, mask, x, out))
    assert plain.specializations == {}

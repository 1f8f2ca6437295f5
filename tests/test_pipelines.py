"""The driver's registry of named passes and the pipelines built from it
(``polypy.driver.pipelines``), ``lower_and_emit``, ``--dump-after NAME``, the lazy ``polypy``
package and the launch-shape rules of ``polypy.launch``."""
from __future__ import annotations

import inspect
import subprocess
import sys

import numpy as np
import pytest

import polypy
from polypy.driver import pipelines
from polypy.driver.cli import main
from polypy.driver.pipelines import (GPU_PIPELINE, PASSES, check_pass_name, cpu_pipeline, lower_and_emit,
                                     make_pass, parse_pipeline, register_pass, to_cpu)
from polypy.driver.source import load
from polypy.errors import UserError
from polypy.ir import print_module
from polypy.launch import MAX_BLOCK, MAX_GRID, MAX_THREADS_PER_BLOCK, block_shape, check_block_shape, grid_shape
from polypy.passes import run_pipeline

KERNELS = """
__global__ void scale(int n, float a, float* x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = a * x[i];
}

__global__ void block_sum(const float* x, float* out) {
  __shared__ float s[64];
  s[threadIdx.x] = x[blockIdx.x * 64 + threadIdx.x];
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.0f;
    for (int k = 0; k < 64; k++) t += s[k];
    out[blockIdx.x] = t;
  }
}
"""


@pytest.fixture(scope="module")
def module():
    return load(None, text=KERNELS)


def test_every_registered_pass_is_kebab_case_and_resolves():
    assert len(PASSES) >= 15
    for name, entry in PASSES.items():
        assert name == entry.name
        assert all(part and part.isalnum() and part.islower() for part in name.split("-")), name
        fn = entry.function
        assert callable(fn), name
        params = list(inspect.signature(fn).parameters.values())
        # a pass takes the kernel first; everything else is a keyword-only option
        assert params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, name
        assert set(entry.options) == {p.name for p in params[1:]}, name


def test_pipelines_name_registered_passes_only():
    for names in (pipelines.GPU_PASSES, pipelines.CPU_CHECK, pipelines.CPU_OPTIMIZE, pipelines.CPU_LOWERING, pipelines.CPU_SCHEDULE,
                  pipelines.CPU_FINISH, pipelines.BEFORE_AD, pipelines.AFTER_AD):
        assert names and all(name in PASSES for name in names), names
    full = [p.name for p in cpu_pipeline()]
    assert full == list(pipelines.CPU_CHECK + pipelines.CPU_OPTIMIZE + pipelines.CPU_LOWERING
                        + pipelines.CPU_SCHEDULE + pipelines.CPU_FINISH)
    # The checks run unoptimized too: they refuse what no schedule would translate right.
    assert [p.name for p in cpu_pipeline(optimize=False)] == list(pipelines.CPU_CHECK + pipelines.CPU_LOWERING
                                                                   + pipelines.CPU_FINISH)
    assert [p.name for p in GPU_PIPELINE] == list(pipelines.GPU_PASSES)
    assert [p.name for p in pipelines.before_ad_pipeline(optimize=True)] == list(pipelines.CPU_CHECK
                                                                                 + pipelines.BEFORE_AD)
    assert [p.name for p in pipelines.before_ad_pipeline(optimize=False)] == list(pipelines.CPU_CHECK)
    # the simplification after the frontend is the ground floor's list, by name
    assert pipelines.SIMPLIFY == tuple(p.name for p in polypy.passes.SIMPLIFY)


def test_to_cpu_is_the_cpu_pipeline_run(module):
    for kernel in module.kernels:
        by_hand = run_pipeline(kernel, cpu_pipeline())
        assert print_module(polypy.ir.nodes.Module((to_cpu(kernel),))) == \
            print_module(polypy.ir.nodes.Module((by_hand,)))


def test_make_pass_binds_options_and_report(module):
    kernel = module.kernel("block_sum")
    report: list = []
    lowered = make_pass("serialize-threads", recompute=False, report=report).run(kernel)
    assert lowered.stage == "cpu" and report  # serialize-threads reports its decisions
    silent = make_pass("fold-constants", report=report)  # takes no report: not given one
    assert silent.run(lowered) is not None
    with pytest.raises(UserError, match=r"pass 'fold-constants' has no option recompute \(options: none\)"):
        make_pass("fold-constants", recompute=False)
    with pytest.raises(UserError, match=r"unknown pass 'serialize_threads' \(passes: .*serialize-threads"):
        make_pass("serialize_threads")


def test_parse_pipeline_reads_names_and_options(module):
    kernel = module.kernel("block_sum")
    got = parse_pipeline("serialize-threads{recompute=false}+lower-block-atomics")
    assert [p.name for p in got] == ["serialize-threads", "lower-block-atomics"]
    direct = make_pass("lower-block-atomics").run(make_pass("serialize-threads", recompute=False).run(kernel))
    assert print_module(polypy.ir.nodes.Module((run_pipeline(kernel, got),))) == \
        print_module(polypy.ir.nodes.Module((direct,)))
    for bad in ("serialize-threads{recompute=false", "serialize-threads{recompute}", "nope"):
        with pytest.raises(UserError):
            parse_pipeline(bad)


def test_register_pass_refuses_bad_names_and_conflicts():
    with pytest.raises(ValueError, match="kebab-case"):
        register_pass("Fold_Constants", "polypy.passes.fold_constants:fold_constants")
    with pytest.raises(ValueError, match="already registered"):
        register_pass("fold-constants", "polypy.passes.forward_scalars:forward_scalars")
    assert check_pass_name("fold-constants") == "fold-constants"


def test_lower_and_emit_targets(module):
    cpu = lower_and_emit(module, "cpu")
    assert [k.stage for k in cpu.kernels] == ["cpu", "cpu"]
    assert lower_and_emit(module, "cpu-ir") == print_module(cpu)
    assert "define" in lower_and_emit(module, "llvm")
    c = lower_and_emit(module, "c")
    assert "scale" in c and "block_sum" in c and "#pragma omp" in c
    report: list = []
    lower_and_emit(module, "cpu", report=report)
    assert any("barrier" in d.format() for d in report)  # block_sum's barrier is decided on
    with pytest.raises(UserError, match=r"unknown target 'cuda' \(targets: cpu, cpu-ir, llvm, c, cpp\)"):
        lower_and_emit(module, "cuda")


def test_dump_after_prints_the_ir_after_the_pass(tmp_path, capsys):
    src = tmp_path / "k.cu"
    src.write_text(KERNELS)
    out = tmp_path / "k.cpp"
    assert main(["translate", str(src), "--dump-after", "serialize-threads", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "// ----- IR after serialize-threads (scale)" in err
    assert "// ----- IR after serialize-threads (block_sum)" in err
    assert "stage cpu" in err and out.exists()
    assert main(["grad", str(src), "--kernel", "scale", "--dump-after", "hoist-invariants", "-o",
                 str(tmp_path / "g.cu")]) == 0
    err = capsys.readouterr().err
    assert "// ----- IR after hoist-invariants (scale)" in err and "IR after serialize-threads" not in err


def test_dump_after_an_unknown_pass_is_a_clean_error(tmp_path, capsys):
    src = tmp_path / "k.cu"
    src.write_text(KERNELS)
    out = tmp_path / "k.cpp"
    for command in (["translate", str(src)], ["grad", str(src), "--kernel", "scale"]):
        assert main([*command, "--dump-after", "serialize", "-o", str(out)]) == 1
        err = capsys.readouterr().err
        assert "error: unknown pass 'serialize' (passes: " in err and "serialize-threads" in err
        assert "Traceback" not in err and not out.exists()


def test_import_polypy_imports_no_stage_and_no_driver():
    code = ("import sys, polypy\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('frontend', 'gpu2cpu', 'autodiff', 'codegen', 'islpy', 'llvmlite', 'clang', 'numpy') "
            "or m.startswith('polypy.driver'))\n"
            "print(heavy)\n"
            "assert callable(polypy.compile) and callable(polypy.grad) and callable(polypy.load)\n"
            "assert callable(polypy.parse) and polypy.__version__ and issubclass(polypy.UserError, Exception)\n"
            "assert 'compile' in dir(polypy)\n"
            "try:\n    polypy.nonexistent\nexcept AttributeError:\n    print('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "ok"]


def test_launch_shapes_and_limits():
    assert grid_shape(3) == (3, 1, 1) and grid_shape((2, 3)) == (2, 3, 1) and grid_shape([np.int64(4), 1, 2]) == (4, 1, 2)
    assert grid_shape(0, empty=True) == (0, 1, 1)  # an empty grid: a launch that does nothing
    with pytest.raises(UserError, match=r"grid.x = 0 is outside CUDA's range \[1, "):
        grid_shape(0)
    with pytest.raises(UserError, match=r"grid.y = 65536 is outside CUDA's range \[1, 65535\]"):
        grid_shape((1, MAX_GRID[1] + 1))
    for bad in ((1, 2, 3, 4), 1.5, True, "ab", ()):
        with pytest.raises(UserError, match="grid must be an int or a tuple of 1 to 3 ints"):
            grid_shape(bad)
    assert block_shape((32, 32)) == (32, 32, 1)
    with pytest.raises(UserError, match="block of 2048 threads; CUDA allows at most 1024"):
        block_shape((64, 32))
    with pytest.raises(UserError, match=r"block.z = 65 is outside CUDA's range \[1, 64\]"):
        block_shape((1, 1, MAX_BLOCK[2] + 1))
    assert MAX_THREADS_PER_BLOCK == 1024
    assert check_block_shape((np.int64(8), 4)) == (8, 4, 1)
    with pytest.raises(UserError, match="a block shape is 1 to 3 positive ints"):
        check_block_shape((0,))


def _refuses_like_cuda(launch) -> None:
    with pytest.raises(UserError, match="block of 2048 threads; CUDA allows at most 1024"):
        launch(1, (64, 32))
    with pytest.raises(UserError, match=r"grid.y = 65536 is outside CUDA's range"):
        launch((1, 65536), 32)
    with pytest.raises(UserError, match="block must be an int or a tuple of 1 to 3 ints"):
        launch(1, (1, 2, 3, 4))


def test_the_emulator_and_the_jit_refuse_the_same_shapes(module):
    kernel = module.kernel("scale")
    x = np.ones(64, np.float32)
    mod = polypy.compile(None, text=KERNELS)
    _refuses_like_cuda(lambda g, b: polypy.emulate(kernel, g, b, {"n": 64, "a": 2.0, "x": x}))
    _refuses_like_cuda(lambda g, b: mod.scale[g, b](64, 2.0, x))


def test_the_c_launchers_refuse_the_same_shapes(module):
    from c_support import need_compiler
    from polypy.driver.library import build_library

    need_compiler()
    x = np.ones(64, np.float32)
    lib = build_library([to_cpu(module.kernel("scale"))])
    _refuses_like_cuda(lambda g, b: lib.launch("scale", g, b, {"n": 64, "a": 2.0, "x": x}))


PROGRAM = KERNELS + """
int main() {
  float *x, *out;
  cudaMalloc(&x, 128 * sizeof(float));
  cudaMalloc(&out, 2 * sizeof(float));
  block_sum<<<2, 64>>>(x, out);
  cudaDeviceSynchronize();
  return 0;
}
"""


def test_dump_after_reaches_the_block_shape_versions(tmp_path, capsys):
    """The versions made for a launch's block shape go through ``run_pipeline`` too: their
    passes (``specialize-block-shape`` and the steps of its clean-up) print under --dump-after."""
    src = tmp_path / "p.cu"
    src.write_text(PROGRAM)
    out = tmp_path / "p.cpp"
    assert main(["translate", str(src), "--dump-after", "specialize-block-shape,jam-threads", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "// ----- IR after specialize-block-shape (block_sum)" in err
    assert "// ----- IR after jam-threads (block_sum)" in err
    dumped = err.split("// ----- IR after specialize-block-shape (block_sum)")[1]
    assert "blockDim" not in dumped.split("// -----")[0]  # the shape is a constant there


def test_specialization_steps_are_registered_in_order():
    from polypy.passes.specialize import SPECIALIZE_CLEANUP

    for step in SPECIALIZE_CLEANUP:
        assert step.name in PASSES
        assert PASSES[step.name].function is step.run


def _barrier_between_thread_loops():
    return load(None, text="""
__global__ void step(float* g, int o) {
  __shared__ float s[64];
  int t = threadIdx.x;
  s[t] = g[t];
  __syncthreads();
  float v = t >= o ? s[t - o] : 0.0f;
  __syncthreads();
  s[t] = s[t] + v;
  __syncthreads();
  g[t] = s[t];
}
""").kernel("step")


def test_fusing_thread_loops_keeps_them_apart_only_when_the_model_cannot_be_built(monkeypatch):
    import gpu2cpu.fuse_thread_loops as ftl
    from polypy.errors import InternalError

    kernel = _barrier_between_thread_loops()
    calls = []

    def no_model(fake):
        calls.append(fake)
        raise InternalError("polyhedral model did not converge")

    monkeypatch.setattr(ftl, "BarrierAnalysis", no_model)
    apart = to_cpu(kernel)  # no fusion where the model cannot say: the kernel as lowered
    assert calls, "the fusion question was not asked of the model"
    assert print_module_kernel(apart).count("for threads") >= 2

    def bug(fake):
        raise TypeError("a bug in the analysis")

    monkeypatch.setattr(ftl, "BarrierAnalysis", bug)
    with pytest.raises(InternalError, match="fuse-thread-loops.*TypeError"):
        to_cpu(kernel)


def print_module_kernel(kernel):
    from polypy.ir.printer import print_kernel
    return print_kernel(kernel)

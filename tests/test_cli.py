"""The command line: every --emit mode of translate produces what it says; --version, missing
files, files without kernels; source text without a path; unknown kernels."""
from __future__ import annotations

import importlib.metadata
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

import polypy
from polypy.driver.cli import main
from polypy.ir.parser import parse_module
from polypy.ir.verifier import verify_module

ROOT = pathlib.Path(__file__).resolve().parents[1]
SAXPY = ROOT / "samples" / "saxpy.cu"


def test_emit_ir_and_cpu_ir_parse_back(tmp_path, capsys) -> None:
    for emit, stage in (("ir", "gpu"), ("cpu-ir", "cpu")):
        out = tmp_path / f"{emit}.txt"
        assert main(["translate", "samples/reduce_sum.cu", "--emit", emit, "-o", str(out)]) == 0
        module = parse_module(out.read_text())
        verify_module(module)
        assert {k.stage for k in module.kernels} == {stage}


def test_emit_llvm_is_optimized_and_vectorized(tmp_path) -> None:
    out = tmp_path / "saxpy.ll"
    assert main(["translate", "samples/saxpy.cu", "--emit", "llvm", "-o", str(out)]) == 0
    text = out.read_text()
    assert "define" in text and "saxpy_blocks" in text
    assert "x float>" in text  # the thread loop became vector code


def test_report_explains_barrier_decisions(tmp_path, capsys) -> None:
    out = tmp_path / "backprop.txt"
    assert main(["translate", "samples/backprop_layerforward.cu", "--emit", "cpu-ir", "--report", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "barrier removed:" in err and "barrier kept:" in err


# --------------------------------------------------------------------------- small conveniences


def test_version_comes_from_the_package_metadata(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"polypy {importlib.metadata.version('polypy')}\n"


@pytest.mark.parametrize("command", [["translate"], ["grad", "--kernel", "k"], ["run"], ["run", "--emulate"]])
def test_a_missing_input_file_is_one_clean_line(tmp_path, capsys, command) -> None:
    missing = tmp_path / "nope.cu"
    out = [] if command[0] == "run" else ["-o", str(tmp_path / "out.txt")]
    assert main([command[0], str(missing), *command[1:], *out]) == 1
    assert capsys.readouterr().err == f"polypy: error: no such file: {missing}\n"
    assert [p.name for p in tmp_path.iterdir()] == []


def test_a_file_without_kernels_is_translated_with_a_warning(tmp_path, capsys) -> None:
    lib = tmp_path / "helpers.cu"
    lib.write_text("__device__ float twice(float x) { return 2.0f * x; }\n")
    assert main(["translate", str(lib), "-o", str(tmp_path / "helpers.cpp")]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"{lib}: warning: no kernel (__global__ function) in this file")
    assert (tmp_path / "helpers.cpp").exists()

    prog = tmp_path / "host.cu"
    prog.write_text('#include <cstdio>\nint main() { printf("%d\\n", 6 * 7); return 0; }\n')
    out = tmp_path / "host.cpp"
    assert main(["translate", str(prog), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert err == f"{prog}: warning: no kernel (__global__ function) in this file; only its host code is translated\n"
    assert "int main()" in out.read_text()
    # A file with kernels says nothing.
    assert main(["translate", str(SAXPY), "-o", str(tmp_path / "saxpy.cpp")]) == 0
    assert capsys.readouterr().err == ""


def test_compile_and_load_take_source_text_without_a_path() -> None:
    mod = polypy.compile(None, text=SAXPY.read_text())
    x = np.arange(8, dtype=np.float32)
    y = np.ones(8, dtype=np.float32)
    mod.saxpy[1, 32](8, 2.0, x, y)
    assert np.array_equal(y, 2.0 * np.arange(8) + 1.0)
    with pytest.raises(polypy.UserError) as err:
        polypy.load(None, text="__global__ void k(float* x) {\n  x[0] = nothing_here;\n}\n")
    assert err.value.loc is not None and (err.value.loc.file, err.value.loc.line) == ("<string>", 2)
    with pytest.raises(polypy.UserError, match="give a source file or the source text"):
        polypy.compile(None)


def test_an_unknown_kernel_names_the_known_ones() -> None:
    module = polypy.load(ROOT / "samples" / "reduce_sum.cu")
    with pytest.raises(polypy.UserError) as err:
        module.kernel("zz")
    assert isinstance(err.value, KeyError)  # what callers that probe for a kernel catch
    assert str(err.value) == f"polypy: error: no kernel named 'zz' in {module.source} (kernels: reduce_sum)"


def test_the_readme_quick_start_outputs_are_ignored_by_git() -> None:
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout")
    # --no-index: ask the ignore rules only; nothing is created in the checkout.
    result = subprocess.run([git, "check-ignore", "--no-index", "jacobi", "jacobi.cpp"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.split() == ["jacobi", "jacobi.cpp"], result.stderr


ARCH_KERNEL = r"""
__global__ void k(int* out) {
#if __CUDA_ARCH__ >= 900
  out[threadIdx.x] = 9;
#elif __CUDA_ARCH__ >= 750
  out[threadIdx.x] = 7;
#else
  out[threadIdx.x] = 6;
#endif
}
"""


def _ir_of(tmp_path, capsys, *flags: str) -> tuple[int, str, str]:
    src = tmp_path / "k.cu"
    src.write_text(ARCH_KERNEL)
    out = tmp_path / "k.ir"
    if out.exists():
        out.unlink()
    status = main(["translate", str(src), "--emit", "ir", "-o", str(out), *flags])
    captured = capsys.readouterr()
    return status, out.read_text() if out.exists() else "", captured.err


def test_a_makefiles_nvcc_options_are_accepted(tmp_path, capsys) -> None:
    # What a Makefile passes nvcc: accepted, the same translation (polypy.driver.nvcc_flags)
    status, plain, _ = _ir_of(tmp_path, capsys)
    assert status == 0 and "= 7" in plain
    status, flagged, err = _ir_of(tmp_path, capsys, "-O3", "-std=c++14", "-Xcompiler", "-fopenmp", "-Xptxas", "-v",
                                  "-lineinfo", "-g", "-G", "-Wno-deprecated-gpu-targets", "--expt-relaxed-constexpr",
                                  "--extended-lambda", "-m64", "-w", "-x", "cu", "-maxrregcount", "32",
                                  "--default-stream", "per-thread", "-lcublas", "-L/usr/lib64", "--prec-div=false",
                                  "-isystem", str(tmp_path))
    assert status == 0, err
    assert flagged == plain


@pytest.mark.parametrize("flags, expected", [((), 7), (("-arch", "sm_70"), 6),
                                             (("-gencode", "arch=compute_75,code=sm_75"), 7),
                                             (("-gencode", "arch=compute_60,code=sm_60", "-gencode",
                                               "arch=compute_90,code=[sm_90,compute_90]"), 9),
                                             (("-arch", "sm_70", "-gencode", "arch=compute_90,code=sm_90"), 6)])
def test_gencode_names_the_architecture_unless_arch_does(tmp_path, capsys, flags, expected) -> None:
    # sm_80 by default; with -gencode the highest architecture listed; -arch wins over -gencode
    status, ir, err = _ir_of(tmp_path, capsys, *flags)
    assert status == 0, err
    assert f"= {expected}" in ir and all(f"= {v}" not in ir for v in {6, 7, 9} - {expected}), ir


@pytest.mark.parametrize("flag", [["--use_fast_math"], ["--ftz=true"], ["-std=c++20"]])
def test_nvcc_options_whose_meaning_is_not_implemented_are_refused(tmp_path, capsys, flag) -> None:
    with pytest.raises(SystemExit) as exit_:
        _ir_of(tmp_path, capsys, *flag)
    assert exit_.value.code == 1
    assert not (tmp_path / "k.ir").exists()
    assert flag[0].split("=")[0] in capsys.readouterr().err

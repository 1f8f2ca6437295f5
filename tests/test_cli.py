"""The command line: every --emit mode of translate produces what it says."""
from __future__ import annotations

from polypy.cli import main
from polypy.ir.parser import parse_module
from polypy.ir.verifier import verify_module


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

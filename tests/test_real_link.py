"""Rodinia link and run blockers (issue 14): programs of our own in ``tests/programs/link/``, each in
the style of the construct a Rodinia program needs, checked against NumPy.

* A ``.cu`` file with host code and no kernel (Rodinia's ``util/cuda/cuda.cu``) translated alone
  keeps its functions and globals and links with the program's other objects; the CUDA runtime's
  state (allocations, last error) is one for the whole program.
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np

from c_support import need_compiler
from codegen.c import find_compiler
from test_programs import outputs_match

LINK = pathlib.Path(__file__).resolve().parent / "programs" / "link"


def _polypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=600)


def _check(got: str, want: str, rtol: float = 1e-5) -> None:
    problem = outputs_match(got, want, rtol)
    assert problem is None, f"{problem}\n--- got:\n{got}\n--- expected:\n{want}"


def test_a_cu_file_of_host_code_only_links_with_the_program_and_shares_the_runtime(tmp_path) -> None:
    """link_util.cu has no kernel: it was emitted as an empty kernel library (b+tree, lavaMD:
    undefined reference to checkCUDAError). Memory allocated in one object is freed in the other,
    and an error made in one is what cudaGetLastError returns in the other."""
    need_compiler(cpp=True)
    cxx = find_compiler(cpp=True)
    objects = []
    for name in ("link_util", "link_main"):
        cpp = tmp_path / f"{name}.cpp"
        result = _polypy("translate", str(LINK / f"{name}.cu"), "-o", str(cpp))
        assert result.returncode == 0, result.stderr
        obj = tmp_path / f"{name}.o"
        built = subprocess.run([cxx, "-O2", "-fopenmp", "-c", str(cpp), "-o", str(obj)], capture_output=True,
                               text=True)
        assert built.returncode == 0, built.stderr[-3000:]
        objects.append(str(obj))
    text = (tmp_path / "link_util.cpp").read_text()
    assert "int util_calls = 0;" in text and "int check_error(const char* where)" in text
    linked = subprocess.run([cxx, "-fopenmp", *objects, "-o", str(tmp_path / "prog"), "-lm"], capture_output=True,
                            text=True)
    assert linked.returncode == 0, linked.stderr[-3000:]
    run = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    h = (np.arange(1000) % 17).astype(np.float32) - np.float32(4)
    x = np.float32(1.5) * h + np.float32(0.25)
    _check(run.stdout, "error 1 at oversized launch: invalid configuration argument\n"
                       "error 2 at double free: invalid device pointer\n"
                       "x[0] %.3f x[999] %.3f sum %.3f calls 6\n" % (x[0], x[999], x.astype(np.float64).sum()))

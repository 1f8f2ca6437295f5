"""Rodinia link and run blockers (issue 14): programs of our own in ``tests/programs/link/``, each in
the style of the construct a Rodinia program needs, checked against NumPy.

* A ``.cu`` file with host code and no kernel (Rodinia's ``util/cuda/cuda.cu``) translated alone
  keeps its functions and globals and links with the program's other objects; the CUDA runtime's
  state (allocations, last error) is one for the whole program, and plain C files can call it.
* ``cudaMemcpyToSymbol("name", ...)`` (the symbol named by a string, CUDA before 5.0: kmeans) copies
  to the variable of that name; a name that is no variable is a located error.
* A C source including <stdlib.h> and <math.h> (leukocyte: "redeclaration of 'abs' must have the
  'overloadable' attribute") parses, whatever the order of the includes, and its device code's calls
  of the C library are CUDA's.
* kmeans ran and gave wrong clusters: nearest_index.cu (its kernel in small) was wrong in the translated
  code (sink-thread-loops did not load a per-thread value back in a part that writes it only under an
  if; tests/test_sink_conditional.py).
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

import polypy

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
    and an error made in one is what cudaGetLastError returns in the other. link_host.c, plain C,
    calls the runtime API by its C names (b+tree's main.c: undefined reference to cudaSetDevice)."""
    need_compiler(cpp=True)
    need_compiler(cpp=False)
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
    cc = find_compiler(cpp=False)
    built = subprocess.run([cc, "-O2", "-c", str(LINK / "link_host.c"), "-o", str(tmp_path / "link_host.o")],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    objects.append(str(tmp_path / "link_host.o"))
    linked = subprocess.run([cxx, "-fopenmp", *objects, "-o", str(tmp_path / "prog"), "-lm"], capture_output=True,
                            text=True)
    assert linked.returncode == 0, linked.stderr[-3000:]
    run = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    h = (np.arange(1000) % 17).astype(np.float32) - np.float32(4)
    x = np.float32(1.5) * h + np.float32(0.25)
    _check(run.stdout, "error 1 at oversized launch: invalid configuration argument\n"
                       "error 2 at double free: invalid device pointer\n"
                       "c free 0 17 last 17\nzsum 3000.0\n"
                       "x[0] %.3f x[999] %.3f sum %.3f calls 6\n" % (x[0], x[999], x.astype(np.float64).sum()))


def _run_both(path: pathlib.Path) -> tuple[str, str]:
    native = _polypy("run", str(path))
    assert native.returncode == 0, native.stderr[-3000:]
    emulated = _polypy("run", str(path), "--emulate")
    assert emulated.returncode == 0, emulated.stderr[-3000:]
    return native.stdout, emulated.stdout


def test_a_symbol_named_by_a_string_is_the_variable_of_that_name() -> None:
    """kmeans: cudaMemcpyToSymbol("c_clusters", ...) bound the runtime's template to the string and
    copied the centres into it (a segfault: string literals are read-only)."""
    need_compiler(cpp=True)
    i = np.arange(500)
    points = np.stack([(i * 7) % 13, (i * 5) % 11], 1).astype(np.float32)
    centres = np.array([[0, 0], [10, 0], [0, 10]], np.float32)
    membership = ((points[:, None, :] - centres[None]) ** 2).sum(-1).argmin(1)  # first of equals, as `<`
    counts = np.bincount(membership, minlength=3)
    want = "counts %d %d %d weighted %d centre 10 10\n" % (*counts, (i * membership).sum())
    native, emulated = _run_both(LINK / "symbol_by_name.cu")
    _check(emulated, want)
    _check(native, want)


def test_a_string_naming_no_symbol_is_a_located_error(tmp_path) -> None:
    src = tmp_path / "nosym.cu"
    src.write_text("#include <cuda_runtime.h>\n__constant__ float c_taps[4];\n"
                   "__global__ void k(float* x) { x[threadIdx.x] = c_taps[threadIdx.x]; }\n"
                   "int main() {\n  float h[4] = {1, 2, 3, 4};\n"
                   "  cudaMemcpyToSymbol(\"c_tap\", h, sizeof h);\n  return 0;\n}\n")
    out = tmp_path / "nosym.cpp"
    result = _polypy("translate", str(src), "-o", str(out))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{src}:6:22: error: cudaMemcpyToSymbol names its symbol by a string (\"c_tap\")" in result.stderr
    assert not out.exists()


C_HEADERS = ("#include <math.h>\n", "#include <stdlib.h>\n", "#include <string.h>\n", "#include <stdio.h>\n")


@pytest.mark.parametrize("order", ["as written", "reversed"])
def test_a_c_source_including_the_c_librarys_headers_parses_in_any_order(tmp_path, order) -> None:
    text = (LINK / "c_headers.c").read_text()
    assert all(h in text for h in C_HEADERS)
    if order == "reversed":
        for h in C_HEADERS:
            text = text.replace(h, "")
        text = "".join(reversed(C_HEADERS)) + text
    src = tmp_path / "c_headers.c"
    src.write_text(text)
    module = polypy.compile(src, threads=2)
    n = 300
    x = np.linspace(-3, 3, n).astype(np.float32)
    k = (np.arange(n) - 150).astype(np.int32)
    y, m = np.zeros(n, np.float32), np.zeros(n, np.int32)
    module.c_library_calls[(n + 127) // 128, 128](x, k, y, m, n)
    a = np.abs(x)
    want = np.sqrt(a) + np.exp(-x * x) + a * np.float32(0.5) + np.exp(np.float32(0.25) * x) + a ** np.float32(1.5)
    np.testing.assert_allclose(y, want, rtol=1e-5)
    np.testing.assert_array_equal(m, 4 * np.abs(k))


def test_an_index_set_under_an_if_in_a_loop_over_centres_is_kept() -> None:
    need_compiler(cpp=True)
    n = 300
    p = np.arange(n)
    x = np.stack([(p * 7) % 13, (p * 5) % 11], 1).astype(np.float32)
    c = np.array([[0, 0], [10, 0], [0, 10], [10, 10]], np.float32)
    out = ((x[:, None, :] - c[None]) ** 2).sum(-1).argmin(1)
    want = "counts %d %d %d %d weighted %d\n" % (*np.bincount(out, minlength=4), (p * out).sum())
    native, emulated = _run_both(LINK / "nearest_index.cu")
    _check(emulated, want)
    _check(native, want)

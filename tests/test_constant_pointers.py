"""Records holding device pointers in ``__constant__``/``__device__`` memory (issue 36 item 8,
Rodinia heartwall's ``d_unique[bx].d_in2``; ``frontend/lower/held_pointers.py``).

A pointer member read from module memory is an offset into a pool of device memory that the
launcher finds at each launch from the symbol's bytes (every pointer in a live ``cudaMalloc``
allocation, aligned; else the launch stops, located at the read). ``tests/programs/
constant_pointers.cu`` reads and writes through two members of a ``__constant__`` record, re-sets
it between launches (another allocation; a pointer into the middle of one), and indexes an array
of such records by ``blockIdx`` (two records sharing an allocation), and reads a ``__device__``
record: ``polypy run`` (native) and ``polypy run --emulate`` print what NumPy computes; the
CLI's ``translate`` builds the program whose launches are refused at run time.
"""
from __future__ import annotations

import pathlib
import subprocess

import numpy as np
import pytest

from c_support import assert_translate_refused, need_compiler, polypy_cli as _polypy, translate_and_compile
from polypy.errors import UserError

PROGRAMS = pathlib.Path(__file__).resolve().parent / "programs"


def _expected() -> str:
    """What tests/programs/constant_pointers.cu prints, computed with NumPy."""
    f32 = np.float32
    n, m = 200, 150
    i, j = np.arange(n), np.arange(m)
    src = (i % 17).astype(f32) - f32(8)
    src2 = f32(0.5) * i.astype(f32)
    out = f32(1.5) * src[(7 * i) % n]
    sum1 = float(np.sum(out.astype(np.float64) * (i + 1)))
    hits = i + 1  # first launch: hits[i] += i + 1
    out2 = f32(-2.0) * src2[(7 * j) % m]  # second launch: the symbol re-set, hits from element 50 on
    sum2 = float(np.sum(out2.astype(np.float64) * (j + 1)))
    hits[50:50 + m] += j + 1
    total = int(np.sum(hits * (i + 3)))
    a = np.arange(64).astype(f32)
    b = f32(100) + np.arange(32).astype(f32)
    c = -np.arange(48).astype(f32)
    for block, (arr, first) in enumerate([(a, 0), (b, 8), (a, 32), (c, 16)]):  # slots 0 and 2 share `a`
        arr[first:first + 16] = arr[first:first + 16] * f32(2) + f32(block)
    s = sum(float(np.sum(x.astype(np.float64) * (np.arange(x.size) + k))) for x, k in ((a, 1), (b, 2), (c, 3)))
    b[:4] = b[:4] * f32(0.5) + f32(16)  # scale_dev through the __device__ record: n = 4, every count 16
    dev = " ".join(f"{float(v):.2f}" for v in b[:5])
    return f"gather {sum1:.3f} {sum2:.3f} hits {total}\nslots {s:.1f} counts 16 16 16 16\ndevice {dev}\n"


def test_constant_records_holding_pointers_run_native_and_emulated(tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    source = PROGRAMS / "constant_pointers.cu"
    want = _expected()
    for mode in ((), ("--emulate",)):
        result = _polypy("run", str(source), *mode, cwd=tmp_path)
        assert result.returncode == 0, (mode, result.stderr)
        assert result.stdout == want, mode


BAD_POINTERS = """#include <cstdio>
#include <cstdlib>
struct Pair { int n; float* src; };
__constant__ Pair d_pairs[2];
__global__ void k(float* out) { out[threadIdx.x] = d_pairs[blockIdx.x].src[threadIdx.x]; }
int main(int argc, char** argv) {
  float *a, *b, *out;
  float host[64];
  cudaMalloc((void**)&a, 64 * sizeof(float));
  cudaMalloc((void**)&b, 64 * sizeof(float));
  cudaMalloc((void**)&out, 64 * sizeof(float));
  Pair p[2] = {{1, a}, {2, b}};
  int mode = atoi(argv[1]);
  if (mode == 1) cudaFree(b);
  if (mode == 2) p[1].src = host;
  if (mode == 3) p[1].src = (float*)((char*)b + 2);
  if (mode == 4) p[1].src = 0;
  cudaMemcpyToSymbol(d_pairs, p, sizeof(p));
  k<<<mode == 4 ? 1 : 2, 32>>>(out);
  cudaDeviceSynchronize();
  printf("launched\\n");
  return 0;
}
"""


@pytest.fixture(scope="module")
def bad_program(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, pathlib.Path]:
    """BAD_POINTERS through the CLI's ``translate`` and the C++ compiler, once: (source, binary)."""
    src = tmp_path_factory.mktemp("bad_pointers") / "bad.cu"
    src.write_text(BAD_POINTERS)
    return src, translate_and_compile(src)


@pytest.mark.parametrize("mode, what", [
    ("0", None),  # both pointers fine
    ("1", "freed"),  # b freed before the launch
    ("2", "host"),  # a host array
    ("3", "misaligned"),  # two bytes into b
    ("4", None),  # a null pointer in a record the launch does not read
])
def test_a_pointer_to_no_allocation_stops_the_launch_located(mode: str, what: str | None, bad_program,
                                                             tmp_path: pathlib.Path) -> None:
    """A pointer that is not null must point into a live allocation at a multiple of its type's
    size, else the launch stops, located at the member's read."""
    src, exe = bad_program
    result = subprocess.run([str(exe), mode], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    if what is None:
        assert result.returncode == 0, result.stderr
        assert result.stdout == "launched\n"
        return
    assert result.returncode == 1, (what, result.stdout, result.stderr)
    assert "launched" not in result.stdout
    assert (f"{src}:5:72: error: pointer 'd_pairs[1].src' read from d_pairs here does not point into memory from "
            "cudaMalloc") in result.stderr, result.stderr


def test_an_emulated_launch_checks_the_pointers_too(tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    src = tmp_path / "bad.cu"
    src.write_text(BAD_POINTERS)
    result = _polypy("run", str(src), "--emulate", "--", "2", cwd=tmp_path)
    assert result.returncode == 1, result.stdout
    assert f"{src}:5:72: error: pointer 'd_pairs[1].src' read from d_pairs" in result.stderr, result.stderr


REFUSED = "struct Pair { float* src; float4* v; int n; };\n__constant__ Pair d_pair;\n"


@pytest.mark.parametrize("body, message, column", [
    ("d_pair.src = out;", "this pointer is not one polypy can pass to free or store to memory in device code", 33),
    ("out[0] = d_pair.v[0].x;", "member 'v' of type 'float4 *' of 'd_pair': a pointer read from __constant__ or "
     "__device__ memory is supported to scalars only (not to 'float4')", 49),
    ("Pair p = d_pair; out[0] = p.src[0];", "local variable 'p' has a member of type 'float *'", 38),
    ("__shared__ Pair s[2]; out[0] = s[0].src[0];", "memory of type 'Pair' is not supported: it holds pointers", 0),
])
def test_what_is_not_supported_is_refused_located(body: str, message: str, column: int,
                                                  tmp_path: pathlib.Path) -> None:
    src = tmp_path / "refused.cu"
    src.write_text(REFUSED + f"__global__ void k(float* out) {{ {body} }}\n")
    assert_translate_refused(src, f"{src}:3:{column}" if column else f"{src}:3:", message)


def test_an_initializer_of_a_constant_record_holding_pointers_is_refused(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "init.cu"
    src.write_text("struct Pair { float* src; int n; };\n__constant__ Pair d_pair = {0, 3};\n"
                   "__global__ void k(float* out) { out[0] = d_pair.src[d_pair.n]; }\n")
    result = _polypy("translate", str(src), "-o", str(tmp_path / "init.cpp"))
    assert result.returncode == 1
    assert f"{src}:2:19: error: 'd_pair' holds pointers: an initializer" in result.stderr, result.stderr


def test_the_python_api_and_grad_refuse_located(tmp_path: pathlib.Path) -> None:
    """NumPy arrays are no memory a pointer in ``__constant__`` memory can point into."""
    import polypy
    from polypy.emulator import emulate

    src = tmp_path / "api.cu"
    src.write_text("struct Pair { float* src; int n; };\n__device__ Pair d_pair;\n"
                   "__global__ void k(float* out) { out[threadIdx.x] = d_pair.src[threadIdx.x]; }\n")
    module = polypy.load(str(src))
    with pytest.raises(UserError) as emulated:
        emulate(module.kernel("k"), (1, 1, 1), (4, 1, 1), {"out": np.zeros(4, np.float32)})
    assert f"{src}:3:59: error: kernel 'k' reads pointers from __constant__ or __device__ memory ('d_pair')" \
        in emulated.value.render()
    with pytest.raises(UserError) as compiled:
        polypy.compile(str(src))
    assert "supported in whole programs only" in compiled.value.render()
    result = _polypy("grad", str(src), "--kernel", "k", "-o", str(tmp_path / "g.cu"))
    assert result.returncode == 1
    assert f"{src}:3:59: error: gradients of kernels that read pointers from __constant__ or __device__ memory" \
        in result.stderr, result.stderr

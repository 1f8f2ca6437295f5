"""Host-side Thrust in whole programs (issue 41 item 6, docs/thrust.md).

The programs under ``tests/programs/thrust/`` use Thrust's containers, algorithms and iterators
with their own function objects and lambdas, and pass a ``device_vector``'s memory to a kernel
polypy translates; Thrust itself is NVIDIA's, compiled with the program on its OpenMP device
system. Each printed value is compared with NumPy's over the same data. The refusals (CUB, Thrust
in device code, Thrust's CUDA system, CCCL absent) are located errors.

The CCCL headers come from the optional extra ``polypy[thrust]`` (``nvidia-cuda-cccl-cu12``): the
tests that need them skip, saying so, where it is not installed.
"""
from __future__ import annotations

import os
import pathlib
import shlex
import subprocess
import sys

import numpy as np
import pytest

from c_support import need_compiler
from codegen.c import find_compiler
from polypy.cccl import include_dir

PROGRAMS = pathlib.Path(__file__).resolve().parent / "programs" / "thrust"
N_SORT, N_SCAN = 5000, 3000


def _need_cccl() -> None:
    if include_dir() is None:
        pytest.skip("the CCCL headers are not installed (pip install 'polypy[thrust]': nvidia-cuda-cccl-cu12)")


def _polypy(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=900, env=env)


def _values(stdout: str) -> dict[str, list[str]]:
    out = {}
    for line in stdout.splitlines():
        name, *values = line.split()
        out[name] = values
    return out


def _sort_reduce_expected() -> dict[str, list[str]]:
    i = np.arange(N_SORT, dtype=np.int64)
    h = (i * 7919 + 13) % 10007
    hv = 0.5 * i
    distance = np.abs(h - 5000)
    farthest = h[np.lexsort((h, distance))[-1]]  # largest distance, then largest value
    order = np.argsort(h, kind="stable")  # the keys are distinct (10007 is prime)
    keys, vals = h[order], hv[order]
    desc = np.sort(h)[::-1]
    back = (0.5 * keys + 1.0) * 3.0 + i  # exact in float32: halves below 2**23
    w13, w5 = i % 13 + 1, i % 5 + 1
    return {
        "sum": [str(h.sum())], "farthest": [str(farthest)], "weighted": [str(3 * h.sum())],
        "sorted_checksum": [str((keys * w13).sum())], "values_checksum": [f"{(vals * w5).sum():.1f}"],
        "descending": [str(desc[0]), str(desc[-1]), str((desc * w13).sum())],
        "kernel": ["no", "error", f"{back[0]:.1f}", f"{back[-1]:.1f}", f"{(back * w5).sum():.1f}"],
    }


def _scan_select_expected() -> dict[str, list[str]]:
    i = np.arange(N_SCAN, dtype=np.int64)
    v = 5 + 3 * i + i % 7
    inc = np.cumsum(v)
    exc = 7 + inc - v
    run_max = np.maximum.accumulate((i * 37) % 101 - i // 50)
    picked = v[v % 4 == 0]
    m = N_SCAN
    return {
        "inclusive": [str(inc[0]), str(inc[m // 2]), str(inc[-1])],
        "exclusive": [str(exc[0]), str(exc[m // 2]), str(exc[-1])],
        "running_max": [str(run_max[10]), str(run_max[m // 3]), str(run_max[-1])],
        "copy_if": [str(len(picked)), str(picked[0]), str(picked[-1]), str(picked.sum())],
        "count_if": [str(len(picked))],
        "device_functor": [f"{2 * 1.5 + 1:.2f}"],
        "zip_dot": [f"{(0.25 * i * 4.0).sum():.2f}"],  # integers below 2**24: exact in float32
        "transform_iterator": [str((i * i).sum())],
    }


@pytest.mark.slow
def test_a_thrust_program_translates_and_builds_as_its_build_line_says(tmp_path) -> None:
    """sort, sort_by_key, a descending sort, reduce/transform_reduce with function objects,
    transform with a lambda, a device_vector passed to a translated kernel and read back."""
    _need_cccl()
    need_compiler(cpp=True)
    out = tmp_path / "sort_reduce.cpp"
    result = _polypy("translate", str(PROGRAMS / "sort_reduce.cu"), "-o", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    text = out.read_text()
    build = next(line for line in text.splitlines() if line.startswith(" * Build: ")).removeprefix(" * Build: ")
    assert f"-isystem {include_dir()}" in build  # where Thrust's headers are
    assert "#include <thrust/system_error.h>" in text  # named, not included, by the program
    exe = tmp_path / "program"
    command = [{"c++": find_compiler(True), "THIS_FILE": str(out), "program": str(exe)}.get(a, a)
               for a in shlex.split(build)]
    built = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr[-3000:]
    ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert _values(ran.stdout) == _sort_reduce_expected()


@pytest.mark.slow
def test_scans_selection_and_iterators_run_with_polypy_run() -> None:
    """inclusive/exclusive scans, copy_if, count_if, sequence, fill, counting, transform and zip
    iterators, and a ``__device__`` function object calling a ``__device__`` function; the kernel
    tests ``__CUDA_ARCH__`` (the device pass reads Thrust's headers as device code too)."""
    _need_cccl()
    need_compiler(cpp=True)
    result = _polypy("run", str(PROGRAMS / "scan_select.cu"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert _values(result.stdout) == _scan_select_expected()


def test_emulated_launches_refuse_device_vector_memory_at_the_kernel() -> None:
    """``run --emulate`` views device memory through polypy's cudaMalloc registry, which Thrust's
    allocations (operator new, on its OpenMP system) are not in: refused, located."""
    _need_cccl()
    need_compiler(cpp=True)
    result = _polypy("run", "--emulate", str(PROGRAMS / "sort_reduce.cu"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "sort_reduce.cu:31:17: error: argument 'f' of kernel 'scale_and_offset' does not point into memory " \
           "from cudaMalloc" in result.stderr


@pytest.mark.slow
def test_thrust_on_cudamalloc_memory_runs_translated_and_emulated() -> None:
    _need_cccl()
    need_compiler(cpp=True)
    i = np.arange(1000)
    a = -np.sort((i * 37) % 1000) + 3 * i
    want = f"{a.sum()} {a[10]} {a[11]} {a[12]}\n"
    for mode in ((), ("--emulate",)):
        result = _polypy("run", *mode, str(PROGRAMS / "device_ptr.cu"))
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout == want, mode


def test_device_functions_host_text_calls_stay_in_the_program() -> None:
    """Without Thrust too: a struct's ``__device__`` method (host text) calling a ``__device__``
    function, which the translated program used to drop (g++: 'twice' was not declared)."""
    need_compiler(cpp=True)
    i = np.arange(32)
    want = 2.0 * i + 1.0 + i  # op.apply(a[i]) + Lane<float>().at(0): 2 a[i] + 1 + threadIdx.x
    for mode in ((), ("--emulate",)):
        result = _polypy("run", *mode, str(PROGRAMS / "device_helpers.cu"))
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout == f"{want[5]:g} {want[31]:g}\n", mode


KERNEL = "__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n"
REFUSED = [
    ("#include <cstdio>\n#include <cub/device/device_reduce.cuh>\n" + KERNEL, (), "2:10",
     "CUB's device-wide algorithms (cub::DeviceReduce"),
    ("#include <thrust/device_vector.h>\n#include <thrust/system/cuda/execution_policy.h>\n" + KERNEL, (), "2:10",
     "Thrust's CUDA system (thrust/system/cuda, thrust::cuda::par) is not supported"),
    ("#include <thrust/tuple.h>\n__global__ void k(float* x) {\n"
     "  x[threadIdx.x] = thrust::get<0>(thrust::make_tuple(1.0f, 2));\n}\n", (), "3:20",
     "'get' (CCCL's "),
    ("#include <thrust/extrema.h>\n__device__ float lo(float a, float b) { return thrust::min(a, b); }\n"
     "__global__ void k(float* x) { x[threadIdx.x] = lo(x[0], 2.0f); }\n", (), "2:48",
     "'min' (CCCL's thrust/"),
    ("#define THRUST_DEVICE_SYSTEM THRUST_DEVICE_SYSTEM_CUDA\n#include <thrust/device_vector.h>\n" + KERNEL, (), "1:9",
     "THRUST_DEVICE_SYSTEM THRUST_DEVICE_SYSTEM_CUDA: polypy runs Thrust on the CPU"),
    ("#include <thrust/device_vector.h>\n" + KERNEL, ("-D", "THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_TBB"), None,
     "THRUST_DEVICE_SYSTEM THRUST_DEVICE_SYSTEM_TBB: polypy runs Thrust on the CPU"),
]


@pytest.mark.parametrize("source, options, where, message", REFUSED)
def test_what_polypy_does_not_run_of_cccl_is_a_located_error(tmp_path, source, options, where, message) -> None:
    _need_cccl()
    src = tmp_path / "prog.cu"
    src.write_text(source)
    result = _polypy("translate", str(src), *options, "-o", str(tmp_path / "out.cpp"))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert message in result.stderr, result.stderr
    if where is not None:
        assert f"{src}:{where}: error: " in result.stderr and "^" in result.stderr, result.stderr
    assert not (tmp_path / "out.cpp").exists()


def test_without_the_cccl_headers_thrust_is_a_located_error_naming_the_extra(tmp_path) -> None:
    env = dict(os.environ, POLYPY_CCCL_INCLUDE="off")
    result = _polypy("translate", str(PROGRAMS / "scan_select.cu"), "-o", str(tmp_path / "out.cpp"), env=env)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "scan_select.cu:6:10: error: Thrust needs the CCCL headers, which are not installed: pip install " \
           "'polypy[thrust]'" in result.stderr, result.stderr
    assert not (tmp_path / "out.cpp").exists()


def test_a_program_without_thrust_builds_without_the_cccl_flags(tmp_path) -> None:
    """The CCCL directory is added only to programs that include its headers."""
    _need_cccl()
    src = tmp_path / "plain.cu"
    src.write_text("#include <cstdio>\n" + KERNEL + "int main() { printf(\"ok\\n\"); return 0; }\n")
    out = tmp_path / "plain.cpp"
    result = _polypy("translate", str(src), "-o", str(out))
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert str(include_dir()) not in text and "#include <thrust/" not in text

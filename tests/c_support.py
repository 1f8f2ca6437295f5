"""Shared helpers of the GPU -> CPU and C backend tests: build, run, compare with the emulator."""
from __future__ import annotations

import atexit
import functools
import hashlib
import pathlib
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Mapping

import numpy as np
import pytest

from codegen.c import find_compiler
from polypy.driver.library import build_library
from polypy.driver.pipelines import GPU_PIPELINE, to_cpu
from polypy.emulator import emulate
from polypy.ir import Kernel, parse_kernel
from polypy.launch import block_shape
from polypy.passes import run_pipeline


def need_compiler(cpp: bool = False) -> None:
    """Skip the calling test (with the reason) when the machine has no C/C++ compiler."""
    if find_compiler(cpp) is None:
        pytest.skip(f"no {'C++ compiler (c++/g++/clang++)' if cpp else 'C compiler (cc/gcc/clang)'} on this machine")


def polypy_cli(*args: str, cwd: pathlib.Path | None = None) -> subprocess.CompletedProcess:
    """``python -m polypy.driver.cli ARGS`` (what the ``polypy`` command runs), output captured."""
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=600, cwd=cwd)


def translate_and_compile(src: pathlib.Path, *flags: str) -> pathlib.Path:
    """Whole program ``src`` through ``polypy translate`` and ``c++ -O2 -fopenmp``, beside it: the binary."""
    need_compiler(cpp=True)
    cpp = src.with_suffix(".cpp")
    translated = polypy_cli("translate", str(src), "-o", str(cpp), *flags)
    assert translated.returncode == 0, translated.stderr
    exe = src.with_suffix("")
    built = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", str(cpp), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    return exe


def build_from_parts(tmp: pathlib.Path, files: dict[str, str], flags: tuple[str, ...] = ("-c",),
                     extra: dict[str, tuple[str, ...]] | None = None) -> pathlib.Path:
    """A program of several files, as a Makefile builds it: every file written into ``tmp``; each
    ``.cu`` translated on its own (with ``flags`` and its ``extra`` options, ``TMP`` standing for
    ``tmp``), compiled to an object; the objects linked. Returns the program."""
    for name, text in files.items():
        (tmp / name).write_text(text)
    compiler = find_compiler(True)
    objects = []
    for name in files:
        if not name.endswith(".cu"):
            continue
        out = tmp / (name[:-3] + ".cpp")
        more = tuple(a.replace("TMP", str(tmp)) for a in (extra or {}).get(name, ()))
        r = polypy_cli("translate", str(tmp / name), "-o", str(out), *flags, *more)
        assert r.returncode == 0, r.stderr[-3000:]
        obj = tmp / (name[:-3] + ".o")
        r = subprocess.run([compiler, "-O1", "-fopenmp", "-w", "-c", str(out), "-o", str(obj)],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        objects.append(str(obj))
    program = tmp / "program"
    r = subprocess.run([compiler, "-fopenmp", *objects, "-o", str(program), "-lm"], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return program


def gpu_kernel(text: str) -> Kernel:
    """IR text -> the GPU form the driver's ``load`` gives (returns eliminated, simplified)."""
    return run_pipeline(parse_kernel(text), GPU_PIPELINE)


def cuda_source(directory, name: str, source: str, kernel: str) -> tuple[Any, Kernel]:
    """``source`` written to ``directory/name``: ``polypy.compile`` of it (the LLVM JIT) and the
    GPU form of its kernel ``kernel``."""
    import polypy

    path = directory / name
    path.write_text(source)
    return polypy.compile(str(path)), polypy.load(str(path)).kernel(kernel)


def run_against_runtime(directory, name: str, source: str) -> str:
    """``source``, a C++ program that includes ``"cuda_runtime.h"`` (polypy's runtime header,
    written next to it), built with ``-O2`` in ``directory`` and run: its standard output."""
    import subprocess

    from codegen.c import runtime_header

    need_compiler(cpp=True)
    (directory / "cuda_runtime.h").write_text(runtime_header())
    (directory / f"{name}.cpp").write_text(source)
    exe = directory / name
    built = subprocess.run([find_compiler(cpp=True), "-O2", str(directory / f"{name}.cpp"), "-o", str(exe)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    result = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def copy_args(args: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}


def run_c(kernel: Kernel, grid, block, args: Mapping[str, Any], *, shmem: int = 0, cpp: bool = False,
          check_bounds: bool = False, optimize: bool = True, globals_=()) -> dict[str, Any]:
    """``kernel`` (GPU form) lowered, compiled and run on copies of ``args``; the copies.

    The library is built with the launch's block shape known (``block_shapes``): it holds the
    versions a launch of that shape would otherwise compile as a second library on its own
    (``codegen.c.CLibrary``), made by the same stage: one C compile instead of two. Not where the
    kernel keeps its generic version (module arrays: ``__constant__``/``__device__``)."""
    need_compiler(cpp)
    cpu = cpu_form(kernel, optimize)
    shapes = None
    if not globals_ and not any(b.space in ("constant", "device") for b in cpu.buffers):
        shapes = {cpu.name: [block_shape(block)]}
    lib = build_library([cpu], globals_, block_shapes=shapes, cpp=cpp, check_bounds=check_bounds)
    out = copy_args(args)
    lib.launch(kernel.name, grid, block, out, shmem=shmem)
    return out


def run_emulated(kernel: Kernel, grid, block, args: Mapping[str, Any], *, shmem: int = 0) -> dict[str, Any]:
    out = copy_args(args)
    emulate(kernel, grid, block, out, shmem=shmem)
    return out


def run_emulator_and_llvm(loaded, compiled, name: str, grid, block, args: Mapping[str, Any], *,
                          shmem: int = 0) -> list[dict[str, Any]]:
    """Kernel ``name`` of one source run on copies of ``args`` by the emulator (``loaded``:
    ``polypy.load``) and by the LLVM backend (``compiled``: ``polypy.compile``): both copies."""
    out = [run_emulated(loaded.kernel(name), grid, block, args, shmem=shmem)]
    a = copy_args(args)
    getattr(compiled, name)[grid, block, shmem](*a.values())
    return out + [a]


def run_three_ways(loaded, compiled, name: str, grid, block, args: Mapping[str, Any], *,
                   shmem: int = 0) -> list[dict[str, Any]]:
    """``run_emulator_and_llvm``, then the C backend: three copies."""
    return run_emulator_and_llvm(loaded, compiled, name, grid, block, args, shmem=shmem) + \
        [run_c(loaded.kernel(name), grid, block, args, shmem=shmem)]


def assert_same_as_emulator(kernel: Kernel, grid, block, args: Mapping[str, Any], *, shmem: int = 0,
                            rtol: float = 0.0, atol: float = 0.0, **options: Any) -> dict[str, Any]:
    """Run ``kernel`` in the emulator and through the C backend; every array must agree."""
    want = run_emulated(kernel, grid, block, args, shmem=shmem)
    got = run_c(kernel, grid, block, args, shmem=shmem, **options)
    for name, value in want.items():
        if isinstance(value, np.ndarray):
            if rtol == 0.0 and atol == 0.0:
                np.testing.assert_array_equal(got[name], value, err_msg=f"{kernel.name}: {name}")
            else:
                np.testing.assert_allclose(got[name], value, rtol=rtol, atol=atol, err_msg=f"{kernel.name}: {name}")
    return got


# The CPU form of each GPU-form kernel object, kept for the kernel objects the tests reuse (the
# modules ``run_way`` loads once): the CPU pipeline's isl analyses run once per kernel, not once
# per launch shape. FIFO of the last CPU_FORMS kernels; the key's kernel is kept alive with it.
CPU_FORMS = 256
_CPU: dict[tuple[int, bool], tuple[Kernel, Kernel]] = {}


def cpu_form(kernel: Kernel, optimize: bool = True) -> Kernel:
    key = (id(kernel), optimize)
    hit = _CPU.get(key)
    if hit is None or hit[0] is not kernel:
        if len(_CPU) >= CPU_FORMS:
            del _CPU[next(iter(_CPU))]
        hit = _CPU[key] = (kernel, to_cpu(kernel, optimize=optimize))
    return hit[1]


@functools.lru_cache(maxsize=None)
def _source_root() -> pathlib.Path:
    root = pathlib.Path(tempfile.mkdtemp(prefix="polypy-test-sources-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


def source_file(source: str, name: str) -> pathlib.Path:
    """``source`` as a file named ``name`` (error messages say ``name:line:col``), written once per
    process into a temporary directory of its own (one per distinct text)."""
    directory = _source_root() / hashlib.sha256(source.encode()).hexdigest()[:16]
    path = directory / name
    if not path.exists():
        directory.mkdir(exist_ok=True)
        path.write_text(source)
    return path


@functools.lru_cache(maxsize=None)
def loaded(path: pathlib.Path):
    import polypy

    return polypy.load(str(path))


@functools.lru_cache(maxsize=None)
def compiled(path: pathlib.Path):
    import polypy

    return polypy.compile(str(path))


WAYS = ("emulator", "llvm", "c")


def run_way(source: str, kernel: str, grid, block, args: Mapping[str, Any], way: str, shmem: int = 0, *,
            name: str | None = None) -> dict[str, Any]:
    """Kernel ``kernel`` of CUDA ``source`` (a file ``name``, default ``kernel.cu``) run one way —
    the reference emulator, the LLVM JIT (``polypy.compile``) or the C backend — on copies of
    ``args``; the copies. Each text is parsed and compiled once per process."""
    path = source_file(source, name or f"{kernel}.cu")
    out = copy_args(args)
    if way == "emulator":
        emulate(loaded(path).kernel(kernel), grid, block, out, shmem=shmem)
        return out
    if way == "c":
        return run_c(loaded(path).kernel(kernel), grid, block, args, shmem=shmem)
    if way != "llvm":
        raise ValueError(f"unknown way {way!r}: {', '.join(WAYS)}")
    getattr(compiled(path), kernel)[grid, block, shmem](*out.values())
    return out


def assert_load_refused(tmp_path: pathlib.Path, name: str, source: str, message: str,
                        where: tuple[int, int]) -> None:
    """``polypy.load`` of ``source`` raises a UserError holding ``message`` at (line, col) ``where``."""
    import polypy
    from polypy.errors import UserError

    path = tmp_path / f"{name}.cu"
    path.write_text(source)
    with pytest.raises(UserError) as info:
        polypy.load(str(path))
    err = info.value
    assert message in err.message, err.render()
    assert err.loc is not None and (err.loc.line, err.loc.col) == where, err.render()


def assert_translate_refused(src: pathlib.Path, where: str, message: str) -> None:
    """``polypy translate src`` exits 1 with ``{where}: error: {message}`` (``where`` is
    ``file:line:col`` or ``file:line``), no traceback, and writes no output file."""
    out = src.with_suffix(".refused.cpp")
    result = polypy_cli("translate", str(src), "-o", str(out))
    assert result.returncode == 1, result.stdout
    assert where in result.stderr and f"error: {message}" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()

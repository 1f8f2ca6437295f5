"""Records and vector types in device memory (issue 14, structs).

``__constant__``/``__device__`` arrays of ``float3`` and of records keep the host's declaration in
a whole program; kernels address their scalar slots through it. Pointer parameters to records of
mixed member types are buffers of records: each member access is a load or store of the member's
type at its byte offset (clang's layout), identical in the emulator, the LLVM and the C backends.
Each program in ``tests/programs/`` goes through ``polypy translate`` + ``c++ -O2 -fopenmp`` and
through ``polypy run --emulate``; both must print what NumPy computes.
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

from c_support import need_compiler
from codegen.c import find_compiler
from test_programs import outputs_match

PROGRAMS = pathlib.Path(__file__).resolve().parent / "programs"


def _polypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=300)


def _translated_and_emulated(name: str, tmp_path: pathlib.Path) -> tuple[str, str]:
    """What the translated C++ program and the emulated program print."""
    need_compiler(cpp=True)
    source = PROGRAMS / f"{name}.cu"
    out = tmp_path / f"{name}.cpp"
    translated = _polypy("translate", str(source), "-o", str(out))
    assert translated.returncode == 0, translated.stderr
    exe = tmp_path / name
    built = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", str(out), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    native = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert native.returncode == 0, native.stderr
    emulated = _polypy("run", str(source), "--emulate")
    assert emulated.returncode == 0, emulated.stderr
    return native.stdout, emulated.stdout


# --------------------------------------------------------------------------- module arrays


def _struct_symbols_expected() -> str:
    f32 = np.float32
    n = 1000
    i = np.arange(n)
    x = (i % 13).astype(f32) - f32(6)
    scale = np.array([2.0, -1.0, 0.5], f32)[i % 3]
    shift = np.array([0.5, 0.25, -3.0], f32)[i % 3]
    r, c = i % 2, i % 3
    tx, ty = 7 * (r + 1) + c, r - c
    # flux[0].x + 10 flux[0].z + 100 flux[1].y, in the kernel's float order
    out = scale * x + shift + f32(1) + f32(30) + f32(500) + (tx - 2 * ty).astype(f32)
    return ("sum %.3f out[0] %.3f out[1] %.3f out[5] %.3f\n" % (out.astype(np.float64).sum(), out[0], out[1], out[5])
            + "table[1][2] = (%d, %d)\n" % (7 * 2 + 2, 1 - 2))


def test_members_of_constant_and_device_record_arrays(tmp_path: pathlib.Path) -> None:
    # Used to read flux[1].y as the C++ element flux[4] of the host's `float3 flux[2]`.
    native, emulated = _translated_and_emulated("struct_symbols", tmp_path)
    expected = _struct_symbols_expected()
    assert outputs_match(native, expected, 1e-6) is None, native
    assert outputs_match(emulated, expected, 1e-6) is None, emulated

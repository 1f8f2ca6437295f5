"""CRTP, empty bases and ``__managed__`` variables (issue 36, C++ in device code; found by
running CUDA written as libraries write it). The program (tests/programs/crtp_managed.cu) has a
base class template calling its derived class through ``static_cast<D*>(this)`` and
``static_cast<D&>(*this)``, a function taking the base by reference and casting it back, an
empty derived class of an empty base, an empty policy base holding a member function, and
``__managed__`` variables (a scalar the host writes between launches, an array the host reads
directly) next to a ``static __device__`` counter. It runs compiled and on the emulator, three
launch shapes each (1x1, odd, one partial block); what it prints is checked against NumPy. A
downcast of an object polypy does not know to be a subobject of the derived class stays
refused, located."""
from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from c_support import need_compiler

PROGRAM = pathlib.Path(__file__).parent / "programs" / "crtp_managed.cu"
SHAPES = (1, 37, 20)


def _expected() -> str:
    f = np.float32
    x = (f(0.25) * (np.arange(37) - 10)).astype(f)
    lines = []
    for s, n in enumerate(SHAPES):
        bias = f(0.5) + f(s)
        off = f(2.0) - f(0.5)
        xs = x[:n]
        for name, step in (("scale", lambda v: f(3.0) * v), ("square", lambda v: v * v)):
            st = step(xs)
            run = st + f(1.0)
            y = run + f(2.0) * st + (run + st) + off + bias
            lines.append(f"{name} {n} {bias:g} " + " ".join(f"{v:g}" for v in y))
            lines.append("hits " + " ".join(str(3 * i + 1) for i in range(n)))
    lines.append(f"calls {2 * sum(SHAPES)}")
    return "\n".join(lines) + "\n"


def _polypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=600)


@pytest.mark.parametrize("way", ["compiled", "emulated"])
def test_crtp_empty_bases_and_managed_variables(tmp_path: pathlib.Path, way: str) -> None:
    if way == "compiled":
        need_compiler(cpp=True)
    cu = tmp_path / PROGRAM.name
    shutil.copy(PROGRAM, cu)
    done = _polypy("run", str(cu), *(("--emulate",) if way == "emulated" else ()))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == _expected()


def test_a_downcast_of_an_object_not_known_to_be_a_subobject_is_refused(tmp_path: pathlib.Path) -> None:
    cu = tmp_path / "down.cu"
    cu.write_text("struct B { float v; };\n"
                  "struct D1 : B { float a; };\n"
                  "struct D2 : B { float b; };\n"
                  "__global__ void k(float* out) {\n"
                  "  D1 x; x.v = 1; x.a = 2;\n"
                  "  B& r = x;\n"
                  "  out[threadIdx.x] = static_cast<D2&>(r).b;\n"
                  "}\n")
    out = tmp_path / "down.cpp"
    done = _polypy("translate", str(cu), "-o", str(out))
    assert done.returncode == 1
    assert f"{cu}:7:22: error: conversion of 'B' to its derived class 'D2' (a downcast)" in done.stderr
    assert "Traceback" not in done.stderr and not out.exists()

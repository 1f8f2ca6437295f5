"""A launch whose gridDim.x exceeds 2^31 - 1 (CUDA's limit, ``cudaDeviceProp.maxGridSize[0]``)
runs nothing and records ``cudaErrorInvalidConfiguration`` (issue 36: found running whole
programs that check their launches; before, the runtime checked y and z only, and such a launch
ran and returned cudaSuccess). Through ``<<<...>>>``, ``cudaLaunchKernel`` and a created stream,
compiled and on the emulator (tests/programs/runtime/grid_limits.cu)."""
from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

from c_support import need_compiler

PROGRAM = pathlib.Path(__file__).parent / "programs" / "runtime" / "grid_limits.cu"
EXPECTED = ("cudaErrorInvalidConfiguration cudaErrorInvalidConfiguration cudaErrorInvalidConfiguration "
            "cudaErrorInvalidConfiguration cudaSuccess hits=24\n")


@pytest.mark.parametrize("way", ["compiled", "emulated"])
def test_grid_x_above_the_limit_is_an_invalid_configuration(tmp_path: pathlib.Path, way: str) -> None:
    need_compiler(cpp=True)
    cu = tmp_path / PROGRAM.name
    shutil.copy(PROGRAM, cu)
    done = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", str(cu),
                           *(("--emulate",) if way == "emulated" else ())],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert done.stdout == EXPECTED

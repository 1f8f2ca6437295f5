"""Golden tests of small gradients: IR in, ``grad_kernel``, IR out (and checked numerically).

Each ``tests/golden/autodiff/*.ir`` file holds, in sections:

    === launch          grid=2 block=32 size=64 n=50   (arrays get ``size`` random elements)
    === input           the kernel (IR text; SIMPLIFY runs first, as after the frontend)
    === grad            the expected reverse-mode kernel
    === fwd             the expected forward-mode kernel
    === report          the expected ``--report`` lines

Every generated kernel is also checked against finite differences on the launch.
``POLYPY_UPDATE_GOLDEN=1`` rewrites the expected sections.
"""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

from autodiff.check import check_gradients
from golden_files import check_all, read_sections
from polypy.driver.gradients import grad_kernel
from polypy.ir import nodes as n
from polypy.ir import parse_kernel, print_kernel
from polypy.ir.types import PointerType
from polypy.passes import SIMPLIFY, run_pipeline

GOLDEN = pathlib.Path(__file__).parent / "golden" / "autodiff"
FILES = sorted(GOLDEN.glob("*.ir"))


def test_there_are_golden_files() -> None:
    assert len(FILES) >= 4


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_golden_gradient(path: pathlib.Path) -> None:
    header, listed = read_sections(path)
    sections = dict(listed)
    kernel = run_pipeline(parse_kernel(sections["input"], filename=path.name), SIMPLIFY)
    module = n.Module((kernel,))
    report: list = []
    got = {
        "grad": print_kernel(grad_kernel(module, kernel.name, report=report)),
        "fwd": print_kernel(grad_kernel(module, kernel.name, mode="forward")),
        "report": "\n".join(d.format() for d in report) + "\n",
    }
    check_all(path, header, listed, got)
    # numerically right, on the file's launch
    launch = dict(item.split("=") for item in sections["launch"].split())
    size = int(launch.pop("size"))
    grid, block = int(launch.pop("grid")), int(launch.pop("block"))
    rng = np.random.default_rng(0)
    args = {}
    for p in kernel.params:
        if isinstance(p.ptype, PointerType):
            args[p.name] = (rng.uniform(0.5, 1.5, size) if p.ptype.elem.is_float
                            else rng.integers(0, size, size)).astype(p.ptype.elem.dtype)
        elif p.ptype.is_float:
            args[p.name] = p.ptype.dtype.type(rng.uniform(0.5, 1.5))
        else:
            args[p.name] = p.ptype.dtype.type(int(launch[p.name]))
    result = check_gradients(kernel, grad_kernel(module, kernel.name), grid, block, args,
                             k_fwd=grad_kernel(module, kernel.name, mode="forward"))
    assert result.error() < 1e-6, result

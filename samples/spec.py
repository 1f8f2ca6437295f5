"""What a sample is: a CUDA source, launch shapes, an input generator and a NumPy reference.

Each kernel sample is a pair ``samples/<name>.cu`` + ``samples/<name>.py``; the ``.py`` defines
``SAMPLE = Sample(...)``. Tests and benchmarks find samples with ``all_samples()``.

Conventions:

* ``make_args(rng, case, real)`` returns every kernel argument by parameter name, in parameter
  order: NumPy arrays (C-contiguous) for pointers, Python/NumPy scalars for scalars. ``real`` is
  the floating dtype the kernel was compiled for (``np.float32`` normally; ``np.float64`` when a
  ``real`` sample is compiled with ``-DREAL=double`` for gradient checks).
* ``reference(args, case)`` returns the expected final contents of each buffer in ``outputs``,
  computed with NumPy from the inputs (it must not modify ``args``).
* A sample whose source spells its floating type ``REAL`` (``#ifndef REAL / #define REAL float``)
  sets ``real=True``; it can then be compiled for float64 with ``defines={"REAL": "double"}``.
* ``differentiable`` samples name the inputs (``wrt``) and outputs gradients are checked for.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import pathlib
from typing import Any, Callable

import numpy as np

SAMPLES_DIR = pathlib.Path(__file__).resolve().parent


@dataclasses.dataclass(frozen=True)
class Case:
    """One launch: grid and block shape (1 to 3 dims), dynamic shared bytes, problem sizes."""

    grid: tuple[int, ...]
    block: tuple[int, ...]
    sizes: dict[str, int] = dataclasses.field(default_factory=dict)
    shmem: int = 0  # bytes of dynamic shared memory; may be computed from sizes by the sample

    def __str__(self) -> str:
        sizes = ",".join(f"{k}={v}" for k, v in self.sizes.items())
        return f"g{'x'.join(map(str, self.grid))}-b{'x'.join(map(str, self.block))}" + (f"-{sizes}" if sizes else "")


@dataclasses.dataclass(frozen=True)
class Sample:
    name: str
    kernel: str
    cases: tuple[Case, ...]
    make_args: Callable[[np.random.Generator, Case, type], dict[str, Any]]
    reference: Callable[[dict[str, Any], Case], dict[str, np.ndarray]]
    outputs: tuple[str, ...]
    rtol: float = 1e-5
    atol: float = 1e-6
    real: bool = False
    differentiable: bool = False
    wrt: tuple[str, ...] = ()
    description: str = ""
    defines: dict[str, str] = dataclasses.field(default_factory=dict)
    features: tuple[str, ...] = ()  # e.g. ("shared", "barrier", "atomics", "warp", "dynamic-shared")

    @property
    def source(self) -> pathlib.Path:
        return SAMPLES_DIR / f"{self.name}.cu"


@dataclasses.dataclass(frozen=True)
class ProgramSample:
    """A whole CUDA program (host ``main`` + kernels) in ``samples/programs/<name>.cu``.

    ``expected_stdout(args)`` computes what the program must print, with NumPy (the program's
    own inputs are deterministic); ``float_tolerance`` is applied to numbers in the output.
    """

    name: str
    expected_stdout: Callable[[], str]
    float_rtol: float = 1e-4
    description: str = ""

    @property
    def source(self) -> pathlib.Path:
        return SAMPLES_DIR / "programs" / f"{self.name}.cu"


def _load(path: pathlib.Path, attr: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"polypy_sample_{path.parent.name}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, attr)


def all_samples() -> list[Sample]:
    """Every kernel sample, sorted by name."""
    out = []
    for py in sorted(SAMPLES_DIR.glob("*.py")):
        if py.name in ("spec.py", "__init__.py") or not py.with_suffix(".cu").exists():
            continue
        sample = _load(py, "SAMPLE")
        assert sample.name == py.stem, f"{py}: SAMPLE.name must be {py.stem!r}"
        out.append(sample)
    return out


def all_programs() -> list[ProgramSample]:
    out = []
    for py in sorted((SAMPLES_DIR / "programs").glob("*.py")):
        if not py.with_suffix(".cu").exists():
            continue
        program = _load(py, "PROGRAM")
        assert program.name == py.stem, f"{py}: PROGRAM.name must be {py.stem!r}"
        out.append(program)
    return out


def sample(name: str) -> Sample:
    for s in all_samples():
        if s.name == name:
            return s
    raise KeyError(name)

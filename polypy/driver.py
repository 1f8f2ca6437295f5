"""The driver: the one place that wires the stages together.

``frontend`` → GPU-form passes → (``gpu2cpu`` → ``codegen``) or (``autodiff``). Stage packages
are imported inside the functions that use them, so importing ``polypy`` stays cheap and the
stages never depend on one another.
"""
from __future__ import annotations

import dataclasses
import os

from polypy.ir import nodes as n
from polypy.passes import SIMPLIFY, Pass, run_pipeline
from polypy.passes.eliminate_returns import eliminate_returns

# What every kernel goes through right after the frontend (GPU form in, GPU form out).
GPU_PIPELINE: tuple[Pass, ...] = (Pass("eliminate-returns", eliminate_returns),) + SIMPLIFY


def parse(path: str | os.PathLike, *, defines: dict[str, str] | None = None,
          include_dirs: tuple[str, ...] = (), text: str | None = None) -> n.Module:
    """The frontend alone: GPU-form IR exactly as the source says."""
    from frontend import parse_file

    return parse_file(os.fspath(path), text=text, defines=defines, include_dirs=tuple(include_dirs))


def load(path: str | os.PathLike, *, defines: dict[str, str] | None = None,
         include_dirs: tuple[str, ...] = (), text: str | None = None,
         timings: dict[str, float] | None = None) -> n.Module:
    """Parse and simplify: the GPU-form module every other stage starts from."""
    module = parse(path, defines=defines, include_dirs=include_dirs, text=text)
    return optimize_module(module, GPU_PIPELINE, timings=timings)


def optimize_module(module: n.Module, passes, *, timings: dict[str, float] | None = None) -> n.Module:
    kernels = tuple(run_pipeline(k, passes, timings=timings) for k in module.kernels)
    return dataclasses.replace(module, kernels=kernels)

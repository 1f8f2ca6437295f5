"""Where the headers of NVIDIA's CUDA Core Compute Libraries (CCCL: Thrust, CUB, libcu++) are.

polypy does not rewrite Thrust: a program's host-side Thrust is NVIDIA's own library, compiled
with its OpenMP device system (``THRUST_DEVICE_SYSTEM_OMP``: ``device_vector`` in host memory,
algorithms on every core). The headers come from the optional extra ``polypy[thrust]``, which
installs the wheel ``nvidia-cuda-cccl-cu12`` (its ``nvidia/cuda_cccl/include``), or from any CCCL
checkout or CUDA toolkit named by ``POLYPY_CCCL_INCLUDE`` (the directory holding ``thrust/``).
``POLYPY_CCCL_INCLUDE=off`` hides them (a program including Thrust is then refused at the
``#include``, as without the extra). docs/thrust.md has the design.

The frontend reads the directory as a system directory (never walked for kernels), and the
translated program is compiled against it (``polypy run`` adds it; ``polypy translate`` names it
in a note at the top of its output).
"""
from __future__ import annotations

import functools
import importlib.util
import os
import pathlib

ENV = "POLYPY_CCCL_INCLUDE"
EXTRA = "pip install 'polypy[thrust]'"

# The systems a program may choose for Thrust's algorithms and containers (polypy's runtime header
# defines THRUST_DEVICE_SYSTEM_OMP): polypy's device memory is host memory, so both are the CPU's.
# CUDA's (Thrust's default) and TBB's are refused.
ALLOWED_SYSTEMS = {
    "THRUST_DEVICE_SYSTEM": ("THRUST_DEVICE_SYSTEM_OMP", "THRUST_DEVICE_SYSTEM_CPP", "2", "3"),
    "THRUST_HOST_SYSTEM": ("THRUST_HOST_SYSTEM_CPP", "THRUST_HOST_SYSTEM_OMP", "1", "2"),
}

# What Thrust's CUDA system includes with every Thrust header and its OpenMP system does not, which
# programs written for the CUDA system use without including it (``thrust::system_error``).
THRUST_CUDA_SYSTEM_INCLUDES = ("thrust/system_error.h",)


def include_dir() -> pathlib.Path | None:
    """The directory holding ``thrust/``, ``cub/`` and ``cuda/std/``, or None when there is none."""
    forced = os.environ.get(ENV, "").strip()
    return _include_dir(forced)


@functools.lru_cache(maxsize=None)
def _include_dir(forced: str) -> pathlib.Path | None:
    if forced.lower() in ("off", "none", "0"):
        return None
    if forced:
        path = pathlib.Path(forced)
        return path.resolve() if (path / "thrust" / "version.h").is_file() else None
    try:
        spec = importlib.util.find_spec("nvidia.cuda_cccl")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = pathlib.Path(location) / "include"
        if (path / "thrust" / "version.h").is_file():
            return path.resolve()
    return None


def missing_message(library: str) -> str:
    """Why ``#include <thrust/...>`` was not found: the extra is not installed."""
    return (f"{library} needs the CCCL headers, which are not installed: {EXTRA} (NVIDIA's "
            f"nvidia-cuda-cccl-cu12), or set {ENV} to a directory holding thrust/ (docs/thrust.md)")


def used_by(include_targets) -> pathlib.Path | None:
    """The CCCL directory when one of ``include_targets`` (the resolved paths a program's files
    include) lies in it: the translated program is then compiled with ``-isystem`` that directory."""
    root = include_dir()
    if root is None:
        return None
    prefixes = tuple(dict.fromkeys((str(root) + os.sep, os.path.realpath(root) + os.sep)))
    for target in include_targets:
        if target is not None and (target.startswith(prefixes) or os.path.realpath(target).startswith(prefixes)):
            return root
    return None


def program_flags(host) -> tuple[str, ...]:
    """The compiler flags a translated program (``polypy.ir.host.HostProgram``) needs for CCCL."""
    root = used_by(span.target for f in host.files.values() for span in f.includes) if host is not None else None
    return ("-isystem", str(root)) if root is not None else ()

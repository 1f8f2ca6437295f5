"""nvcc's two passes over a ``.cu`` file, where they differ: ``__CUDA_ARCH__``.

nvcc compiles a CUDA file twice: a host pass (``__CUDA_ARCH__`` undefined) whose host code runs,
and a device pass per architecture (``__CUDA_ARCH__`` = 800 for sm_80) whose kernels and device
functions run. polypy parses once, as the host pass does; that is exact for every file that
never tests ``__CUDA_ARCH__`` (both passes then read the same text). A file (or one of the
user's headers) that names it is parsed a second time with ``__CUDA_ARCH__`` defined, and the
module takes its kernels and device globals from that device pass and its host code from the
host pass, as nvcc would.

The two passes must define the same kernels, with the same parameters (the host program
launches them by their signature), and the same device globals; the bodies may differ (a kernel
whose body is under ``#if __CUDA_ARCH__ >= 700`` is empty in the host pass). The host program is
built against the kernels that run, the device pass's: which arguments they write decides the
copies around their launches, and their ``__shared__``/``__constant__`` bytes what
``cudaFuncGetAttributes`` reports; when these differ from the host pass's reading, the host
pass is lowered again with the device pass's kernels as its view. The kernels must translate in
the host pass's reading too (it is lowered first, and what it refuses stays refused).
"""
from __future__ import annotations

import dataclasses
import os

import clang.cindex as ci

from polypy.cccl import include_dir as cccl_include_dir
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.sources import read_source

from frontend.clang_setup import FREESTANDING_DIR, PRELUDE_DIR, RUNTIME_DIR, system_include_dirs
from frontend.host_copies import written_arguments
from frontend.kernel_values import static_bytes

# sm_80 (Ampere) unless told otherwise (nvcc's ``-arch=sm_XY`` makes it XY0; polypy's ``-arch sm_XY``
# passes it as the define ``__POLYPY_CUDA_ARCH__``, which only the device pass reads).
DEFAULT_CUDA_ARCH = 800
ARCH_MACRO = "__CUDA_ARCH__"
ARCH_OPTION = "__POLYPY_CUDA_ARCH__"

def device_defines(defines: dict[str, str] | None) -> dict[str, str] | None:
    """The defines of the device pass: the user's, ``__CUDA_ARCH__`` added (None when the user
    defined ``__CUDA_ARCH__`` themselves: both passes then see it, and one parse is exact)."""
    mine = dict(defines or {})
    if ARCH_MACRO in mine:
        return None
    arch = mine.pop(ARCH_OPTION, None) or DEFAULT_CUDA_ARCH
    try:
        value = int(arch)  # type: ignore[arg-type]
    except ValueError:
        raise UserError(f"{ARCH_OPTION}={arch}: the architecture is a number such as 800 (sm_80)") from None
    mine[ARCH_MACRO] = str(value)
    return mine


def names_cuda_arch(tu: ci.TranslationUnit, path: str, text: str | None) -> bool:
    """Whether the main file or one of the user's headers names ``__CUDA_ARCH__`` (polypy's own
    and the system's headers do not decide what the user's kernels mean). A mention in a comment
    only costs a second parse, whose kernels are then the same."""
    main = text if text is not None else read_source(path)
    if ARCH_MACRO in main:
        return True
    cccl = cccl_include_dir()  # Thrust's headers test it, and are host code of the program
    ours = tuple(str(d) for d in (PRELUDE_DIR, RUNTIME_DIR, FREESTANDING_DIR)) + system_include_dirs("c++") \
        + ((str(cccl),) if cccl is not None else ())
    for inclusion in tu.get_includes():
        name = inclusion.include.name if inclusion.include is not None else None
        if name is None or any(os.path.abspath(name).startswith(os.path.abspath(d) + os.sep) for d in ours):
            continue
        try:
            if ARCH_MACRO in read_source(name):
                return True
        except (OSError, UnicodeDecodeError):
            continue
    return False


def views_differ(host: n.Module, device: n.Module) -> bool:
    """Whether a kernel of the device pass writes other arguments, or has other ``__shared__`` or
    ``__constant__`` bytes, than the host pass's kernel of its name (the host program's view)."""
    by_name = {k.name: k for k in host.kernels}
    return any(k.name in by_name and (written_arguments(k) != written_arguments(by_name[k.name])
                                      or static_bytes(k) != static_bytes(by_name[k.name])) for k in device.kernels)


def join_passes(host: n.Module, device: n.Module) -> n.Module:
    """Kernels and device globals from the device pass, host code from the host pass (built
    against the device pass's kernels: ``views_differ``). The two passes must define the same
    kernels with the same parameters: the host program launches them by their signature."""
    by_name = {k.name: k for k in host.kernels}
    for k in device.kernels:
        mine = by_name.pop(k.name, None)
        if mine is None:
            raise UserError(f"kernel '{k.name}' is defined only when {ARCH_MACRO} is defined (nvcc's device pass): "
                            "polypy needs the same kernels in both passes", k.loc)
        if mine.params != k.params or mine.source_params != k.source_params:
            raise UserError(f"kernel '{k.name}' has other parameters when {ARCH_MACRO} is defined (nvcc's device "
                            "pass) than in the host pass: not supported", k.loc)
    for k in by_name.values():
        raise UserError(f"kernel '{k.name}' is defined only when {ARCH_MACRO} is not defined (nvcc's host pass): "
                        "polypy needs the same kernels in both passes", k.loc)
    if host.globals != device.globals:
        where = next((g.loc for g, h in zip(device.globals, host.globals) if g != h), None)
        raise UserError(f"the device globals differ between nvcc's host pass and its device pass ({ARCH_MACRO}): "
                        "not supported", where)
    order = {k.name: i for i, k in enumerate(host.kernels)}
    kernels = tuple(sorted(device.kernels, key=lambda k: order[k.name]))
    return dataclasses.replace(host, kernels=kernels, globals=device.globals)

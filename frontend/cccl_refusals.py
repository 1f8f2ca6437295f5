"""What of NVIDIA's CCCL (Thrust, CUB, libcu++) a program may use, and the refusals of the rest.

Host-side Thrust is NVIDIA's own library on its OpenMP device system (``polypy.cccl``,
docs/thrust.md): it is compiled with the translated program, never translated. So:

- the program's files may include ``<thrust/...>`` and ``<cuda/std/...>`` (libcu++) for host code;
- CCCL's CUB (``<cub/...>`` other than the block and warp primitives polypy's runtime provides
  itself, docs/cub.md: the device-wide algorithms) and Thrust's CUDA and TBB systems are refused
  at the ``#include`` of the user's file that names them: CUB's kernels are CUDA code written for
  the GPU (inline PTX), and its headers need the toolkit's (``cuda_fp8.h``);
- a kernel, or a device function a kernel calls, that names a CCCL declaration (``thrust::get``,
  ``cuda::std::min``...) is refused at that name (``frontend.lower.cccl``): kernels are translated,
  and polypy does not translate CCCL's device code.
"""
from __future__ import annotations

import os

import clang.cindex as ci

from polypy.cccl import ALLOWED_SYSTEMS, include_dir
from polypy.errors import Loc, UserError


CUB = ("CUB's device-wide algorithms (cub::DeviceReduce, cub::DeviceScan, cub::DeviceRadixSort...) and the CUB "
       "headers polypy does not provide are not supported: polypy's own <cub/cub.cuh> and its <cub/block/...>, "
       "<cub/warp/...>, <cub/thread/thread_operators.cuh> and <cub/util_ptx.cuh> give cub::BlockReduce, BlockScan, "
       "BlockRadixSort, BlockLoad, BlockStore, BlockExchange, BlockHistogram, BlockDiscontinuity, BlockShuffle, WarpReduce, WarpScan (docs/cub.md)")
_SYSTEMS = {
    "thrust/system/cuda": "Thrust's CUDA system (thrust/system/cuda, thrust::cuda::par) is not supported: polypy runs "
                          "Thrust on its OpenMP device system (docs/thrust.md)",
    "thrust/system/tbb": "Thrust's TBB system is not supported: polypy runs Thrust on its OpenMP device system "
                         "(docs/thrust.md)",
}
CK = ci.CursorKind


def prefixes() -> tuple[str, ...]:
    root = include_dir()
    if root is None:
        return ()
    return tuple(dict.fromkeys((str(root) + os.sep, os.path.realpath(root) + os.sep)))


def _loc(location: ci.SourceLocation) -> Loc:
    # (frontend.clang_setup.location_of, which calls this module: located here without it)
    return Loc(location.file.name, location.line, location.column)


def relative(path: str, roots: tuple[str, ...]) -> str | None:
    """``path`` below the CCCL directory (``thrust/sort.h``; ``roots``: ``prefixes()``), or None outside it."""
    for p in roots:
        if path.startswith(p):
            return path[len(p):]
    return None


def refuse_includes(tu: ci.TranslationUnit, defines: dict[str, str | None] | None = None) -> bool:
    """CUB, or Thrust's CUDA or TBB system, included by a file outside CCCL: a located refusal;
    likewise a definition of ``THRUST_DEVICE_SYSTEM`` (or ``THRUST_HOST_SYSTEM``) naming a system
    other than the CPU's, in the user's files or in ``defines`` (the command line's ``-D``).
    Whether the user's files include CCCL's headers."""
    roots = prefixes()
    if not roots:
        return False
    used = False
    for inclusion in tu.get_includes():
        source, target = inclusion.source, inclusion.include
        if source is None or target is None or relative(source.name, roots) is not None:
            continue
        rel = relative(target.name, roots)
        if rel is None:
            continue
        used = True
        message = CUB if rel.startswith("cub/") else \
            next((m for prefix, m in _SYSTEMS.items() if rel.startswith(prefix + "/")), None)
        if message is not None:
            raise UserError(message, _loc(inclusion.location))
    if used:
        _refuse_defines(defines)
        _refuse_systems(tu)
    return used


def _refuse_systems(tu: ci.TranslationUnit) -> None:
    """``#define THRUST_DEVICE_SYSTEM THRUST_DEVICE_SYSTEM_CUDA`` in the user's files."""
    for c in tu.cursor.get_children():
        if c.kind != CK.MACRO_DEFINITION or c.spelling not in ALLOWED_SYSTEMS or c.location.file is None \
                or c.location.is_in_system_header:
            continue
        value = "".join(t.spelling for t in list(c.get_tokens())[1:])
        if value not in ALLOWED_SYSTEMS[c.spelling]:
            raise UserError(_system_message(c.spelling, value), _loc(c.location))


def _refuse_defines(defines: dict[str, str | None] | None) -> None:
    """``-D THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_CUDA`` (an option of the command line: no place)."""
    for name, value in (defines or {}).items():
        if name in ALLOWED_SYSTEMS and (value or "") not in ALLOWED_SYSTEMS[name]:
            raise UserError(_system_message(name, value or ""))


def _system_message(name: str, value: str) -> str:
    return (f"{name} {value}: polypy runs Thrust on the CPU, with THRUST_DEVICE_SYSTEM_OMP (the default) or "
            "THRUST_DEVICE_SYSTEM_CPP and THRUST_HOST_SYSTEM_CPP or _OMP; CUDA's and TBB's systems are not supported "
            "(docs/thrust.md)")

"""CCCL (Thrust, CUB, libcu++) named in device code: refused where it is named.

Kernels are translated, and polypy does not translate CCCL's device code (Thrust runs in host
code only, compiled as NVIDIA wrote it: ``frontend.cccl_refusals``, docs/thrust.md).
"""
from __future__ import annotations

import clang.cindex as ci

from frontend.cccl_refusals import CUB, prefixes, relative
from frontend.function_scan import scan


def refuse_in_device_code(cursor: ci.Cursor, error, *, call: ci.Cursor | None = None) -> None:
    """The first name under ``cursor`` (a kernel, or a device function being inlined at ``call``)
    that refers to a CCCL declaration: ``error(message, at)`` raised there (a function of CCCL's
    own inlined at ``call``: raised at the call)."""
    roots = prefixes()
    if not roots:
        return
    if call is not None and cursor.location.file is not None:
        rel = relative(cursor.location.file.name, roots)
        if rel is not None:
            raise error(_message(cursor.spelling, rel), call)
    for where, (c, ref) in scan(cursor).first_reference_into.items():  # (frontend.function_scan)
        rel = relative(where, roots)
        if rel is not None:
            raise error(_message(ref.spelling or c.spelling, rel), c)


def _message(name: str, rel: str) -> str:
    if rel.startswith("cub/"):
        return f"'{name}': {CUB}"
    return (f"'{name}' (CCCL's {rel}) in device code is not supported: polypy translates kernels, and runs Thrust "
            "and libcu++ in host code only, compiled as NVIDIA wrote them (docs/thrust.md)")

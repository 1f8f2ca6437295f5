"""CCCL (Thrust, CUB, libcu++) named in device code: refused where it is named.

Kernels are translated, and polypy does not translate CCCL's device code (Thrust runs in host
code only, compiled as NVIDIA wrote it: ``frontend.cccl_refusals``, docs/thrust.md).
"""
from __future__ import annotations

import weakref

import clang.cindex as ci

from frontend.cccl_refusals import CUB, prefixes, relative
from frontend.clang_setup import preorder

CK = ci.CursorKind
# Not NAMESPACE_REF: a namespace is open, and `cuda::` of polypy's own <cuda/pipeline> is the one that
# CCCL's <cuda/std/...> opened first; the names used in it are checked where they are declared.
_KINDS = (CK.TYPE_REF, CK.TEMPLATE_REF, CK.DECL_REF_EXPR, CK.MEMBER_REF_EXPR, CK.CALL_EXPR, CK.OVERLOADED_DECL_REF)


def refuse_in_device_code(cursor: ci.Cursor, error, *, call: ci.Cursor | None = None) -> None:
    """The first name under ``cursor`` (a kernel, or a device function being inlined at ``call``)
    that refers to a CCCL declaration: ``error(message, at)`` raised there (a function of CCCL's
    own inlined at ``call``: raised at the call)."""
    roots = prefixes()
    if not roots:
        return
    scanned = _scanned(cursor.translation_unit, roots)
    if call is not None and cursor.location.file is not None:
        rel = relative(cursor.location.file.name, roots)
        if rel is not None:
            raise error(_message(cursor.spelling, rel), call)
    key = (cursor.location.file.name if cursor.location.file is not None else "", cursor.location.offset)
    if key in scanned:  # (a function inlined at many calls: once it is found clean)
        return
    for c in preorder(cursor):
        if c.kind not in _KINDS:
            continue
        ref = c.referenced
        where = ref.location.file if ref is not None else None
        rel = relative(where.name, roots) if where is not None else None
        if rel is not None:
            raise error(_message(ref.spelling or c.spelling, rel), c)
    scanned.add(key)  # only now: a function refused once is refused again if lowered again


# Per translation unit: the functions already found clean. (A cache: weak, so that units are freed
# with their modules.) Every unit is scanned: whether a unit includes CCCL cannot be told from its
# inclusions, which a unit parsed through a precompiled preamble does not list (a second load of
# the same file accepted `cuda::std::min` in a kernel).
_SCANNED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _scanned(tu: ci.TranslationUnit, roots: tuple[str, ...]) -> set[tuple[str, int]]:
    return _SCANNED.setdefault(tu, set())


def _message(name: str, rel: str) -> str:
    if rel.startswith("cub/"):
        return f"'{name}': {CUB}"
    return (f"'{name}' (CCCL's {rel}) in device code is not supported: polypy translates kernels, and runs Thrust "
            "and libcu++ in host code only, compiled as NVIDIA wrote them (docs/thrust.md)")

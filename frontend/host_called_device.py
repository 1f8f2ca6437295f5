"""Device functions that the program's host code calls: they stay in the host text.

A whole program keeps its host code as written and drops the definitions of device-only
functions (``__device__`` without ``__host__``): kernels inline them. But code that stays may call
one: a function object's ``__device__ operator()`` that Thrust applies on its OpenMP device
system (the CPU, where polypy's device code runs) calling a ``__device__`` helper, or a struct's
``__device__`` method. Those helpers, and what they call in turn, are kept as written (the
translated program compiles ``__device__`` as nothing), so that the calls have their callee --
unless one of them uses a CUDA built-in of polypy's device prelude (``threadIdx``,
``__syncthreads``, ``__shfl_sync``...), which host code cannot compile: such a helper is dropped
as before (a member of a class template that host code never instantiates may call it).
"""
from __future__ import annotations

import clang.cindex as ci

from frontend.clang_setup import preorder
from frontend.lower import CK, has_attr
from frontend.lower.context import is_device_decl, is_host_decl, is_kernel_decl

_FUNCTIONS = (CK.FUNCTION_DECL, CK.FUNCTION_TEMPLATE)
_REFS = (CK.DECL_REF_EXPR, CK.CALL_EXPR, CK.OVERLOADED_DECL_REF)


def _places(c: ci.Cursor) -> set[tuple[str, int]]:
    """Where a function is declared, under each cursor that stands for it (its first declaration,
    its definition; an instance of a template is where the template is)."""
    out = set()
    for x in (c, c.canonical, c.get_definition()):
        if x is not None and x.location.file is not None:
            out.add((x.location.file.name, x.location.offset))
    return out


def _device_only(d: ci.Cursor) -> bool:
    return d.kind in _FUNCTIONS and is_device_decl(d) and not is_host_decl(d) and not is_kernel_decl(d)


def _device_side(d: ci.Cursor) -> bool:
    """Declarations the host text does not keep: kernels, device-only functions, device globals."""
    if d.kind in _FUNCTIONS and is_kernel_decl(d):
        return True
    return _device_only(d) or (d.kind == CK.VAR_DECL and (has_attr(d, CK.CUDACONSTANT_ATTR, "polypy_constant")
                                                           or has_attr(d, CK.CUDADEVICE_ATTR, "polypy_device")))


def host_called_device_functions(decls: list[ci.Cursor]) -> set[tuple[str, int]]:
    """The places (file, offset) of the user's device-only functions that host text refers to,
    directly or through other such functions; ``decls``: the user's top-level declarations."""
    device = [d for d in decls if _device_only(d)]
    if not device:
        return set()
    by_place: dict[tuple[str, int], list[ci.Cursor]] = {}
    for d in device:
        for place in _places(d):
            by_place.setdefault(place, []).append(d)
    kept: set[tuple[str, int]] = set()
    host_safe: dict[tuple[str, int], bool] = {}
    todo = [d for d in decls if not _device_side(d)]
    while todo:
        for r in preorder(todo.pop()):
            if r.kind not in _REFS or r.referenced is None:
                continue
            for place in _places(r.referenced):
                for d in by_place.get(place, ()):
                    ours = (d.location.file.name, d.location.offset)
                    if ours not in kept and _host_safe(d, by_place, host_safe):
                        kept.add(ours)
                        todo.append(d)
    return kept


def _host_safe(fn: ci.Cursor, by_place: dict[tuple[str, int], list[ci.Cursor]],
               memo: dict[tuple[str, int], bool]) -> bool:
    """Whether ``fn`` and the device-only functions it calls use no CUDA built-in."""
    key = (fn.location.file.name, fn.location.offset)
    if key in memo:
        return memo[key]
    memo[key] = True  # (recursion: assumed until shown otherwise)
    for r in preorder(fn):
        ref = r.referenced if r.kind in _REFS else None
        if ref is None:
            continue
        if _builtin(ref) or any(not _host_safe(d, by_place, memo) for place in _places(ref)
                                for d in by_place.get(place, ()) if d != fn):
            memo[key] = False
            break
    return memo[key]


def _builtin(ref: ci.Cursor) -> bool:
    f = ref.location.file
    return f is not None and f.name.replace("\\", "/").endswith("/polypy_device.h")

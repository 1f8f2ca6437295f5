"""The ids of device functions whose address is taken (docs/function_pointers.md).

polypy translates a device function pointer as a small integer: every ``__device__`` (or
``__host__ __device__``) function whose address the translation unit takes anywhere (``op_t f =
add;``, ``&add``, ``{add, mul}``, a template argument, ``__device__ op_t d_add = add;``) gets an
id, a 62-bit hash of the function's clang USR (never 0); 0 is the null pointer. The world is
closed: a call through a pointer can only reach one of these functions, and only one whose type
is the pointer's (``frontend.lower.function_pointers`` dispatches over them).

A reference to a function is a taking of its address unless it is the callee of a call
(``add(a, b)``) or names an overloaded operator. Kernels, module variables and the host (which
only sees ids through ``cudaMemcpyFromSymbol`` and kernel arguments, as opaque values) agree on
them, and so do the files of a program built by separate compilation (``-rdc``): the id of a
function is a function of its USR alone (an inline function or template instance of a shared
header has one USR in every file; a ``static`` one's USR names its file), so a pointer made in one
file and called in another reaches the same function where that file defines it, and otherwise
matches no target of the dispatch, which fails the launch as a failed device assertion does.
"""
from __future__ import annotations

import hashlib

import clang.cindex as ci

from frontend.clang_setup import child_cursors, file_name
from frontend.unit_cache import PerUnit

CK = ci.CursorKind
TK = ci.TypeKind

_CACHE = PerUnit(4)
_WRAPPERS = (CK.UNEXPOSED_EXPR, CK.PAREN_EXPR)


def is_function_type(t: ci.Type) -> bool:
    return t.get_canonical().kind in (TK.FUNCTIONPROTO, TK.FUNCTIONNOPROTO)


def is_function_pointer(t: ci.Type) -> bool:
    """Whether ``t`` is a pointer to a function (``float (*)(float, float)``, a typedef of one)."""
    c = t.get_canonical()
    return c.kind == TK.POINTER and is_function_type(c.get_pointee())


def _is_device(fn: ci.Cursor) -> bool:
    return any(ch.kind == CK.CUDADEVICE_ATTR or (ch.kind == CK.ANNOTATE_ATTR and ch.spelling == "polypy_device")
               for ch in fn.get_children())


def _user_code(c: ci.Cursor) -> bool:
    if c.location.is_in_system_header:
        return False
    name = file_name(c)
    if name is None:
        return False
    name = name.replace("\\", "/")
    return not (name.endswith("polypy_device.h") or "/polypy/runtime/" in name or "/frontend/include/" in name)


def _callee(call: ci.Cursor) -> ci.Cursor | None:
    children = child_cursors(call)
    if not children:
        return None
    c = children[0]
    while c.kind in _WRAPPERS:
        inner = child_cursors(c)
        if len(inner) != 1:
            return None
        c = inner[0]
    return c


def address_taken(tu: ci.TranslationUnit) -> dict[str, tuple[int, ci.Cursor]]:
    """USR -> (id, the function's declaration) for the device functions of ``tu`` whose address
    is taken (``stable_id`` of the USR), in the order of the functions' first declarations."""
    answers = _CACHE.of(tu)
    found = answers.get("ids")
    if found is not None:
        return found
    callees: set[ci.Cursor] = set()
    taken: dict[str, ci.Cursor] = {}
    stack = [c for c in child_cursors(tu.cursor) if _user_code(c)]
    stack.reverse()
    while stack:
        c = stack.pop()
        if c.kind == CK.CALL_EXPR:
            callee = _callee(c)
            if callee is not None and callee.kind == CK.DECL_REF_EXPR:
                callees.add(callee)
        elif c.kind == CK.DECL_REF_EXPR and c not in callees:
            r = c.referenced
            if r is not None and r.kind == CK.FUNCTION_DECL and not r.spelling.startswith("operator") and \
                    _is_device(r):
                taken.setdefault(r.get_usr(), r.canonical)
        below = child_cursors(c)
        below.reverse()
        stack.extend(below)
    ordered = sorted(taken.items(), key=lambda kv: (file_name(kv[1]) or "", kv[1].location.offset, kv[0]))
    found = {usr: (stable_id(usr), fn) for usr, fn in ordered}
    answers["ids"] = found
    return found


def stable_id(usr: str) -> int:
    """A function's id: 62 bits of a hash of its USR, never 0 (the null pointer), the same in
    every translation unit and every run."""
    h = int.from_bytes(hashlib.blake2b(usr.encode(), digest_size=8).digest(), "little")
    return (h >> 2) or 1


def function_id(fn: ci.Cursor) -> int | None:
    """The id of device function ``fn`` (None: not a device function whose address is taken)."""
    entry = address_taken(fn.translation_unit).get(fn.get_usr())
    return entry[0] if entry is not None else None


def targets(tu: ci.TranslationUnit, function_type: ci.Type) -> list[tuple[int, ci.Cursor]]:
    """The (id, declaration) of the address-taken device functions of type ``function_type``."""
    spelling = _without_noexcept(function_type)
    return [(k, fn) for k, fn in address_taken(tu).values() if _without_noexcept(fn.type) == spelling]


def _without_noexcept(t: ci.Type) -> str:
    """A function type's spelling, ``noexcept`` left out (a pointer to a function may point to a
    ``noexcept`` one; taking in more functions than can be reached changes nothing: ids differ)."""
    return t.get_canonical().spelling.removesuffix(" noexcept")

"""Spans of a host file that the emitted program rewrites, read from clang's cursors: the
``#include`` s (``include_span``), device symbols named by strings (``symbol_name_spans``), and
byte offsets (clang) as character offsets (``OffsetMap``). For ``frontend.module``."""
from __future__ import annotations

import pathlib
from collections.abc import Callable

import clang.cindex as ci

from polypy.errors import UserError
from polypy.ir.host import DeviceSpan, IncludeSpan
from polypy.sources import read_source

from frontend.clang_setup import PRELUDE_DIR, RUNTIME_DIR, cursor_loc, spelled_extent
from frontend.function_ids import function_id, is_function_pointer, is_function_type
from frontend.function_scan import scan
from frontend.lower import CK, has_attr

# CUDA headers whose every declaration polypy's runtime header and device prelude already hold: in
# emitted code their includes become a note (the runtime is pasted at the top). polypy's other
# headers (polypy/runtime: helper_cuda.h, cutil.h, math_constants.h ...) have content of their
# own: they are inlined like a user's header.
CUDA_HEADERS = frozenset({
    "cuda_runtime.h", "cuda.h", "cuda_runtime_api.h", "device_launch_parameters.h", "device_functions.h",
    "cuda_device_runtime_api.h", "vector_types.h", "vector_functions.h", "driver_types.h", "cuda_profiler_api.h",
})

# Runtime calls that take a device symbol: the position of the symbol among their arguments.
_SYMBOL_ARGUMENT = {"cudaMemcpyToSymbol": 0, "cudaMemcpyToSymbolAsync": 0, "cudaMemcpyFromSymbol": 1,
                    "cudaMemcpyFromSymbolAsync": 1, "cudaGetSymbolAddress": 1, "cudaGetSymbolSize": 1}


def symbol_name_spans(file_decls: list[ci.Cursor], decls: list[ci.Cursor], conv: OffsetMap,
                      is_host_function: Callable[[ci.Cursor], bool]) -> tuple[DeviceSpan, ...]:
    """``cudaMemcpyToSymbol("c_clusters", ...)``: the symbol named by a string (CUDA before 5.0;
    kmeans). The emitted program knows its symbols, so the string becomes the variable itself
    (a ``"symbol-name"`` span); a string that names no ``__constant__``/``__device__`` variable of
    the program is a located error (the runtime's template would copy into the string)."""
    symbols = {d.spelling for d in decls if d.kind == CK.VAR_DECL
               and (has_attr(d, CK.CUDACONSTANT_ATTR, "polypy_constant")
                    or has_attr(d, CK.CUDADEVICE_ATTR, "polypy_device"))}
    out: list[DeviceSpan] = []
    for d in file_decls:
        if not is_host_function(d):
            continue
        for call in scan(d).calls:  # (frontend.function_scan)
            position = _SYMBOL_ARGUMENT.get(call.spelling)
            if position is None:
                continue
            args = list(call.get_arguments())
            if len(args) <= position:
                continue
            literal = _string_literal(args[position])
            if literal is None:
                continue
            name = literal.spelling[1:-1] if literal.spelling.startswith('"') else None
            if name is None or name not in symbols:
                raise UserError(f"{call.spelling} names its symbol by a string ({literal.spelling}), and this "
                                "program has no __constant__ or __device__ variable of that name: pass the "
                                "variable itself", cursor_loc(literal))
            if conv.slice(literal.extent) != literal.spelling:
                raise UserError(f"{call.spelling} with a symbol named by a string written in a macro is not "
                                "supported: pass the variable itself", cursor_loc(literal))
            out.append(DeviceSpan(conv.char(literal.extent.start.offset), conv.char(literal.extent.end.offset),
                                  "symbol-name", (name,)))
    return tuple(out)


def function_id_spans(file_decls: list[ci.Cursor], conv: OffsetMap) -> tuple[DeviceSpan, ...]:
    """``__device__ op_t d_add = add;``, ``__constant__ op_t ops[] = {add, &mul};``: the emitted
    program's variable holds the function's id (frontend.function_ids), which kernels read and
    ``cudaMemcpyFromSymbol`` hands the host, so each function named there becomes its id, cast to
    the pointer type (a ``"function-id"`` span; the device function itself is not in the program)."""
    out: list[DeviceSpan] = []
    for d in file_decls:
        if d.kind != CK.VAR_DECL or not (has_attr(d, CK.CUDACONSTANT_ATTR, "polypy_constant")
                                         or has_attr(d, CK.CUDADEVICE_ATTR, "polypy_device")):
            continue
        stack = [ch for ch in d.get_children() if ch.kind.is_expression()]
        while stack:
            c = stack.pop()
            target = _named_function(c)
            if target is None:
                stack.extend(c.get_children())
                continue
            k = function_id(target)
            if k is None:
                raise UserError(f"'{target.spelling}' is not a __device__ function: a device function pointer cannot "
                                "point to it", cursor_loc(c))
            extent = c.extent
            text = f"((__typeof__({target.type.get_canonical().spelling})*)(intptr_t){k})"
            out.append(DeviceSpan(conv.char(extent.start.offset), conv.char(extent.end.offset), "function-id", (text,)))
    return tuple(out)


def _named_function(c: ci.Cursor) -> ci.Cursor | None:
    """The function ``c`` converts to a pointer (``add`` decayed, ``&add``), or None."""
    if c.kind == CK.DECL_REF_EXPR and is_function_type(c.type) and c.referenced is not None and \
            c.referenced.kind == CK.FUNCTION_DECL:  # an element of a brace list
        return c.referenced
    if not is_function_pointer(c.type) or c.kind not in (CK.UNEXPOSED_EXPR, CK.UNARY_OPERATOR):
        return None
    inner = [ch for ch in c.get_children() if ch.kind.is_expression()]
    while len(inner) == 1 and inner[0].kind == CK.PAREN_EXPR:
        inner = list(inner[0].get_children())
    if len(inner) == 1 and inner[0].kind == CK.DECL_REF_EXPR and inner[0].referenced is not None and \
            inner[0].referenced.kind == CK.FUNCTION_DECL:
        return inner[0].referenced
    return None


def include_span(c: ci.Cursor, conv: OffsetMap, tu: ci.TranslationUnit) -> IncludeSpan:
    """An ``#include`` of a host file: what its header is (``cuda``, ``user``, ``system``)."""
    included = c.get_included_file()
    target = included.name if included is not None else None
    name = pathlib.PurePath(c.spelling).name
    if target is not None and is_runtime_header(target):
        kind = "cuda" if pathlib.PurePath(target).name in CUDA_HEADERS else "user"
    elif target is not None and pathlib.Path(target).resolve().is_relative_to(PRELUDE_DIR.resolve()):
        kind = "system"  # polypy's stand-in for a system header (omp.h, stdio.h): compiled against the real one
    elif target is not None and (pathlib.Path(target).resolve().is_relative_to((RUNTIME_DIR / "torch").resolve())
                                 or in_system_directory(tu, included)):
        # A library's header (PyTorch's, on an -isystem path) or polypy's stand-in for one of
        # ATen's CUDA headers: the build compiles against it, on its own include path.
        kind = "system"
    elif name in CUDA_HEADERS and (target is None or not is_user_path(target)):
        kind = "cuda"  # a CUDA toolkit's header named with -I: polypy's runtime stands for it
    elif target is not None and is_user_path(target):
        kind = "user"
    else:
        kind = "system"
    start = conv.char(c.extent.start.offset)
    once = pragma_once_spans(tu, included) if kind == "user" and included is not None else ()
    return IncludeSpan(start, conv.char(c.extent.end.offset), target, kind, once)


def pragma_once_spans(tu: ci.TranslationUnit, included: ci.File) -> tuple[tuple[int, int], ...]:
    """The character spans of the ``#pragma once`` directives of an included file (clang's tokens,
    read as the file's bytes: libclang's spellings are UTF-8, a Latin-1 comment's are not)."""
    data = pathlib.Path(included.name).read_bytes()
    whole = ci.SourceRange.from_locations(ci.SourceLocation.from_offset(tu, included, 0),
                                          ci.SourceLocation.from_offset(tu, included, len(data)))
    tokens = list(tu.get_tokens(extent=whole))
    conv = OffsetMap(read_source(included.name), data)
    out = []
    def spelled(t: ci.Token) -> bytes:
        return data[t.extent.start.offset:t.extent.end.offset]

    for hash_, pragma, once in zip(tokens, tokens[1:], tokens[2:]):
        if (spelled(hash_), spelled(pragma), spelled(once)) == (b"#", b"pragma", b"once") and \
                hash_.location.line == pragma.location.line == once.location.line:
            out.append((conv.char(hash_.extent.start.offset), conv.char(once.extent.end.offset)))
    return tuple(out)


def in_system_directory(tu: ci.TranslationUnit, included: ci.File) -> bool:
    """Whether clang found the file in a system include directory (``-isystem``)."""
    return ci.SourceLocation.from_offset(tu, included, 0).is_in_system_header

def is_user_path(path: str) -> bool:
    system_dirs = ("/usr/", "/opt/")
    return not path.startswith(system_dirs) and "polypy" not in pathlib.PurePath(path).parts[-2:-1]


def _string_literal(arg: ci.Cursor) -> ci.Cursor | None:
    """The string literal an argument is, through implicit conversions and parentheses."""
    while arg.kind in (CK.UNEXPOSED_EXPR, CK.PAREN_EXPR, CK.CSTYLE_CAST_EXPR):
        children = [c for c in arg.get_children() if c.kind != CK.TYPE_REF]
        if len(children) != 1:
            return None
        arg = children[0]
    return arg if arg.kind == CK.STRING_LITERAL else None


def is_runtime_header(path: str) -> bool:
    """A header of polypy's runtime directory, of its ``cooperative_groups/`` or ``cuda/``, or of its
    CUB (``cub/...``, docs/cub.md) (not the user's file of the same name)."""
    resolved = pathlib.Path(path).resolve()
    parent = resolved.parent
    return parent == RUNTIME_DIR.resolve() or parent in (
        (RUNTIME_DIR / "cooperative_groups").resolve(), (RUNTIME_DIR / "cuda").resolve()) \
        or resolved.is_relative_to((RUNTIME_DIR / "cub").resolve())


class OffsetMap:
    """Byte offsets (clang) → character offsets (Python strings) for one file.

    ``data``: the bytes clang read (a file from disk, which may not be valid UTF-8: ``text`` is
    then its lenient decoding, one U+FFFD per bad byte); by default ``text`` as UTF-8.
    """

    def __init__(self, text: str, data: bytes | None = None):
        self.text = text
        data = text.encode("utf-8") if data is None else data
        self.ascii = len(data) == len(text)
        self.data = data

    def char(self, byte_offset: int) -> int:
        if self.ascii:
            return byte_offset
        return len(self.data[:byte_offset].decode("utf-8", errors="replace"))

    def slice(self, extent: ci.SourceRange) -> str:
        return self.text[self.char(extent.start.offset):self.char(extent.end.offset)]

    def spelled(self, cursor: ci.Cursor) -> str:
        """The text of ``cursor`` as written (in a macro's argument: the argument's text)."""
        start, end = spelled_extent(cursor)
        return self.text[self.char(start):self.char(end)]

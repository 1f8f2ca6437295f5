"""libclang set-up: include paths, compiler flags, diagnostics, and C-API helpers.

The pip wheel of libclang ships no resource directory (no ``stddef.h``), and a machine without
a CUDA toolkit has no CUDA headers. So the frontend always parses with ``-nostdinc`` and an
explicit include path:

1. polypy's own CUDA headers (``polypy/runtime``: ``cuda_runtime.h`` and the toolkit's header
   names programs include, ``helper_cuda.h``, ``cutil.h`` ...) and device prelude
   (``frontend/include``, force-included), which replace the toolkit's headers; ``frontend/include``
   also holds stand-ins for system headers libclang cannot parse (GCC's ``omp.h``), found first;
2. the system C/C++ compiler's include directories when one is installed (found once by asking
   ``c++ -E -v``), so ``<vector>`` or ``<iostream>`` in host code parse as they would compile;
3. otherwise polypy's bundled freestanding headers (``frontend/include/freestanding``): the C
   and C++ standard headers CUDA programs commonly include, declaring what those programs use.

``POLYPY_HEADERS=bundled`` (or ``system``) forces one of 2/3.
"""
from __future__ import annotations

import ctypes
import functools
import os
import pathlib
import re
import shutil
import subprocess

import clang.cindex as ci

from polypy.cccl import THRUST_CUDA_SYSTEM_INCLUDES, include_dir as cccl_include_dir, missing_message as cccl_missing
from polypy.errors import Loc, UserError
from polypy.sources import SystemIncludeDir
from polypy.ir.depth import MAX_BRACKETS, too_deep
from polypy.stack import on_big_stack

from frontend.cccl_refusals import refuse_includes
from frontend.pch import forget, pch_arguments

FRONTEND_DIR = pathlib.Path(__file__).resolve().parent
PRELUDE_DIR = FRONTEND_DIR / "include"
PRELUDE = PRELUDE_DIR / "polypy_device.h"
FREESTANDING_DIR = PRELUDE_DIR / "freestanding"
RUNTIME_DIR = FRONTEND_DIR.parent / "polypy" / "runtime"


# What nvcc 12.0 predefines in both of its passes (polypy's cuda_runtime.h has CUDART_VERSION
# 12000): code that tests the version (``#if __CUDACC_VER_MAJOR__ >= 9`` around ``__shfl_down_sync``
# and the legacy ``__shfl_down``) takes the branch nvcc 12 takes. ``__CUDA_ARCH__`` is defined in
# the device pass only: see ``frontend.device_pass``.
NVCC_MACROS: dict[str, str | None] = {
    "__CUDACC__": None, "__NVCC__": None, "__CUDACC_VER_MAJOR__": "12", "__CUDACC_VER_MINOR__": "0",
    "__CUDACC_VER_BUILD__": "76",
}


# GCC 12's -fopenmp (OpenMP 4.5).
OPENMP_VERSION = 201511


@functools.lru_cache(maxsize=None)
def index() -> ci.Index:
    return ci.Index.create()


@functools.lru_cache(maxsize=None)
def system_include_dirs(language: str) -> tuple[str, ...]:
    """The system compiler's ``#include <...>`` search list, or () when there is no compiler."""
    compiler = shutil.which("c++" if language == "c++" else "cc") or shutil.which("g++" if language == "c++" else "gcc")
    if compiler is None:
        return ()
    try:
        proc = subprocess.run(
            [compiler, "-E", "-x", language, "-", "-v"], input="", capture_output=True, text=True, timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    dirs: list[str] = []
    inside = False
    for line in proc.stderr.splitlines():
        if line.startswith("#include <...> search starts here"):
            inside = True
            continue
        if line.startswith("End of search list"):
            break
        if inside:
            path = line.strip().split(" (framework directory)")[0]
            if os.path.isdir(path):
                dirs.append(path)
    return tuple(dirs)


def header_mode() -> str:
    forced = os.environ.get("POLYPY_HEADERS", "").strip().lower()
    if forced in ("bundled", "system"):
        return forced
    return "system" if system_include_dirs("c++") else "bundled"


def clang_args(language: str, *, defines: dict[str, str] | None = None,
               include_dirs: tuple[str, ...] = ()) -> list[str]:
    """Flags for parsing a ``cuda`` or ``c`` source."""
    if language == "cuda":
        args = ["-x", "cuda", "-std=c++17", "-nocudainc", "-nocudalib", "--cuda-host-only", "-nostdinc",
                "-nostdinc++"]
        args += [f"-D{name}" if value is None else f"-D{name}={value}" for name, value in NVCC_MACROS.items()]
    else:
        args = ["-x", "c", "-std=gnu11", "-nostdinc"]
    args += ["-Wno-unknown-cuda-version", "-ferror-limit=20", f"-fbracket-depth={MAX_BRACKETS}"]
    if language == "cuda":
        # `"node ("fNID")"` with fNID a string macro: C++11 reads `"..."fNID` as a user-defined
        # literal, which clang rejects; nvcc (EDG, then GCC) warns and reads two tokens, and so
        # does clang with this off (Rodinia's mummergpu).
        args.append("-Wno-reserved-user-defined-literal")
    for d in include_dirs:
        args += ["-isystem" if isinstance(d, SystemIncludeDir) else "-I", str(d)]
    args += ["-isystem", str(RUNTIME_DIR), "-isystem", str(PRELUDE_DIR)]
    if language == "cuda":
        # A translated program is compiled with -fopenmp, which defines _OPENMP: its host code
        # (and Thrust's OpenMP system, which requires it) is read as the compiler will read it.
        args.append(f"-D_OPENMP={OPENMP_VERSION}")
        cccl = cccl_include_dir()
        if cccl is not None:  # Thrust and libcu++, after polypy's own <cuda/barrier> and <cuda/pipeline>
            args += ["-isystem", str(cccl)]
    if header_mode() == "system":
        for d in system_include_dirs("c++" if language == "cuda" else "c"):
            args += ["-isystem", d]
    else:
        args += ["-isystem", str(FREESTANDING_DIR)]
    for name, value in (defines or {}).items():
        args.append(f"-D{name}={value}" if value is not None else f"-D{name}")
    args += ["-include", str(PRELUDE)]
    return args


@on_big_stack
def parse_translation_unit(path: str, language: str, *, text: str | None = None,
                           defines: dict[str, str] | None = None,
                           include_dirs: tuple[str, ...] = ()) -> ci.TranslationUnit:
    """Parse ``path`` (or ``text`` under that name); clang errors become a ``UserError``.

    Clang's parser and semantic checks recurse over deep expressions (a sum of 15,000 terms
    overflowed the 8 MiB thread libclang parses on by default). So parsing runs here, on
    ``polypy.stack``'s big stack, and ``LIBCLANG_NOTHREADS`` tells libclang to stay on it."""
    os.environ["LIBCLANG_NOTHREADS"] = "1"  # read by libclang at each parse
    args = clang_args(language, defines=defines, include_dirs=include_dirs)
    unsaved = [(path, text)] if text is not None else None
    options = ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD
    device_pass = "__CUDA_ARCH__" in (defines or {})
    tu = _parse(path, args, unsaved, options, device_pass)
    # CUB and Thrust's CUDA system first: their headers do not parse here.
    errors = _errors(tu, device_pass)
    if refuse_includes(tu, defines) and errors and not _includes(tu, THRUST_CUDA_SYSTEM_INCLUDES):
        # Thrust's CUDA system includes <thrust/system_error.h> with every header, and programs
        # written for it name thrust::system_error without including it; the OpenMP system does
        # not. The translated program includes it after polypy's runtime (codegen.c.module's
        # ``emit_program``), and so does this second reading.
        tu = _parse(path, args + [a for h in THRUST_CUDA_SYSTEM_INCLUDES for a in ("-include", h)], unsaved,
                    options, device_pass)
        errors = _errors(tu, device_pass)
    if errors:
        first = errors[0]
        if first.spelling.startswith("bracket nesting level exceeded"):
            raise too_deep(MAX_BRACKETS + 1, MAX_BRACKETS, location_of(first.location), at_least=True,
                           what="levels of brackets")
        raise UserError(_explain(first.spelling), location_of(first.location),
                        notes=tuple((d.spelling, location_of(d.location)) for d in errors[1:4]))
    return tu


def _parse(path: str, args: list[str], unsaved, options: int, device_pass: bool) -> ci.TranslationUnit:
    """One libclang parse, through the precompiled prelude where there is one (``frontend.pch``);
    a parse through it with any error is parsed again without it."""
    fast = pch_arguments(args, PRELUDE, options, (PRELUDE_DIR, RUNTIME_DIR), index())
    if fast is not None:
        try:
            tu = index().parse(path, args=fast, unsaved_files=unsaved, options=options)
        except ci.TranslationUnitLoadError:
            tu = None
        if tu is None or any("precompiled" in d.spelling or "PCH" in d.spelling for d in _errors(tu, device_pass)):
            forget(fast)  # unreadable or stale: built again at the next parse
        elif not _errors(tu, device_pass):
            return tu
    try:
        return index().parse(path, args=args, unsaved_files=unsaved, options=options)
    except ci.TranslationUnitLoadError as exc:
        raise UserError(f"cannot parse {path}: {exc}") from None


def _errors(tu: ci.TranslationUnit, device_pass: bool) -> list[ci.Diagnostic]:
    """The errors of a parse. In nvcc's device pass (``__CUDA_ARCH__`` defined: frontend.device_pass),
    not those inside CCCL's headers, which then read as device code that polypy's prelude does not
    declare (``__trap``): the pass gives only kernels, which may not name CCCL (frontend.lower.cccl),
    and Thrust's host code comes from the host pass."""
    return [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Error and not _alignas_after_specifier(tu, d)
            and not _device_functor_in_thrust(d) and not (device_pass and _in_cccl(d))]


def _in_cccl(d: ci.Diagnostic) -> bool:
    cccl = cccl_include_dir()
    return cccl is not None and d.location.file is not None and \
        pathlib.Path(d.location.file.name).resolve().is_relative_to(cccl)


def _includes(tu: ci.TranslationUnit, headers: tuple[str, ...]) -> bool:
    """Whether the unit includes every one of ``headers`` (named as in ``#include <...>``)."""
    names = {i.include.name for i in tu.get_includes() if i.include is not None}
    return all(any(name.endswith("/" + h) for name in names) for h in headers)


def _device_functor_in_thrust(d: ci.Diagnostic) -> bool:
    """``thrust::transform(v.begin(), v.end(), out.begin(), op())`` with a ``__device__``-only
    ``op::operator()``: Thrust's algorithms are ``__host__ __device__``, and clang's host pass
    says that they may not call it. Thrust runs them on its OpenMP device system here, whose
    device is the CPU, where polypy's device code runs: the call is the one CUDA makes on the
    device (the translated program compiles ``__device__`` as nothing). Only inside CCCL."""
    return d.spelling.startswith("reference to __device__ function") and _in_cccl(d)


def _alignas_after_specifier(tu: ci.TranslationUnit, d: ci.Diagnostic) -> bool:
    """``__shared__ alignas(16) float a[..]``: nvcc accepts ``alignas`` after ``__shared__``; clang
    (whose ``__shared__`` is a GNU attribute, a specifier) says "an attribute list cannot appear
    here", then applies the alignment all the same. Only that error, at an ``alignas`` token."""
    if d.spelling != "an attribute list cannot appear here" or d.location.file is None:
        return False
    at = ci.SourceLocation.from_position(tu, d.location.file, d.location.line, d.location.column)
    token = next(iter(tu.get_tokens(extent=ci.SourceRange.from_locations(at, at))), None)
    return token is not None and token.spelling == "alignas"


# Clang's wording for device-code calls of host-only C library functions; polypy says why.
_DEVICE_CALL_ERRORS = {
    "no matching function for call to 'printf'": "printf in device code is not supported",
    "no matching function for call to 'malloc'": "dynamic allocation in device code is not supported",
    "no matching function for call to 'free'": "dynamic allocation in device code is not supported",
}


# Headers of CUDA features polypy does not translate (by name, or by their library's directory):
# a missing header says which feature it is.
_UNSUPPORTED_HEADERS = {
    "curand.h": "the cuRAND host API (curand.h: curandCreateGenerator, curandGenerate...; the device API of "
                "curand_kernel.h is supported)",
    "cuda_awbarrier.h": "asynchronous barriers (cuda_awbarrier.h)",
    "thrust": "Thrust",
    "cub": "CUB beyond its block and warp primitives (polypy's <cub/cub.cuh>: cub::BlockReduce, BlockScan, "
           "BlockRadixSort, BlockLoad, BlockStore, BlockExchange, BlockHistogram, BlockDiscontinuity, BlockShuffle, WarpReduce, WarpScan; docs/cub.md)",
    "cuda": "libcu++ (<cuda/...> other than <cuda/barrier> and <cuda/pipeline>: atomics, <cuda/std/...>)",
}
# Of those, what CCCL's headers give in host code where they are installed (polypy.cccl).
_CCCL_HOST = {"thrust": "Thrust", "cuda": "libcu++ (<cuda/...> other than <cuda/barrier> and <cuda/pipeline>) in "
                                          "host code"}
_NOT_FOUND = re.compile(r"^'([^']+)' file not found$")


def _explain(message: str) -> str:
    ours = _DEVICE_CALL_ERRORS.get(message)
    missing = _NOT_FOUND.match(message)
    if ours is None and missing is not None:
        header = missing.group(1)
        feature = _UNSUPPORTED_HEADERS.get(header) or _UNSUPPORTED_HEADERS.get(header.split("/")[0]) \
            if "/" in header else _UNSUPPORTED_HEADERS.get(header)
        ours = f"{feature} is not supported" if feature is not None else None
        top = header.split("/")[0] if "/" in header else None
        if top in _CCCL_HOST:  # missing from CCCL's headers, or CCCL missing
            ours = cccl_missing(_CCCL_HOST[top]) if cccl_include_dir() is None else None
    if ours is None and "TensorAccessor" in message and ("operator[]" in message or "member function" in message):
        # PyTorch's accessors are host code in the host compiler's reading of its headers; the
        # reading polypy.torch gives the frontend (polypy_torch_host.h) makes them device code.
        ours = ("PyTorch's tensor accessors (packed_accessor32/64) are device code only where polypy reads "
                "PyTorch's headers for an extension: build it with polypy.torch.load / load_inline, or compile its "
                "kernels with polypy.torch.kernels")
    return f"{ours} (clang: {message})" if ours is not None else message


def location_of(location: ci.SourceLocation) -> Loc | None:
    if location.file is None:
        return None
    return Loc(location.file.name, location.line, location.column)


def cursor_loc(cursor: ci.Cursor) -> Loc | None:
    return location_of(cursor.location)


def instantiation(location: ci.SourceLocation, tu: ci.TranslationUnit | None) -> tuple[str | None, int, int, int]:
    """``(location.file.name, .line, .column, .offset)`` (name None: no file) of a location
    in ``tu``, in one call into libclang: asked through the bindings, each is a call and the
    name a string made and freed again, about a tenth of the frontend on a long sum, whose
    every node is located and every name's declaration keyed (``decl_key``). The names are
    remembered in the unit by libclang's handle of the file (good while the unit lives)."""
    handle, line, column, offset = ctypes.c_void_p(), ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
    _instantiation_fn()(location, ctypes.byref(handle), ctypes.byref(line), ctypes.byref(column),
                        ctypes.byref(offset))
    key = handle.value
    if key is None:
        return None, line.value, column.value, offset.value
    if tu is None:  # (a cursor the bindings made without its unit)
        return location.file.name, line.value, column.value, offset.value
    names = tu.__dict__.get("_polypy_file_names")
    if names is None:
        names = tu._polypy_file_names = {}
    name = names.get(key)
    if name is None:
        name = names[key] = location.file.name  # (the bindings' answer: the same call, once per file)
    return name, line.value, column.value, offset.value


def file_name(cursor: ci.Cursor) -> str | None:
    """``cursor.location.file.name`` (None: no file), through ``instantiation``."""
    return instantiation(cursor.location, getattr(cursor, "_tu", None))[0]


@functools.lru_cache(maxsize=None)
def _instantiation_fn():
    """libclang's ``clang_getInstantiationLocation`` with the file handed back as a plain address."""
    out = ctypes.POINTER(ctypes.c_uint)
    prototype = ctypes.CFUNCTYPE(None, ci.SourceLocation, ctypes.POINTER(ctypes.c_void_p), out, out, out)
    return prototype(("clang_getInstantiationLocation", ci.conf.lib))


# --------------------------------------------------------------------------- C API extras
# The Python bindings of libclang 18 do not expose operator kinds or constant evaluation; the
# shared library does (since LLVM 17 and 13). We bind them here, by spelling, so that the
# enumeration numbers never appear in our code.


@functools.lru_cache(maxsize=None)
def _lib() -> ctypes.CDLL:
    lib = ci.conf.lib
    lib.clang_getCursorBinaryOperatorKind.argtypes = [ci.Cursor]
    lib.clang_getCursorBinaryOperatorKind.restype = ctypes.c_int
    lib.clang_getCursorUnaryOperatorKind.argtypes = [ci.Cursor]
    lib.clang_getCursorUnaryOperatorKind.restype = ctypes.c_int
    lib.clang_getBinaryOperatorKindSpelling.argtypes = [ctypes.c_int]
    lib.clang_getBinaryOperatorKindSpelling.restype = ci._CXString
    lib.clang_getUnaryOperatorKindSpelling.argtypes = [ctypes.c_int]
    lib.clang_getUnaryOperatorKindSpelling.restype = ci._CXString
    lib.clang_Cursor_Evaluate.argtypes = [ci.Cursor]
    lib.clang_Cursor_Evaluate.restype = ctypes.c_void_p
    lib.clang_EvalResult_getKind.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_getKind.restype = ctypes.c_int
    lib.clang_EvalResult_isUnsignedInt.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_isUnsignedInt.restype = ctypes.c_uint
    lib.clang_EvalResult_getAsUnsigned.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_getAsUnsigned.restype = ctypes.c_ulonglong
    lib.clang_EvalResult_getAsLongLong.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_getAsLongLong.restype = ctypes.c_longlong
    lib.clang_EvalResult_getAsDouble.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_getAsDouble.restype = ctypes.c_double
    lib.clang_EvalResult_getAsStr.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_getAsStr.restype = ctypes.c_char_p
    lib.clang_EvalResult_dispose.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_dispose.restype = None
    lib.clang_getFileLocation.argtypes = [ci.SourceLocation, ctypes.POINTER(ci.c_object_p), ctypes.POINTER(ctypes.c_uint),
                                          ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_uint)]
    lib.clang_getFileLocation.restype = None
    return lib


def _file_offset(location: ci.SourceLocation) -> tuple[str | None, int]:
    """Where the token at ``location`` is spelled (``clang_getFileLocation``): inside a macro's
    argument, the argument's text, where ``location.offset`` is the macro's name."""
    f, line, col, offset = ci.c_object_p(), ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
    _lib().clang_getFileLocation(location, ctypes.byref(f), ctypes.byref(line), ctypes.byref(col), ctypes.byref(offset))
    name = ci.File(f).name if f else None
    return name, offset.value


def spelled_extent(cursor: ci.Cursor) -> tuple[int, int]:
    """The byte offsets of ``cursor``'s text in its file. For code written in a macro's argument
    (a launch in the lambda of ``AT_DISPATCH_FLOATING_TYPES(t, "f", [&] { ... })``, which expands
    once per type), the argument's own text, which comes after the macro's name in the same file;
    otherwise (code outside macros, or in a macro's body, which precedes its use) the extent as
    the file holds it, for a macro its invocation."""
    extent = cursor.extent
    start, end = extent.start.offset, extent.end.offset
    file = extent.start.file.name if extent.start.file is not None else None
    (f1, spelled_start), (f2, spelled_end) = _file_offset(extent.start), _file_offset(extent.end)
    if (f1 == f2 == file and (spelled_start, spelled_end) != (start, end)
            and start <= spelled_start < spelled_end):
        return spelled_start, spelled_end
    return start, end


def _spelling(cxstring: ci._CXString) -> str:
    return ci._CXString.from_result(cxstring)


@functools.lru_cache(maxsize=None)
def _binary_spellings() -> dict[int, str]:
    lib = _lib()
    # Kinds 1..33 (PtrMemD .. Comma); the library does not bounds-check, so never ask past them.
    return {k: _spelling(lib.clang_getBinaryOperatorKindSpelling(k)) for k in range(1, 34)}


@functools.lru_cache(maxsize=None)
def _unary_spellings() -> dict[int, str]:
    lib = _lib()
    return {k: _spelling(lib.clang_getUnaryOperatorKindSpelling(k)) for k in range(1, 14)}


def binary_operator(cursor: ci.Cursor) -> str:
    """The operator of a BINARY_OPERATOR / COMPOUND_ASSIGNMENT_OPERATOR cursor: ``+``, ``+=``..."""
    return _binary_spellings().get(_lib().clang_getCursorBinaryOperatorKind(cursor), "")


def unary_operator(cursor: ci.Cursor) -> str:
    """The operator of a UNARY_OPERATOR cursor: ``++`` (pre/post: see ``is_postfix``), ``-``, ``&``..."""
    return _unary_spellings().get(_lib().clang_getCursorUnaryOperatorKind(cursor), "")


@functools.lru_cache(maxsize=None)
def _postfix_kinds() -> frozenset[int]:
    # clang spells post- and pre-increment alike; the C enumeration lists PostInc, PostDec first.
    return frozenset({1, 2})


def is_postfix(cursor: ci.Cursor) -> bool:
    return _lib().clang_getCursorUnaryOperatorKind(cursor) in _postfix_kinds()


_EVAL_INT = 1
_EVAL_FLOAT = 2
_EVAL_STR_LITERAL = 4


def evaluate(cursor: ci.Cursor) -> int | float | None:
    """Value of a constant expression (literals, ``sizeof``, enumerators...), or None."""
    lib = _lib()
    result = lib.clang_Cursor_Evaluate(cursor)
    if not result:
        return None
    try:
        kind = lib.clang_EvalResult_getKind(result)
        if kind == _EVAL_INT:
            if lib.clang_EvalResult_isUnsignedInt(result):
                return int(lib.clang_EvalResult_getAsUnsigned(result))
            return int(lib.clang_EvalResult_getAsLongLong(result))
        if kind == _EVAL_FLOAT:
            return float(lib.clang_EvalResult_getAsDouble(result))
        return None
    finally:
        lib.clang_EvalResult_dispose(result)


def string_literal_bytes(cursor: ci.Cursor, length: int) -> bytes | None:
    """The ``length`` bytes a narrow string literal stores into a ``char[length]`` array it
    initializes: its characters, then zeros (C's rule for a literal shorter than the array).

    clang evaluates a literal to a NUL-terminated string, so the characters after an embedded
    NUL (``"a\\0b"``) are not seen: where the array holds more than the characters read, the
    literal must be free of escape sequences (only those can spell a NUL) for the rest to be
    zeros. None where that cannot be shown (the caller refuses), or for wide literals."""
    elem = cursor.type.get_canonical().element_type
    if elem.get_size() != 1:
        return None
    text = evaluated_string(cursor)
    if text is None:
        return None
    text = text[:length]
    if len(text) + 1 < length and any("\\" in t.spelling for t in cursor.get_tokens()):
        return None
    return text + bytes(length - len(text))


def evaluated_string(cursor: ci.Cursor) -> bytes | None:
    """The characters (to the first NUL) of a ``const char*`` expression that clang evaluates to
    a string literal, or None."""
    lib = _lib()
    result = lib.clang_Cursor_Evaluate(cursor)
    if not result:
        return None
    try:
        if lib.clang_EvalResult_getKind(result) != _EVAL_STR_LITERAL:
            return None
        return lib.clang_EvalResult_getAsStr(result) or b""
    finally:
        lib.clang_EvalResult_dispose(result)


def top_cursors(tu: ci.TranslationUnit) -> list[ci.Cursor]:
    """The unit's top-level cursors (the headers' included: about 15,000 for the prelude alone),
    listed once per unit: each listing calls back into Python once per cursor."""
    listed = getattr(tu, "_polypy_top", None)
    if listed is None:
        listed = tu._polypy_top = list(tu.cursor.get_children())
    return listed


def preorder(cursor: ci.Cursor):
    """``cursor`` and every cursor below it, parents before children, in source order: what
    ``Cursor.walk_preorder`` gives, without its nested generators (a cursor at depth d passes
    through d of them, so a walk of a 100,000-term sum took quadratic time)."""
    stack = [cursor]
    while stack:
        c = stack.pop()
        yield c
        below = child_cursors(c)
        below.reverse()
        stack.extend(below)


def child_cursors(cursor: ci.Cursor) -> list[ci.Cursor]:
    """``list(cursor.get_children())``, at half the cost: the bindings make a new callback for
    each call and compare every child with the null cursor (a call into libclang each; it never
    hands out null cursors); here one callback serves every call."""
    out: list[ci.Cursor] = []
    ci.conf.lib.clang_visitChildren(cursor, _collect_children(), out)
    tu = cursor._tu  # (each cursor keeps its unit alive, as the bindings' own children do)
    for c in out:
        c._tu = tu
    return out


@functools.lru_cache(maxsize=None)
def _collect_children():
    def collect(child: ci.Cursor, parent: ci.Cursor, out: list) -> int:
        out.append(child)
        return 1  # CXChildVisit_Continue

    return ci.callbacks["cursor_visit"](collect)


def deepest_cursor(cursor: ci.Cursor) -> tuple[ci.Cursor, int]:
    """The first of the deepest cursors under ``cursor`` (in ``preorder``) and its depth,
    found without recursion: where a refusal of too deep input points."""
    deepest, best = 0, cursor
    stack = [(cursor, 0)]
    while stack:
        c, depth = stack.pop()
        if depth > deepest:
            deepest, best = depth, c
        children = list(c.get_children())
        children.reverse()
        stack.extend((child, depth + 1) for child in children)
    return best, deepest

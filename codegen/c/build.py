"""Build emitted kernel code with the system C compiler and launch it from Python (ctypes).

``compile_library(source, cpp=...)`` compiles a kernel library (``codegen.c.emit_kernels``) into a
shared object with ``cc``/``c++ -O3 -march=native -fopenmp -shared -fPIC``, cached on disk by a
hash of compiler, flags and source (``$POLYPY_CACHE_DIR``, default ``~/.cache/polypy``).
``CLibrary`` calls a kernel's launcher on NumPy arrays, binding arguments like the emulator
(``polypy.launch``: C-contiguous arrays of the exact element type, modified in
place; struct parameters passed whole as dicts or member by member).

Block shapes, as in the JIT (``polypy.driver.api``): a library from ``build_library`` holds each
kernel's versions as the pipeline made them (``versions``: ``polypy.passes.versions``; made from
block shapes known in advance by ``polypy.driver.library.build_library``), and, given a way to
make them (``specialize``: a kernel and a block shape -> the kernel's versions for that shape, the
same stage), compiles on the first launch of a kernel with a new block shape that shape's
versions (``blockDim`` made constants; one more small library, cached on disk like the first)
and runs later launches of that shape with it. Kernels that use ``__constant__``/``__device__``
arrays keep their generic version (the arrays live in the first library). Nothing here decides
a version: the launchers print the values' guards (``codegen.c.versions``).

``-ffp-contract=off`` keeps every float operation separately rounded, as the IR (and the
emulator) define it; without it ``-march=native`` lets the compiler fuse ``a * b + c``.
``-fno-math-errno`` changes no result (CUDA math never sets errno) but lets ``sqrtf`` be one
instruction, inlined and vectorized. ``-falign-loops=32``: a short hot loop that straddles a
32-byte boundary runs up to 1.5x slower on AMD Zen 4 (histogram's bin-increment loop: 5
instructions, 18 bytes); with it, where such a loop lands is no longer luck.
"""
from __future__ import annotations

import atexit
import ctypes
import dataclasses
import functools
import hashlib
import os
import pathlib
import shutil
import subprocess
import tempfile
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from polypy.cache import cache_root
from polypy.launch import bind_arguments, block_shape, grid_shape, storage_root
from polypy.errors import InternalError, UserError
from polypy.ir import nodes as n
from polypy.ir.types import PointerType, ScalarType
from polypy.stack import on_big_stack

from polypy.passes.apart_twins import written_pointers
from polypy.ir.versions import BlockShapeIs, KernelVersions
from codegen.c.module import emit_kernels

FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-ffp-contract=off", "-fno-strict-aliasing",
         "-fno-math-errno", "-falign-loops=32")
# Block shapes per kernel a library specializes for on first launch; later shapes run the generic code.
MAX_SPECIALIZATIONS = 4
# A kernel and a block shape -> the kernel's versions for launches of that shape.
Specializer = Callable[[n.Kernel, tuple[int, int, int]], KernelVersions]


class CompilerNotFound(UserError):
    """No C/C++ compiler on this machine (tests skip on it)."""


def find_compiler(cpp: bool) -> str | None:
    names = ("c++", "g++", "clang++") if cpp else ("cc", "gcc", "clang")
    env = os.environ.get("CXX" if cpp else "CC")
    for name in ((env,) if env else ()) + names:
        path = shutil.which(name)
        if path is not None:
            return path
    return None


def cache_dir() -> pathlib.Path:
    """Where compiled libraries go: ``c/`` of polypy's cache (``polypy.cache``), or, with caching
    off, a directory of this process (removed at exit)."""
    root = cache_root()
    path = root / "c" if root is not None else _scratch_dir()
    path.mkdir(parents=True, exist_ok=True)
    return path


@functools.lru_cache(maxsize=None)
def _scratch_dir() -> pathlib.Path:
    path = pathlib.Path(tempfile.mkdtemp(prefix="polypy-c-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def compile_library(source: str, *, cpp: bool = False, flags: Sequence[str] = FLAGS) -> pathlib.Path:
    """The path of a shared library built from ``source`` (reused when already built)."""
    compiler = find_compiler(cpp)
    if compiler is None:
        raise CompilerNotFound(f"no {'C++' if cpp else 'C'} compiler found (looked for "
                               f"{'c++, g++, clang++' if cpp else 'cc, gcc, clang'}; set {'CXX' if cpp else 'CC'})")
    key = hashlib.sha256("\0".join([compiler, *flags, source]).encode()).hexdigest()[:24]
    directory = cache_dir()
    library = directory / f"kernels-{key}.so"
    if library.exists():
        return library
    suffix = ".cpp" if cpp else ".c"
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        src = pathlib.Path(tmp) / f"kernels{suffix}"
        src.write_text(source, encoding="utf-8")
        out = pathlib.Path(tmp) / "kernels.so"
        command = [compiler, *flags, str(src), "-o", str(out), "-lm"]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise InternalError(f"the C compiler rejected polypy's output ({' '.join(command)}):\n"
                                f"{result.stderr[-4000:]}")
        os.replace(out, library)  # atomic: concurrent builders of the same source agree
    return library


_CTYPES: dict[str, Any] = {
    "bool": ctypes.c_bool, "i8": ctypes.c_int8, "u8": ctypes.c_uint8, "i16": ctypes.c_int16,
    "u16": ctypes.c_uint16, "i32": ctypes.c_int32, "u32": ctypes.c_uint32, "i64": ctypes.c_int64,
    "u64": ctypes.c_uint64, "f32": ctypes.c_float, "f64": ctypes.c_double,
}


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


@dataclasses.dataclass(frozen=True)
class _Rebuild:
    """How a library was built: what compiling a specialized version of one of its kernels takes."""

    flags: tuple[str, ...]
    threads: int
    source: str
    built_in: frozenset[tuple[str, tuple[int, int, int]]] = frozenset()  # specialized in the library itself
    # A kernel and a block shape -> the kernel's versions for that shape (the versions stage).
    versions: Specializer | None = None


class CLibrary:
    """A compiled kernel library: ``lib.launch("saxpy", grid, block, args, shmem=0)``.

    ``specializations``: per kernel, the block shapes launched through a specialized version
    (compiled on the first launch of each; see the module docstring)."""

    def __init__(self, path: pathlib.Path, kernels: Sequence[n.Kernel], *, cpp: bool, check_bounds: bool,
                 globals_: Sequence[n.Buffer] = (), rebuild: _Rebuild | None = None):
        self.path = path
        self.cpp = cpp
        self.check_bounds = check_bounds
        self.kernels = {k.name: k for k in kernels}
        self.globals = {g.name: g for g in globals_}
        self.dll = ctypes.CDLL(str(path))
        self._functions: dict[str, Any] = {}  # symbol -> ctypes function (None: not in the library)
        self._written: dict[str, list[str]] = {}  # kernel -> the pointer parameters it writes
        self._rebuild = rebuild
        self._specialized: dict[tuple[str, tuple[int, int, int]], CLibrary] = {}

    @property
    def specializations(self) -> dict[str, list[tuple[int, int, int]]]:
        out: dict[str, list[tuple[int, int, int]]] = {}
        for name, shape in self._specialized:
            out.setdefault(name, []).append(shape)
        return out

    def _version(self, kernel: n.Kernel, block: tuple[int, int, int]) -> CLibrary:
        """The library whose launcher runs ``kernel`` with block shape ``block``: one compiled for
        that shape (built now if new), or this one."""
        key = (kernel.name, block)
        found = self._specialized.get(key)
        if found is not None:
            return found
        rebuild = self._rebuild
        if (rebuild is None or rebuild.versions is None or key in rebuild.built_in
                or any(b.space in ("constant", "device") for b in kernel.buffers)
                or sum(1 for name, _ in self._specialized if name == kernel.name) >= MAX_SPECIALIZATIONS):
            return self
        text = emit_kernels([kernel], source=rebuild.source, cpp=self.cpp, threads=rebuild.threads,
                            check_bounds=self.check_bounds, versions={kernel.name: rebuild.versions(kernel, block)})
        found = CLibrary(compile_library(text, cpp=self.cpp, flags=rebuild.flags), [kernel], cpp=self.cpp,
                         check_bounds=self.check_bounds)
        self._specialized[key] = found
        return found

    def _function(self, kernel: n.Kernel, symbol: str):
        """The library's function ``symbol`` (a launcher of ``kernel``), None if it has none."""
        if symbol in self._functions:
            return self._functions[symbol]
        try:
            fn = getattr(self.dll, symbol)
        except AttributeError:
            self._functions[symbol] = None
            return None
        head = [Dim3, Dim3] if self.cpp else [ctypes.c_uint] * 6
        params = [ctypes.c_void_p if isinstance(p.ptype, PointerType) else _CTYPES[p.ptype.name]
                  for p in kernel.params]
        fn.argtypes = head + [ctypes.c_size_t] + params
        fn.restype = None
        self._functions[symbol] = fn
        return fn

    def _launcher(self, kernel: n.Kernel, arrays: Mapping[str, np.ndarray]):
        """``K_launch_apart`` where the library has it (``polypy.passes.apart_twins``) and the arrays keep its
        promise: each array the kernel writes a view of storage of its own that no other argument
        shares (two views of one array are not apart, even where they do not overlap: as with
        cudaMalloc'ed memory, the allocation counts), and no module arrays the kernel could reach by
        name. Else ``K_launch``."""
        apart = None if self.globals else self._function(kernel, f"{kernel.name}_launch_apart")
        if apart is not None:
            written = self._written.get(kernel.name)
            if written is None:
                written = self._written[kernel.name] = written_pointers(kernel)
            roots = {name: storage_root(a) for name, a in arrays.items()}
            if all(not np.may_share_memory(roots[w], roots[p]) for w in written for p in roots if p != w):
                return apart
        plain = self._function(kernel, f"{kernel.name}_launch")
        if plain is None:
            raise InternalError(f"the library {self.path} has no launcher {kernel.name}_launch")
        return plain

    def launch(self, name: str, grid: int | Sequence[int], block: int | Sequence[int],
               args: Mapping[str, Any] | Sequence[Any], *, shmem: int = 0) -> None:
        """Run kernel ``name`` on all cores; array arguments are updated in place."""
        kernel = self.kernels.get(name)
        if kernel is None:
            raise UserError(f"no kernel named {name!r} in this library (kernels: {', '.join(self.kernels)})")
        g, b = grid_shape(grid), block_shape(block)
        version = self._version(kernel, b)
        if version is not self:
            version.launch(name, g, b, args, shmem=shmem)
            return
        bound = bind_arguments(kernel, args)
        arrays = {name: v for name, v in bound.items() if isinstance(v, np.ndarray)}
        values = [bound[p.name].ctypes.data if isinstance(p.ptype, PointerType) else bound[p.name]
                  for p in kernel.params]
        head: list[Any] = [Dim3(*g), Dim3(*b)] if self.cpp else [*g, *b]
        fn = self._launcher(kernel, arrays)
        registered = []
        if self.check_bounds:
            for a in arrays.values():
                self.dll.polypy_register_alloc(ctypes.c_void_p(a.ctypes.data), ctypes.c_size_t(a.nbytes))
                registered.append(a)
        try:
            fn(*head, int(shmem), *values)
        finally:
            for a in registered:
                self.dll.polypy_unregister_alloc(ctypes.c_void_p(a.ctypes.data))

    def global_array(self, name: str) -> np.ndarray:
        """The library's ``__constant__``/``__device__`` array ``name`` as a writable NumPy view."""
        g = self.globals.get(name)
        if g is None or g.shape is None:
            raise UserError(f"no module array named {name!r} in this library")
        shape = tuple(int(d.value) for d in g.shape)  # type: ignore[attr-defined]
        ctype = _CTYPES[g.elem.name] * int(np.prod(shape))
        return np.ctypeslib.as_array(ctype.in_dll(self.dll, name)).view(g.elem.dtype).reshape(shape)


@on_big_stack
def build_library(kernels: Sequence[n.Kernel], globals_: Sequence[n.Buffer] = (), *, cpp: bool = False,
                  threads: int = 0, check_bounds: bool = False, source: str = "", flags: Sequence[str] = FLAGS,
                  versions: Mapping[str, KernelVersions] | None = None,
                  specialize: Specializer | None = None) -> CLibrary:
    """Emit, compile (cached) and load CPU-form ``kernels`` as one library.

    ``versions``: per kernel, its versions (the pipeline's) compiled into the library now;
    ``specialize``: a kernel and a block shape -> its versions for that shape, compiled on the
    first launch with a shape the library has none for (see the module docstring); None: such
    launches run the kernel's generic code. ``polypy.driver.library.build_library`` makes both from
    block shapes and a coarsener.
    """
    text = emit_kernels(kernels, globals_, source=source, cpp=cpp, threads=threads, check_bounds=check_bounds,
                        versions=versions)
    path = compile_library(text, cpp=cpp, flags=flags)
    built_in = frozenset((name, shape.shape) for name, made in (versions or {}).items()
                         for guard, _ in made.versions if (shape := guard.find(BlockShapeIs)) is not None)
    rebuild = _Rebuild(tuple(flags), threads, source, built_in, specialize)
    return CLibrary(path, kernels, cpp=cpp, check_bounds=check_bounds, globals_=globals_, rebuild=rebuild)


def scalar_ctype(t: ScalarType) -> Any:
    return _CTYPES[t.name]

"""Running whole CUDA programs: natively (translated C++) or with every launch emulated.

``polypy run prog.cu`` translates the program, compiles it with the system C++ compiler and
runs it. ``polypy run prog.cu --emulate`` keeps the host code native but hands every kernel
launch to the reference emulator: the program is built as a shared library whose launchers call
back into Python with the launch configuration, the addresses of the arguments and of the
module's ``__constant__``/``__device__`` arrays; the callback views the program's device memory
(allocations the runtime registered in ``cudaMalloc``) as NumPy arrays and emulates the launch
on them in place. That is the oracle the translated program is compared with.
"""
from __future__ import annotations

import ctypes
import pathlib
import subprocess
import sys
import tempfile
from typing import Any, Mapping, Sequence

import numpy as np

from polypy.cccl import program_flags
from polypy.driver.program_tables import gather_tables
from polypy.errors import DeviceAssertError, MisalignedAddressError, UserError
from polypy.ir import nodes as n
from polypy.ir.types import PointerType

_HOOK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                         ctypes.c_uint, ctypes.c_uint, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p),
                         ctypes.POINTER(ctypes.c_void_p))


def _compiler() -> str:
    from codegen.c import find_compiler

    compiler = find_compiler(True)
    if compiler is None:
        raise UserError("running a whole program needs a C++ compiler (c++, g++ or clang++; or set CXX)")
    return compiler


# Lines of the compiler's complaint shown when it rejects a generated program.
COMPILER_LINES_SHOWN = 12


def _build(source: str, directory: pathlib.Path, flags: Sequence[str], output: str, *, name: str) -> pathlib.Path:
    """Compile the generated ``source`` of the program ``name``; a rejection is a ``UserError``
    showing the compiler's first lines (the host code is the user's, passed through as written)."""
    src = directory / "program.cpp"
    src.write_text(source, encoding="utf-8")
    out = directory / output
    command = [_compiler(), *flags, str(src), "-o", str(out), "-lm"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        lines = result.stderr.replace(str(directory) + "/", "").splitlines()
        shown = "\n".join(lines[:COMPILER_LINES_SHOWN] + (["..."] if len(lines) > COMPILER_LINES_SHOWN else []))
        raise UserError(f"the C++ compiler rejected the generated code for {name}:\n{shown}\n"
                        f"(see it with: polypy translate {name} -o program.cpp)")
    return out


def with_defines(source: str, defines: Mapping[str, str] | None) -> str:
    """A translated program that starts with the ``-D`` definitions its kernels were parsed with.

    The kernels were translated under them; the host code (kept as source) must see the same
    ones, or it would launch with the defaults of ``#ifndef BS ... #endif`` while the kernels
    assume the given value. They go first, as the compiler's ``-D`` flags act before any line.
    """
    if not defines:
        return source
    lines = [f"#define {name} {value}".rstrip() for name, value in defines.items()]
    return ("/* -D definitions polypy was given: the host code sees what the kernels saw */\n"
            + "\n".join(lines) + "\n" + source)


def run_program(module: n.Module, *, emulate: bool = False, threads: int = 0, optimize: bool = True,
                argv: Sequence[str] = (), defines: Mapping[str, str] | None = None,
                include_dirs: Sequence[str] = ()) -> int:
    """Run the program of ``module`` (GPU form with host code); returns its exit status.

    ``argv``: the program's arguments (``argv[1:]`` in its ``main``). ``defines``/``include_dirs``:
    the ``-D``/``-I`` the module was parsed with; the host code is compiled with the same.
    """
    if module.host is None or not module.host.has_main:
        raise UserError(f"{module.source} has no main()")
    from codegen.c import emit_program

    includes = tuple(f"-I{d}" for d in include_dirs) + program_flags(module.host)  # (CCCL's headers: Thrust)
    with tempfile.TemporaryDirectory(prefix="polypy-run-") as tmp:
        directory = pathlib.Path(tmp)
        if not emulate:
            from polypy.driver.pipelines import lower_and_emit

            source = lower_and_emit(module, "cpp", optimize=optimize, program=True, threads=threads)
            exe = _build(with_defines(source, defines), directory, ("-O3", "-march=native", "-fopenmp", *includes), "program",
                         name=module.source)
            sys.stdout.flush()
            return subprocess.run([str(exe), *argv]).returncode
        from gpu2cpu.refuse_spin_waits import refuse_spin_waits
        from polypy.driver.pipelines import static_shared
        from polypy.emulator.launch import refuse_device_launches

        for kernel in module.kernels:  # before building: the refusal is located, and nothing runs
            refuse_device_launches(kernel)
        # Spin waits as in a compiled run: a loop only another thread's store can end is refused at
        # translation; one only the host can end (``host_polls``) runs only on a created stream.
        kernels = {k.name: refuse_spin_waits(k, program=True) for k in module.kernels}
        source = emit_program(module.host, kernels, emulate=True, static_shared=static_shared(module))
        # The program's entry point (``polypy_program_main``) calls its ``main`` through the name
        # ``polypy_main_impl``; ``main`` keeps its own name, so a ``main`` that ends without
        # ``return`` still returns 0, as C++ says (a renamed one would run off its end).
        library = _build(with_defines(source, defines), directory,
                         ("-O1", "-shared", "-fPIC", "-fopenmp", "-Dpolypy_main_impl=main", *includes),
                         "program.so", name=module.source)
        return _run_emulated(ctypes.CDLL(str(library)), module, argv)


def _run_emulated(lib: ctypes.CDLL, module: n.Module, argv: Sequence[str]) -> int:
    find_alloc = lib.polypy_find_alloc
    find_alloc.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)]
    find_alloc.restype = ctypes.c_int
    kernels = module.kernels
    # Texture fetches go through the program's own runtime (its texture objects live there).
    fetch = lib.polypy_tex_value_export
    fetch.argtypes = [ctypes.c_ulonglong, ctypes.c_int, ctypes.c_int, ctypes.c_float, ctypes.c_float, ctypes.c_float,
                      ctypes.c_int, ctypes.c_int]
    fetch.restype = ctypes.c_double

    def launch(index, gx, gy, gz, bx, by, bz, shmem, args, globals_) -> int:
        try:
            kernel = kernels[index]
            values = _arguments(kernel, args, find_alloc)
            write_back = gather_tables(kernel, values, find_alloc)  # T** rows in several allocations
            arrays = _globals(kernel, globals_)
            from polypy.emulator import emulate

            emulate(kernel, (gx, gy, gz), (bx, by, bz), values, shmem=shmem, globals=arrays, textures=fetch)
            write_back()
            return 0
        except DeviceAssertError as exc:
            sys.stdout.flush()
            sys.stderr.flush()
            # the message is printed; the launch fails with cudaErrorAssert (2) or cudaErrorMisalignedAddress (3)
            return 3 if isinstance(exc, MisalignedAddressError) else 2
        except UserError as exc:
            sys.stdout.flush()
            print(exc.render(), file=sys.stderr)
        except BaseException as exc:  # noqa: BLE001 - the C caller cannot take a Python exception
            sys.stdout.flush()
            print(f"polypy: internal error while emulating {kernels[index].name}: {type(exc).__name__}: {exc}",
                  file=sys.stderr)
        sys.stderr.flush()
        return 1

    hook = _HOOK(launch)  # kept alive for the whole run
    ctypes.c_void_p.in_dll(lib, "polypy_emulate_hook").value = ctypes.cast(hook, ctypes.c_void_p).value
    main = lib.polypy_program_main
    main.restype = ctypes.c_int
    main.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    words = [b"program"] + [a.encode() for a in argv]
    c_argv = (ctypes.c_char_p * (len(words) + 1))(*words, None)
    sys.stdout.flush()
    status = main(len(words), c_argv)
    libc = ctypes.CDLL(None)
    libc.fflush(None)
    return status


def _arguments(kernel: n.Kernel, args: Any, find_alloc: Any) -> dict[str, Any]:
    """The launch's arguments, by IR parameter: arrays view the program's device memory."""
    out: dict[str, Any] = {}
    index = {p.name: i for i, p in enumerate(kernel.params)}
    pools = {s.pool: s.extent for s in kernel.held_pointers}  # (the launcher found and checked them)
    for i, p in enumerate(kernel.params):
        address = args[i]
        if p.name in pools:  # pointers read from __constant__ records: the allocations they point into
            pointer = ctypes.c_void_p.from_address(address).value or 0
            count = ctypes.c_ulonglong.from_address(args[index[pools[p.name]]]).value
            dtype = p.ptype.elem.dtype  # type: ignore[union-attr]
            out[p.name] = np.frombuffer((ctypes.c_char * (count * dtype.itemsize)).from_address(pointer), dtype=dtype) \
                if pointer and count else np.zeros(0, dtype=dtype)
        elif isinstance(p.ptype, PointerType):
            pointer = ctypes.c_void_p.from_address(address).value or 0
            out[p.name] = _device_array(pointer, p, kernel, find_alloc)
        else:
            ctype = np.ctypeslib.as_ctypes_type(p.ptype.dtype)
            out[p.name] = p.ptype.dtype.type(ctype.from_address(address).value)
    return out


def _device_array(pointer: int, p: n.Param, kernel: n.Kernel, find_alloc: Any) -> np.ndarray:
    dtype = p.ptype.elem.dtype  # type: ignore[union-attr]
    base, size = ctypes.c_void_p(), ctypes.c_size_t()
    if not pointer:
        # a null argument the kernel may leave unused (Rodinia's scan passes 0 for the block sums
        # it does not store): an empty array, so that any access to it is an out-of-bounds error
        return np.zeros(0, dtype=dtype)
    if not find_alloc(pointer, ctypes.byref(base), ctypes.byref(size)):
        raise UserError(f"argument '{p.name}' of kernel '{kernel.name}' does not point into memory from cudaMalloc",
                        kernel.loc)
    offset = pointer - base.value
    if offset % dtype.itemsize:
        raise UserError(f"argument '{p.name}' of kernel '{kernel.name}' is not aligned to its element type", kernel.loc)
    count = (size.value - offset) // dtype.itemsize
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(pointer)
    return np.frombuffer(raw, dtype=dtype)


def _globals(kernel: n.Kernel, addresses: Any) -> dict[str, np.ndarray]:
    """The program's ``__constant__``/``__device__`` arrays the kernel uses, in place."""
    out = {}
    for i, b in enumerate(k for k in kernel.buffers if k.space in ("constant", "device")):
        count = 1
        for d in b.shape or ():
            count *= int(d.value)  # type: ignore[attr-defined]
        raw = (ctypes.c_char * (count * b.elem.itemsize)).from_address(addresses[i])
        out[b.name] = np.frombuffer(raw, dtype=b.elem.dtype)
    return out


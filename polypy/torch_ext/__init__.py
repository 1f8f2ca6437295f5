"""PyTorch CUDA extensions built for the CPU, unmodified: ``polypy.torch.load`` / ``load_inline``.

::

    import polypy.torch
    ext = polypy.torch.load("lltm", sources=["lltm.cpp", "lltm_kernel.cu"], build_directory=tmp)
    new_h, new_c = ext.forward(x, w, b, h, c)          # CPU tensors

The signatures are those of ``torch.utils.cpp_extension.load`` and ``load_inline``, and so is
what they return (a Python module, or the path of the library with ``is_python_module=False``).
Each ``.cu`` file is translated by polypy (``translate.translate_cuda``: its kernels to OpenMP
C++, its host code kept, each launch a call of the kernel's launcher); the ``.cpp`` files are
compiled as they are; then PyTorch's own JIT builds everything against the installed PyTorch's
headers and libraries, in its build directory (``build_directory=`` or PyTorch's default), with
PyTorch's caching and rebuild-on-change rule. Every source is compiled with polypy's stand-ins
for ATen's CUDA headers first on the include path and with ``polypy_torch_cuda.h``
force-included: CPU tensors stand in for CUDA tensors (docs/torch_extensions.md).

This module wires the driver (the translation) to PyTorch's build, so it imports the driver
inside functions only.
"""
from __future__ import annotations

import functools
import os
import pathlib
import subprocess
import sys
from typing import Any, Sequence

from polypy.errors import UserError

# Flags of every source: OpenMP for the translated kernels' launchers; -O3 -march=native as polypy
# translate's programs and the C backend's libraries are built (the extension is built where it
# runs): the kernels' thread loops vectorize with the machine's vectors, and the prelude's exp and
# tanh need SSE4.1's rounding to vectorize at all. -ffp-contract=off so that -march=native fuses no
# a * b + c in the extension's own C++ (the translated file says so itself: c_fp_contract.h.j2),
# and -mno-f16c so that c10::Half converts in software as in a default build (F16C's instructions
# keep a NaN's sign and payload where c10's code writes 0x7E00): the user's C++ computes what it
# computes built without them. -fno-trapping-math: CUDA has no floating-point traps, and GCC then
# vectorizes a choice between floating-point values made by a comparison (the LLTM backward's
# `e - 1 < 0 ? e : 0`), which it leaves as a branch otherwise; every value stays the same (no
# -ffast-math: rounding, NaN, infinities and signed zeros as written), only the floating-point
# exception flags of <fenv.h> may differ.
CFLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-trapping-math", "-mno-f16c", "-fopenmp")
LDFLAGS = ("-fopenmp",)
# GCC vectorizes a loop whose accesses may overlap only behind run-time overlap checks, at most
# 10 of them by default. A kernel over several PyTorch accessors needs more (the classic LLTM's
# elementwise kernels: 30, among 7 to 9 data pointers with run-time strides), and its thread
# loop stayed scalar; the checks cost a few comparisons per block. Not a language option, so
# not for other compilers.
GCC_CFLAGS = ("--param=vect-max-version-for-alias-checks=64",)


@functools.lru_cache(maxsize=None)
def _compiler_flags() -> tuple[str, ...]:
    """``CFLAGS``, and ``GCC_CFLAGS`` where PyTorch's compiler (``$CXX``, else ``c++``) is GCC."""
    try:
        done = subprocess.run([os.environ.get("CXX", "c++"), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return CFLAGS
    first = done.stdout.splitlines()[0] if done.stdout else ""
    gcc = "Free Software Foundation" in done.stdout and "clang" not in first.lower()
    return CFLAGS + (GCC_CFLAGS if gcc else ())


def _cpp_extension() -> Any:
    try:
        import torch.utils.cpp_extension as cpp_extension
    except ImportError:
        raise UserError("polypy.torch.load needs PyTorch: pip install -e '.[torch]'") from None
    return cpp_extension


def _build_dir(name: str, build_directory: str | os.PathLike | None, verbose: bool) -> pathlib.Path:
    if build_directory is not None:
        path = pathlib.Path(build_directory)
        path.mkdir(parents=True, exist_ok=True)
        return path
    return pathlib.Path(_cpp_extension()._get_build_directory(name, verbose))


def _flags(extra_cflags: Sequence[str] | None, extra_include_paths: Sequence[str] | None) -> dict[str, Any]:
    from polypy.torch_ext.translate import POLICY_HEADER, RUNTIME_HEADERS, TORCH_HEADERS

    return {
        "extra_cflags": [*_compiler_flags(), "-include", str(POLICY_HEADER), *(extra_cflags or ())],
        "extra_include_paths": [str(TORCH_HEADERS), str(RUNTIME_HEADERS), *(extra_include_paths or ())],
    }


def _translated(cu_files: Sequence[pathlib.Path], out_dir: pathlib.Path, flags: Sequence[str],
                include_paths: Sequence[str], verbose: bool) -> list[str]:
    from polypy.torch_ext.translate import translate_cuda

    out = []
    for i, path in enumerate(cu_files):
        if verbose:
            print(f"polypy: [{i + 1}/{len(cu_files)}] {path.name}", file=sys.stderr)
        out.append(str(translate_cuda(path, out_dir, flags=flags, extra_include_paths=include_paths, verbose=verbose)))
    return out


def load(name: str, sources: str | Sequence[str], extra_cflags: Sequence[str] | None = None,
         extra_cuda_cflags: Sequence[str] | None = None, extra_sycl_cflags: Sequence[str] | None = None,
         extra_ldflags: Sequence[str] | None = None, extra_include_paths: Sequence[str] | None = None,
         build_directory: str | os.PathLike | None = None, verbose: bool = False, with_cuda: bool | None = None,
         with_sycl: bool | None = None, is_python_module: bool = True, is_standalone: bool = False,
         keep_intermediates: bool = True) -> Any:
    """``torch.utils.cpp_extension.load`` for the CPU: ``.cu`` sources are translated by polypy,
    the others compiled as they are (see the module). ``extra_cuda_cflags`` apply to the
    translated ``.cu`` files (their ``-D``/``-I`` also to the translation); ``with_cuda`` and
    ``with_sycl`` are accepted and ignored (nothing is built for a GPU)."""
    cpp_extension = _cpp_extension()
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    paths = [pathlib.Path(s) for s in sources]
    for p in paths:
        if not p.is_file():
            raise UserError(f"polypy.torch.load: no such source file: {p}")
    if extra_sycl_cflags:
        raise UserError("polypy.torch.load: SYCL sources are not supported")
    directory = _build_dir(name, build_directory, verbose)
    cu = [p for p in paths if p.suffix == ".cu"]
    cuda_flags = [*(extra_cflags or ()), *(extra_cuda_cflags or ())]
    translated = iter(_translated(cu, directory / "polypy", cuda_flags, extra_include_paths or (), verbose))
    # Sources in the order given (the order of the static initializers: a later registration of
    # an op's kernel for one dispatch key replaces an earlier one).
    built = [next(translated) if p.suffix == ".cu" else str(p) for p in paths]
    flags = _flags([*(extra_cflags or ()), *((extra_cuda_cflags or ()) if cu else ())], extra_include_paths)
    return cpp_extension.load(name, built, extra_ldflags=[*LDFLAGS, *(extra_ldflags or ())],
                              build_directory=str(directory), verbose=verbose, with_cuda=False,
                              is_python_module=is_python_module, is_standalone=is_standalone,
                              keep_intermediates=keep_intermediates, **flags)


# What torch.utils.cpp_extension.load_inline puts before CUDA sources (one line each, joined as it joins them).
CUDA_PREAMBLE = ("#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>")


def load_inline(name: str, cpp_sources: str | Sequence[str], cuda_sources: str | Sequence[str] | None = None,
                sycl_sources: str | Sequence[str] | None = None, functions: Any = None,
                extra_cflags: Sequence[str] | None = None, extra_cuda_cflags: Sequence[str] | None = None,
                extra_sycl_cflags: Sequence[str] | None = None, extra_ldflags: Sequence[str] | None = None,
                extra_include_paths: Sequence[str] | None = None, build_directory: str | os.PathLike | None = None,
                verbose: bool = False, with_cuda: bool | None = None, with_sycl: bool | None = None,
                is_python_module: bool = True, with_pytorch_error_handling: bool = True,
                keep_intermediates: bool = True, use_pch: bool = False, no_implicit_headers: bool = False) -> Any:
    """``torch.utils.cpp_extension.load_inline`` for the CPU: the CUDA sources (one ``cuda.cu``,
    with the includes PyTorch's ``load_inline`` puts first) are translated by polypy and compiled
    with the C++ sources, whose ``functions`` get Python bindings as PyTorch makes them."""
    cpp_extension = _cpp_extension()
    if sycl_sources:
        raise UserError("polypy.torch.load_inline: SYCL sources are not supported")
    if isinstance(cpp_sources, str):
        cpp_sources = [cpp_sources]
    if isinstance(cuda_sources, str):
        cuda_sources = [cuda_sources]
    directory = _build_dir(name, build_directory, verbose)
    cpp = list(cpp_sources)
    if cuda_sources:
        directory.mkdir(parents=True, exist_ok=True)
        cu = directory / "cuda.cu"
        text = "\n".join([*(() if no_implicit_headers else CUDA_PREAMBLE), *cuda_sources])
        if not cu.exists() or cu.read_text(encoding="utf-8") != text:
            cu.write_text(text, encoding="utf-8")
        cuda_flags = [*(extra_cflags or ()), *(extra_cuda_cflags or ())]
        [translated] = _translated([cu], directory / "polypy", cuda_flags, extra_include_paths or (), verbose)
        cpp.append(pathlib.Path(translated).read_text(encoding="utf-8"))
    flags = _flags([*(extra_cflags or ()), *((extra_cuda_cflags or ()) if cuda_sources else ())], extra_include_paths)
    return cpp_extension.load_inline(name, cpp, functions=functions, extra_ldflags=[*LDFLAGS, *(extra_ldflags or ())],
                                     build_directory=str(directory), verbose=verbose, with_cuda=False,
                                     is_python_module=is_python_module,
                                     with_pytorch_error_handling=with_pytorch_error_handling,
                                     keep_intermediates=keep_intermediates, use_pch=use_pch,
                                     no_implicit_headers=no_implicit_headers, **flags)


def kernels(source: str | os.PathLike, *, extra_cflags: Sequence[str] | None = None,
            extra_include_paths: Sequence[str] | None = None) -> Any:
    """The kernels of an extension's ``.cu`` file compiled by ``polypy.compile`` (its host code
    left out), read against PyTorch's headers as ``load`` reads them: for a kernel the extension
    has no backward for, ``polypy.torch.function(mod.K, ...)`` makes it an autograd function whose
    backward ``polypy.grad`` synthesizes. A kernel template's instances are named as ``polypy
    translate`` names them (``square_affine_kernel_float``). A file ``load`` translated in this
    process is not parsed again."""
    from polypy.driver.api import CompiledModule
    from polypy.torch_ext.translate import flag_defines, flag_include_dirs, load_module, parse_include_dirs

    flags = list(extra_cflags or ())
    include_dirs = parse_include_dirs([*(extra_include_paths or ()), *flag_include_dirs(flags)])
    path = pathlib.Path(os.fspath(source))
    if not path.is_file():
        raise UserError(f"polypy.torch.kernels: no such source file: {path}")
    # The module ``load`` read from the same file, when it did in this process (one parse).
    return CompiledModule.from_ir(load_module(path, defines=flag_defines(flags), include_dirs=include_dirs))


__all__ = ["kernels", "load", "load_inline"]

"""One ``.cu`` file of a PyTorch extension translated to C++ (kernels and host code), cached.

The frontend parses the file against polypy's stand-ins for ATen's CUDA headers
(``polypy/runtime/torch``: ``ATen/cuda/CUDAContext.h``, ``c10/cuda/CUDAGuard.h`` ...), found
before PyTorch's own, and PyTorch's headers as system headers read without ``__CUDACC__``
(``polypy_torch_host.h``), as the host compiler reads them when it builds the result. The result
is what ``polypy translate`` writes for a file with host code: the kernels as OpenMP C++ and the
host code as written, each ``<<<...>>>`` a call of the kernel's launcher.

Translating parses all of PyTorch's headers (a minute or more), so the result is kept next to
the build: ``<stem>.cu.cpp`` with its key in ``<stem>.cu.key`` (the file's text, the flags, the
include paths, PyTorch's version and polypy's own sources); the same key skips the translation,
and an unchanged ``.cpp`` leaves PyTorch's rebuild-on-change rule nothing to rebuild. A
translation says so on stderr when it starts and ends (``verbose``: also when one is reused).
"""
from __future__ import annotations

import functools
import hashlib
import pathlib
import sys
import sysconfig
from typing import Sequence

from polypy.sources import SystemIncludeDir, read_source

POLYPY_DIR = pathlib.Path(__file__).resolve().parents[1]
TORCH_HEADERS = POLYPY_DIR / "runtime" / "torch"
RUNTIME_HEADERS = POLYPY_DIR / "runtime"
POLICY_HEADER = TORCH_HEADERS / "polypy_torch_cuda.h"
# Defined for the frontend's parse only: its prelude then reads PyTorch's headers first (host view).
PARSE_DEFINE = "POLYPY_TORCH_EXTENSION"


@functools.lru_cache(maxsize=None)
def polypy_stamp() -> str:
    """A digest of polypy's own sources (the stages and the headers): a new polypy translates again."""
    h = hashlib.sha256()
    root = POLYPY_DIR.parent
    for package in ("polypy", "frontend", "gpu2cpu", "codegen"):
        for path in sorted((root / package).rglob("*")):
            if path.suffix in (".py", ".h", ".j2", ".jinja", "") and path.is_file():
                h.update(path.relative_to(root).as_posix().encode())
                h.update(path.read_bytes())
    return h.hexdigest()


def flag_defines(flags: Sequence[str]) -> dict[str, str | None]:
    """The ``-DNAME[=VALUE]`` of compiler flags (the parse must see what the compiler sees)."""
    out: dict[str, str | None] = {}
    for f in flags:
        if f.startswith("-D") and len(f) > 2:
            name, _, value = f[2:].partition("=")
            out[name] = value if value else None
    return out


def flag_include_dirs(flags: Sequence[str]) -> list[str]:
    return [f[2:] for f in flags if f.startswith("-I") and len(f) > 2]


def parse_include_dirs(extra_include_paths: Sequence[str]) -> tuple[str, ...]:
    """The user's include paths, polypy's ATen stand-ins, then PyTorch's and Python's headers
    (system directories: the frontend never walks them for kernels)."""
    from torch.utils.cpp_extension import include_paths

    system = [*include_paths(), sysconfig.get_paths()["include"]]
    return (*map(str, extra_include_paths), str(TORCH_HEADERS), *map(SystemIncludeDir, system))


def translate_cuda(path: pathlib.Path, out_dir: pathlib.Path, *, flags: Sequence[str] = (),
                   extra_include_paths: Sequence[str] = (), verbose: bool = False) -> pathlib.Path:
    """``out_dir/<stem>.cu.cpp``, the translation of the ``.cu`` file ``path`` (see the module)."""
    import torch

    text = read_source(path)
    include_dirs = parse_include_dirs([*extra_include_paths, *flag_include_dirs(flags)])
    defines = flag_defines(flags)
    h = hashlib.sha256()
    for part in (str(path), text, repr(sorted(defines.items())), repr(include_dirs), torch.__version__, polypy_stamp()):
        h.update(part.encode("utf-8", errors="replace"))
        h.update(b"\0")
    key = h.hexdigest()
    out = out_dir / f"{path.stem}.cu.cpp"
    stamp = out_dir / f"{path.stem}.cu.key"
    if out.exists() and stamp.exists() and stamp.read_text() == key:
        if verbose:
            print(f"polypy: {path.name} unchanged, its translation {out} is reused", file=sys.stderr)
        return out
    # Always said (a translation takes minutes; PyTorch's build after it is silent unless verbose).
    print(f"polypy: translating {path} for the CPU (parsing PyTorch's headers takes a minute or two) ...",
          file=sys.stderr, flush=True)
    cpp = translate_text(path, defines=defines, include_dirs=include_dirs)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not out.exists() or out.read_text(encoding="utf-8") != cpp:
        out.write_text(cpp, encoding="utf-8")
    stamp.write_text(key)
    print(f"polypy: {path.name} -> {out}", file=sys.stderr, flush=True)
    return out


# A cache of the GPU-form modules of the extension sources read in this process, by path, text,
# defines and include directories: ``load`` and ``kernels`` of one ``.cu`` file parse PyTorch's
# headers once. Modules are immutable IR; the last few are kept.
_MODULE_CACHE: dict[tuple, object] = {}
_MODULE_CACHE_SIZE = 4


def load_module(path: str | pathlib.Path, *, defines: dict[str, str | None], include_dirs: tuple[str, ...]):
    """The GPU-form module (``polypy.driver.source.load``) of a PyTorch extension's ``.cu`` file,
    read against PyTorch's headers (``PARSE_DEFINE``); cached in this process (``_MODULE_CACHE``)."""
    from polypy.driver import source

    name = str(path)
    key = (str(pathlib.Path(name).resolve()), read_source(pathlib.Path(name)), repr(sorted(defines.items())),
           include_dirs, polypy_stamp())
    module = _MODULE_CACHE.pop(key, None)
    if module is None:
        module = source.load(name, defines={**defines, PARSE_DEFINE: "1"}, include_dirs=include_dirs)
    _MODULE_CACHE[key] = module  # the most recent last
    while len(_MODULE_CACHE) > _MODULE_CACHE_SIZE:
        del _MODULE_CACHE[next(iter(_MODULE_CACHE))]
    return module


def translate_text(path: pathlib.Path, *, defines: dict[str, str | None], include_dirs: tuple[str, ...]) -> str:
    """The C++ of a PyTorch extension's ``.cu`` file (kernels and host code)."""
    from polypy.driver.pipelines import lower_and_emit

    module = load_module(path, defines=defines, include_dirs=include_dirs)
    cpp = lower_and_emit(module, "cpp", program=True)
    header = (f"/* {path.name} of a PyTorch extension, translated by polypy.torch.load: CPU tensors stand in\n"
              " * for CUDA tensors (polypy_torch_cuda.h, force-included, says how). */\n")
    return header + cpp

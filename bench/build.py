"""Compile the hand-written C (``bench/omp/*.c`` and ``bench/stream.c``) into one shared library.

The library is cached under ``bench/build/`` (or ``$POLYPY_BENCH_BUILD_DIR``) by a hash of the
sources, the compiler and the flags, so it is built once and rebuilt only when something changes.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import pathlib
import shutil
import subprocess

BENCH_DIR = pathlib.Path(__file__).resolve().parent
BUILD_DIR = pathlib.Path(os.environ.get("POLYPY_BENCH_BUILD_DIR") or BENCH_DIR / "build")

# The same flags build polypy's emitted C (the "polypy-c" variant), so that the two differ only in
# their source. -ffp-contract=off: every float operation separately rounded, as polypy's IR
# defines it (no fused multiply-add behind the program's back; polypy's LLVM backend does not
# fuse either). -fno-math-errno: CUDA math functions never set errno, and without it GCC will not
# vectorize a loop that calls sqrtf (nbody). Nothing else is relaxed: no -ffast-math, so
# expf/logf/erfcf are libm's scalar functions, as in polypy's backends.
CFLAGS = ("-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-ffp-contract=off", "-falign-loops=32", "-shared",
          "-fPIC")
LIBS = ("-lm",)


def sources() -> list[pathlib.Path]:
    """Every C file that goes into the library, in a stable order."""
    return sorted((BENCH_DIR / "omp").glob("*.c")) + [BENCH_DIR / "stream.c"]


def compiler() -> str:
    """``$CC`` if set, else the first of cc, gcc, clang found on PATH."""
    cc = os.environ.get("CC")
    if cc:
        return cc
    for name in ("cc", "gcc", "clang"):
        if shutil.which(name):
            return name
    raise RuntimeError("no C compiler found (set CC)")


def build_library(*, verbose: bool = False) -> pathlib.Path:
    """Path of the compiled library, building it if the cached one is missing or stale."""
    cc = compiler()
    files = sources()
    digest = hashlib.sha256()
    for part in (cc, *CFLAGS, *LIBS):
        digest.update(part.encode() + b"\0")
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    target = BUILD_DIR / f"libbench-{digest.hexdigest()[:16]}.so"
    if target.exists():
        return target
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    cmd = [cc, *CFLAGS, "-o", str(tmp), *map(str, files), *LIBS]
    if verbose:
        print(" ".join(cmd))
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"building the OpenMP baselines failed:\n{' '.join(cmd)}\n{done.stderr}")
    os.replace(tmp, target)  # atomic: a concurrent run sees either no library or a whole one
    for stale in BUILD_DIR.glob("libbench-*.so"):
        if stale != target:
            stale.unlink(missing_ok=True)  # safe on POSIX even if another process has it loaded
    return target


_LIBRARY_CACHE: dict[pathlib.Path, ctypes.CDLL] = {}


def load_library() -> ctypes.CDLL:
    """The compiled library, loaded once per process."""
    path = build_library()
    if path not in _LIBRARY_CACHE:
        _LIBRARY_CACHE[path] = ctypes.CDLL(str(path))
    return _LIBRARY_CACHE[path]

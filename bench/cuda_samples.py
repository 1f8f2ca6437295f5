"""NVIDIA's CUDA samples, as a new user would try them: translate, compile, run (issue 41).

    python -m bench.cuda_samples /path/to/cuda-samples [--only a,b] [--keep DIR] [--json out.json]

The samples are not in this repository: pass the root of an extracted checkout of
github:NVIDIA/cuda-samples (the directory holding ``Samples/`` and ``Common/``).

What it does per sample (one row each): reads the sample's ``CMakeLists.txt`` (its
``add_executable`` sources, its libraries); a sample that needs what a CPU cannot give (graphics
interop, the driver API or NVRTC, several GPUs, a vendor library, PTX, another platform) is
listed as ``n/a`` with why, from what its CMake file links and what its sources mention; every
other sample is built exactly as its CMake file builds it: ``polypy translate`` each ``.cu`` file
with the ``-I`` directories its CMake file adds (``Common`` in all of them: so NVIDIA's own ``helper_*.h`` are the ones used), then ``g++ -O3 -fopenmp
-I Common -isystem polypy/runtime`` over the translated files and the sample's own ``.cpp``/``.c``
files (those include ``<cuda_runtime.h>`` themselves: polypy's), then runs the
binary in the sample's directory (where its data files are found). A sample passes when it exits
with status 0 (the samples check their own results and exit non-zero on a mismatch); status 2
is ``EXIT_WAIVED`` (the sample found its requirements unmet and skipped itself).

Columns: sample / result (pass, FAIL, waived, translate, compile, timeout, n/a) / first blocker
(the first error line of the step that failed, or why the sample is not applicable).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Sequence

from polypy.cccl import include_dir
from bench.real_programs import first_error

RUNTIME_DIR = pathlib.Path(__file__).resolve().parents[1] / "polypy" / "runtime"  # polypy's cuda_runtime.h & co.
RUN_TIMEOUT_S = 300.0
TRANSLATE_TIMEOUT_S = 300.0
CXXFLAGS = ("-O3", "-fopenmp", "-std=c++17", "-w")
# NVIDIA's Thrust headers where polypy finds them (polypy.cccl), as the translation's Build line says.
CCCL = ("-isystem", str(include_dir())) if include_dir() is not None else ()

# What a sample's CMake file links or finds that a CPU cannot give, and the reason shown.
_CMAKE_NEEDS = (
    (("OpenGL", "GLUT", "Vulkan", "EGL", "X11", "d3d", "DirectX"), "graphics interop"),
    (("CUDA::cuda_driver", "CUDA::nvrtc", "nvvm"), "driver API / NVRTC"),
    (("CUDA::cublas", "CUDA::cufft", "CUDA::curand", "CUDA::cusparse", "CUDA::cusolver", "CUDA::npp",
      "CUDA::nvjpeg", "CUDA::nvml", "cudla", "nvsci", "NvSci"), "vendor library"),
    (("MPI",), "MPI"),
)
# (only the libraries a target links and the include directories it adds are read: many CMake
# files look for OpenGL and build nothing with it)
# What a sample's sources mention that a CPU cannot give (identifiers and header names).
_SOURCE_NEEDS = (
    (("GL/", "helper_gl.h", "cuda_gl_interop.h", "cuda_egl_interop.h", "vulkan", "d3d1", "d3d9"),
     "graphics interop"),
    (("cuModuleLoad", "cuLaunchKernel", "nvrtc.h", "cuCtxCreate", "cuMemCreate", "cuMemMap"), "driver API / NVRTC"),
    ((".ptx", ".fatbin", "asm(", "asm volatile"), "PTX"),
    (("cudaDeviceEnablePeerAccess", "cudaDeviceCanAccessPeer", "cudaIpc", "MultiGPU", "multi_gpu", "cudaMemcpyPeer"),
     "multi-GPU / IPC"),
    (("cublas", "cufft", "curand.h", "cusparse", "cusolver", "npp.h", "nvjpeg", "cudla", "nvsci", "nvvm.h",
      "cutensor"), "vendor library"),
    (("<mpi.h>",), "MPI"),
)
_PLATFORM_DIRS = ("8_Platform_Specific", "7_libNVVM")


@dataclasses.dataclass
class Sample:
    name: str
    directory: pathlib.Path
    sources: tuple[str, ...]
    include_dirs: tuple[pathlib.Path, ...]  # what its CMake file adds (Common among them)
    blocker: str | None  # why it is not applicable, or None
    separable: bool = False  # CUDA_SEPARABLE_COMPILATION ON (nvcc -rdc=true)


@dataclasses.dataclass
class Row:
    sample: str
    result: str
    blocker: str


def _cmake_sources(cmake: str) -> tuple[str, ...]:
    """The sources of the first add_executable (CMake syntax, not C)."""
    m = re.search(r"add_executable\(\s*\S+\s+([^)]*)\)", cmake)
    if m is None:
        return ()
    return tuple(s for s in m.group(1).split() if not s.startswith("$"))


def _cmake_include_dirs(cmake: str, directory: pathlib.Path) -> tuple[pathlib.Path, ...]:
    """The directories of include_directories / target_include_directories (the target's name
    and CMake variables skipped)."""
    dirs = []
    for m in re.finditer(r"(target_)?include_directories\(([^)]*)\)", cmake):
        words = m.group(2).split()
        if m.group(1):
            words = words[1:]
        dirs += [(directory / w).resolve() for w in words
                 if not w.startswith("$") and w not in ("PRIVATE", "PUBLIC", "INTERFACE", "SYSTEM", "BEFORE")]
    return tuple(dict.fromkeys(d for d in dirs if d.is_dir()))


def find_samples(root: pathlib.Path) -> list[Sample]:
    samples = []
    for cmake_path in sorted((root / "Samples").rglob("CMakeLists.txt")):
        cmake = cmake_path.read_text(errors="replace")
        if "add_executable" not in cmake:
            continue
        directory = cmake_path.parent
        sources = _cmake_sources(cmake)
        blocker = None
        if any(part in _PLATFORM_DIRS for part in directory.relative_to(root).parts):
            blocker = "another platform (Tegra, libNVVM)"
        linked = " ".join(re.findall(r"target_(?:link_libraries|include_directories)\(([^)]*)\)", cmake))
        for words, why in _CMAKE_NEEDS:
            if blocker is None and any(w in linked for w in words):
                blocker = why
        text = "".join(p.read_text(errors="replace") for p in directory.rglob("*")
                       if p.suffix in (".cu", ".cuh", ".cpp", ".c", ".h", ".hpp") and p.is_file())
        for words, why in _SOURCE_NEEDS:
            if blocker is None and any(w in text for w in words):
                blocker = why
        if blocker is None and not any(s.endswith(".cu") for s in sources):
            blocker = "no .cu source"
        separable = re.search(r"CUDA_SEPARABLE_COMPILATION\s+ON", cmake) is not None
        samples.append(Sample(directory.name, directory, sources, _cmake_include_dirs(cmake, directory), blocker,
                              separable))
    return samples


def _run(command: Sequence[str], *, cwd: pathlib.Path, timeout: float) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(list(command), cwd=cwd, capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def measure(sample: Sample, root: pathlib.Path, work: pathlib.Path, polypy: Sequence[str]) -> Row:
    if sample.blocker is not None:
        return Row(sample.name, "n/a", sample.blocker)
    includes = [f"-I{d}" for d in sample.include_dirs] or [f"-I{(root / 'Common').resolve()}"]
    work.mkdir(parents=True, exist_ok=True)
    objects = []
    # Several sources are objects linked together, as CMake builds them: each .cu is a part of the
    # program (translate -c: its kernels' host stubs are exported even from a file of kernels alone).
    # With CUDA_SEPARABLE_COMPILATION (nvcc -rdc=true) device code links across files too: the
    # other .cu files are where a device function only declared in one is defined.
    part = ["-c"] if len(sample.sources) > 1 else []
    cu_files = [s for s in sample.sources if s.endswith(".cu")]
    for i, source in enumerate(sample.sources):
        path = sample.directory / source
        if source.endswith(".cu"):
            out = work / f"t{i}_{path.stem}.cpp"
            if sample.separable and len(cu_files) > 1:
                part = ["-rdc=true"] + [f"--device-sources={sample.directory / s}" for s in cu_files if s != source]
            r = _run([*polypy, "translate", str(path), "-o", str(out), *part, *includes], cwd=work,
                     timeout=TRANSLATE_TIMEOUT_S)
            if r is None:
                return Row(sample.name, "translate", "timed out")
            if r.returncode != 0:
                return Row(sample.name, "translate", first_error(r.stderr or r.stdout))
            path = out
        compiler = "gcc" if source.endswith(".c") else "g++"
        flags = [f for f in CXXFLAGS if compiler == "g++" or f != "-std=c++17"]
        obj = work / f"o{i}_{path.stem}.o"
        # the sample's own .cpp files include <cuda_runtime.h>: polypy's (after -I Common, which
        # keeps NVIDIA's helper headers first)
        r = _run([compiler, *flags, *includes, "-isystem", str(RUNTIME_DIR), *CCCL, "-iquote", str(sample.directory),
                  "-c", str(path), "-o", str(obj)],
                 cwd=work, timeout=TRANSLATE_TIMEOUT_S)
        if r is None or r.returncode != 0:
            return Row(sample.name, "compile", "timed out" if r is None else first_error(r.stderr or r.stdout))
        objects.append(str(obj))
    binary = work / sample.name
    r = _run(["g++", "-fopenmp", *objects, "-o", str(binary), "-lm"], cwd=work, timeout=TRANSLATE_TIMEOUT_S)
    if r is None or r.returncode != 0:
        return Row(sample.name, "compile", "timed out" if r is None else first_error(r.stderr or r.stdout))
    r = _run([str(binary)], cwd=sample.directory, timeout=RUN_TIMEOUT_S)
    if r is None:
        return Row(sample.name, "timeout", f"ran over {RUN_TIMEOUT_S:g} s")
    if r.returncode == 0:
        return Row(sample.name, "pass", "")
    result = "waived" if r.returncode == 2 else "FAIL"
    return Row(sample.name, result, f"exit {r.returncode}: " + first_error(r.stderr + "\n" + r.stdout))


def format_table(rows: Sequence[Row]) -> str:
    width = max(len(r.sample) for r in rows)
    lines = [f"| {'sample':<{width}} | result    | first blocker |", f"|{'-' * (width + 2)}|-----------|---------------|"]
    lines += [f"| {r.sample:<{width}} | {r.result:<9} | {r.blocker.replace('|', '/')} |" for r in rows]
    return "\n".join(lines)


def summary(rows: Sequence[Row]) -> dict[str, int]:
    counts: dict[str, int] = {"samples": len(rows), "applicable": sum(r.result != "n/a" for r in rows)}
    for r in rows:
        counts[r.result] = counts.get(r.result, 0) + 1
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.cuda_samples", description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=pathlib.Path, help="an extracted NVIDIA/cuda-samples checkout")
    parser.add_argument("--only", default="", help="comma-separated sample names")
    parser.add_argument("--applicable", action="store_true", help="list only the CPU-applicable samples")
    parser.add_argument("--keep", type=pathlib.Path, help="keep each sample's work directory here")
    parser.add_argument("--json", type=pathlib.Path, help="write the rows and counts here")
    args = parser.parse_args(argv)
    samples = find_samples(args.root)
    if args.only:
        wanted = set(args.only.split(","))
        samples = [s for s in samples if s.name in wanted]
    if args.applicable:
        samples = [s for s in samples if s.blocker is None]
    polypy = (sys.executable, "-m", "polypy.driver.cli")
    base = args.keep or pathlib.Path(tempfile.mkdtemp(prefix="polypy-samples-"))
    rows = []
    try:
        for sample in samples:
            row = measure(sample, args.root, base / sample.name, polypy)
            print(f"{row.sample}: {row.result} {row.blocker}", file=sys.stderr, flush=True)
            rows.append(row)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    print(format_table(rows))
    counts = summary(rows)
    print(", ".join(f"{k}: {v}" for k, v in counts.items()))
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": [dataclasses.asdict(r) for r in rows], "counts": counts}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""PolyBench/GPU (sgrauerg/polybenchGpu, ``CUDA/<NAME>``) for ``bench/real_programs.py``.

How they are counted: ``CUDA/`` holds 21 program directories; the tree
``polybenchCodesCudaOpenClHMPPOpenAcc/CUDA`` holds older versions of the same 21 programs (their
own sources: one-dimensional arrays, no polybench.h, the sizes hard-coded in the .cu), 42 in all
(the issue's "43" counts one more). Both trees are run: ``CUDA/<NAME>`` rows with small sizes,
``old/<NAME>`` rows at each program's own size. ``CUDA/DOITGEN`` does not build (nvcc fails on
it too, see below), so its row is the older tree's copy, and that copy has no row of its own:
41 rows.

Each Makefile is ``nvcc -O3 <name>.cu`` (``common.mk``): no -D/-I flags. Each program runs its
kernels, then the same computation on the CPU, and prints how many results differ by more than
0.05 percent ("Non-Matching CPU-GPU Outputs ...: N", DOITGEN and GEMVER "Number of misses: N"):
that count must be 0. The default sizes (up to 4096x4096, computed serially on the CPU by the
program itself) are too big for a quick table, so every program gets smaller sizes through its
header's own switch: ``-DN=...`` turns off the header's size table (``# if !defined(N)``) and
the other size macros are given with it. No input files.

``--time`` (issue 37): each program prints how long its kernels took and how long its own serial
CPU version took ("GPU Runtime: ...s" / "CPU Runtime: ...s" in the older tree; "GPU Time in
seconds:" and the number on the next line in the new tree, which prints it only when built with
-DPOLYBENCH_TIME). Timed, the new tree is built at its headers' default sizes (no size flags)
with -DPOLYBENCH_TIME; the older tree is at its own sizes anyway. The ratio is CPU time / GPU
time, both as the program prints them, and the self-check still has to pass.

``--omp``: each ``CUDA/<NAME>`` row also builds our plain OpenMP port of the program's serial
version (``bench/omp_polybench/NAME.c``, ``bench/real_programs_ports.py``) at the same sizes,
checks its output against what the translated program copies back to the host (the program's own
tolerance), and with ``--time`` times it against the program's "GPU Time": t_omp / t_polypy,
best of ``--repeat``, the two run in turn.
"""
from __future__ import annotations

import pathlib

from bench.real_programs_ports import PORTS
from bench.real_programs_spec import Build, Check, Program

OLD_TREE = "polybenchCodesCudaOpenClHMPPOpenAcc/CUDA"
SELF_CHECK = r"(?:Non-Matching CPU-GPU Outputs[^:]*|Number of misses):\s*(?P<ok>\d+)"
# what each program prints of its own times (--time): the older tree "GPU Runtime: 0.123456s" and
# "CPU Runtime: ...s"; the new tree, built with -DPOLYBENCH_TIME, "GPU Time in seconds:" (or "CPU")
# and polybench_timer_print's number on the next line
_SECONDS = r"(?P<s>[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)"
SELF_TIMES = tuple(rf"(?:{part} Runtime:\s*|{part} Time in seconds:\s*\n\s*){_SECONDS}" for part in ("GPU", "CPU"))
TIME_FLAGS = ("-DPOLYBENCH_TIME",)  # the new tree with --time: the headers' default sizes

# directory, source, small sizes (-D values; None: the program has no size switch)
_PROGRAMS: tuple[tuple[str, str, dict[str, int] | None], ...] = (
    ("2DCONV", "2DConvolution.cu", {"N": 1, "NI": 512, "NJ": 512}),
    ("2MM", "2mm.cu", {"N": 1, "NI": 256, "NJ": 256, "NK": 256, "NL": 256}),
    ("3DCONV", "3DConvolution.cu", {"N": 1, "NI": 64, "NJ": 64, "NK": 64}),
    ("3MM", "3mm.cu", {"N": 1, "NI": 128, "NJ": 128, "NK": 128, "NL": 128, "NM": 128}),
    ("ADI", "adi.cu", {"N": 256, "TSTEPS": 2}),
    ("ATAX", "atax.cu", {"N": 1, "NX": 1024, "NY": 1024}),
    ("BICG", "bicg.cu", {"N": 1, "NX": 1024, "NY": 1024}),
    ("CORR", "correlation.cu", {"N": 256, "M": 256}),
    ("COVAR", "covariance.cu", {"N": 256, "M": 256}),
    ("DOITGEN", "doitgen.cu", None),
    ("FDTD-2D", "fdtd2d.cu", {"N": 1, "TMAX": 20, "NX": 256, "NY": 256}),
    ("GEMM", "gemm.cu", {"N": 1, "NI": 256, "NJ": 256, "NK": 256}),
    ("GEMVER", "gemver.cu", {"N": 1024}),
    ("GESUMMV", "gesummv.cu", {"N": 1024}),
    ("GRAMSCHM", "gramschmidt.cu", {"N": 1, "NI": 256, "NJ": 256}),
    ("JACOBI1D", "jacobi1D.cu", {"N": 1024, "TSTEPS": 100}),
    ("JACOBI2D", "jacobi2D.cu", {"N": 256, "TSTEPS": 10}),
    ("LU", "lu.cu", {"N": 256}),
    ("MVT", "mvt.cu", {"N": 1024}),
    ("SYR2K", "syr2k.cu", {"N": 1, "NI": 256, "NJ": 256}),
    ("SYRK", "syrk.cu", {"N": 1, "NI": 256, "NJ": 256}),
)


def programs(root: pathlib.Path) -> list[Program]:
    """The 21 programs of ``root/CUDA`` and the 20 of the older tree (``old/<NAME>``) that exist
    in this checkout."""
    return _new_tree(root) + _old_tree(root)


def _old_tree(root: pathlib.Path) -> list[Program]:
    """``polybenchCodesCudaOpenClHMPPOpenAcc/CUDA``: the older versions of the same programs
    (one-dimensional arrays, no polybench.h, sizes hard-coded in each .cu: no switch to make them
    smaller, so each runs at its own size, up to 4096x4096, its CPU version serially). DOITGEN
    is left out: the ``CUDA/DOITGEN`` row is already built from this tree's copy."""
    out = []
    for name, source, _ in _PROGRAMS:
        directory = f"{OLD_TREE}/{name}"
        if name == "DOITGEN" or not (root / directory / source).exists():
            continue
        out.append(Program(name=f"old/{name}", build=Build(directory, cu=(source,)),
                           check=Check(kind="self", pattern=SELF_CHECK), timeout_s=900.0,
                           self_times=SELF_TIMES,
                           note="the older tree's version, at the sizes hard-coded in it"))
    return out


def _new_tree(root: pathlib.Path) -> list[Program]:
    """The 21 programs of ``root/CUDA`` that exist in this checkout."""
    out = []
    for name, source, sizes in _PROGRAMS:
        # CUDA/DOITGEN calls rtclock(), which only the older tree's polybenchUtilFuncts.h
        # defines (nvcc fails on it too): DOITGEN is built from its identical older copy
        directory = f"{OLD_TREE}/{name}" if name == "DOITGEN" else f"CUDA/{name}"
        if not (root / directory / source).exists():
            continue
        flags = tuple(f"-D{k}={v}" for k, v in (sizes or {}).items())
        out.append(Program(name=name, build=Build(directory, cu=(source,), flags=flags),
                           check=Check(kind="self", pattern=SELF_CHECK),
                           self_times=SELF_TIMES, time_flags=TIME_FLAGS, timeout_s=900.0,
                           omp_port=name if name in PORTS else None,
                           note="sizes: " + (", ".join(f"{k}={v}" for k, v in sizes.items() if k != "N" or v > 1)
                                             if sizes else "the program's own")))
    return out

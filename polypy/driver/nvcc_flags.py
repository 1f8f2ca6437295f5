"""nvcc's options on polypy's command line, so that a Makefile's nvcc line can be reused as it is.

Each option nvcc takes is either taken with its meaning, accepted because it changes nothing a
CPU translation computes, or refused because its meaning is not implemented:

* meaning kept: ``-arch``/``--gpu-architecture`` (``polypy.driver.cli``), ``-gencode``/
  ``--generate-code arch=compute_XY,code=...`` (``__CUDA_ARCH__`` is the highest ``compute_XY``
  listed, unless ``-arch`` says; the device pass then sees that architecture), ``-isystem DIR`` (as
  ``-I``), ``-std=c++03/11/14/17`` (polypy parses C++17, which accepts these programs alike);
* no effect on what the translation computes: optimization and debug levels (``-O3``, ``-g``,
  ``-G``, ``-lineinfo``), warnings (``-w``, ``-Wno-deprecated-gpu-targets``, ``-Werror ...``),
  ``-m64``, ``-x cu``, ``--extended-lambda`` and ``--expt-relaxed-constexpr`` (what polypy supports
  of them it supports without the flag), ``-maxrregcount``, ``-cudart``, ``-ccbin``, options for
  the host compiler, ptxas and the linker (``-Xcompiler``, ``-Xptxas``, ``-Xlinker`` and their long
  forms), libraries (``-lcublas``, ``-L DIR``), ``--default-stream per-thread`` (polypy's streams
  never run two commands at once, an order per-thread streams allow), ``--prec-div=false``,
  ``--prec-sqrt=false`` and ``--fmad`` (they allow a less precise result; polypy's is the precise
  one, which they also allow);
* refused: ``--use_fast_math`` and ``--ftz=true`` (flushing denormal floats to zero is a definite
  result polypy does not compute), ``-std=c++20`` and later (polypy parses C++17).
"""
from __future__ import annotations

import argparse

_FLAGS = ("-g", "-G", "-lineinfo", "-w", "-m64", "--extended-lambda", "--expt-extended-lambda",
          "--expt-relaxed-constexpr", "-expt-relaxed-constexpr", "-expt-extended-lambda",
          "--resource-usage", "-res-usage", "--keep", "-keep", "-v", "--verbose")
_WITH_VALUE = ("-Xcompiler", "--compiler-options", "-Xptxas", "--ptxas-options", "-Xlinker", "--linker-options",
               "-maxrregcount", "--maxrregcount", "-cudart", "--cudart", "-ccbin", "--compiler-bindir", "-x",
               "--x", "-code", "--gpu-code", "--default-stream", "-default-stream", "-L", "-l", "-W",
               "--prec-div", "-prec-div", "--prec-sqrt", "-prec-sqrt", "--fmad", "-fmad")
_SUPPORTED_STD = ("c++03", "c++11", "c++14", "c++17", "gnu++11", "gnu++14", "gnu++17")


def joined_values(words: list[str]) -> list[str]:
    """``-Xcompiler -fopenmp`` as ``-Xcompiler=-fopenmp``: the value of an option that takes one
    may itself start with ``-``, which argparse would read as an option."""
    out: list[str] = []
    i = 0
    while i < len(words):
        if words[i] in _WITH_VALUE and i + 1 < len(words):
            out.append(f"{words[i]}={words[i + 1]}")
            i += 2
        else:
            out.append(words[i])
            i += 1
    return out


def add_nvcc_flags(p: argparse.ArgumentParser) -> None:
    """Add nvcc's options (see the module docstring) to a sub-command's parser."""
    group = p.add_argument_group("nvcc options", "accepted so that a Makefile's nvcc line works (polypy.driver."
                                 "nvcc_flags: what each one means here)")
    group.add_argument("-O", dest="nvcc_ignored", action="append", nargs="?", const="", metavar="LEVEL",
                       help="optimization level (polypy always optimizes)")
    for flag in _FLAGS:
        group.add_argument(flag, dest="nvcc_ignored", action="append_const", const=flag, help=argparse.SUPPRESS)
    for option in _WITH_VALUE:  # (``-W`` takes ``-Wno-deprecated-gpu-targets`` and ``-Werror=...``)
        group.add_argument(option, dest="nvcc_ignored", action="append", help=argparse.SUPPRESS)
    group.add_argument("-gencode", "--generate-code", dest="gencodes", action="append", default=[],
                       metavar="arch=compute_XY,code=...", help="__CUDA_ARCH__: the highest compute_XY listed")
    group.add_argument("-isystem", dest="include_dirs", action="append", metavar="DIR", help="as -I")
    group.add_argument("-std", "--std", dest="std", metavar="c++NN", help="C++03 to C++17")
    group.add_argument("--use_fast_math", "-use_fast_math", "--use-fast-math", dest="fast_math", action="store_true",
                       help="refused: flushing denormals to zero is not implemented")
    group.add_argument("--ftz", "-ftz", dest="ftz", choices=("true", "false"), help="only false")


def apply_nvcc_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Check the refused options and turn ``-gencode`` into the architecture (``parser.error``:
    exit status 1 with the option named)."""
    if getattr(args, "fast_math", False) or getattr(args, "ftz", None) == "true":
        parser.error("--use_fast_math / --ftz=true: flushing denormal floats to zero (and nvcc's approximate "
                     "math) is not implemented; polypy computes IEEE results: remove the option")
    std = getattr(args, "std", None)
    if std is not None and std not in _SUPPORTED_STD:
        parser.error(f"-std={std}: polypy parses C++17; C++03 to C++17 are accepted")
    gencodes = getattr(args, "gencodes", None) or []
    defines = getattr(args, "defines", None)
    if not gencodes or defines is None or any(d.startswith("__POLYPY_CUDA_ARCH__=") for d in defines):
        return
    archs = []
    for value in gencodes:
        for part in value.split(","):
            key, _, arch = part.strip().strip("[]{}\"'").partition("=")
            for name in arch.strip("[]{}\"'").split(","):
                prefix, _, digits = name.strip().partition("_")
                if key.strip() in ("arch", "code") and prefix in ("compute", "sm") and digits.isdigit():
                    archs.append(int(digits))
    if not archs:
        parser.error(f"-gencode {gencodes[0]}: expected arch=compute_XY,code=sm_XY")
    args.defines = list(defines) + [f"__POLYPY_CUDA_ARCH__={max(archs) * 10}"]

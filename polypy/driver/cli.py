"""The ``polypy`` command line.

    polypy translate FILE [-o OUT] [--emit cpp|c|llvm|ir] [--report] [--kernel NAME] [--threads N]
                          [--dump-after PASS]
    polypy grad FILE --kernel K [--wrt p,q] [--const r] [--mode reverse|forward] [--emit cuda|cpp|ir] [-o OUT]
                     [--scratch-outputs p,q] [--dump-after PASS]
    polypy run FILE [--emulate] [...] [-- PROGRAM ARGS...]

User errors print ``file:line:col: error: ...`` with the source line and a caret and exit with
status 1; nothing is written then (see ``polypy.driver.output.write_output``). What each sub-command
does is ``polypy.driver.commands``.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from polypy.driver import commands
from polypy.driver.nvcc_flags import add_nvcc_flags, apply_nvcc_flags, joined_values
from polypy.errors import PolypyError, UserError


def version() -> str:
    """polypy's version as installed (package metadata), else the one the source says."""
    from importlib import metadata

    try:
        return metadata.version("polypy")
    except metadata.PackageNotFoundError:
        from polypy import __version__

        return __version__


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="CUDA (.cu) or C (.c) source")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]",
                   help="define a preprocessor macro")
    p.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR",
                   help="add an include directory")
    p.add_argument("-arch", "--gpu-architecture", dest="defines", action=_Arch, metavar="sm_XY",
                   help="the architecture __CUDA_ARCH__ names in device code (XY0; default sm_80)")
    add_nvcc_flags(p)


class _Arch(argparse.Action):
    """``-arch sm_XY`` as nvcc reads it: ``__CUDA_ARCH__`` is XY0 in the device pass. It travels
    with the defines as ``__POLYPY_CUDA_ARCH__`` (``frontend.device_pass.ARCH_OPTION``), which only
    the device pass reads."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[override]
        text = str(values)
        prefix, _, digits = text.partition("_")
        if prefix not in ("sm", "compute") or not digits.isdigit() or not 2 <= len(digits) <= 3:
            parser.error(f"{option_string}: expected an architecture such as sm_80, got {text!r}")
        namespace.defines = list(namespace.defines or []) + [f"__POLYPY_CUDA_ARCH__={int(digits) * 10}"]


def thread_count(text: str) -> int:
    """``--threads N``: a number of threads, 0 for all cores (every command reads it so)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of threads, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of threads (or 0 for all cores), got {value}")
    return value


def _add_threads(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--threads", type=thread_count, default=0, metavar="N", help=help)


def _add_dump_after(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dump-after", metavar="NAME",
                   help="print the IR after each run of the named passes on stderr (passes of "
                        "polypy.driver.pipelines, comma separated, e.g. serialize-threads,jam-threads)")


class _Parser(argparse.ArgumentParser):
    """argparse, with polypy's exit status for every error: 1 (a bad option value too)."""

    def error(self, message: str):  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="polypy", description="Run CUDA on multicore CPUs; differentiate kernels.")
    parser.add_argument("--version", action="version", version=f"polypy {version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    t = sub.add_parser("translate", help="translate CUDA kernels / programs to CPU code")
    _add_common(t)
    t.add_argument("-o", dest="output", help="output file (default: stdout)")
    t.add_argument("--emit", choices=("cpp", "c", "llvm", "ir", "cpu-ir"), default="cpp",
                   help="cpp/c: C++ or C with OpenMP; llvm: optimized LLVM IR; ir: GPU-form polypy IR; "
                        "cpu-ir: the CPU form that the code generators receive")
    t.add_argument("--report", action="store_true", help="explain barrier and schedule decisions on stderr")
    t.add_argument("--kernel", help="only this kernel")
    _add_threads(t, "CPU threads for the emitted code (0: all cores)")
    t.add_argument("--check-bounds", action="store_true", help="emit bounds checks on every memory access")
    t.add_argument("--no-opt", action="store_true", help="skip barrier elimination and forwarding")
    t.add_argument("-c", "-dc", "--device-c", "--compile", dest="part", action="store_true",
                   help="the file is one part of a program built by separate compilation (as nvcc -c / -dc): "
                        "its kernels get host stubs that other translated files call, even without host code")
    t.add_argument("-rdc", "--relocatable-device-code", dest="rdc", choices=("true", "false"), default="false",
                   help="as nvcc's: with true, the file is a part of a program (as -c); extern __device__ / "
                        "__constant__ variables are then defined by another file")
    t.add_argument("--device-sources", dest="device_sources", action="append", default=[], metavar="FILE",
                   help="another .cu file of the program whose __device__ functions this file's kernels call "
                        "(declared here, defined there: nvcc -rdc=true); polypy inlines them from it (repeatable)")
    _add_dump_after(t)

    g = sub.add_parser("grad", help="synthesize the gradient of a kernel")
    _add_common(g)
    g.add_argument("--kernel", required=True)
    g.add_argument("--wrt", default="", help="comma-separated active inputs (default: all float inputs)")
    g.add_argument("--const", default="", help="comma-separated parameters to treat as constants")
    g.add_argument("--mode", choices=("reverse", "forward"), default="reverse")
    g.add_argument("--emit", choices=("cuda", "cpp", "ir"), default="cuda")
    g.add_argument("--report", action="store_true", help="explain accumulation and caching decisions on stderr")
    g.add_argument("-o", dest="output")
    g.add_argument("--no-opt", action="store_true", help="differentiate the kernel as written (no optimization first)")
    g.add_argument("--cache", choices=("auto", "recompute", "store"), default="auto",
                   help="how the reverse sweep gets values the forward sweep overwrote")
    g.add_argument("--no-privacy", action="store_true", help="do not use isl privacy proofs (atomics everywhere)")
    g.add_argument("--no-block-reductions", action="store_true", help="no block-level reductions of adjoints")
    g.add_argument("--no-windows", action="store_true",
                   help="no block windows (per-block sums in shared memory) for adjoints of read-only inputs")
    g.add_argument("--checkpoint-budget", type=int, default=None, metavar="N",
                   help="binomial checkpointing of loops whose trip count is only known at run time: at most N "
                        "snapshots of their loop-carried values per thread")
    g.add_argument("--scratch-outputs", default="", metavar="P,Q",
                   help="comma-separated outputs whose contents and seeds the caller does not read after K_grad "
                        "(reverse mode): K_grad leaves out its stores to them where it does not read them back, "
                        "so it no longer repeats K's effect on them, and does not zero a seed it need not")
    _add_dump_after(g)

    r = sub.add_parser("run", help="run a sample or a whole program",
                       epilog="Arguments after -- go to the program: polypy run prog.cu -- 1024 input.txt")
    _add_common(r)
    r.add_argument("--emulate", action="store_true", help="use the reference emulator instead of compiled code")
    _add_threads(r, "CPU threads to run on (0: all cores)")
    return parser


def split_program_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``polypy run prog.cu [options] -- ARGS``: polypy's own arguments, and the program's (after
    the first ``--``, passed through untouched, options included)."""
    words = list(argv)
    if words[:1] == ["run"] and "--" in words:
        at = words.index("--")
        return words[:at], words[at + 1:]
    return words, []


def main(argv: Sequence[str] | None = None) -> int:
    own, program_args = split_program_args(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(joined_values(own))
    apply_nvcc_flags(parser, args)
    args.program_args = program_args
    try:
        if args.command == "translate":
            return commands.translate(args)
        if args.command == "grad":
            return commands.grad(args)
        if args.command == "run":
            return commands.run(args)
    except UserError as exc:
        print(exc.render(), file=sys.stderr)
        return 1
    except PolypyError as exc:
        print(f"polypy: {exc}", file=sys.stderr)
        raise
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

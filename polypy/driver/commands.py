"""What each ``polypy`` sub-command does (argument parsing lives in ``polypy.driver.cli``, which
calls these; nothing here imports it)."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from typing import Sequence

from polypy.driver.output import check_output, write_output
from polypy.errors import Loc, UserError
from polypy.ir import nodes as n
from polypy.ir.printer import print_module
from polypy.stack import on_big_stack


def _defines(values: Sequence[str]) -> dict[str, str]:
    """``-D`` flags as the C compiler reads them: ``-DN`` defines N as 1, ``-DN=`` as nothing."""
    out: dict[str, str] = {}
    for v in values:
        name, equals, value = v.partition("=")
        out[name] = value if equals else "1"
    return out


def _load(args: argparse.Namespace) -> n.Module:
    from polypy.driver.source import load

    return load(args.file, defines=_defines(args.defines), include_dirs=tuple(args.include_dirs),
                part=bool(getattr(args, "part", False)) or getattr(args, "rdc", "false") == "true",
                device_sources=tuple(getattr(args, "device_sources", None) or ()))


def _warn_without_kernels(module: n.Module, path: str) -> None:
    """A file with no kernel is translated (or run) all the same, but it is probably not the
    file that was meant: say so on stderr."""
    import sys

    if module.kernels:
        return
    if module.host is not None:
        what = "only its host code is translated"
    else:
        what = "the output has no kernel functions"
    print(f"{path}: warning: no kernel (__global__ function) in this file; {what}", file=sys.stderr)


def _check_kernel(module: n.Module, kernel: str, path: str) -> None:
    """``--kernel K`` names a kernel of the file. The error is located like every other one: at the
    file's first line, since the name that is missing has no place in it (a truncated file, a typo)."""
    names = [k.name for k in module.kernels]
    if kernel not in names:
        raise UserError(f"no kernel named '{kernel}' in {module.source} (kernels: {', '.join(names) or 'none'})",
                        Loc(path, 1, 1))


def _select(module: n.Module, kernel: str | None, path: str) -> n.Module:
    if kernel is None:
        return module
    _check_kernel(module, kernel, path)
    return dataclasses.replace(module, kernels=tuple(k for k in module.kernels if k.name == kernel))


@contextlib.contextmanager
def _dumping(args: argparse.Namespace):
    """``--dump-after NAME[,NAME...]``: the pipelines print the IR after the named passes (each
    checked against the registry first: an unknown name is an error listing the names); a named
    pass that did not run in the command gets a line saying so and why, instead of nothing."""
    from polypy.passes.pipeline import printing_after

    names = getattr(args, "dump_after", None)
    wanted = []
    if names is not None:
        from polypy.driver.pipelines import check_pass_name

        for name in names.split(","):
            check_pass_name(name.strip())
            wanted.append(name.strip())
    with printing_after(names) as ran:
        yield
    from polypy.driver.pipelines import not_run_reason

    for name in wanted:
        if name != "all" and name not in ran:
            print(f"// ----- no IR after {name}: the pass did not run ({not_run_reason(name)})", file=sys.stderr)


@on_big_stack
def translate(args: argparse.Namespace) -> int:
    """CUDA -> CPU code: a whole program (a file with host code) becomes one C++ file; a file of
    kernels (or ``--kernel K``) becomes C/C++ functions with an OpenMP launcher per kernel."""
    with _dumping(args):
        return _translate(args)


def _translate(args: argparse.Namespace) -> int:
    check_output(args.output, (args.file,))
    module = _select(_load(args), args.kernel, args.file)
    _warn_without_kernels(module, args.file)
    if args.emit == "ir":
        write_output(args.output, print_module(module), (args.file,))
        return 0
    whole_program = module.host is not None and args.kernel is None
    if whole_program and args.emit == "c":
        raise UserError(f"{module.source} has host code, which polypy keeps as C++: use --emit cpp for the whole "
                        "program, or --kernel NAME for the C code of one kernel")
    from polypy.driver.pipelines import lower_and_emit

    report: list | None = [] if args.report else None
    text = lower_and_emit(module, args.emit, optimize=not args.no_opt, report=report, program=whole_program,
                          threads=args.threads, check_bounds=args.check_bounds)
    if report is not None:  # warnings for stores that two threads of a launch race on
        from polypy.poly.race_report import race_report

        report.extend(race_report(module))
    _print_report(report)
    if whole_program and args.emit == "cpp":
        from polypy.driver.programs import with_defines

        text = with_defines(text, _defines(args.defines))
    write_output(args.output, text, (args.file,))
    return 0


def _print_report(report: list | None) -> None:
    import sys

    for decision in report or ():
        print(decision.format(), file=sys.stderr)


@on_big_stack
def grad(args: argparse.Namespace) -> int:
    """``polypy grad``: the reverse (``K_grad``) or forward (``K_fwd``) derivative of one kernel."""
    with _dumping(args):
        return _grad(args)


def _grad(args: argparse.Namespace) -> int:
    from polypy.driver.gradients import grad_kernel, gradient_cpp, gradient_source, privacy_oracle

    check_output(args.output, (args.file,))
    module = _load(args)
    _check_kernel(module, args.kernel, args.file)
    wrt = [w.strip() for w in args.wrt.split(",") if w.strip()] or None
    const = [c.strip() for c in args.const.split(",") if c.strip()]
    scratch = _scratch_outputs(module, args)
    report: list | None = [] if args.report else None
    gradient = grad_kernel(module, args.kernel, wrt=wrt, const=const, mode=args.mode, report=report,
                           optimize=not args.no_opt, cache=args.cache, privacy=not args.no_privacy,
                           block_reductions=not args.no_block_reductions, windows=not args.no_windows,
                           checkpoint_budget=args.checkpoint_budget, scratch_outputs=scratch)
    if args.emit == "ir":
        text = print_module(dataclasses.replace(module, kernels=module.kernels + (gradient,)))
    elif args.emit == "cuda":
        text = gradient_source(module, gradient, defines=_defines(args.defines))
    else:
        text = gradient_cpp(module, gradient)
    if report is not None and args.mode == "reverse":  # what polypy.grad does instead on the CPU
        from polypy.driver.gathered import gather_notes

        report.extend(gather_notes(module, args.kernel, grad_kernel, privacy_oracle, wrt=wrt, const=const, optimize=not args.no_opt,
                                   cache=args.cache, privacy=not args.no_privacy,
                                   block_reductions=not args.no_block_reductions, windows=not args.no_windows,
                                   checkpoint_budget=args.checkpoint_budget, scratch_outputs=scratch))
    _print_report(report)
    _warn_races(module, args.kernel)
    write_output(args.output, text, (args.file,))
    return 0


def _scratch_outputs(module: n.Module, args: argparse.Namespace) -> tuple[str, ...]:
    """``--scratch-outputs P,Q``: pointer parameters of the kernel, in reverse mode only (an error
    located at the file's first line otherwise, as for ``--kernel``)."""
    names = tuple(w.strip() for w in args.scratch_outputs.split(",") if w.strip())
    if not names:
        return ()
    if args.mode != "reverse":
        raise UserError("--scratch-outputs is for reverse mode (K_grad)", Loc(args.file, 1, 1))
    kernel = module.kernel(args.kernel)
    for name in names:
        p = kernel.param(name)
        if p is None or not isinstance(p.ptype, n.PointerType) or p.ptype.const:
            raise UserError(f"--scratch-outputs: '{name}' is not an output (a non-const pointer parameter) of kernel "
                            f"'{args.kernel}'", Loc(args.file, 1, 1))
    return names


def _warn_races(module: n.Module, kernel: str) -> None:
    """The race warnings ``translate --report`` gives for ``kernel``, always given by ``grad``: the
    gradient of a result that depends on the thread schedule is the gradient of one schedule's
    result (with ``--report``, after its decisions)."""
    import sys

    from polypy.poly.race_report import kernel_race_warnings

    for text in kernel_race_warnings(module, kernel):
        print(text, file=sys.stderr)


@on_big_stack
def run(args: argparse.Namespace) -> int:
    """Run a sample (``X.cu`` next to a ``X.py`` describing it) or a whole program."""
    import pathlib

    path = pathlib.Path(args.file)
    module = _load(args)
    if module.host is not None and module.host.has_main:
        _warn_without_kernels(module, args.file)
        return _run_program(module, args)
    description = path.with_suffix(".py")
    if description.exists():
        if getattr(args, "program_args", None):
            raise UserError(f"{path} is a kernel sample, which takes no arguments (the arguments after -- are "
                            "for a whole program's main)")
        return _run_sample(path, description, emulate=args.emulate, threads=args.threads)
    raise UserError(f"nothing to run: {path} has no main() and no sample description ({description.name})")


def _run_sample(path, description, *, emulate: bool, threads: int) -> int:
    """Every launch shape of the sample, checked against its NumPy reference."""
    import importlib.util
    import sys

    import numpy as np

    root = str(description.resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)  # sample descriptions import `samples.spec`
    spec = importlib.util.spec_from_file_location(f"polypy_run_{path.stem}", description)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sample = getattr(mod, "SAMPLE", None)
    if sample is None:
        raise UserError(f"{description} does not define SAMPLE")
    from polypy.driver.source import load

    module = load(path, defines=dict(sample.defines))
    kernel = module.kernel(sample.kernel)
    launch = _launcher(path, sample, kernel, emulate=emulate, threads=threads)
    failures = 0
    for i, case in enumerate(sample.cases):
        args = sample.make_args(np.random.default_rng(i), case, np.float32)
        pristine = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        expected = sample.reference(pristine, case)
        launch(case, args)
        worst = 0.0
        ok = True
        for out in sample.outputs:
            got = np.asarray(args[out], dtype=np.float64).reshape(-1)
            want = np.asarray(expected[out], dtype=np.float64).reshape(-1)
            ok &= bool(np.allclose(got, want, rtol=sample.rtol, atol=sample.atol))
            scale = np.maximum(np.abs(want), 1e-30)
            with np.errstate(invalid="ignore"):  # equal infinities differ by nothing, not by NaN
                diff = np.where(got == want, 0.0, np.abs(got - want))
            worst = max(worst, float(np.max(diff / scale)) if got.size else 0.0)
        failures += not ok
        print(f"{sample.name} {case}: {'ok' if ok else 'MISMATCH'} (max relative error {worst:.2e})")
    return 1 if failures else 0


def _launcher(path, sample, kernel, *, emulate: bool, threads: int):
    if emulate:
        from polypy.emulator import emulate as run_emulated

        return lambda case, args: run_emulated(kernel, case.grid, case.block, args, shmem=case.shmem)
    try:
        from polypy.driver.api import compile as compile_module
    except ImportError:
        raise UserError("compiled execution is not available in this build; use --emulate") from None
    compiled = compile_module(path, defines=dict(sample.defines), threads=threads or None)
    launchable = getattr(compiled, sample.kernel)
    return lambda case, args: launchable[case.grid, case.block, case.shmem](**args)


def _run_program(module: n.Module, args: argparse.Namespace) -> int:
    from polypy.driver.programs import run_program

    return run_program(module, emulate=args.emulate, threads=args.threads, argv=getattr(args, "program_args", ()),
                       defines=_defines(args.defines), include_dirs=tuple(args.include_dirs))

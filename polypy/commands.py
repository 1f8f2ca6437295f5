"""What each ``polypy`` sub-command does (argument parsing lives in ``polypy.cli``)."""
from __future__ import annotations

import argparse
import dataclasses

from polypy.cli import _defines, write_output
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.printer import print_module


def _load(args: argparse.Namespace) -> n.Module:
    from polypy.driver import load

    return load(args.file, defines=_defines(args.defines), include_dirs=tuple(args.include_dirs))


def _select(module: n.Module, kernel: str | None) -> n.Module:
    if kernel is None:
        return module
    names = [k.name for k in module.kernels]
    if kernel not in names:
        raise UserError(f"no kernel named '{kernel}' in {module.source} (kernels: {', '.join(names) or 'none'})")
    return dataclasses.replace(module, kernels=tuple(k for k in module.kernels if k.name == kernel))


def translate(args: argparse.Namespace) -> int:
    module = _select(_load(args), args.kernel)
    if args.emit == "ir":
        write_output(args.output, print_module(module))
        return 0
    raise UserError(f"--emit {args.emit} is not available yet")


def grad(args: argparse.Namespace) -> int:
    raise UserError("polypy grad is not available yet")


def run(args: argparse.Namespace) -> int:
    raise UserError("polypy run is not available yet")

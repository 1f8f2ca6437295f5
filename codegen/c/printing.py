"""C for device printf and failed asserts (``n.Print``, ``n.AssertFail``).

A ``Print`` is one call of the C library's ``printf`` with the format as written and each argument
cast to the C type its conversion reads: glibc holds ``stdout``'s lock for the whole call, so each
call's output is whole, as on a GPU. A failed assert writes CUDA's message to ``stderr`` in one
call and records ``cudaErrorAssert``: in a whole program as the runtime's sticky error (what the
next synchronization returns), in a file of kernels in ``polypy_device_assert_failed``."""
from __future__ import annotations

from typing import Callable

from polypy.errors import format_diagnostic
from polypy.ir import nodes as n
from polypy.ir.printf import c_library_format, c_string, escape, fault_format, parse_format

_C_TYPES = {"i32": "int", "u32": "unsigned int", "i64": "long long", "u64": "unsigned long long", "f64": "double"}


def print_call(s: n.Print, expr: Callable[[n.Expr], str]) -> str:
    """The ``printf`` call; with ``%s`` of character arrays (``s.strings``), in a block that first
    copies each array's bytes into a local ``char`` array ending with a 0 byte."""
    if not s.strings:
        args = "".join(f", ({_C_TYPES[a.type.name]})({expr(a)})" for a in s.args)
        return f"printf({c_string(c_library_format(s.format))}{args})"
    arrays: list[str] = []
    args_c: list[str] = []
    values = iter(s.args)
    lengths = iter(s.strings)
    for spec in parse_format(s.format, allow_strings=True):
        if spec.conv == "s":
            chars = [f"(char)({expr(next(values))})" for _ in range(next(lengths))]
            name = f"polypy_str{len(arrays)}"
            arrays.append(f"char {name}[{len(chars) + 1}] = {{{', '.join(chars + ['0'])}}}; ")
            args_c.append(f", {name}")
        else:
            args_c += [f", ({_C_TYPES[a.type.name]})({expr(a)})" for a in (next(values) for _ in spec.arg_types())]
    return f"{{ {''.join(arrays)}printf({c_string(c_library_format(s.format))}{''.join(args_c)}); }}"


def assert_fail_lines(s: n.AssertFail, expr: Callable[[n.Expr], str]) -> list[str]:
    """A misaligned access (``fault``) is the same, with its own message and error: 2 in
    ``polypy_device_assert_failed``, ``cudaErrorMisalignedAddress`` in a whole program."""
    where = ", ".join(f"(unsigned)({expr(w)})" for w in s.where)
    error, word = ("cudaErrorMisalignedAddress", 2) if s.fault == "misaligned" else ("cudaErrorAssert", 1)
    return [f"fprintf(stderr, {c_string(fault_format(s, escape))}, {where});",
            "#ifdef POLYPY_RT_STATE",
            f"polypy_rt_fail_sticky({error});",
            "#else",
            f"__atomic_store_n(&polypy_device_assert_failed, {word}, __ATOMIC_SEQ_CST);",
            "#endif"]


def aligned_argument_lines(kernel: n.Kernel, c_name: Callable[[str], str]) -> list[str]:
    """A whole program's launcher: an argument the kernel views with a stricter alignment than
    its elements' (``Kernel.aligned``) whose address is not a multiple of it is refused, located
    at the cast (polypy checks views from the argument's start): the diagnostic, status 1."""
    out: list[str] = []
    for name, align, loc in kernel.aligned:
        message = format_diagnostic(
            "error", f"argument '{c_name(name)}' of kernel '{kernel.name}' is at an address that is not a multiple "
            f"of {align} bytes, which this view of it needs: polypy does not support such an argument (on a GPU, an "
            "access here at an aligned offset faults with 'misaligned address')", loc) + "\n"
        out.append(f"if ((size_t)({c_name(name)}) % {align}u != 0u) {{ fflush(stdout); "
                   f"fputs({c_string(message)}, stderr); exit(1); }}")
    return out


__all__ = ["aligned_argument_lines", "assert_fail_lines", "print_call"]

"""C for device printf and failed asserts (``n.Print``, ``n.AssertFail``).

A ``Print`` is one call of the C library's ``printf`` with the format as written and each argument
cast to the C type its conversion reads: glibc holds ``stdout``'s lock for the whole call, so each
call's output is whole, as on a GPU. A failed assert writes CUDA's message to ``stderr`` in one
call and records ``cudaErrorAssert``: in a whole program as the runtime's sticky error (what the
next synchronization returns), in a file of kernels in ``polypy_device_assert_failed``."""
from __future__ import annotations

from typing import Callable

from polypy.ir import nodes as n
from polypy.ir.printf import c_library_format, c_string, escape, fault_format

_C_TYPES = {"i32": "int", "u32": "unsigned int", "i64": "long long", "u64": "unsigned long long", "f64": "double"}


def print_call(s: n.Print, expr: Callable[[n.Expr], str]) -> str:
    args = "".join(f", ({_C_TYPES[a.type.name]})({expr(a)})" for a in s.args)
    return f"printf({c_string(c_library_format(s.format))}{args})"


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


__all__ = ["assert_fail_lines", "print_call"]

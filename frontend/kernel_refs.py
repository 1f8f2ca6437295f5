"""A kernel named in host code other than as the kernel of a launch: ``(void*)k`` for
``cudaKernelNodeParams::func`` (CUDA graphs' kernel nodes).

A translated program has no function ``k``, only its launcher; such a reference becomes a
``"kernel-address"`` span the program emitter rewrites to
``polypy_rt_kernel_address(k's launcher)``, the runtime's object for the kernel
(``polypy/runtime/parts/graphs.h``), which binds a ``void**`` array of arguments to the launcher's
parameters. Refused with a located error: a kernel template's instance (no single launcher to
name), a kernel reading texture references (its launcher has hidden parameters), and a reference
written inside a macro (no source text to rewrite).
"""
from __future__ import annotations

from typing import Callable, Iterable

import clang.cindex as ci

from polypy.errors import UserError
from polypy.ir.host import DeviceSpan

from frontend.clang_setup import cursor_loc, preorder
from frontend.lower import CK, is_kernel_decl

_VALUE = "used as a value (not launched with <<<...>>>) is not supported"


def _where(c: ci.Cursor) -> tuple:
    return (c.extent.start.file.name if c.extent.start.file else "", c.extent.start.offset)


def kernel_values(fn: ci.Cursor, is_launch: Callable[[ci.Cursor], bool]) -> list[ci.Cursor]:
    """The references to kernels in host function ``fn`` that are not the kernel of a launch;
    refuses those a translated program cannot take the address of."""
    launched = {_where(c) for c in preorder(fn) if c.kind == CK.CALL_EXPR and is_launch(c)}
    out = []
    for ref in preorder(fn):
        if ref.kind != CK.DECL_REF_EXPR or ref.referenced is None or not is_kernel_decl(ref.referenced):
            continue
        if _where(ref) in launched:
            continue
        target = ref.referenced
        if fn.kind == CK.FUNCTION_TEMPLATE or target.kind == CK.FUNCTION_TEMPLATE or \
                target.get_num_template_arguments() > 0 or (target.get_definition() is None):
            raise UserError(f"kernel '{ref.spelling}' {_VALUE}: only the address of a kernel that is not a "
                            "template, defined in the program, can be taken", cursor_loc(ref))
        out.append(ref)
    return out


def kernel_address_spans(functions: Iterable[ci.Cursor], is_launch: Callable[[ci.Cursor], bool],
                         name_of: Callable[[ci.Cursor], str | None], textured: Callable[[str], bool],
                         slice_of: Callable[[ci.SourceRange], str], char: Callable[[int], int]) -> tuple[DeviceSpan, ...]:
    """``"kernel-address"`` spans for the kernel references of ``functions`` (host functions of one
    file); ``name_of``: the IR kernel of a kernel's definition."""
    out = []
    for fn in functions:
        for ref in kernel_values(fn, is_launch):
            name = name_of(ref.referenced.get_definition())
            if name is None:
                raise UserError(f"kernel '{ref.spelling}' {_VALUE}: it was not translated", cursor_loc(ref))
            if textured(name):
                raise UserError(f"kernel '{ref.spelling}' {_VALUE}: it reads texture references", cursor_loc(ref))
            if slice_of(ref.extent) != ref.spelling:
                raise UserError(f"kernel '{ref.spelling}' {_VALUE} inside a macro", cursor_loc(ref))
            out.append(DeviceSpan(char(ref.extent.start.offset), char(ref.extent.end.offset), "kernel-address", (name,)))
    return tuple(out)

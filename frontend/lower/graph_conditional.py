"""A kernel's part in CUDA graphs' conditional nodes: ``cudaGraphSetConditional(handle, value)``.

The runtime's conditional handle is the address of the condition, an ``unsigned int``
(``polypy/runtime/parts/graph_conditional.h``). A kernel parameter of type
``cudaGraphConditionalHandle`` is therefore a pointer to one ``u32`` in the IR (its launcher casts
the handle the host passes), and ``cudaGraphSetConditional(handle, value)`` is a store of
``(unsigned int)value`` through it: what CUDA's device call does to the condition the node reads.

A handle has no other meaning a kernel could use (it is an opaque 64-bit number in CUDA): a
kernel parameter of the type that is used other than as cudaGraphSetConditional's first argument
is refused at the use.
"""
from __future__ import annotations

import clang.cindex as ci

from polypy.errors import UserError
from polypy.ir.types import U32

from frontend.arith import convert
from frontend.clang_setup import cursor_loc
from frontend.lower.context import CK
from frontend.lower.helpers import strip
from frontend.values import Pointer

HANDLE = "cudaGraphConditionalHandle"


def is_condition_handle(t: ci.Type) -> bool:
    """Whether ``t`` is spelled with CUDA's handle typedef (possibly const)."""
    while t.kind == ci.TypeKind.ELABORATED:
        t = t.get_named_type()
    return t.kind == ci.TypeKind.TYPEDEF and t.get_declaration().spelling == HANDLE


def check_handle_uses(kernel: ci.Cursor, param: ci.Cursor) -> None:
    """Refuse a use of the handle parameter ``param`` other than ``cudaGraphSetConditional(param, v)``."""
    def visit(c: ci.Cursor, parents: list[ci.Cursor]) -> None:
        if c.kind == CK.DECL_REF_EXPR and c.referenced is not None and c.referenced == param:
            up = [x for x in parents if x.kind != CK.UNEXPOSED_EXPR]
            call = up[-1] if up else None
            args = list(call.get_children()) if call is not None and call.kind == CK.CALL_EXPR else []
            ok = call is not None and call.kind == CK.CALL_EXPR and call.spelling == "cudaGraphSetConditional" \
                and len(args) == 3 and strip(args[1]) == c
            if not ok:
                raise UserError(f"the conditional handle '{param.spelling}' is only supported as the first argument "
                                "of cudaGraphSetConditional in the kernel (polypy's handle is the address of the "
                                "condition)", cursor_loc(c))
        for ch in c.get_children():
            visit(ch, parents + [c])

    for ch in kernel.get_children():
        if ch.kind == CK.COMPOUND_STMT:
            visit(ch, [])


def set_conditional(b, args: list[ci.Cursor], c: ci.Cursor, discard: bool) -> None:
    """``cudaGraphSetConditional(handle, value)``: ``*handle = (unsigned int)value``."""
    if not discard:
        raise b.error("cudaGraphSetConditional() has no value", c)
    handle = b.expr(strip(args[0]))
    if not isinstance(handle, Pointer):
        raise b.error("cudaGraphSetConditional's handle must be a parameter of the kernel of type "
                      "cudaGraphConditionalHandle", c)
    value = convert(b.scalar(args[1]), U32)
    b.assign(b.deref(handle, c), value, c)
    return None

"""Device function pointers, closed world (docs/function_pointers.md).

A function pointer is a number, the id ``frontend.function_ids`` gives the function (0: null),
of IR type ``ctypes_map.FUNCTION_POINTER``: locals, arrays, ``__constant__`` tables, record
members and kernel arguments holding one are plain integers. A call through a pointer is an
exact dispatch over the address-taken device functions of the pointer's type::

    f(a, b)   ==>   sel = f;
                    if (sel == 1) { r = add(a, b) } else if (sel == 2) { r = mul(a, b) }
                    else { fault }        (null or not a device function of this type)

Each branch inlines its function with the call's arguments, evaluated there (one branch runs,
so each argument is evaluated once, after the callee, as C++17 orders them). A call whose
pointer can reach no function is refused.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import BOOL

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.function_ids import function_id, is_function_pointer, is_function_type, targets
from frontend.lower import inlining
from frontend.lower.context import CK, is_device_decl, is_kernel_decl
from frontend.lower.helpers import strip
from frontend.values import Value

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder

# The text of the fault that ends every dispatch (``_fault``): how later stages (``polypy grad
# --emit cuda``, which cannot write a dispatch over polypy's function ids back as CUDA) find one.
DISPATCH_FAULT = "call through a null or invalid function pointer"


def function_value(kb: KernelBuilder, fn: ci.Cursor, c: ci.Cursor) -> n.Expr:
    """The value of ``add`` / ``&add`` in device code: the function's id."""
    if is_kernel_decl(fn):
        raise kb.error(f"kernel '{fn.spelling}' used as a value in device code (pointers to kernels are not "
                       "supported in device code)", c)
    if not is_device_decl(fn):
        raise kb.error(f"host function '{fn.spelling}' used as a value in device code (a device function pointer "
                       "must point to a __device__ function)", c)
    k = function_id(fn)
    if k is None:  # every reference outside a call is a taking of the address: seen by the scan
        raise kb.error(f"function '{fn.spelling}' used as a value: polypy found no taking of its address here", c)
    return n.Const(k, tm.FUNCTION_POINTER, loc=kb.loc(c))


def is_null_constant(c: ci.Cursor) -> bool:
    """``nullptr``, ``NULL`` or ``0`` (the operand of a conversion to a function pointer)."""
    inner = strip(c)
    if inner.kind in (CK.CXX_NULL_PTR_LITERAL_EXPR, CK.GNU_NULL_EXPR):
        return True
    return inner.kind == CK.INTEGER_LITERAL and [t.spelling for t in inner.get_tokens()] in (["0"], ["0L"])


def is_pointer_call(callee: ci.Cursor | None) -> bool:
    """Whether a call's callee is a function pointer (or a function it points to: ``(*f)(a)``),
    not a function named directly."""
    if callee is None:
        return False
    inner = strip(callee)
    if inner.kind == CK.DECL_REF_EXPR and inner.referenced is not None and \
            inner.referenced.kind in (CK.FUNCTION_DECL, CK.FUNCTION_TEMPLATE, CK.CXX_METHOD):
        return False
    if inner.kind in (CK.MEMBER_REF_EXPR, CK.OVERLOADED_DECL_REF):
        r = inner.referenced
        if r is None or r.kind not in (CK.FIELD_DECL, CK.VAR_DECL):
            return False
    return is_function_pointer(callee.type) or is_function_pointer(inner.type) or is_function_type(inner.type)


def pointer_call(kb: KernelBuilder, c: ci.Cursor, callee: ci.Cursor, args: list[ci.Cursor],
                 discard: bool) -> Value | None:
    inner = strip(callee)
    if inner.kind == CK.UNARY_OPERATOR and is_function_type(inner.type):  # `(*f)(a, b)`: f
        inner = strip(next(iter(inner.get_children())))
    pointer_type = inner.type.get_canonical()
    if not is_function_pointer(pointer_type):
        raise kb.error("calls through this kind of callee are not supported in device code", c)
    function_type = pointer_type.get_pointee()
    found = targets(c.translation_unit, function_type)
    if not found:
        raise kb.error(f"call through a function pointer of type '{pointer_type.spelling}', which can reach no "
                       "device function (no __device__ function of this type has its address taken in this "
                       "translation unit)", c)
    sel = kb.temp(tm.FUNCTION_POINTER, convert(kb.scalar(inner), tm.FUNCTION_POINTER), "fnptr", c)
    rt = c.type.get_canonical()
    result = None
    if rt.kind != ci.TypeKind.VOID and not discard:
        st = tm.scalar_type(rt)
        if st is None:
            raise kb.error(f"a call through a function pointer returning '{c.type.spelling}' is not supported "
                           "(only numbers and void)", c)
        result = kb.temp(st, None, "fnptr_ret", c)
    loc = kb.loc(c)
    chain: tuple[n.Stmt, ...] = _fault(kb, c)
    for k, fn in reversed(found):
        definition = fn.get_definition()
        if definition is None:
            raise kb.error(f"call through a function pointer that may reach '{fn.spelling}', which has no "
                           "definition polypy can translate", c)
        with kb.sub_block() as body:
            value = inlining.inline(kb, definition, args, c, result is None)
            if result is not None:
                if not isinstance(value, n.Expr):
                    raise kb.error(f"'{fn.spelling}' called through a function pointer must return a number", c)
                kb.emit(n.Assign(result.name, convert(value, result.type), loc=loc))
        test = n.Binary("eq", kb.read(sel, c), n.Const(k, tm.FUNCTION_POINTER), loc=loc)
        chain = (n.If(test, tuple(body), chain, loc=loc),)
    for s in chain:
        kb.emit(s)
    return None if result is None else kb.read(result, c)


def _fault(kb: KernelBuilder, c: ci.Cursor) -> tuple[n.Stmt, ...]:
    """A call through a null pointer or a value that is no device function of the type stops
    the thread, and the launch fails (as the GPU's does; polypy reports it as a failed device
    assertion, cudaErrorAssert, naming the call)."""
    loc = kb.loc(c)
    fn = kb.frame.cursor
    where = tuple(k(d, loc=loc) for k in (n.BlockIdx, n.ThreadIdx) for d in range(3))
    file = c.location.file.name if c.location.file is not None else ""
    stop: list[n.Stmt] = [n.AssertFail(DISPATCH_FAULT, file, c.location.line,
                                       f"{fn.result_type.spelling} {fn.displayname}", where, loc=loc)]
    if not kb.frame.is_kernel:
        if kb.assert_flag is None:
            kb.assert_flag = kb.names.fresh("assert_failed")
        stop.append(n.Assign(kb.assert_flag, n.Const(True, BOOL), loc=loc))
    stop.append(n.Return(loc=loc))
    return tuple(stop)

"""PyTorch's ``c10::Half`` (``at::Half``) in device code: its two conversions, lowered exactly.

``c10::Half`` (``torch/headeronly/util/Half.h``) is 16 bits of IEEE binary16 whose operators are
written on two primitives: the constructor ``Half(float)`` (round to nearest even; on the device
``__float2half``) and ``operator float()`` (exact; ``__half2float``). ``polypy_torch_host.h``
reads that header as ``__host__ __device__``, so the frontend inlines the operators as PyTorch
writes them (``Half + Half`` is the float sum made a Half, ``Half + float`` a float, ``Half +
int`` the int made a Half first ...), and clang's overload resolution picks the operator each
expression means. Only the primitives are not inlined from PyTorch's host code (bit-level float
tricks, or F16C intrinsics where the host compiler enables them): they are lowered as the free
functions of ``polypy/runtime/torch/polypy_c10_half.h``, on polypy's exact binary16 rounding (the
code of ``__half``, docs/half.md). So is the unary minus, which CUDA's device code computes with
``__hneg`` (the sign bit flipped, NaN payloads kept) where the host reading negates in float.

The class is recognized by its declaration (struct ``Half`` of namespace ``c10`` in a system
header), never by spelling.
"""
from __future__ import annotations

import clang.cindex as ci

from polypy.errors import InternalError

from frontend.lower.context import CK

_NAMESPACE = "polypy_c10"


def _in_c10(decl: ci.Cursor | None) -> bool:
    p = decl.semantic_parent if decl is not None else None
    return p is not None and p.kind == CK.NAMESPACE and p.spelling == "c10" and \
        (p.semantic_parent is None or p.semantic_parent.kind == CK.TRANSLATION_UNIT)


def is_c10_half(decl: ci.Cursor | None) -> bool:
    """Whether ``decl`` declares PyTorch's ``c10::Half``."""
    return decl is not None and decl.kind in (CK.STRUCT_DECL, CK.CLASS_DECL) and decl.spelling == "Half" and \
        decl.location.is_in_system_header and _in_c10(decl)


def is_c10_half_type(t: ci.Type) -> bool:
    c = t.get_canonical()
    if c.kind == ci.TypeKind.LVALUEREFERENCE or c.kind == ci.TypeKind.RVALUEREFERENCE:
        c = c.get_pointee().get_canonical()
    return c.kind == ci.TypeKind.RECORD and is_c10_half(c.get_declaration())


def c10_half_primitive(fn: ci.Cursor) -> str | None:
    """The function of ``polypy_c10_half.h`` that ``fn`` (a member or operator of ``c10::Half``)
    is lowered as, or None for the members and operators inlined as written."""
    if fn.kind == CK.CONSTRUCTOR and is_c10_half(fn.semantic_parent):
        params = list(fn.get_arguments())
        if len(params) == 1 and params[0].type.get_canonical().kind == ci.TypeKind.FLOAT:
            return "half_from_float"
        return None
    if fn.kind == CK.CONVERSION_FUNCTION and is_c10_half(fn.semantic_parent):
        return "half_to_float" if fn.type.get_result().get_canonical().kind == ci.TypeKind.FLOAT else None
    if fn.kind == CK.FUNCTION_DECL and fn.spelling == "operator-" and fn.location.is_in_system_header and \
            _in_c10(fn):
        params = list(fn.get_arguments())
        if len(params) == 1 and is_c10_half_type(params[0].type):
            return "half_neg"
    return None


def c10_half_function(fn: ci.Cursor, name: str, cache: dict[str, ci.Cursor]) -> ci.Cursor:
    """The definition of ``polypy_c10::name`` in ``fn``'s translation unit (found once: ``cache``)."""
    key = f"{_NAMESPACE}::{name}"
    if key not in cache:
        for ns in fn.translation_unit.cursor.get_children():
            if ns.kind == CK.NAMESPACE and ns.spelling == _NAMESPACE:
                for d in ns.get_children():
                    if d.kind == CK.FUNCTION_DECL and d.is_definition():
                        cache[f"{_NAMESPACE}::{d.spelling}"] = d
        if key not in cache:
            raise InternalError(f"'{key}' of polypy_c10_half.h is not in this translation unit")
    return cache[key]

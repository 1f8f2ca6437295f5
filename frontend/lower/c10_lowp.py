"""PyTorch's ``c10::Half`` and ``c10::BFloat16`` in device code: their two conversions, lowered exactly.

``c10::Half`` (``torch/headeronly/util/Half.h``, IEEE binary16) and ``c10::BFloat16``
(``torch/headeronly/util/BFloat16.h``, the upper 16 bits of a float) are 16-bit storage types
whose operators are written on two primitives: the constructor ``T(float)`` (round to nearest
even) and ``operator float()`` (exact). ``polypy_torch_host.h`` reads both headers as
``__host__ __device__``, so the frontend inlines the operators as PyTorch writes them (``T + T``
is the float sum made a T, ``T + float`` a float, ``T + int`` the int made a T first ...), and
clang's overload resolution picks the operator each expression means. Only the primitives are not
inlined from PyTorch's host code (bit-level float tricks, ``memcpy``, F16C intrinsics): they are
lowered as the free functions of ``polypy/runtime/torch/polypy_c10_lowp.h``, on polypy's exact
binary16 and bfloat16 rounding (the code of ``__half`` and ``__nv_bfloat16``, docs/half.md).

The meanings: ``Half(float)`` is ``__float2half`` (CUDA's device code); ``BFloat16(float)`` is
c10's ``round_to_nearest_even`` (any NaN becomes ``0x7FC0``, as on the CPU and on devices before
sm_80). ``Half``'s unary minus is not inlined either: CUDA's device code computes it with
``__hneg`` (the sign bit flipped, NaN payloads kept), where the host reading negates in float.
``BFloat16``'s unary minus is written ``-float(a)`` made a BFloat16 on the device too: inlined.

The classes are recognized by their declarations (struct ``Half`` / ``BFloat16`` of namespace
``c10`` in a system header), never by spelling.
"""
from __future__ import annotations

import clang.cindex as ci

from polypy.errors import InternalError

from frontend.lower.context import CK

_NAMESPACE = "polypy_c10"
# The class's name in namespace c10 -> (the lowering of T(float), of operator float()).
_PRIMITIVES = {"Half": ("half_from_float", "half_to_float"), "BFloat16": ("bf16_from_float", "bf16_to_float")}


def _in_c10(decl: ci.Cursor | None) -> bool:
    p = decl.semantic_parent if decl is not None else None
    return p is not None and p.kind == CK.NAMESPACE and p.spelling == "c10" and \
        (p.semantic_parent is None or p.semantic_parent.kind == CK.TRANSLATION_UNIT)


def c10_lowp_class(decl: ci.Cursor | None) -> str | None:
    """``"Half"`` or ``"BFloat16"`` where ``decl`` declares PyTorch's ``c10::Half`` or
    ``c10::BFloat16``, else None."""
    if decl is None or decl.kind not in (CK.STRUCT_DECL, CK.CLASS_DECL) or decl.spelling not in _PRIMITIVES:
        return None
    return decl.spelling if decl.location.is_in_system_header and _in_c10(decl) else None


def c10_lowp_type(t: ci.Type) -> str | None:
    """``"Half"`` / ``"BFloat16"`` where ``t`` (or the type it references) is that class."""
    c = t.get_canonical()
    if c.kind == ci.TypeKind.LVALUEREFERENCE or c.kind == ci.TypeKind.RVALUEREFERENCE:
        c = c.get_pointee().get_canonical()
    return c10_lowp_class(c.get_declaration()) if c.kind == ci.TypeKind.RECORD else None


def c10_lowp_primitive(fn: ci.Cursor) -> str | None:
    """The function of ``polypy_c10_lowp.h`` that ``fn`` (a member or operator of ``c10::Half`` or
    ``c10::BFloat16``) is lowered as, or None for the members and operators inlined as written."""
    cls = c10_lowp_class(fn.semantic_parent) if fn.kind in (CK.CONSTRUCTOR, CK.CONVERSION_FUNCTION) else None
    if cls is not None and fn.kind == CK.CONSTRUCTOR:
        params = list(fn.get_arguments())
        if len(params) == 1 and params[0].type.get_canonical().kind == ci.TypeKind.FLOAT:
            return _PRIMITIVES[cls][0]
        return None
    if cls is not None:
        return _PRIMITIVES[cls][1] if fn.type.get_result().get_canonical().kind == ci.TypeKind.FLOAT else None
    if fn.kind == CK.FUNCTION_DECL and fn.spelling == "operator-" and fn.location.is_in_system_header and \
            _in_c10(fn):
        params = list(fn.get_arguments())
        if len(params) == 1 and c10_lowp_type(params[0].type) == "Half":
            return "half_neg"
    return None


def c10_lowp_function(fn: ci.Cursor, name: str, cache: dict[str, ci.Cursor]) -> ci.Cursor:
    """The definition of ``polypy_c10::name`` in ``fn``'s translation unit (found once: ``cache``)."""
    key = f"{_NAMESPACE}::{name}"
    if key not in cache:
        for ns in fn.translation_unit.cursor.get_children():
            if ns.kind == CK.NAMESPACE and ns.spelling == _NAMESPACE:
                for d in ns.get_children():
                    if d.kind == CK.FUNCTION_DECL and d.is_definition():
                        cache[f"{_NAMESPACE}::{d.spelling}"] = d
        if key not in cache:
            raise InternalError(f"'{key}' of polypy_c10_lowp.h is not in this translation unit")
    return cache[key]

"""PyTorch's tensor accessors in device code (``packed_accessor32/64<scalar_t, N, PtrTraits>()``).

A ``GenericPackedTensorAccessor<T, N, PtrTraits, index_t>`` (``at::PackedTensorAccessor32/64``,
``torch::PackedTensorAccessor32/64``) passed to a kernel by value holds a data pointer and
``sizes_[N]``, ``strides_[N]`` of ``index_t`` (int32 or int64). In device code
``acc[i]`` is a ``TensorAccessor`` of rank N-1 at ``data + strides[0] * i`` with the remaining
sizes and strides, and the ``[]`` of a rank-1 accessor is the ``T&`` at ``data + strides[0] * i``
(``torch/headeronly/core/TensorAccessor.h``). So an accessor is lowered to what it holds (an
``Accessor`` value: a ``Pointer`` into the tensor's buffer and the sizes and strides as scalar
expressions), the kernel parameter to ``N * 2 + 1`` IR parameters (the pointer, ``x_size0`` ...,
``x_stride0`` ...), which the launcher takes from the accessor with its public members
(``x.data()``, ``x.size(d)``, ``x.stride(d)``), and ``acc[i][j][k]`` to the element
``data[i * stride0 + j * stride1 + k * stride2]``: the same affine-in-the-indices access a kernel
taking ``data_ptr<scalar_t>()`` and its strides as integers makes.

The accessor classes are recognized by their declarations (the class templates of namespace
``torch::headeronly::detail`` in PyTorch's headers, whose ``at::`` and ``torch::`` names are
aliases), never by spelling; their member functions are never inlined (their bodies copy pointers
to the size and stride arrays, which the lowering keeps as values instead). ``PtrTraits`` only
says whether the data pointer is ``__restrict__``: both traits are read as a plain pointer (not
assuming ``__restrict__`` is always exact).
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.errors import Loc, UserError
from polypy.ir import nodes as n
from polypy.ir.types import PointerType

from frontend import ctypes_map as tm
from frontend.arith import add_offsets, convert
from frontend.lower.c10_lowp import c10_lowp_type
from frontend.lower.context import CK, decl_key
from frontend.lower.helpers import strip
from frontend.values import Accessor, LValue, Pointer, Value

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder

_NAMESPACE = ("torch", "headeronly", "detail")
# Class template -> (position of T, of N, of index_t) among its template arguments, and whether it
# is a packed accessor (sizes and strides held by value: what a kernel takes).
_CLASSES = {
    "GenericPackedTensorAccessor": (2, 3, 5, True),
    "GenericPackedTensorAccessorBase": (1, 2, 4, True),
    "TensorAccessor": (1, 2, 4, False),
    "TensorAccessorBase": (1, 2, 4, False),
}
# Member functions of the accessors usable in device code (operator[] aside).
_MEMBERS = frozenset({"size", "stride", "data"})


@dataclasses.dataclass(frozen=True)
class AccessorType:
    elem: ci.Type
    rank: int
    index: ci.Type
    packed: bool


def _namespaces(decl: ci.Cursor) -> tuple[str, ...]:
    out: list[str] = []
    p = decl.semantic_parent
    while p is not None and p.kind == CK.NAMESPACE:
        out.append(p.spelling)
        p = p.semantic_parent
    return tuple(reversed(out))


def accessor_class(decl: ci.Cursor | None) -> AccessorType | None:
    """What the accessor class ``decl`` (a specialization of one of PyTorch's accessor class
    templates) holds, or None for any other declaration."""
    if decl is None or decl.kind not in (CK.CLASS_DECL, CK.STRUCT_DECL):
        return None
    where = _CLASSES.get(decl.spelling)
    if where is None or not decl.location.is_in_system_header or _namespaces(decl) != _NAMESPACE:
        return None
    t_at, n_at, index_at, packed = where
    if decl.get_num_template_arguments() <= index_at:
        return None
    return AccessorType(decl.get_template_argument_type(t_at), decl.get_template_argument_value(n_at),
                        decl.get_template_argument_type(index_at), packed)


def accessor_type(t: ci.Type) -> AccessorType | None:
    """``accessor_class`` of type ``t`` (references and qualifiers looked through)."""
    c = tm.strip_reference(t) if tm.is_reference(t) else tm.canonical(t)
    if c.kind != ci.TypeKind.RECORD:
        return None
    return accessor_class(c.get_declaration())


# ------------------------------------------------------------------ kernel parameters
def accessor_param(kb: KernelBuilder, p: ci.Cursor, info: AccessorType, mutated: set[tuple]) -> None:
    """A kernel parameter of a packed accessor type: its data pointer, sizes and strides."""
    name = p.spelling or f"arg{len(kb.params)}"
    where = kb.loc(p)
    if not info.packed:
        raise UserError(f"kernel parameter '{name}': a TensorAccessor holds pointers to host memory (its sizes "
                        "and strides); pass packed_accessor32/64<scalar_t, N>() instead", where)
    if decl_key(p) in mutated:
        raise UserError(f"accessor parameter '{name}' cannot be reassigned", where)
    layout = accessor_layout(kb, info, name, where)
    index = tm.scalar_type(info.index)
    assert index is not None
    kb.params.append(n.Param(name, PointerType(layout.scalar, const=info.elem.is_const_qualified()), loc=where))
    members: list[tuple[str, str]] = [(".data()", name)]
    sizes, strides = [], []
    for what, out in (("size", sizes), ("stride", strides)):
        for d in range(info.rank):
            pname = kb.names.fresh(f"{name}_{what}{d}")
            kb.params.append(n.Param(pname, index, loc=where))
            members.append((f".{what}({d})", pname))
            out.append(n.Var(pname, index, loc=where))
    # clang prints a c10::Half (BFloat16) template argument as written inside PyTorch's
    # namespaces (`PackedTensorAccessor32<Half, 1, ...>`); the launcher's C++ needs the qualified name.
    spelling = p.type.get_canonical().spelling if c10_lowp_type(info.elem) is not None else p.type.spelling
    kb.source_params.append(n.SourceParam(name, spelling, tuple(members)))
    kb.bind(p, Accessor(Pointer(name, (), None, layout), tuple(sizes), tuple(strides), p.type.spelling))


def accessor_layout(kb: KernelBuilder, info: AccessorType, name: str, where: Loc | None) -> tm.ElemLayout:
    # Numbers, and PyTorch's c10::Half and c10::BFloat16 (their 16 bits, as memory of
    # data_ptr<at::Half>() is).
    number = tm.scalar_type(info.elem) is not None or c10_lowp_type(info.elem) is not None
    layout = tm.elem_layout(info.elem, where) if number else None
    if layout is None or tm.scalar_type(info.index) is None:
        raise UserError(f"accessor '{name}' of '{info.elem.spelling}' elements: only accessors of numbers are "
                        "supported in device code", where)
    return layout


# ------------------------------------------------------------------ uses
def accessor_call(kb: KernelBuilder, c: ci.Cursor, fn: ci.Cursor, children: list[ci.Cursor],
                  discard: bool) -> Value | None:
    """A call of a member of an accessor: ``acc[i]``, ``acc.size(d)``, ``acc.stride(d)``,
    ``acc.data()``; a copy of an accessor (its constructors)."""
    if fn.kind == CK.CONSTRUCTOR:
        args = [ch for ch in children if ch.kind.is_expression()]
        if (fn.is_copy_constructor() or fn.is_move_constructor()) and len(args) == 1:
            return accessor_value(kb, args[0])
        raise kb.error("constructing a tensor accessor in device code is not supported (pass "
                       "packed_accessor32/64<scalar_t, N>() to the kernel)", c)
    if fn.spelling == "operator[]":
        place = accessor_element(kb, c, fn, children)
        return place if isinstance(place, Accessor) else kb.read(place, c)
    if fn.spelling == "operator=":
        raise kb.error("assigning a tensor accessor is not supported in device code (its elements can be)", c)
    if fn.spelling not in _MEMBERS:
        raise kb.error(f"'{fn.spelling}' of a tensor accessor is not supported in device code (size(d), "
                       "stride(d), data() and [] are)", c)
    callee = strip(children[0]) if children else None
    base = next(iter(callee.get_children()), None) if callee is not None else None
    if callee is None or callee.kind != CK.MEMBER_REF_EXPR or base is None:
        raise kb.error(f"this call of '{fn.spelling}' of a tensor accessor is not supported", c)
    acc = accessor_value(kb, base)
    if fn.spelling == "data":
        return acc.data
    table = acc.sizes if fn.spelling == "size" else acc.strides
    d = kb.scalar(children[1])
    if isinstance(d, n.Const):
        if not 0 <= int(d.value) < len(table):
            raise kb.error(f"{fn.spelling}({int(d.value)}) of an accessor of {len(table)} dimensions", c)
        return table[int(d.value)]
    # A dimension known at run time: the one it names (another one is out of bounds, as in CUDA).
    out = table[-1]
    for k in range(len(table) - 2, -1, -1):
        out = n.Select(n.Binary("eq", d, n.Const(k, d.type), loc=kb.loc(c)), table[k], out, loc=kb.loc(c))
    return out


def accessor_value(kb: KernelBuilder, obj: ci.Cursor) -> Accessor:
    value = kb.expr(obj)
    if not isinstance(value, Accessor):
        raise kb.error("a tensor accessor polypy cannot follow here", obj)
    return value


def accessor_element(kb: KernelBuilder, c: ci.Cursor, fn: ci.Cursor, children: list[ci.Cursor]) -> Accessor | LValue:
    """``acc[i]``: the accessor of rank N-1 at ``data + strides[0] * i``, or (rank 1) the element."""
    operands = [ch for ch in children
                if not (strip(ch).kind == CK.DECL_REF_EXPR and strip(ch).spelling == fn.spelling)]
    if len(operands) != 2:
        raise kb.error("this use of a tensor accessor's [] is not supported", c)
    acc = accessor_value(kb, operands[0])
    index = acc.strides[0].type
    i = convert(kb.scalar(operands[1]), index)  # the parameter is an index_t
    offset = n.Binary("mul", acc.strides[0], i, loc=kb.loc(c))
    if len(acc.sizes) > 1:
        data = dataclasses.replace(acc.data, offset=add_offsets(acc.data.offset, offset))
        return Accessor(data, acc.sizes[1:], acc.strides[1:], acc.spelling)
    return kb.pointer_element(acc.data, offset, c)


def accessor_lvalue(kb: KernelBuilder, c: ci.Cursor) -> LValue | None:
    """The element ``acc[i]...[k]`` names when ``c`` is a rank-1 accessor's ``[]`` (None for any
    other call)."""
    fn = c.referenced
    if fn is None or fn.spelling != "operator[]" or accessor_class(fn.semantic_parent) is None:
        return None
    place = accessor_element(kb, c, fn, list(c.get_children()))
    if isinstance(place, Accessor):
        raise kb.error("a tensor accessor is not assignable", c)
    return place


def accessor_binding(kb: KernelBuilder, d: ci.Cursor, init: ci.Cursor | None, owner: ci.Cursor, what: str) -> Accessor:
    """A local variable or function parameter ``d`` (of function ``owner``) of an accessor type,
    or a reference to one, initialized from ``init``: the accessor it holds (never reassigned)."""
    if init is None:
        raise kb.error(f"{what} '{d.spelling}' of an accessor type needs an initializer", d)
    if decl_key(d) in kb.assigned_decls(owner):
        raise kb.error(f"{what} '{d.spelling}' of an accessor type cannot be reassigned", d)
    return accessor_value(kb, init)

"""Declarations: local scalars, pointers and references, shared and per-thread arrays and their
initializers."""
from __future__ import annotations

from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.types import I32, I64, U8, U16, U32, U64

from frontend import ctypes_map as tm
from frontend.arith import convert, plus, scale
from frontend.clang_setup import evaluate
from frontend.closures import closure_declaration
from frontend.lower.closure_records import closure_record, holds_closure
from frontend.lower import accessors, lambdas, members, record_arrays
from frontend.lower.context import (
    CK, _array_dims, _buffer_shape, decl_key, function_body, has_attr, initializer_of, string_initializer,
)
from frontend.lower.accessors import accessor_type
from frontend.lower.groups import is_cooperative, is_tile_memory
from frontend.lower.views import element, overlay_element
from frontend.lower.held_pointers import held_variable, is_held_variable
from frontend.lower.helpers import ScalarArray, is_trivial_construction, strip, zero_of
from frontend.lower.null_tests import is_null_pointer
from frontend.lower.pointer_choice import pending_pointer, pointer_hint
from frontend.values import (
    AggLV, ArrayBinding, BitsLV, Closure, LValue, Pointer, PointerChoice, RecLV, RefBinding, UnionLV,
    VarAddress, VarLV,
)

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


def decl_stmt(kb: KernelBuilder, c: ci.Cursor) -> None:
    for d in c.get_children():
        if d.kind == CK.VAR_DECL:
            var_decl(kb, d)
        elif d.kind == CK.UNEXPOSED_DECL and _bindings(d):  # `auto [a, b] = f();`
            decomposition(kb, d)
        elif d.kind in (CK.TYPEDEF_DECL, CK.TYPE_ALIAS_DECL, CK.STRUCT_DECL, CK.UNION_DECL, CK.CLASS_DECL,
                        CK.ENUM_DECL, CK.STATIC_ASSERT):  # type definitions (`__shared__ union {...} temp;`)
            continue
        else:
            raise kb.error(f"unsupported declaration ({d.kind.name.lower()})", d)


def _bindings(d: ci.Cursor) -> list[ci.Cursor]:
    """The names a structured binding declaration introduces (libclang shows the declaration
    and each binding as unexposed declarations), or []."""
    return [ch for ch in d.get_children() if ch.kind == CK.UNEXPOSED_DECL]


def decomposition(kb: KernelBuilder, d: ci.Cursor) -> None:
    """``auto [v, i] = f();`` (``auto& [a, b] = s;``): a hidden variable (or reference) holding
    the initializer, each name its member of the same position (the data members in declaration
    order, as C++ binds a record without a tuple protocol: ``std::pair`` alike, ``first`` then
    ``second``)."""
    names = _bindings(d)
    init = next((ch for ch in d.get_children() if ch.kind.is_expression()), None)
    t = d.type
    record = tm.strip_reference(t)
    if init is None or not tm.is_record(record):
        raise kb.error(f"structured bindings of a '{t.spelling}' are not supported in device code (only of "
                       "records)", d)
    spelling = tm.canonical(record).spelling
    if (spelling.startswith("std::") and not spelling.startswith("std::pair<")) or _tuple_protocol(d, record):
        raise kb.error(f"structured bindings of '{record.spelling}' (through its tuple protocol: std::get) are not "
                       "supported in device code", d)
    fields = list(tm.canonical(record).get_fields())
    if len(fields) != len(names) or any(not f.spelling for f in fields):
        raise kb.error(f"structured bindings of '{record.spelling}' are not supported in device code (a member "
                       "polypy cannot name)", d)
    if tm.is_reference(t):
        place = kb.lvalue(init)
    else:
        where = kb.loc(d)
        values: dict[str, LValue] = {}
        for leaf in tm.leaves(record):
            if leaf.scalar is None:
                raise UserError(f"structured bindings of '{record.spelling}', which has a member of type "
                                f"'{leaf.ctype.spelling}', are not supported in device code", where)
            var = kb.names.fresh("bound" + leaf.path.replace(".", "_"))
            kb.emit(n.Decl(var, leaf.scalar, None, loc=where))
            values[leaf.path] = VarLV(var, leaf.scalar)
        place = AggLV(values, record.spelling)
        initialize_record(kb, d, place, record, init)
    for name, f in zip(names, fields):
        kb.bind(name, kb.member_lv(place, f.spelling, name))


def _tuple_protocol(d: ci.Cursor, record: ci.Type) -> bool:
    """Whether the program specializes ``std::tuple_size`` for ``record`` (then C++ binds the
    names through ``get<i>``, not the members)."""
    want = tm.canonical(record).spelling
    for top in d.translation_unit.cursor.get_children():
        if top.kind != CK.NAMESPACE or top.spelling != "std":
            continue
        for ch in top.get_children():
            if ch.spelling == "tuple_size" and ch.kind in (CK.STRUCT_DECL, CK.CLASS_DECL) and \
                    ch.type.get_num_template_arguments() == 1 and \
                    tm.canonical(ch.type.get_template_argument_type(0)).spelling == want:
                return True
    return False


def initializer(kb: KernelBuilder, d: ci.Cursor) -> ci.Cursor | None:
    return initializer_of(d)


def var_decl(kb: KernelBuilder, d: ci.Cursor) -> None:
    where = kb.loc(d)
    t = d.type
    name = d.spelling
    if has_attr(d, CK.CUDASHARED_ATTR, "polypy_shared"):
        if is_tile_memory(t):  # the scratch of CUDA's big tiles: polypy's need none
            return
        kb.bind(d, shared_array(kb, d))
        init = initializer(kb, d)
        body = function_body(strip(init).referenced) if init is not None and is_trivial_construction(init) \
            else None
        if init is not None and (body is None or any(True for _ in body.get_children())):
            # (clang shows a record's implicit default constructor as a call of an empty body)
            raise UserError(f"__shared__ variable '{name}' cannot have an initializer", where)
        return
    if d.storage_class == ci.StorageClass.STATIC:
        raise UserError(f"static local variable '{name}' is not supported", where)
    init = initializer(kb, d)
    if accessor_type(t) is not None:  # `auto row = acc[i];` (accessors.py)
        kb.bind(d, accessors.accessor_binding(kb, d, init, kb.frame.cursor, "local variable"))
        return
    if tm.is_reference(t):
        if init is None:
            raise UserError(f"reference '{name}' without initializer", where)
        kb.bind(d, RefBinding(kb.lvalue(init)))
        return
    if tm.is_array(t):
        kb.bind(d, local_array(kb, d, init))
        return
    st = tm.scalar_type(t)
    if st is not None:
        known = evaluate(d) if init is not None and st.is_int and t.is_const_qualified() else None
        if isinstance(known, int):
            # `constexpr int p = cpow(2, 5);`: clang's value of the constant initializer (a
            # constexpr function, recursive or not, need not be translated)
            value = n.Const(known, st, loc=where)
        else:
            value = convert(kb.scalar(init), st) if init is not None else None
        var = kb.names.fresh(name)
        kb.emit(n.Decl(var, st, value, loc=where))
        kb.bind(d, VarLV(var, st))
        return
    if tm.is_pointer(t):
        if init is None or is_null_pointer(init):
            # Pointed into a buffer by its first assignment (places.assign_pending); a null
            # pointer until then can be neither read through nor compared (both refused).
            kb.bind(d, pending_pointer(kb, decl_key(d), name, pointer_hint(kb, decl_key(d)),
                                       n.Const(0, I64), d))
            return
        value = kb.expr(init)
        if isinstance(value, VarAddress):
            kb.bind(d, value)
            return
        if not isinstance(value, (Pointer, PointerChoice)):
            raise UserError(f"cannot tell which buffer pointer '{name}' points into", where)
        mutable = decl_key(d) in kb.assigned_decls(kb.frame.cursor)
        kb.bind(d, kb.pointer_binding(value, mutable, name, d, decl_key(d)))
        return
    if init is not None and (strip(init).kind == CK.LAMBDA_EXPR or lambdas.is_closure_type(kb, t) or
                             closure_declaration(t) is not None):  # (`auto f = make_scale(2.0f);` too)
        closure = kb.expr(init)  # `auto f = [&](float v) { ... };` (see ``lambdas``)
        if not isinstance(closure, Closure):
            raise UserError(f"local variable '{name}' holds a lambda polypy cannot follow", where)
        # (made here, it is this variable; `auto g = f;` calls the copy constructor, whose
        # value is already a copy: places.record_value)
        kb.bind(d, closure)
        return
    if tm.is_union(t) and (tm.union_scalars(t) is not None or tm.union_slices(t) is not None):
        kb.bind(d, local_union(kb, name, t, init, where))
        return
    if tm.is_record(t) and tm.has_union(t) and tm.overlay_leaves(t) is not None:
        kb.bind(d, local_overlay(kb, name, t, init, where))
        return
    if tm.has_union(t):  # any other union, or a record holding one: a local byte pool (typed_views.md)
        if init is not None and not is_trivial_construction(init):
            raise UserError(f"initializing '{name}', which holds a union, in its declaration is not supported in "
                            "device code (assign a member)", where)
        local_record_in_memory(kb, d, name, t, None, where)
        return
    if holds_closure(t):  # `Mapper<decltype(l)> m{l};` (closure_records.py)
        kb.bind(d, closure_record(kb, t, init, name, d))
        return
    if tm.is_record(t):
        members.record_bases(kb, tm.canonical(t).get_declaration(), d)  # refuses bases polypy cannot lay out
        if tm.has_array_member(t) and not any(tm.is_pointer(leaf.ctype) for leaf in tm.leaves(t)):
            local_record_in_memory(kb, d, name, t, init, where)
            return
        fields: dict[str, LValue] = {}
        for leaf in tm.leaves(t):
            lst = leaf.scalar
            if lst is None:
                raise UserError(f"local variable '{name}' has a member of type '{leaf.ctype.spelling}', "
                                "which is not supported", where)
            var = kb.names.fresh(name + leaf.path)
            kb.emit(n.Decl(var, lst, None, loc=where))
            fields[leaf.path] = VarLV(var, lst)
        lv = AggLV(fields, t.spelling)
        kb.bind(d, lv)
        initialize_record(kb, d, lv, t, init)
        return
    raise UserError(f"local variable '{name}' of type '{t.spelling}' is not supported", where)


def local_overlay(kb: KernelBuilder, name: str, t: ci.Type, init: ci.Cursor | None, where) -> AggLV:
    """A local record holding unions whose members cover its bytes (mummergpu's
    ``struct _PixelOfChildren { union { uint4 data; struct { uchar3 a, c, g, t, d; char leafchar; }; }; }``):
    a local array of its bytes in units of its smallest member type, each member path a typed
    view of the bytes at its offset (``views.element``: little-endian, bit for bit), so a read of
    one member is exactly the bytes another wrote (``tm.overlay_leaves``)."""
    copy = init is not None and not is_trivial_construction(init)
    if copy and strip(init).kind == CK.INIT_LIST_EXPR:  # it would set the first member of each union only
        raise UserError(f"initializing '{name}' of type '{t.spelling}' (it holds a union) with a list is not "
                        "supported in device code (assign its members)", where)
    leaves = tm.overlay_leaves(t)
    assert leaves is not None
    smallest = min(st.itemsize for _, st, _ in leaves)
    stored = next(st for _, st, _ in leaves if st.itemsize == smallest)
    buffer = kb.names.fresh(name)
    size = tm.canonical(t).get_size()
    kb.buffers[buffer] = n.Buffer(buffer, stored, (n.Const(size // smallest, I32),), "local", loc=where)
    lv = AggLV({path: element(buffer, (n.Const(offset // st.itemsize, I32),), st, stored)
                for path, st, offset in leaves}, t.spelling)
    if copy:  # `M m = r[i];`: every member copied, the bytes each covers written with the same value
        assert init is not None
        kb.assign(lv, kb.record_value(init, t), init)
    return lv


def local_record_in_memory(kb: KernelBuilder, d: ci.Cursor, name: str, t: ci.Type, init: ci.Cursor | None,
                           where) -> None:
    """``struct { float x[8]; } f;``: a local array of one record in memory, so that ``f.x[i]``
    is an element of memory at a run-time index (a record of variables has constant members only)."""
    binding = kb.record_array(name, (1,), tm.local_layout(t, where), "local", where)
    kb.bind(d, ScalarArray(binding))
    initialize_record(kb, d, element_lv(kb, binding, (n.Const(0, I32),), d), t, init)


def initialize_record(kb: KernelBuilder, d: ci.Cursor, lv, t: ci.Type, init: ci.Cursor | None) -> None:
    """A local record's initializer: ``V3 p(a, b, c);`` (or ``V3 p;``) with a user constructor is
    constructed in place; any other non-trivial initializer is assigned."""
    ctor = strip(init) if init is not None else None
    if ctor is not None and ctor.kind == CK.CALL_EXPR and ctor.referenced is not None and \
            ctor.referenced.kind == CK.CONSTRUCTOR and members.is_user_construction(kb, ctor.referenced, ctor):
        members.construct(kb, lv, ctor.referenced, [a for a in ctor.get_children() if a.kind.is_expression()], ctor)
    elif init is not None and not is_trivial_construction(init):
        kb.assign(lv, kb.record_value(init, t), d)


def local_union(kb: KernelBuilder, name: str, t: ci.Type, init: ci.Cursor | None, where) -> UnionLV:
    """``union { float f; unsigned u; } v;``: one variable of the first member's type; the
    others read and write its bits (``bitcasts.reinterpret``), as the union's shared bytes do.
    Members of other sizes that cover the same bytes (``tm.union_slices``): one unsigned
    integer, each scalar leaf a slice of its bits (``bitcasts.read_bits`` / ``with_bits``)."""
    members = tm.union_scalars(t)
    slices = tm.union_slices(t) if members is None else None
    if members is None and slices is None:
        raise UserError(f"union '{t.spelling}' is not supported in device code: only local unions whose members "
                        "are all scalars of one size, or scalars and records of scalars that cover the same "
                        "bytes, are (read as one another's bits)", where)
    if init is not None and not is_trivial_construction(init):
        raise UserError(f"initializing union '{name}' in its declaration is not supported in device code "
                        "(assign a member)", where)
    if slices is not None:
        # Members of other sizes (`union { struct { short lo, hi; }; unsigned u; }`): one unsigned
        # integer, each scalar leaf the bits of its bytes (little-endian, as on the GPU).
        bits, leaves = slices
        whole = {8: U8, 16: U16, 32: U32, 64: U64}[bits]
        var = VarLV(kb.names.fresh(name), whole)
        kb.emit(n.Decl(var.name, whole, None, loc=where))
        return UnionLV({path: BitsLV(var, st, 8 * offset) for path, st, offset in leaves}, t.spelling)
    first = members[0][1]
    var = VarLV(kb.names.fresh(name), first)
    kb.emit(n.Decl(var.name, first, None, loc=where))
    return UnionLV({path: var if st == first else BitsLV(var, st) for path, st in members}, t.spelling)


def shared_array(kb: KernelBuilder, d: ci.Cursor) -> ArrayBinding:
    where = kb.loc(d)
    key = decl_key(d)
    if key in kb.shared:
        return kb.shared[key]
    dims, elem = _array_dims(d.type)
    if is_cooperative(elem.get_canonical().get_declaration()):
        raise UserError(f"__shared__ '{elem.spelling}' is not supported", where)
    layout = tm.array_layout(elem, where)
    if d.storage_class == ci.StorageClass.EXTERN or (dims and dims[0] is None):
        if layout.record is not None:
            raise UserError("extern __shared__ arrays of records of mixed member types are not supported", where)
        if kb.dynamic_shared is not None:
            # Every extern __shared__ array is the one dynamic pool: another element type is a
            # typed view of it (docs/typed_views.md).
            stored = kb.dynamic_shared.layout.scalar
            if stored.is_bool != layout.scalar.is_bool or (stored.is_bool and layout.stride != 1):
                raise UserError("extern __shared__ arrays of bool and of another element type are not supported "
                                "(a bool's bytes other than 0 and 1 have no value)", where)
            view = ArrayBinding(kb.dynamic_shared.buffer, _dynamic_dims(dims, where), layout,
                                stored=None if stored == layout.scalar else stored)
            kb.shared[key] = view
            return view
        name = kb.names.fresh(d.spelling)
        kb.buffers[name] = n.Buffer(name, layout.scalar, None, "shared", loc=where)
        binding = ArrayBinding(name, _dynamic_dims(dims, where), layout)
        kb.dynamic_shared = binding
        kb.shared[key] = binding
        return binding
    if layout.record is not None:
        _buffer_shape(dims, layout, where, d.spelling)  # refuses variable-length arrays
        binding = kb.record_array(d.spelling, dims, layout, "shared", where)
    else:
        shape = _buffer_shape(dims, layout, where, d.spelling)
        name = kb.names.fresh(d.spelling)
        kb.buffers[name] = n.Buffer(name, layout.scalar, shape, "shared", loc=where)
        binding = ArrayBinding(name, dims or (1,), layout)
    if not dims:  # a shared scalar or record: element 0 of a one-element array
        scalar = ScalarArray(binding)
        kb.shared[key] = scalar  # type: ignore[assignment]
        return scalar  # type: ignore[return-value]
    kb.shared[key] = binding
    return binding


def local_array(kb: KernelBuilder, d: ci.Cursor, init: ci.Cursor | None) -> ArrayBinding:
    where = kb.loc(d)
    dims, elem = _array_dims(d.type)
    layout = tm.local_layout(elem, where)
    shape = _buffer_shape(dims, layout, where, d.spelling)
    if shape is None:
        raise UserError(f"local array '{d.spelling}' needs a constant size", where)
    if layout.record is not None:
        binding = kb.record_array(d.spelling, dims, layout, "local", where)
    else:
        name = kb.names.fresh(d.spelling)
        kb.buffers[name] = n.Buffer(name, layout.scalar, shape, "local", loc=where)
        binding = ArrayBinding(name, dims, layout)
    ctor = record_arrays.element_constructor(kb, elem, d)
    if init is not None:
        array_initializer(kb, binding, init, d)
    elif ctor is not None:  # `V3 pts[4];`: each element default-constructed (record_arrays.py)
        record_arrays.construct_all(kb, binding, dims, ctor, element_lv, d)
    return binding


def array_initializer(kb: KernelBuilder, binding: ArrayBinding, init: ci.Cursor, d: ci.Cursor) -> None:
    if init.kind not in (CK.INIT_LIST_EXPR, CK.STRING_LITERAL):
        raise kb.error("array initializers must be brace lists or string literals", init)
    dims = binding.dims
    elem = _array_dims(d.type)[1]

    def fill(c: ci.Cursor | None, prefix: tuple[int, ...]) -> None:
        depth = len(prefix)
        if c is not None and c.kind == CK.STRING_LITERAL and depth == len(dims) - 1:
            st = binding.layout.scalar
            for i, byte in enumerate(string_initializer(c)):
                lv = element_lv(kb, binding, tuple(n.Const(k, I32) for k in prefix + (i,)), c)
                kb.assign(lv, n.Const(byte, st, loc=kb.loc(c)), c)
            return
        if depth == len(dims):
            lv = element_lv(kb, binding, tuple(n.Const(i, I32) for i in prefix), c or d)
            if isinstance(lv, RecLV):
                lv = kb.expand_record(lv, c or d)
            if isinstance(lv, AggLV) and record_arrays.initialize_element(kb, lv, elem, c, d):
                return
            if c is None:
                kb.assign(lv, zero_of(lv), d)
            elif isinstance(lv, AggLV):
                kb.assign(lv, kb.record_value(c, None, lv), c)
            else:
                kb.assign(lv, kb.scalar(c), c)
            return
        items = list(c.get_children()) if c is not None and c.kind == CK.INIT_LIST_EXPR else []
        if c is not None and c.kind != CK.INIT_LIST_EXPR:
            raise kb.error("nested array initializers must be brace lists", c)
        for i in range(dims[depth] or 0):
            fill(items[i] if i < len(items) else None, prefix + (i,))

    fill(init, ())


def element_lv(kb: KernelBuilder, binding: ArrayBinding, index: tuple[n.Expr, ...], where: ci.Cursor) -> LValue:
    """The lvalue of element ``index`` (one index per C dimension) of an array."""
    if is_held_variable(kb, binding.buffer):  # a module pointer variable: the pointer it holds
        return held_variable(kb, binding.buffer, index, where)
    layout = binding.layout
    if layout.record is not None:
        return RecLV(binding.address(index), layout.record)
    index = binding.flat(index)
    if layout.views:
        fields = overlay_element(binding.buffer, index[:-1], index[-1], layout, binding.stored)
        return AggLV(fields, layout.ctype_spelling)
    last = index[-1]
    if layout.stride > 1:
        last = scale(last, layout.stride)
    prefix = index[:-1]
    if layout.is_scalar:
        return element(binding.buffer, prefix + (last,), layout.scalar, binding.stored)
    fields = {path: element(binding.buffer, prefix + (plus(last, slot),), layout.scalar, binding.stored)
              for path, slot in layout.slots}
    return AggLV(fields, layout.ctype_spelling)


def _dynamic_dims(dims: tuple[int | None, ...], where) -> tuple[int | None, ...]:
    """The C dimensions of an ``extern __shared__`` array: ``s[]`` (one buffer sized at launch), or
    ``s[][C]`` / ``s[][C][D]``, the same buffer seen as rows of constant size (indexed
    ``r * C + c``, ``ArrayBinding.flat``); its first dimension must be the one left open."""
    if not dims or dims[0] is not None or any(d is None or d == -1 or d <= 0 for d in dims[1:]):
        raise UserError("an extern __shared__ array must have an open first dimension and constant others "
                        "(extern __shared__ T s[]; or T s[][C];)", where)
    return dims

"""Places: lvalues (variables, array elements, pointer targets, members), records and stores."""
from __future__ import annotations

from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.types import I32, U8, U16, U32, U64

from frontend import ctypes_map as tm
from frontend.arith import add_offsets, convert, plus, scale
from frontend.clang_setup import child_cursors, unary_operator
from frontend.lower.bitcasts import reinterpret, split_bits, with_bits
from frontend.lower.views import element, overlay_element, store_part, whole_elements
from frontend.lower.context import CK, GPU_BUILTINS, is_prelude_decl
from frontend.lower.inheritance import converted, downcast_place, member_path, subobject
from frontend.lower.heap import address_of
from frontend.lower.held_pointers import held_pointer, held_variable, is_held_variable, store_held
from frontend.lower.helpers import ArrayRef, ScalarArray, describe, select_member, strip
from frontend.lower.member_rows import RowsRef, member_rows, row_pointer
from frontend.lower.param_arrays import element_lv, element_of, is_variable_member
from frontend.lower import accessors, inlining, members, place_choice, pointer_choice
from frontend.lower.pointer_choice import assign_pointer, choice_element, store_choice
from frontend.values import (
    Aggregate, AggLV, ArrayBinding, BitsLV, ChoiceLV, PackLV, ChoiceVarLV, Closure, HeldPointer, LValue, MemLV, PendingPtrLV, Pointer,
    PointerChoice, PointerTable, PtrVarLV, RecLV, PartLV, PlaceOf, RecordAddress, RefBinding, UnionLV, Value,
    VarAddress, VarLV, ViewLV,
)

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


# -- lvalues
def lvalue(kb: KernelBuilder, c: ci.Cursor) -> LValue:
    kind = c.kind
    if kind in (CK.PAREN_EXPR, CK.UNEXPOSED_EXPR):
        children = child_cursors(c)
        if len(children) == 1:
            # a derived object as its base (frontend.lower.inheritance)
            return converted(kb, lvalue(kb, children[0]), children[0], c)
    if kind == CK.DECL_REF_EXPR:
        r = c.referenced
        if r is not None and r.kind == CK.VAR_DECL and r.spelling in GPU_BUILTINS and is_prelude_decl(r):
            raise kb.error(f"'{r.spelling}' is read-only", c)
        b = kb.lookup(r, c) if r is not None else None
        if isinstance(b, RefBinding):
            return b.target
        if isinstance(b, ScalarArray):
            return kb.element_lv(b.binding, (n.Const(0, I32),), c)
        if isinstance(b, (VarLV, MemLV, AggLV, PtrVarLV, ChoiceVarLV, RecLV, PendingPtrLV)):
            return b
        raise kb.error(f"cannot assign to '{c.spelling}'", c)
    if kind == CK.ARRAY_SUBSCRIPT_EXPR:
        base_c, index_c = child_cursors(c)
        if tm.scalar_type(base_c.type) is not None and not tm.is_pointer(base_c.type):
            base_c, index_c = index_c, base_c
        if is_variable_member(base_c) and tm.canonical(strip(base_c).type).kind == ci.TypeKind.CONSTANTARRAY:
            base_lv = lvalue(kb, strip(base_c))  # an array member of a record variable: its element's place
            if isinstance(base_lv, AggLV):
                index = kb.scalar(index_c)
                element = element_lv(base_lv, index)
                if element is not None:
                    return element
                raise kb.error("an array member of a local record indexed at run time is not supported", c)
        elif strip(base_c).kind == CK.MEMBER_REF_EXPR and kb.in_memory(strip(base_c)) and \
                tm.canonical(strip(base_c).type).kind == ci.TypeKind.CONSTANTARRAY:
            # `buffer.data[i]` of an object in memory: the element's place, without reading
            # the whole array member first (expressions.in_memory: lvalue evaluates as expr)
            base_lv = lvalue(kb, strip(base_c))
            index = kb.scalar(index_c)
            element = element_lv(base_lv, index) if isinstance(base_lv, AggLV) else None
            return element if element is not None else subscript(kb, kb.read(base_lv, c), index, c)
        base = kb.expr(base_c)
        index = kb.scalar(index_c)
        return subscript(kb, base, index, c)
    if kind == CK.UNARY_OPERATOR and unary_operator(c) == "*":
        ptr = kb.expr(next(iter(c.get_children())))
        return deref(kb, ptr, c)
    if kind == CK.MEMBER_REF_EXPR:
        base_c = next((ch for ch in c.get_children() if ch.kind.is_expression()), None)
        if base_c is None:  # `x` inside a member function: `this->x`
            base_lv = members.this_place(kb, c)
        elif tm.is_pointer(base_c.type):
            base_lv = deref(kb, kb.expr(base_c), c)
        else:
            base_lv = lvalue(kb, base_c)
        # a member of a base class: its subobject first (frontend.lower.inheritance)
        return member_lv(kb, subobject(kb, base_lv, member_path(kb, base_c, c), c), c.spelling, c)
    if kind in (CK.CXX_STATIC_CAST_EXPR, CK.CSTYLE_CAST_EXPR):
        place = downcast_place(kb, c)  # `static_cast<Derived&>(*this)`
        if place is not None:
            return place
    if kind in (CK.CXX_STATIC_CAST_EXPR, CK.CSTYLE_CAST_EXPR) and tm.is_reference(c.type) and \
            tm.is_record(tm.strip_reference(c.type)):
        # `static_cast<Base&>(d)`: d's base subobject (a downcast is refused)
        source = [ch for ch in c.get_children() if ch.kind.is_expression()][-1]
        return converted(kb, lvalue(kb, source), source, c)
    if kind == CK.CXX_CONST_CAST_EXPR and not tm.is_pointer(c.type):
        # `const_cast<T&>(x)` (std::array's operator[]; a const_cast to anything but a pointer
        # casts to a reference): the same place, writable
        return lvalue(kb, [ch for ch in c.get_children() if ch.kind.is_expression()][-1])
    if kind == CK.CONDITIONAL_OPERATOR:  # `(c ? a : b) = v`: one of two places (place_choice.py)
        return place_choice.conditional_place(kb, c)
    if kind == CK.CALL_EXPR:
        place = accessors.accessor_lvalue(kb, c)  # `acc[i][j] = v` (accessors.py)
        if place is not None:
            return place
        fn = c.referenced
        args = [ch for ch in c.get_children() if ch.kind.is_expression()][1:]
        if fn is not None and fn.spelling in ("move", "forward") and len(args) == 1 and _in_std(fn):
            return lvalue(kb, args[0])  # std::move(x), std::forward<T>(x): the place x names
        if fn is not None and tm.is_reference(fn.result_type):
            # `at(p, i) = v`, `smem[i] += v` (a member `T& operator[]`): the place the inlined
            # function's one `return` names (or `*this`), as CUDA's reference result is.
            kb.place_calls.append(c)
            try:
                value = kb.call(c, False)
            finally:
                kb.place_calls.pop()
            if isinstance(value, PlaceOf):
                return value.place
    raise kb.error("expression is not assignable here", c)


def _in_std(fn: ci.Cursor) -> bool:
    """Whether ``fn`` is declared in namespace std (or an inline namespace of it)."""
    parent = fn.semantic_parent
    while parent is not None and parent.kind == CK.NAMESPACE:
        if parent.spelling == "std":
            return True
        parent = parent.semantic_parent
    return False


def subscript(kb: KernelBuilder, base: Value | None, index: n.Expr, c: ci.Cursor) -> LValue | "ArrayRef":
    if isinstance(base, (ArrayRef, RowsRef)):
        return base.index(kb, index, c)  # type: ignore[return-value]
    if isinstance(base, PointerTable):
        return base.element(index)  # type: ignore[return-value]  # a pointer value, not assignable
    if isinstance(base, Pointer):
        return pointer_element(kb, base, index, c)
    if isinstance(base, PointerChoice):
        return choice_element(kb, base, index, c)
    if isinstance(base, VarAddress):
        if isinstance(index, n.Const) and index.value == 0:
            return base.target
        raise kb.error("only element 0 of the address of a local variable can be accessed", c)
    if isinstance(base, Aggregate):
        element = element_of(base, index)  # an array member of a record parameter in memory
        if element is not None:
            return element
    raise kb.error(f"cannot index a {describe(base)}", c)


def pointer_element(kb: KernelBuilder, ptr: Pointer, j: n.Expr | None, c: ci.Cursor) -> LValue:
    off = add_offsets(ptr.offset, j)
    if is_held_variable(kb, ptr.buffer, ptr.layout):  # into a module array of pointers: the pointer held there
        return held_variable(kb, ptr.buffer, ptr.prefix + (off if off is not None else n.Const(0, I32),), c)
    layout = ptr.layout
    if layout.record is not None:
        assert ptr.record is not None
        return RecLV(ptr.record.plus(off, layout.record.size), layout.record)
    if layout.is_scalar:
        return _element(ptr, ptr.prefix + (off,))
    if layout.views:
        return AggLV(overlay_element(ptr.buffer, ptr.prefix, off, layout, ptr.stored), layout.ctype_spelling)
    base = scale(off, layout.stride)
    fields = {path: _element(ptr, ptr.prefix + (plus(base, slot),)) for path, slot in layout.slots}
    return AggLV(fields, layout.ctype_spelling)


def deref(kb: KernelBuilder, ptr: Value | None, c: ci.Cursor) -> LValue:
    if isinstance(ptr, ArrayRef):
        ptr = ptr.decay(kb)
    if isinstance(ptr, Pointer):
        return pointer_element(kb, ptr, None, c)
    if isinstance(ptr, PointerChoice):
        return choice_element(kb, ptr, None, c)
    if isinstance(ptr, VarAddress):
        return ptr.target
    if isinstance(ptr, PointerTable):
        return ptr.element(n.Const(0, I32))  # type: ignore[return-value]  # a pointer value
    raise kb.error(f"cannot dereference a {describe(ptr)}", c)


def member_lv(kb: KernelBuilder, base: LValue, member: str, c: ci.Cursor) -> LValue:
    if isinstance(base, RecLV):
        return record_member(kb, base, member, c)  # type: ignore[return-value]
    if not isinstance(base, AggLV):
        raise kb.error(f"'.{member}' of something that is not a record", c)
    return select_member(base.fields, member, c, lambda fields, sp: AggLV(fields, sp), kb)


# ------------------------------------------------------------------ records in memory
def record_member(kb: KernelBuilder, rec: RecLV, member: str, c: ci.Cursor) -> LValue | Pointer:
    """Member ``member`` of a record of mixed member types in memory: an element of the view
    of its type, a nested record, or (an array member) a pointer to its first element."""
    rt = rec.layout.ctype
    ft = tm.member_type(rt, member)
    if ft is None:
        raise kb.error(f"no member '{member}'", c)
    address = rec.address.shifted(tm.member_offset(rt, member, kb.loc(c)))
    st = tm.scalar_type(ft)
    if st is not None:
        return record_leaf(kb, address, st, member, c)
    ct = tm.canonical(ft)
    if tm.is_record(ft):
        return RecLV(address, tm.RecordLayout(ft.spelling, ct.get_size(), (), ct))
    if ct.kind == ci.TypeKind.CONSTANTARRAY:
        et = ct.element_type
        est = tm.scalar_type(et)
        if est is not None:
            return row_pointer(address, et)
        rows = member_rows(address, ft)  # `float a[3][3]`: rows (member_rows.py)
        if rows is not None:
            return rows  # type: ignore[return-value]
        if tm.is_record(et):
            ect = tm.canonical(et)
            record = tm.RecordLayout(et.spelling, ect.get_size(), (), ect)
            return Pointer(address.views[0][1], (), None,
                           tm.ElemLayout(address.views[0][0], 1, (), et.spelling, record), address)
    if tm.is_pointer(ft):
        held = held_pointer(kb, address, ft, member, c)  # in __constant__/__device__ memory
        if held is not None:
            return held
    raise kb.error(f"member '{member}' of type '{ft.spelling}' of a record in device memory cannot be "
                   "used in device code", c)


def record_array(kb: KernelBuilder, base: str, dims: tuple[int | None, ...], layout: tm.ElemLayout, space: str,
                 where) -> ArrayBinding:
    """A shared or local array of records of mixed member types: one buffer per member type."""
    assert layout.record is not None
    count = 1
    for d in dims:
        count *= d or 1
    if layout.record.overlaps:
        # Unions: one pool of the record's bytes, in elements of the narrowest member type's
        # size; each member is a typed view of it at its offset, so a member read through another
        # type is the bit reinterpretation of the bytes written (docs/typed_views.md).
        pool = _pool_type(layout.record, where)
        name = kb.names.fresh(base)
        kb.buffers[name] = n.Buffer(name, pool, (n.Const(tm.view_length(count, layout.record, pool), I32),),
                                    space, loc=where)
        address = RecordAddress(tuple((st, name) for st in layout.record.scalars), stored=pool)
        return ArrayBinding(name, dims or (1,), layout, address)
    views = []
    for st in layout.record.scalars:
        name = kb.names.fresh(f"{base}_{st.name}")
        length = tm.view_length(count, layout.record, st)
        kb.buffers[name] = n.Buffer(name, st, (n.Const(length, I32),), space, loc=where)
        views.append((st, name))
    return ArrayBinding(views[0][1], dims or (1,), layout, RecordAddress(tuple(views)))


def _pool_type(record: tm.RecordLayout, where):
    """The element type of the byte pool of memory holding unions: the unsigned integer of the
    narrowest member type's size (every member's offset and size are multiples of it)."""
    if any(st.is_bool for st in record.scalars):
        raise UserError(f"'{record.spelling}' holds a union and a bool: records with both are not supported in "
                        "shared or local memory (a bool's bytes other than 0 and 1 have no value)", where)
    size = min(st.itemsize for st in record.scalars)
    return {1: U8, 2: U16, 4: U32, 8: U64}[size]


def record_leaf(kb: KernelBuilder, address: RecordAddress, st, member: str, c: ci.Cursor) -> LValue:
    view = address.view(st)
    if view is None:  # pragma: no cover - the views cover every scalar member type
        raise kb.error(f"member '{member}' has no view of type {st}", c)
    if address.stored is not None:  # a union's pool: the member is a typed view of its bytes
        return element(view, (address.index(st),), st, address.stored)
    return MemLV(view, (address.index(st),), st)


def expand_record(kb: KernelBuilder, rec: RecLV, c: ci.Cursor) -> AggLV:
    """A whole record in memory as the lvalues of its leaves (for copies to and from it)."""
    if rec.layout.overlaps:
        raise kb.error(f"'{rec.layout.spelling}' holds a union: copying or assigning it whole is not supported in "
                       "device code (its members share bytes; copy a member)", c)
    fields: dict[str, LValue] = {}
    for path, lt, offset in tm.byte_leaves(rec.layout.ctype, kb.loc(c)):
        st = tm.scalar_type(lt)
        if st is None:
            raise kb.error(f"'{rec.layout.spelling}' has a member '{path[1:]}' of type '{lt.spelling}': "
                           "records with such members in device memory can only be used member by member", c)
        fields[path] = record_leaf(kb, rec.address.shifted(offset), st, path[1:], c)
    return AggLV(fields, rec.layout.spelling)


# ------------------------------------------------------------------ records
def record_value(kb: KernelBuilder, c: ci.Cursor, t: ci.Type | None, target: AggLV | None = None) -> Aggregate:
    """The value of a record-typed expression (init lists included)."""
    if c.kind == CK.INIT_LIST_EXPR:
        rt = t if t is not None else c.type
        layout = tm.leaves(rt)
        items = [ch for ch in c.get_children()]
        values: dict[str, Value] = {}
        flat: list[Value | None] = []

        def add(item: ci.Cursor) -> None:
            it = tm.canonical(item.type)
            if it.kind == ci.TypeKind.CONSTANTARRAY and item.kind == CK.INIT_LIST_EXPR:
                # `{{1, 2, 3}, n}` of `struct { float d[3]; int n; }`: the array's items, in
                # order, those the list leaves out zero (value-initialized)
                given = list(item.get_children())
                for ch in given:
                    add(ch)
                flat.extend([None] * ((it.element_count - len(given)) * len(tm.leaves(it.element_type))))
            elif tm.is_record(item.type):
                member = record_value(kb, item, item.type)
                if isinstance(member, Closure):  # (frontend/lower/lambdas.py: not a record of variables)
                    raise kb.error(f"a record holding a lambda ('{tm.strip_reference(rt).spelling}') is not supported "
                                   "in device code", item)
                flat.extend(member.fields.values())
            else:
                flat.append(kb.scalar(item))

        for item in items:
            add(item)
        for i, leaf in enumerate(layout):
            lst = leaf.scalar
            if i < len(flat) and flat[i] is not None:
                v = flat[i]
                values[leaf.path] = convert(v, lst) if isinstance(v, n.Expr) and lst is not None else v
            elif lst is not None:
                values[leaf.path] = n.Const(0, lst)
        return Aggregate(values, rt.spelling)
    v = kb.expr(c)
    if isinstance(v, Closure):  # a copy of a lambda's closure (see ``lambdas``)
        return inlining.closure_copy(kb, v, c)  # type: ignore[return-value]
    if not isinstance(v, Aggregate):
        raise kb.error(f"expected a record value, found a {describe(v)}", c)
    return v


# ------------------------------------------------------------------ stores
def assign(kb: KernelBuilder, lv: LValue, value: Value | None, c: ci.Cursor) -> None:
    if isinstance(lv, RecLV):
        lv = expand_record(kb, lv, c)
    if isinstance(lv, PendingPtrLV):
        lv = assign_pending(kb, lv, value, c)
    if isinstance(lv, UnionLV):
        raise kb.error(f"assigning a whole union ('{lv.spelling}') is not supported in device code "
                       "(assign a member)", c)
    if isinstance(lv, AggLV):
        if not isinstance(value, Aggregate):
            raise kb.error(f"cannot assign a {describe(value)} to a record", c)
        for path in lv.fields:
            if path not in value.fields:
                raise kb.error(f"record value has no member '{path}'", c)
        # through a narrower view (`*(int4*)doubles = v`): whole elements, bit for bit (views.py)
        items = [(field_lv, value.fields[path]) for path, field_lv in lv.fields.items()]
        for field_lv, field_value in whole_elements(items, kb.loc(c)):
            assign(kb, field_lv, field_value, c)
        return
    if isinstance(lv, (PtrVarLV, ChoiceVarLV)):
        if isinstance(value, ArrayRef):
            value = value.decay(kb)
        assign_pointer(kb, lv, value, c)  # into another buffer: pointer_choice.py
        return
    if isinstance(lv, HeldPointer):  # `d_keep[i] = p` of a module pointer variable: p's address
        null = isinstance(value, n.Const) and value.value == 0
        store_held(kb, lv, n.Const(0, U64) if null else address_of(kb, value, c), c)
        return
    if not isinstance(value, n.Expr):
        raise kb.error(f"cannot store a {describe(value)} here", c)
    store(kb, lv, convert(value, lv.type), c)


def assign_pending(kb: KernelBuilder, lv: PendingPtrLV, value: Value | None, c: ci.Cursor) -> PtrVarLV:
    """The first assignment of a pointer declared without initializer fixes its buffer."""
    if isinstance(value, ArrayRef):
        value = value.decay(kb)
    return pointer_choice.assign_pending(kb, lv, value, c)


def store(kb: KernelBuilder, lv: LValue, value: n.Expr, c: ci.Cursor) -> None:
    loc = kb.loc(c)
    if isinstance(lv, VarLV):
        kb.emit(n.Assign(lv.name, value, loc=loc))
    elif isinstance(lv, BitsLV):  # `*(int*)&f = b`, `un.i = b`: f takes b's bits
        kb.emit(n.Assign(lv.var.name, with_bits(lv, value, loc), loc=loc))
    elif isinstance(lv, PackLV):  # `*(uint32_t*)&rgba = w`: each member takes its bytes of w
        if not isinstance(value, (n.Var, n.Const)):
            value = n.Var(kb.temp(lv.type, value, "bytes", c).name, lv.type, loc=loc)
        pieces = split_bits(value, [(part.type, shift) for part, shift in lv.parts], loc)  # type: ignore[union-attr]
        for (part, _), piece in zip(lv.parts, pieces):
            store(kb, part, piece, c)
    elif isinstance(lv, MemLV):
        check_writable(kb, lv.buffer, c)
        kb.emit(n.Store(lv.buffer, lv.index, value, loc=loc))
    elif isinstance(lv, ViewLV):  # `((int*)x)[i] = v` of a float buffer: x[i] takes v's bits
        store(kb, lv.mem, reinterpret(value, lv.mem.type, loc), c)
    elif isinstance(lv, ChoiceLV):  # through a pointer into one of several buffers
        store_choice(kb, lv, value, c)
    elif isinstance(lv, PartLV):  # `((float*)bytes)[i] = v`: the bytes of v (``views``)
        check_writable(kb, lv.buffer, c)
        if not isinstance(value, (n.Var, n.Const)):
            value = n.Var(kb.temp(lv.type, value, "bytes", c).name, lv.type, loc=loc)
        try:
            stores = store_part(lv, value, loc)
        except UserError as e:
            raise kb.error(e.message, c) from None
        for st in stores:
            kb.emit(st)
    else:
        raise kb.error("unsupported assignment", c)


def check_writable(kb: KernelBuilder, buffer: str, c: ci.Cursor) -> None:
    b = kb.buffers.get(buffer)
    if b is not None and b.space == "constant":
        raise kb.error(f"__constant__ memory '{buffer}' is read-only in device code", c)


def _element(ptr: Pointer, index: tuple[n.Expr, ...]) -> MemLV | ViewLV | PartLV:
    """Scalar element ``index`` of ``ptr``'s buffer, seen through ``ptr``'s view if it has one."""
    return element(ptr.buffer, index, ptr.layout.scalar, ptr.stored)

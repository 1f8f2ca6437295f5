"""Expressions: literals, names, operators, conditionals (casts: ``casts``). An expression with side
effects emits them into the current block before the statement that uses its value."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.types import BOOL, I32, U64

from frontend import ctypes_map as tm
from frontend.arith import add_offsets, convert, negated_offset, promote, truth, usual_arithmetic
from frontend.clang_setup import binary_operator, child_cursors, evaluate, is_postfix, unary_operator
from frontend.lower import calls, casts, declarations, function_pointers, lambdas, members
from frontend.lower.bitcasts import compose_bits, read_bits, reinterpret
from frontend.lower.views import read_part
from frontend.lower.null_tests import is_null_pointer, null_test, pointer_condition, pointer_truth
from frontend.lower.heap import delete_expr, is_pool_pointer, new_expr, null_in
from frontend.lower.conditionals import lower_conditional
from frontend.lower.pointer_choice import choice_address, pointer_arith, read_choice, read_pointer_var, shifted
from frontend.lower.context import CK, GPU_BUILTINS, decl_key, has_attr, is_prelude_decl
from frontend.lower.inheritance import converted, member_path, sub_value, subobject
from frontend.lower.member_rows import RowsRef
from frontend.lower.helpers import (
    ArrayRef, DEFAULT, ScalarArray, describe, select_member, strip, strip_parens,
)
from frontend.values import (
    Aggregate, AggLV, ArrayBinding, Binding, BitsLV, ChoiceLV, ChoiceVarLV, Closure, ConstBinding, HeldPointer, LValue, MemLV,
    PackLV, PendingPtrLV, Pointer, PointerChoice, Accessor, PartLV, PointerTable, PtrVarLV, RecLV, RefBinding, UnionLV, Value,
    VarAddress, VarLV, ViewLV,
)

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


_BINARY = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "rem", "<<": "shl", ">>": "shr",
           "&": "band", "|": "bor", "^": "bxor", "<": "lt", ">": "gt", "<=": "le", ">=": "ge",
           "==": "eq", "!=": "ne"}


# ------------------------------------------------------------------ expressions
def expr(kb: KernelBuilder, c: ci.Cursor, *, discard: bool = False) -> Value | None:
    try:
        return _expr(kb, c, discard)
    except UserError as e:
        if e.loc is None:  # raised where no cursor was at hand: the innermost expression's place
            e.loc = kb.loc(c)
        raise


def _expr(kb: KernelBuilder, c: ci.Cursor, discard: bool) -> Value | None:
    handler = _EXPR_HANDLERS.get(c.kind)
    if handler is None:
        if c.kind in (CK.CXX_NULL_PTR_LITERAL_EXPR, CK.GNU_NULL_EXPR):
            raise kb.error("null pointers are not supported in device code", c)
        if c.kind == CK.STRING_LITERAL:
            raise kb.error("string literals are not supported in device code", c)
        if c.kind == CK.StmtExpr and (discard or c.type.get_canonical().kind == ci.TypeKind.VOID):
            # GNU `({ ... })` whose value is not used (glibc's assert in C): its statements.
            for child in c.get_children():
                kb.statement(child)
            return None
        raise kb.error(f"unsupported expression ({c.kind.name.lower()})", c)
    return handler(kb, c, discard)


def scalar(kb: KernelBuilder, c: ci.Cursor) -> n.Expr:
    """A scalar rvalue, of the IR type of ``c``'s C type."""
    v = expr(kb, c)
    if not isinstance(v, n.Expr):
        raise kb.error(f"expected a number here, found a {describe(v)}", c)
    st = tm.scalar_type(c.type)
    if st is not None:
        v = convert(v, st)
    return v


def condition(kb: KernelBuilder, c: ci.Cursor) -> n.Expr:
    if tm.is_pointer(c.type):  # C's `if (p)`: C++ converts to bool first (implicit_conversion)
        return pointer_condition(kb, c)
    return truth(scalar(kb, c))


def literal(kb: KernelBuilder, c: ci.Cursor, discard: bool) -> n.Expr:
    st = tm.scalar_type(c.type)
    value = evaluate(c)
    if value is None:
        tokens = [t.spelling for t in c.get_tokens()]
        if c.kind == CK.CXX_BOOL_LITERAL_EXPR and tokens:
            value = tokens[0] == "true"
        else:
            raise kb.error("cannot evaluate this literal", c)
    if st is None:
        raise kb.error(f"literal of type '{c.type.spelling}' is not supported", c)
    return n.Const(value, st, loc=kb.loc(c))


def paren(kb: KernelBuilder, c: ci.Cursor, discard: bool) -> Value | None:
    return expr(kb, next(iter(c.get_children())), discard=discard)


def unexposed(kb: KernelBuilder, c: ci.Cursor, discard: bool) -> Value | None:
    children = child_cursors(c)
    if not children:
        return DEFAULT  # a default argument or an implicit zero: the caller knows which
    if len(children) > 1:
        raise kb.error("unsupported expression", c)
    if tm.is_function_pointer(c.type) and function_pointers.is_null_constant(children[0]):
        return n.Const(0, tm.FUNCTION_POINTER, loc=kb.loc(c))  # a null function pointer
    if tm.scalar_type(c.type) == BOOL and strip(children[0]).kind == CK.STRING_LITERAL:
        # `assert(ok && "message")`, `assert(!"unreachable")`: a string literal's address is never null
        return n.Const(True, BOOL, loc=kb.loc(c))
    v = expr(kb, children[0], discard=discard)
    if discard:
        return v
    v = converted(kb, v, children[0], c)  # derived to base (frontend.lower.inheritance)
    return implicit_conversion(kb, v, c)


def implicit_conversion(kb: KernelBuilder, v: Value | None, c: ci.Cursor) -> Value | None:
    st = tm.scalar_type(c.type)
    if st is not None and isinstance(v, n.Expr):
        return convert(v, st)
    if st is not None and v is DEFAULT:
        return v
    if st == BOOL and isinstance(v, (Pointer, PointerChoice)):  # `if (p)`, `!p`, `p && x`: not null
        return convert(pointer_truth(kb, v, c), BOOL)
    if st is not None and isinstance(v, (Pointer, PointerChoice, VarAddress)):
        raise kb.error("pointer-to-number conversions are not supported in device code", c)
    if tm.is_pointer(c.type) and isinstance(v, ArrayRef):
        if tm.is_array(tm.pointee(c.type)):
            return v  # `tile` as a pointer to its rows: indexing it is indexing the array
        return v.decay(kb)
    return v


def decl_ref(kb: KernelBuilder, c: ci.Cursor, discard: bool) -> Value:
    r = c.referenced
    if r is None:
        # A substituted template argument (`BLOCK` in an instance of template <int BLOCK>).
        inner = [ch for ch in c.get_children() if ch.kind.is_expression()]
        if len(inner) == 1:
            return implicit_conversion(kb, expr(kb, inner[0]), c)
        value = evaluate(c)
        st = tm.scalar_type(c.type)
        if value is not None and st is not None:
            return n.Const(value, st, loc=kb.loc(c))
        raise kb.error(f"unsupported reference to '{c.spelling}'", c)
    if r.kind == CK.ENUM_CONSTANT_DECL:
        st = tm.scalar_type(c.type) or I32
        return n.Const(r.enum_value, st, loc=kb.loc(c))
    if r.kind == CK.FUNCTION_DECL:  # a device function pointer: the function's id
        return function_pointers.function_value(kb, r, c)
    if r.kind == CK.VAR_DECL and r.spelling in GPU_BUILTINS and is_prelude_decl(r):
        cls = GPU_BUILTINS[r.spelling]
        loc = kb.loc(c)
        return Aggregate({".x": cls(0, loc=loc), ".y": cls(1, loc=loc), ".z": cls(2, loc=loc)}, r.type.spelling)
    binding = lookup(kb, r, c)
    return binding_value(kb, binding, c)


def lookup(kb: KernelBuilder, r: ci.Cursor, c: ci.Cursor) -> Binding:
    key = decl_key(r)
    binding = kb.frame.env.get(key)
    if binding is not None:
        return binding
    if key in kb.shared:
        return kb.shared[key]
    if r.kind == CK.VAR_DECL and r.semantic_parent is not None and \
            r.semantic_parent.kind in (CK.TRANSLATION_UNIT, CK.NAMESPACE):
        return global_binding(kb, r, c)
    if r.kind == CK.VAR_DECL and r.storage_class == ci.StorageClass.STATIC and \
            r.type.is_const_qualified():
        return global_binding(kb, r, c)
    owner = r.semantic_parent
    if r.kind in (CK.VAR_DECL, CK.PARM_DECL) and owner is not None and \
            owner.kind in (CK.FUNCTION_DECL, CK.FUNCTION_TEMPLATE, CK.CXX_METHOD) and \
            not has_attr(owner, CK.CUDADEVICE_ATTR, "polypy_device") and \
            not has_attr(owner, CK.CUDAGLOBAL_ATTR, "polypy_global"):
        # Device code names a host function's variable only in a lambda made there (frontend.closures):
        # a capture is bound to its copy; what is left is a constant the lambda need not capture
        # (`const int n = 100;`, read as its value) or a variable device code cannot read.
        if r.kind == CK.VAR_DECL and r.type.is_const_qualified() and tm.scalar_type(r.type) is not None:
            return global_binding(kb, r, c)
        raise kb.error(f"'{r.spelling}' is a variable of the host function '{owner.spelling}', which device code "
                       "cannot read (a lambda passed to a kernel reaches it only as a capture by value)", c)
    raise kb.error(f"'{r.spelling}' is not visible here (unsupported use of a variable)", c)


def global_binding(kb: KernelBuilder, r: ci.Cursor, c: ci.Cursor) -> Binding:
    if has_attr(r, CK.CUDASHARED_ATTR, "polypy_shared"):
        return declarations.shared_array(kb, r)
    if has_attr(r, CK.CUDACONSTANT_ATTR, "polypy_constant") or has_attr(r, CK.CUDADEVICE_ATTR, "polypy_device"):
        binding = kb.ctx.global_array(r, kb.loc(r))
        for buffer in kb.ctx.global_buffers(binding):  # records of mixed types: one per view
            kb.buffers.setdefault(buffer.name, buffer)
            kb.names.taken.add(buffer.name)
        if not tm.is_array(r.type):
            return ScalarArray(binding)
        return binding
    if r.type.is_const_qualified() and tm.scalar_type(r.type) is not None:
        init = declarations.initializer(kb, r)
        value = evaluate(init) if init is not None else None
        if value is None:
            raise kb.error(f"'{r.spelling}' is a host variable; device code can only read constants", c)
        return ConstBinding(n.Const(value, tm.scalar_type(r.type), loc=kb.loc(c)))
    raise kb.error(f"'{r.spelling}' is a host variable and cannot be used in device code "
                   "(declare it __constant__ or __device__)", c)


def binding_value(kb: KernelBuilder, b: Binding, c: ci.Cursor) -> Value:
    if isinstance(b, ConstBinding):
        return b.value
    if isinstance(b, Closure):
        return b
    if isinstance(b, RefBinding):
        return read(kb, b.target, c)
    if isinstance(b, ArrayBinding):
        return ArrayRef(b, ())
    if isinstance(b, ScalarArray):
        return read(kb, kb.element_lv(b.binding, (n.Const(0, I32),), c), c)
    if isinstance(b, VarAddress):
        return b
    return read(kb, b, c)


def read(kb: KernelBuilder, lv: LValue, c: ci.Cursor) -> Value:
    loc = kb.loc(c)
    if isinstance(lv, VarLV):
        return n.Var(lv.name, lv.type, loc=loc)
    if isinstance(lv, BitsLV):
        return read_bits(lv, loc)
    if isinstance(lv, PackLV):  # `*(uint32_t*)&rgba`: the record's bytes as one value
        return compose_bits([(read(kb, part, c), shift) for part, shift in lv.parts], lv.type, loc)  # type: ignore[misc]
    if isinstance(lv, UnionLV):
        raise kb.error(f"a union ('{lv.spelling}') used as a whole value is not supported in device code "
                       "(use its members)", c)
    if isinstance(lv, MemLV):
        return n.Load(lv.buffer, lv.index, lv.type, loc=loc)
    if isinstance(lv, ViewLV):
        return reinterpret(read(kb, lv.mem, c), lv.type, loc)  # type: ignore[arg-type]
    if isinstance(lv, PartLV):
        return read_part(lv, loc)
    if isinstance(lv, AggLV):  # (the location found once: records of arrays have many leaves)
        return Aggregate({k: n.Load(v.buffer, v.index, v.type, loc=loc) if isinstance(v, MemLV) else read(kb, v, c)
                          for k, v in lv.fields.items()}, lv.spelling)
    if isinstance(lv, RecLV):
        return read(kb, kb.expand_record(lv, c), c)
    if isinstance(lv, Closure):  # a lambda held by a record (closure_records.py)
        return lv
    if isinstance(lv, (Pointer, PointerTable, Accessor, RowsRef, ArrayRef)):
        # an array member of a record in memory (member_rows.py), a row (range_for.py), a T**
        # parameter, a tensor accessor
        return lv
    if isinstance(lv, PendingPtrLV):
        raise kb.error(f"pointer '{lv.name}' is used before it is assigned", c)
    if isinstance(lv, PtrVarLV):
        if lv.offset_var is None:
            return lv.base
        return dataclasses.replace(lv.base, offset=n.Var(lv.offset_var.name, lv.offset_var.type, loc=loc))
    if isinstance(lv, ChoiceVarLV):
        return read_pointer_var(lv, loc)
    if isinstance(lv, ChoiceLV):
        return read_choice(kb, lv, c)  # type: ignore[arg-type]
    raise AssertionError(lv)


# -- operators
def array_subscript(kb: KernelBuilder, c: ci.Cursor, discard: bool) -> Value:
    lv = kb.lvalue(c)
    if isinstance(lv, ArrayRef):
        return lv
    return read(kb, lv, c)


def member_ref(kb: KernelBuilder, c: ci.Cursor, discard: bool) -> Value:
    ref = c.referenced
    if ref is not None and ref.kind == CK.VAR_DECL:
        # A static data member named through an object (`frag.num_elements`): its constant value.
        value = evaluate(c)
        st = tm.scalar_type(c.type)
        if value is None or st is None:
            raise kb.error(f"static member '{c.spelling}' without a constant value is not supported in "
                           "device code", c)
        return n.Const(value, st, loc=kb.loc(c))
    base_c = next((ch for ch in c.get_children() if ch.kind.is_expression()), None)  # not a `B::` qualifier
    path = member_path(kb, base_c, c)  # a member of a base class (frontend.lower.inheritance)
    if base_c is None:  # `x` inside a member function: `this->x`
        return read(kb, kb.member_lv(subobject(kb, members.this_place(kb, c), path, c), c.spelling, c), c)
    if tm.is_pointer(base_c.type):
        return read(kb, kb.member_lv(subobject(kb, kb.deref(expr(kb, base_c), c), path, c), c.spelling,
                                     c), c)
    if in_memory(kb, base_c):
        # `p[i].keys[k]`, `p->nei[k].x`: members of records in memory are found by their place,
        # not by reading the whole record first.
        base_lv = kb.lvalue(base_c)
        if isinstance(base_lv, (RecLV, UnionLV, AggLV)):  # the member's place, not the whole record read
            return read(kb, kb.member_lv(subobject(kb, base_lv, path, c), c.spelling, c), c)
        base = read(kb, base_lv, c)
    else:
        base = expr(kb, base_c)
    if not isinstance(base, Aggregate):
        raise kb.error(f"'.{c.spelling}' of a {describe(base)}", c)
    base = sub_value(kb, base, path, c)
    return select_member(base.fields, c.spelling, c, lambda fields, sp: Aggregate(fields, sp), kb)


def in_memory(kb: KernelBuilder, c: ci.Cursor) -> bool:
    """Whether record expression ``c`` names a place that ``lvalue`` finds with the same
    evaluation as ``expr`` (an element or member of memory), so that a member of it can be
    taken without reading the whole record."""
    while True:
        c = strip(c)
        if c.kind == CK.MEMBER_REF_EXPR:
            base = next(iter(c.get_children()), None)
            if base is None:  # `buffer.data[i]` inside a member function of an object in memory
                this = kb.frame.this
                return isinstance(this, RecLV) or \
                    (isinstance(this, AggLV) and all(isinstance(f, MemLV) for f in this.fields.values()))
            if tm.is_pointer(base.type):
                return True
            c = base
            continue
        if c.kind == CK.ARRAY_SUBSCRIPT_EXPR:
            return True
        if c.kind == CK.UNARY_OPERATOR and unary_operator(c) == "*":
            return True
        if c.kind == CK.DECL_REF_EXPR and c.referenced is not None:
            r = c.referenced
            b = kb.frame.env.get(decl_key(r))
            if b is None and r.kind == CK.VAR_DECL and not is_prelude_decl(r) and tm.is_record(r.type):
                b = lookup(kb, r, c)  # a module record (what `expr` would look up too; not a built-in)
            return isinstance(b, (RefBinding, RecLV, UnionLV)) or \
                (isinstance(b, ScalarArray) and b.binding.layout.record is not None)
        return False


def unary(kb: KernelBuilder, c: ci.Cursor, discard: bool) -> Value | None:
    op = unary_operator(c)
    operand = next(iter(c.get_children()))
    loc = kb.loc(c)
    if op in ("++", "--"):
        lv = kb.lvalue(operand)
        return increment(kb, lv, op, is_postfix(c), c, discard)
    if op == "&":
        return address_of(kb, operand, c)
    if op == "*":
        return read(kb, kb.deref(expr(kb, operand), c), c)
    if op in ("+", "__extension__"):
        return expr(kb, operand, discard=discard)
    if op == "-":
        return n.Unary("neg", scalar(kb, operand), loc=loc)
    if op == "~":
        return n.Unary("bnot", scalar(kb, operand), loc=loc)
    if op == "!":
        result = n.Unary("not", condition(kb, operand), loc=loc)
        st = tm.scalar_type(c.type)
        return convert(result, st) if st is not None else result
    raise kb.error(f"unsupported operator '{op}'", c)


def address_of(kb: KernelBuilder, operand: ci.Cursor, c: ci.Cursor) -> Value:
    inner = strip_parens(operand)
    if inner.kind == CK.DECL_REF_EXPR and inner.referenced is not None and inner.referenced.kind == CK.FUNCTION_DECL:
        return function_pointers.function_value(kb, inner.referenced, c)  # `&add`
    if inner.kind == CK.ARRAY_SUBSCRIPT_EXPR:
        base_c, index_c = list(inner.get_children())
        if tm.scalar_type(base_c.type) is not None and not tm.is_pointer(base_c.type):
            base_c, index_c = index_c, base_c
        base = expr(kb, base_c)
        index = scalar(kb, index_c)
        if isinstance(base, ArrayRef):
            if len(base.prefix) + 1 < len(base.binding.dims):
                return base.index(kb, index, c).decay(kb)  # address of a row
            return base.binding.pointer(base.prefix, index)
        if isinstance(base, Pointer):
            return dataclasses.replace(base, offset=add_offsets(base.offset, index))
        if isinstance(base, PointerChoice):
            return shifted(base, index)
        raise kb.error(f"cannot take the address of an element of a {describe(base)}", c)
    if inner.kind == CK.UNARY_OPERATOR and unary_operator(inner) == "*":
        return expr(kb, next(iter(inner.get_children())))
    if inner.kind == CK.MEMBER_REF_EXPR:  # `&p[i].count` (atomicAdd), `&rec.x`
        return member_address(kb, kb.lvalue(inner), c)
    if inner.kind == CK.DECL_REF_EXPR:
        r = inner.referenced
        b = lookup(kb, r, inner) if r is not None else None
        if isinstance(b, ArrayBinding):
            return ArrayRef(b, ()).decay(kb)
        if isinstance(b, ScalarArray):
            return b.binding.pointer((), None)
        if isinstance(b, RefBinding):
            b = b.target
        if isinstance(b, MemLV):
            return Pointer(b.buffer, b.index[:-1], b.index[-1], tm.ElemLayout(b.type, 1, (("", 0),), b.type.c_name))
        if isinstance(b, RecLV):  # `&state` of a reference bound to a record (`curandState& state`)
            view = b.address.views[0]
            return Pointer(view[1], (), None, tm.ElemLayout(view[0], 1, (), b.layout.spelling, b.layout), b.address)
        if isinstance(b, (VarLV, AggLV)):
            return VarAddress(b)
    raise kb.error("unsupported address-of expression", c)


def member_address(kb: KernelBuilder, lv: LValue, c: ci.Cursor) -> Value:
    """``&place`` of a member (``&p[i].count``, ``&rec.x``): a pointer to it, or ``VarAddress``."""
    if isinstance(lv, ChoiceLV):  # a member reached through a pointer into one of several buffers
        return choice_address(lv, lambda option: member_address(kb, option, c))
    if isinstance(lv, MemLV):
        return Pointer(lv.buffer, lv.index[:-1], lv.index[-1], tm.ElemLayout(lv.type, 1, (("", 0),), lv.type.c_name))
    if isinstance(lv, ViewLV):  # `&((uint4*)x)[i].y`: the view goes on
        mem = lv.mem
        return Pointer(mem.buffer, mem.index[:-1], mem.index[-1],
                       tm.ElemLayout(lv.type, 1, (("", 0),), lv.type.c_name), stored=mem.type)
    if isinstance(lv, PartLV):
        return Pointer(lv.buffer, lv.prefix, lv.index, tm.ElemLayout(lv.type, 1, (("", 0),), lv.type.c_name),
                       stored=lv.stored)
    if isinstance(lv, RecLV):
        view = lv.address.views[0]
        layout = tm.ElemLayout(view[0], 1, (), lv.layout.spelling, lv.layout)
        return Pointer(view[1], (), None, layout, lv.address)
    if isinstance(lv, (VarLV, AggLV)):
        return VarAddress(lv)
    raise kb.error("unsupported address-of expression", c)


def increment(kb: KernelBuilder, lv: LValue, op: str, postfix: bool, c: ci.Cursor, discard: bool) -> Value | None:
    if isinstance(lv, (PtrVarLV, ChoiceVarLV)):
        if lv.offset_var is None:
            raise kb.error("pointer is not assignable here", c)
        var = lv.offset_var
        saved: n.Expr | None = None
        if postfix and not discard:  # `*p++ = v`: the pointer before the step
            saved = n.Var(kb.temp(var.type, n.Var(var.name, var.type), "old", c).name, var.type)
        delta = n.Const(1 if op == "++" else -1, var.type)
        kb.emit(n.Assign(var.name, n.Binary("add", n.Var(var.name, var.type), delta), loc=kb.loc(c)))
        if discard:
            return None
        if saved is None:
            return read(kb, lv, c)
        if isinstance(lv, ChoiceVarLV):
            return read_pointer_var(lv, kb.loc(c), saved)
        return dataclasses.replace(lv.base, offset=saved)
    if not isinstance(lv, (VarLV, BitsLV, PackLV, MemLV, ViewLV, PartLV, ChoiceLV)):
        raise kb.error("++/-- of this kind of value is not supported", c)
    old = read(kb, lv, c)
    assert isinstance(old, n.Expr)
    saved: n.Expr | None = None
    if postfix and not discard:
        saved = n.Var(kb.temp(lv.type, old, "old", c).name, lv.type)
    ct = promote(lv.type)
    one = n.Const(1, ct)
    new = convert(n.Binary("add" if op == "++" else "sub", convert(old, ct), one, loc=kb.loc(c)), lv.type)
    kb.store(lv, new, c)
    if discard:
        return None
    return saved if saved is not None else read(kb, lv, c)


def binary(kb: KernelBuilder, c: ci.Cursor, discard: bool) -> Value | None:
    op = binary_operator(c)
    lhs_c, rhs_c = child_cursors(c)
    loc = kb.loc(c)
    if op == "=":
        lv = kb.lvalue(lhs_c)
        if is_null_pointer(rhs_c) and (isinstance(lv, HeldPointer) or
                                       (isinstance(lv, PtrVarLV) and is_pool_pointer(kb, lv.base))):
            # `d_keep[i] = nullptr`, `node = NULL` of a pointer into the heap or a pool (heap.py)
            value = n.Const(0, U64) if isinstance(lv, HeldPointer) else null_in(kb, lv.base, c)  # type: ignore
        else:
            value = expr(kb, rhs_c)
        kb.assign(lv, value, c)
        return None if discard else read(kb, lv, c)
    if op.endswith("=") and op not in ("==", "!=", "<=", ">="):
        return compound_assign(kb, c, op[:-1], lhs_c, rhs_c, discard)
    if op == ",":
        expr(kb, lhs_c, discard=True)
        return expr(kb, rhs_c, discard=discard)
    if op in ("&&", "||"):
        return logical(kb, op, lhs_c, rhs_c, c)
    if op not in _BINARY:
        raise kb.error(f"unsupported operator '{op}'", c)
    if op in ("==", "!=") and (is_null_pointer(lhs_c) or is_null_pointer(rhs_c)) and \
            not tm.is_function_pointer(lhs_c.type) and not tm.is_function_pointer(rhs_c.type):
        return null_test(kb, op, rhs_c if is_null_pointer(lhs_c) else lhs_c, c)
    a = expr(kb, lhs_c)
    b = expr(kb, rhs_c)
    if isinstance(a, ArrayRef):
        a = a.decay(kb)
    if isinstance(b, ArrayRef):
        b = b.decay(kb)
    if isinstance(a, (Pointer, PointerChoice)) or isinstance(b, (Pointer, PointerChoice)):
        return pointer_arith(kb, op, a, b, c)
    if not isinstance(a, n.Expr) or not isinstance(b, n.Expr):
        raise kb.error(f"operator '{op}' on a {describe(a if not isinstance(a, n.Expr) else b)}", c)
    result = n.Binary(_BINARY[op], a, b, loc=loc)
    if result.op not in ("shl", "shr") and a.type != b.type:
        raise kb.error(f"operands of '{op}' have different types", c)
    st = tm.scalar_type(c.type)
    return convert(result, st) if st is not None else result


def logical(kb: KernelBuilder, op: str, lhs_c: ci.Cursor, rhs_c: ci.Cursor, c: ci.Cursor) -> n.Expr:
    loc = kb.loc(c)
    a = condition(kb, lhs_c)
    with kb.sub_block() as rhs_stmts:
        b = condition(kb, rhs_c)
    st = tm.scalar_type(c.type) or BOOL
    if not rhs_stmts:
        return convert(n.Binary("land" if op == "&&" else "lor", a, b, loc=loc), st)
    # The right operand has side effects: evaluate it only when C would.
    t = kb.temp(BOOL, a, "cond", c)
    test = n.Var(t.name, BOOL) if op == "&&" else n.Unary("not", n.Var(t.name, BOOL))
    kb.emit(n.If(test, tuple(rhs_stmts) + (n.Assign(t.name, b, loc=loc),), loc=loc))
    return convert(n.Var(t.name, BOOL), st)


def compound_assign(kb: KernelBuilder, c, op: str, lhs_c, rhs_c, discard: bool) -> Value | None:
    lv = kb.lvalue(lhs_c)
    rhs = expr(kb, rhs_c)
    if isinstance(lv, (PtrVarLV, ChoiceVarLV)):
        if op not in ("+", "-") or not isinstance(rhs, n.Expr) or lv.offset_var is None:
            raise kb.error("unsupported pointer update", c)
        var = lv.offset_var
        delta = convert(rhs if op == "+" else negated_offset(rhs), var.type)
        kb.emit(n.Assign(var.name, n.Binary("add", n.Var(var.name, var.type), delta), loc=kb.loc(c)))
        return None if discard else read(kb, lv, c)
    if isinstance(lv, AggLV) or not isinstance(rhs, n.Expr):
        raise kb.error(f"'{op}=' on records is not supported", c)
    old = read(kb, lv, c)
    assert isinstance(old, n.Expr)
    ct = promote(lv.type) if op in ("<<", ">>") else usual_arithmetic(lv.type, rhs.type)
    if op in ("<<", ">>"):
        rhs_ct = rhs
    else:
        rhs_ct = convert(rhs, ct)
    new = convert(n.Binary(_BINARY[op], convert(old, ct), rhs_ct, loc=kb.loc(c)), lv.type)
    kb.store(lv, new, c)
    return None if discard else read(kb, lv, c)


def conditional(kb: KernelBuilder, c: ci.Cursor, discard: bool) -> Value:
    return lower_conditional(kb, c)  # type: ignore[arg-type]


def sizeof(kb: KernelBuilder, c: ci.Cursor, discard: bool) -> n.Expr:
    value = evaluate(c)
    st = tm.scalar_type(c.type)
    if value is None or st is None:
        raise kb.error("unsupported expression (only sizeof/alignof of types are supported)", c)
    return n.Const(value, st, loc=kb.loc(c))


def init_list(kb: KernelBuilder, c: ci.Cursor, discard: bool) -> Value:
    return kb.record_value(c, c.type)


_EXPR_HANDLERS = {
    CK.INTEGER_LITERAL: literal,
    CK.FLOATING_LITERAL: literal,
    CK.CHARACTER_LITERAL: literal,
    CK.CXX_BOOL_LITERAL_EXPR: literal,
    CK.PAREN_EXPR: paren,
    CK.UNEXPOSED_EXPR: unexposed,
    CK.DECL_REF_EXPR: decl_ref,
    CK.MEMBER_REF_EXPR: member_ref,
    CK.CXX_THIS_EXPR: members.this_expr,
    CK.LAMBDA_EXPR: lambdas.lambda_expr,
    CK.ARRAY_SUBSCRIPT_EXPR: array_subscript,
    CK.UNARY_OPERATOR: unary,
    CK.BINARY_OPERATOR: binary,
    CK.COMPOUND_ASSIGNMENT_OPERATOR: binary,
    CK.CONDITIONAL_OPERATOR: conditional,
    CK.CALL_EXPR: calls.call,
    CK.CXX_UNARY_EXPR: sizeof,
    CK.INIT_LIST_EXPR: init_list,
    CK.CXX_NEW_EXPR: new_expr,
    CK.CXX_DELETE_EXPR: lambda kb, c, discard: delete_expr(kb, c, is_null_pointer),
    **{k: casts.cast for k in casts.CASTS},
}

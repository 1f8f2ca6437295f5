"""Lowering one ``__global__`` function (and the device functions it calls) to GPU-form IR.

``KernelBuilder`` walks clang cursors. Statements are emitted into the current block; an
expression whose evaluation has side effects (an assignment, ``i++``, an atomic, an inlined
call) emits them before the statement that uses its value, so IR expressions stay pure.
Device functions are inlined: parameters become fresh locals (or bindings of the caller's
pointers and references), ``return`` becomes an assignment to a result local plus structured
control flow (``polypy.passes.eliminate_returns.remove_returns``).

Everything we cannot translate exactly is refused with a ``UserError`` at its location.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Iterator

import clang.cindex as ci

from polypy.errors import Loc, UserError
from polypy.ir import nodes as n
from polypy.ir.names import NameSupply
from polypy.ir.mathfns import CUDA_ARITH_INTRINSICS, CUDA_MATH_NAMES, MATH_FUNCTIONS
from polypy.ir.types import BOOL, I32, I64, U32, ScalarType
from polypy.passes.eliminate_returns import remove_returns

from frontend import ctypes_map as tm
from frontend.arith import add_offsets, convert, plus, promote, scale, truth, usual_arithmetic
from frontend.clang_setup import binary_operator, cursor_loc, evaluate, is_postfix, unary_operator
from frontend.values import (
    Aggregate, AggLV, ArrayBinding, Binding, ConstBinding, LValue, MemLV, Pointer, PtrVarLV, RefBinding,
    Value, VarAddress, VarLV,
)

CK = ci.CursorKind
GPU_BUILTINS = {"threadIdx": n.ThreadIdx, "blockIdx": n.BlockIdx, "blockDim": n.BlockDim, "gridDim": n.GridDim}
_CASTS = (CK.CSTYLE_CAST_EXPR, CK.CXX_STATIC_CAST_EXPR, CK.CXX_FUNCTIONAL_CAST_EXPR, CK.CXX_CONST_CAST_EXPR,
          CK.CXX_REINTERPRET_CAST_EXPR)
_BINARY = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "rem", "<<": "shl", ">>": "shr",
           "&": "band", "|": "bor", "^": "bxor", "<": "lt", ">": "gt", "<=": "le", ">=": "ge",
           "==": "eq", "!=": "ne"}
_ATOMICS = {"atomicAdd": "add", "atomicSub": "sub", "atomicExch": "exch", "atomicMin": "min", "atomicMax": "max",
            "atomicAnd": "and", "atomicOr": "or", "atomicXor": "xor", "atomicInc": "inc", "atomicDec": "dec",
            "atomicCAS": "cas"}
_SHUFFLES = {"__shfl_sync": "idx", "__shfl_up_sync": "up", "__shfl_down_sync": "down", "__shfl_xor_sync": "xor"}
_VOTES = {"__ballot_sync": "ballot", "__any_sync": "any", "__all_sync": "all", "__activemask": "activemask"}
_REFUSED_CALLS = {
    "printf": "printf in device code is not supported",
    "__syncthreads_count": "__syncthreads_count is not supported",
    "__syncthreads_and": "__syncthreads_and is not supported",
    "__syncthreads_or": "__syncthreads_or is not supported",
    "__syncwarp": "__syncwarp is not supported (warp-synchronous code outside shuffles and votes)",
    "__threadfence": "memory fences (__threadfence) are not supported",
    "__threadfence_block": "memory fences (__threadfence_block) are not supported",
    "malloc": "dynamic allocation in device code is not supported",
    "free": "dynamic allocation in device code is not supported",
    "assert": "assert in device code is not supported",
    "__assert_fail": "assert in device code is not supported",
}


def is_prelude_decl(cursor: ci.Cursor) -> bool:
    """Declared by polypy's device prelude or runtime header (not by the user)."""
    f = cursor.location.file
    if f is None:
        return False
    name = f.name.replace("\\", "/")
    return name.endswith("polypy_device.h") or name.endswith("polypy/runtime/cuda_runtime.h")


def has_attr(cursor: ci.Cursor, kind: ci.CursorKind, annotation: str) -> bool:
    for c in cursor.get_children():
        if c.kind == kind:
            return True
        if c.kind == CK.ANNOTATE_ATTR and c.spelling == annotation:
            return True
    return False


def is_kernel_decl(cursor: ci.Cursor) -> bool:
    return has_attr(cursor, CK.CUDAGLOBAL_ATTR, "polypy_global")


def is_device_decl(cursor: ci.Cursor) -> bool:
    return has_attr(cursor, CK.CUDADEVICE_ATTR, "polypy_device")


def is_host_decl(cursor: ci.Cursor) -> bool:
    return has_attr(cursor, CK.CUDAHOST_ATTR, "polypy_host")


def function_body(cursor: ci.Cursor) -> ci.Cursor | None:
    for c in cursor.get_children():
        if c.kind == CK.COMPOUND_STMT:
            return c
    return None


def decl_key(cursor: ci.Cursor) -> tuple:
    """A key identifying a declaration across the cursors that refer to it."""
    loc = cursor.location
    return (loc.file.name if loc.file else "", loc.offset, cursor.spelling, cursor.kind.value)


def sanitize(text: str) -> str:
    out = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in text)
    while "__" in out:
        out = out.replace("__", "_")
    return out.strip("_") or "v"


class NameAllocator(NameSupply):
    """Unique local names from source spellings (``p.x`` → ``p_x``; ``i``, ``i_1``, ...)."""

    def fresh(self, base: str) -> str:
        base = sanitize(base)
        return super().fresh("v" + base if base[0].isdigit() else base)


@dataclasses.dataclass
class Frame:
    """One function being lowered: the kernel or an inlined device function."""

    key: tuple
    cursor: ci.Cursor
    env: dict[tuple, Binding]
    result: LValue | None = None  # where `return e` stores e (device functions)
    is_kernel: bool = False


class ModuleContext:
    """What kernels of one translation unit share: module-level arrays and constants."""

    def __init__(self, language: str):
        self.language = language
        self.globals: dict[tuple, n.Buffer] = {}
        self.global_layouts: dict[tuple, ArrayBinding] = {}
        self.names = NameAllocator()

    def global_array(self, decl: ci.Cursor, where: Loc | None) -> ArrayBinding:
        key = decl_key(decl)
        if key in self.global_layouts:
            return self.global_layouts[key]
        space = "constant" if has_attr(decl, CK.CUDACONSTANT_ATTR, "polypy_constant") else "device"
        dims, elem = _array_dims(decl.type)
        layout = tm.elem_layout(elem, where)
        shape = _buffer_shape(dims, layout, where, decl.spelling)
        init = _constant_initializer(decl, layout, shape)
        name = self.names.fresh(decl.spelling)
        buffer = n.Buffer(name, layout.scalar, shape, space, init=init, loc=cursor_loc(decl))
        self.globals[key] = buffer
        binding = ArrayBinding(name, dims, layout)
        self.global_layouts[key] = binding
        return binding


def _array_dims(t: ci.Type) -> tuple[tuple[int | None, ...], ci.Type]:
    dims: list[int | None] = []
    c = t.get_canonical()
    while c.kind in (ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY):
        dims.append(c.element_count if c.kind == ci.TypeKind.CONSTANTARRAY else None)
        c = c.element_type.get_canonical()
    if c.kind in (ci.TypeKind.VARIABLEARRAY, ci.TypeKind.DEPENDENTSIZEDARRAY):
        dims.append(-1)
    return tuple(dims), c


def _buffer_shape(dims: tuple[int | None, ...], layout: tm.ElemLayout, where: Loc | None,
                  name: str) -> tuple[n.Expr, ...] | None:
    if any(d == -1 for d in dims):
        raise UserError(f"variable-length array '{name}' is not supported", where)
    if not dims:  # a scalar (or record) variable: one element
        dims = (1,)
    if dims[0] is None:
        return None
    shape = list(dims)
    shape[-1] = shape[-1] * layout.stride  # records occupy `stride` slots of the last dimension
    return tuple(n.Const(d, I32) for d in shape)


def initializer_of(d: ci.Cursor) -> ci.Cursor | None:
    """The initializer of a variable declaration. Array sizes are expression children too, so
    for arrays only a brace list counts."""
    exprs = [ch for ch in d.get_children() if ch.kind.is_expression()]
    if tm.is_array(d.type):
        lists = [ch for ch in exprs if ch.kind == CK.INIT_LIST_EXPR]
        return lists[-1] if lists else None
    return exprs[-1] if exprs else None


def _constant_initializer(decl: ci.Cursor, layout: tm.ElemLayout, shape) -> tuple | None:
    init = initializer_of(decl)
    if init is None:
        return None
    values: list[int | float] = []

    def collect(c: ci.Cursor) -> None:
        if c.kind == CK.INIT_LIST_EXPR:
            for ch in c.get_children():
                collect(ch)
            return
        v = evaluate(c)
        if v is None:
            raise UserError("initializers of __constant__/__device__ arrays must be constants", cursor_loc(c))
        values.append(v)

    collect(init)
    return tuple(values)


class KernelBuilder:
    """Lowers one kernel; see the module docstring."""

    def __init__(self, ctx: ModuleContext, cursor: ci.Cursor, name: str):
        self.ctx = ctx
        self.cursor = cursor
        self.kernel_name = name
        self.names = NameAllocator(set(ctx.names.taken))
        self.params: list[n.Param] = []
        self.source_params: list[n.SourceParam] = []
        self.buffers: dict[str, n.Buffer] = {}
        self.shared: dict[tuple, ArrayBinding] = {}
        self.dynamic_shared: ArrayBinding | None = None
        self.frames: list[Frame] = []
        self.block: list[n.Stmt] = []
        self.mutated_cache: dict[tuple, set[tuple]] = {}
        self.loop_depth = 0

    # ------------------------------------------------------------------ utilities
    def error(self, message: str, cursor: ci.Cursor | None) -> UserError:
        return UserError(message, cursor_loc(cursor) if cursor is not None else None)

    def loc(self, cursor: ci.Cursor) -> Loc | None:
        return cursor_loc(cursor)

    def emit(self, stmt: n.Stmt) -> None:
        self.block.append(stmt)

    @contextlib.contextmanager
    def sub_block(self) -> Iterator[list[n.Stmt]]:
        saved = self.block
        self.block = []
        try:
            yield self.block
        finally:
            self.block = saved

    @property
    def frame(self) -> Frame:
        return self.frames[-1]

    def bind(self, decl: ci.Cursor, binding: Binding) -> None:
        self.frame.env[decl_key(decl)] = binding

    def temp(self, ty: ScalarType, init: n.Expr | None, base: str, cursor: ci.Cursor | None) -> VarLV:
        name = self.names.fresh(base)
        self.emit(n.Decl(name, ty, init, loc=self.loc(cursor) if cursor is not None else None))
        return VarLV(name, ty)

    # ------------------------------------------------------------------ kernel entry
    def build(self) -> n.Kernel:
        body = function_body(self.cursor)
        if body is None:
            raise self.error(f"kernel '{self.cursor.spelling}' has no body", self.cursor)
        self.frames.append(Frame(decl_key(self.cursor), self.cursor, {}, is_kernel=True))
        mutated = self.assigned_decls(self.cursor)
        for p in self.cursor.get_arguments():
            self.kernel_param(p, mutated)
        self.statement(body)
        stmts = tuple(self.block)
        self.frames.pop()
        buffers = tuple(self.buffers.values())
        return n.Kernel(self.kernel_name, tuple(self.params), buffers, stmts, stage="gpu",
                        source_params=tuple(self.source_params), loc=self.loc(self.cursor))

    def kernel_param(self, p: ci.Cursor, mutated: set[tuple]) -> None:
        name = p.spelling or f"arg{len(self.params)}"
        where = self.loc(p)
        t = p.type
        if tm.is_reference(t) or tm.is_array(t):
            raise UserError(f"kernel parameter '{name}' of type '{t.spelling}' is not supported", where)
        self.names.taken.add(name)
        st = tm.scalar_type(t)
        if st is not None:
            self.params.append(n.Param(name, st, loc=where))
            self.source_params.append(n.SourceParam(name, t.spelling, (("", name),)))
            self.bind(p, VarLV(name, st))
            if decl_key(p) in mutated:
                # Assigned in the kernel: work on a local copy so the parameter itself stays read-only.
                copy = self.temp(st, n.Var(name, st), name, p)
                self.bind(p, copy)
            return
        if tm.is_pointer(t):
            binding = self.pointer_param(name, t, where)
            self.source_params.append(n.SourceParam(name, t.spelling, (("", name),)))
            self.bind(p, self.pointer_binding(binding, decl_key(p) in mutated, name, p))
            return
        if tm.is_record(t):
            members: list[tuple[str, str]] = []
            fields: dict[str, LValue] = {}
            for leaf in tm.leaves(t):
                pname = self.names.fresh(name + leaf.path)
                members.append((leaf.path, pname))
                lst = leaf.scalar
                if lst is not None:
                    self.params.append(n.Param(pname, lst, loc=where))
                    fields[leaf.path] = VarLV(pname, lst)
                elif tm.is_pointer(leaf.ctype):
                    fields[leaf.path] = PtrVarLV(self.pointer_param(pname, leaf.ctype, where), None)
                else:
                    raise UserError(f"member '{leaf.path}' of type '{leaf.ctype.spelling}' in kernel parameter "
                                    f"'{name}' is not supported", where)
            self.source_params.append(n.SourceParam(name, t.spelling, tuple(members)))
            self.bind(p, AggLV(fields, t.spelling))
            return
        raise UserError(f"kernel parameter '{name}' of type '{t.spelling}' is not supported", where)

    def pointer_param(self, name: str, t: ci.Type, where: Loc | None) -> Pointer:
        target = tm.pointee(t)
        if tm.is_pointer(target):
            raise UserError(f"pointer-to-pointer parameter '{name}' is not supported", where)
        ptype, layout = tm.pointer_param_type(t, where)
        self.params.append(n.Param(name, ptype, loc=where))
        return Pointer(name, (), None, layout)

    def pointer_binding(self, base: Pointer, mutable: bool, name: str, cursor: ci.Cursor) -> PtrVarLV:
        if not mutable:
            return PtrVarLV(base, None)
        init = base.offset if base.offset is not None else n.Const(0, I32)
        var = self.temp(init.type, init, name + "_off", cursor)
        return PtrVarLV(dataclasses.replace(base, offset=None), var)

    def assigned_decls(self, fn: ci.Cursor) -> set[tuple]:
        """Declarations of variables that ``fn`` assigns (``p = q``, ``p += k``, ``p++``)."""
        key = decl_key(fn)
        cached = self.mutated_cache.get(key)
        if cached is not None:
            return cached
        out: set[tuple] = set()
        for c in fn.walk_preorder():
            target = None
            if c.kind in (CK.BINARY_OPERATOR, CK.COMPOUND_ASSIGNMENT_OPERATOR):
                op = binary_operator(c)
                if op.endswith("=") and op not in ("==", "!=", "<=", ">="):
                    target = next(iter(c.get_children()), None)
            elif c.kind == CK.UNARY_OPERATOR and unary_operator(c) in ("++", "--"):
                target = next(iter(c.get_children()), None)
            while target is not None and target.kind in (CK.UNEXPOSED_EXPR, CK.PAREN_EXPR):
                target = next(iter(target.get_children()), None)
            if target is not None and target.kind == CK.DECL_REF_EXPR and target.referenced is not None:
                out.add(decl_key(target.referenced))
        self.mutated_cache[key] = out
        return out

    # ------------------------------------------------------------------ statements
    def statement(self, c: ci.Cursor) -> None:
        kind = c.kind
        handler = _STMT_HANDLERS.get(kind)
        if handler is not None:
            handler(self, c)
            return
        if kind.is_expression():
            self.expr(c, discard=True)
            return
        if kind == CK.UNEXPOSED_STMT:
            # An attributed statement (`#pragma unroll` before a loop): the hint does not change
            # what the loop computes.
            inner = [ch for ch in c.get_children() if ch.kind.is_statement() or ch.kind.is_expression()]
            if len(inner) == 1:
                self.statement(inner[0])
                return
        if kind in (CK.GOTO_STMT, CK.INDIRECT_GOTO_STMT, CK.LABEL_STMT):
            raise self.error("goto is not supported", c)
        if kind in (CK.ASM_STMT, CK.MS_ASM_STMT):
            raise self.error("inline assembly is not supported", c)
        if kind == CK.SWITCH_STMT:
            raise self.error("switch statements are not supported in device code; use if/else", c)
        raise self.error(f"unsupported statement ({kind.name.lower()})", c)

    def compound(self, c: ci.Cursor) -> None:
        for child in c.get_children():
            self.statement(child)

    def null_stmt(self, c: ci.Cursor) -> None:
        return None

    def decl_stmt(self, c: ci.Cursor) -> None:
        for d in c.get_children():
            if d.kind == CK.VAR_DECL:
                self.var_decl(d)
            elif d.kind in (CK.TYPEDEF_DECL, CK.TYPE_ALIAS_DECL, CK.STRUCT_DECL, CK.ENUM_DECL, CK.STATIC_ASSERT):
                continue
            else:
                raise self.error(f"unsupported declaration ({d.kind.name.lower()})", d)

    def initializer(self, d: ci.Cursor) -> ci.Cursor | None:
        return initializer_of(d)

    def var_decl(self, d: ci.Cursor) -> None:
        where = self.loc(d)
        t = d.type
        name = d.spelling
        if has_attr(d, CK.CUDASHARED_ATTR, "polypy_shared"):
            self.bind(d, self.shared_array(d))
            if self.initializer(d) is not None:
                raise UserError(f"__shared__ variable '{name}' cannot have an initializer", where)
            return
        if d.storage_class == ci.StorageClass.STATIC:
            raise UserError(f"static local variable '{name}' is not supported", where)
        init = self.initializer(d)
        if tm.is_reference(t):
            if init is None:
                raise UserError(f"reference '{name}' without initializer", where)
            self.bind(d, RefBinding(self.lvalue(init)))
            return
        if tm.is_array(t):
            self.bind(d, self.local_array(d, init))
            return
        st = tm.scalar_type(t)
        if st is not None:
            value = convert(self.scalar(init), st) if init is not None else None
            var = self.names.fresh(name)
            self.emit(n.Decl(var, st, value, loc=where))
            self.bind(d, VarLV(var, st))
            return
        if tm.is_pointer(t):
            if init is None:
                raise UserError(f"pointer variable '{name}' must be initialized where it is declared", where)
            value = self.expr(init)
            if isinstance(value, VarAddress):
                self.bind(d, value)
                return
            if not isinstance(value, Pointer):
                raise UserError(f"cannot tell which buffer pointer '{name}' points into", where)
            mutable = decl_key(d) in self.assigned_decls(self.frame.cursor)
            if mutable:
                init_off = value.offset if value.offset is not None else n.Const(0, I32)
                var = self.temp(init_off.type, init_off, name + "_off", d)
                self.bind(d, PtrVarLV(dataclasses.replace(value, offset=None), var))
            else:
                self.bind(d, PtrVarLV(value, None))
            return
        if tm.is_record(t):
            fields: dict[str, LValue] = {}
            for leaf in tm.leaves(t):
                lst = leaf.scalar
                if lst is None:
                    raise UserError(f"local variable '{name}' has a member of type '{leaf.ctype.spelling}', "
                                    "which is not supported", where)
                var = self.names.fresh(name + leaf.path)
                self.emit(n.Decl(var, lst, None, loc=where))
                fields[leaf.path] = VarLV(var, lst)
            lv = AggLV(fields, t.spelling)
            self.bind(d, lv)
            if init is not None and not _is_trivial_construction(init):
                self.assign(lv, self.record_value(init, t), d)
            return
        raise UserError(f"local variable '{name}' of type '{t.spelling}' is not supported", where)

    def shared_array(self, d: ci.Cursor) -> ArrayBinding:
        where = self.loc(d)
        key = decl_key(d)
        if key in self.shared:
            return self.shared[key]
        dims, elem = _array_dims(d.type)
        layout = tm.elem_layout(elem, where)
        if d.storage_class == ci.StorageClass.EXTERN or (dims and dims[0] is None):
            if self.dynamic_shared is not None:
                if self.dynamic_shared.layout.scalar != layout.scalar or layout.stride != 1 \
                        or self.dynamic_shared.layout.stride != 1:
                    raise UserError("extern __shared__ arrays of different element types are not supported "
                                    "(they would alias one another)", where)
                self.shared[key] = self.dynamic_shared
                return self.dynamic_shared
            if len(dims) != 1:
                raise UserError("multi-dimensional extern __shared__ arrays are not supported", where)
            name = self.names.fresh(d.spelling)
            self.buffers[name] = n.Buffer(name, layout.scalar, None, "shared", loc=where)
            binding = ArrayBinding(name, (None,), layout)
            self.dynamic_shared = binding
            self.shared[key] = binding
            return binding
        shape = _buffer_shape(dims, layout, where, d.spelling)
        name = self.names.fresh(d.spelling)
        self.buffers[name] = n.Buffer(name, layout.scalar, shape, "shared", loc=where)
        binding = ArrayBinding(name, dims or (1,), layout)
        if not dims:  # a shared scalar or record: element 0 of a one-element array
            scalar = _ScalarArray(binding)
            self.shared[key] = scalar  # type: ignore[assignment]
            return scalar  # type: ignore[return-value]
        self.shared[key] = binding
        return binding

    def local_array(self, d: ci.Cursor, init: ci.Cursor | None) -> ArrayBinding:
        where = self.loc(d)
        dims, elem = _array_dims(d.type)
        layout = tm.elem_layout(elem, where)
        shape = _buffer_shape(dims, layout, where, d.spelling)
        if shape is None:
            raise UserError(f"local array '{d.spelling}' needs a constant size", where)
        name = self.names.fresh(d.spelling)
        self.buffers[name] = n.Buffer(name, layout.scalar, shape, "local", loc=where)
        binding = ArrayBinding(name, dims, layout)
        if init is not None:
            self.array_initializer(binding, init, d)
        return binding

    def array_initializer(self, binding: ArrayBinding, init: ci.Cursor, d: ci.Cursor) -> None:
        if init.kind != CK.INIT_LIST_EXPR:
            raise self.error("array initializers must be brace lists", init)
        dims = binding.dims

        def fill(c: ci.Cursor | None, prefix: tuple[int, ...]) -> None:
            depth = len(prefix)
            if depth == len(dims):
                lv = self.element_lv(binding, tuple(n.Const(i, I32) for i in prefix), c or d)
                if c is None:
                    self.assign(lv, _zero_of(lv), d)
                elif isinstance(lv, AggLV):
                    self.assign(lv, self.record_value(c, None, lv), c)
                else:
                    self.assign(lv, self.scalar(c), c)
                return
            items = list(c.get_children()) if c is not None and c.kind == CK.INIT_LIST_EXPR else []
            if c is not None and c.kind != CK.INIT_LIST_EXPR:
                raise self.error("nested array initializers must be brace lists", c)
            for i in range(dims[depth] or 0):
                fill(items[i] if i < len(items) else None, prefix + (i,))

        fill(init, ())

    def element_lv(self, binding: ArrayBinding, index: tuple[n.Expr, ...], where: ci.Cursor) -> LValue:
        """The lvalue of element ``index`` (one index per C dimension) of an array."""
        layout = binding.layout
        last = index[-1]
        if layout.stride > 1:
            last = scale(last, layout.stride)
        prefix = index[:-1]
        if layout.is_scalar:
            return MemLV(binding.buffer, prefix + (last,), layout.scalar)
        fields = {path: MemLV(binding.buffer, prefix + (plus(last, slot),), layout.scalar)
                  for path, slot in layout.slots}
        return AggLV(fields, layout.ctype_spelling)

    def if_stmt(self, c: ci.Cursor) -> None:
        children = list(c.get_children())
        if children and children[0].kind in (CK.DECL_STMT, CK.VAR_DECL):
            raise self.error("declarations in if conditions are not supported", children[0])
        cond = self.condition(children[0])
        with self.sub_block() as then:
            self.statement(children[1])
        orelse: list[n.Stmt] = []
        if len(children) > 2:
            with self.sub_block() as orelse:
                self.statement(children[2])
        self.emit(n.If(cond, tuple(then), tuple(orelse), loc=self.loc(c)))

    def loop_body(self, body: ci.Cursor) -> list[n.Stmt]:
        self.loop_depth += 1
        try:
            with self.sub_block() as out:
                self.statement(body)
        finally:
            self.loop_depth -= 1
        return out

    def while_stmt(self, c: ci.Cursor) -> None:
        children = list(c.get_children())
        if children[0].kind == CK.VAR_DECL:
            raise self.error("declarations in while conditions are not supported", children[0])
        with self.sub_block() as cond_stmts:
            cond = self.condition(children[0])
        body = self.loop_body(children[1])
        self.emit(self.make_loop(cond, tuple(cond_stmts), tuple(body), (), c))

    def make_loop(self, cond: n.Expr, cond_stmts: tuple[n.Stmt, ...], body: tuple[n.Stmt, ...],
                  update: tuple[n.Stmt, ...], c: ci.Cursor) -> n.Stmt:
        loc = self.loc(c)
        if not cond_stmts:
            return n.While(cond, body, update, loc=loc)
        # The condition needs statements: evaluate it at the top of every iteration.
        test = cond_stmts + (n.If(n.Unary("not", cond, loc=loc), (n.Break(loc=loc),), loc=loc),)
        return n.While(n.Const(True, BOOL), test + body, update, loc=loc)

    def do_stmt(self, c: ci.Cursor) -> None:
        body_c, cond_c = list(c.get_children())
        body = self.loop_body(body_c)
        with self.sub_block() as update:
            cond = self.condition(cond_c)
            self.emit(n.If(n.Unary("not", cond), (n.Break(loc=self.loc(cond_c)),), loc=self.loc(cond_c)))
        self.emit(n.While(n.Const(True, BOOL), tuple(body), tuple(update), loc=self.loc(c)))

    def for_parts(self, c: ci.Cursor) -> tuple[ci.Cursor | None, ci.Cursor | None, ci.Cursor | None, ci.Cursor]:
        """(init, cond, inc, body) of a for statement; clang omits the absent parts, so the
        position of each child relative to the header's two semicolons tells which it is."""
        children = list(c.get_children())
        body = children[-1]
        semis: list[int] = []
        depth = 0
        for tok in c.get_tokens():
            if tok.spelling == "(":
                depth += 1
            elif tok.spelling == ")":
                depth -= 1
                if depth == 0:
                    break
            elif tok.spelling == ";" and depth == 1:
                semis.append(tok.extent.start.offset)
        if len(semis) != 2:
            raise self.error("cannot read this for statement (macro in its header?)", c)
        init = cond = inc = None
        for ch in children[:-1]:
            start = ch.extent.start.offset
            if start < semis[0]:
                init = ch
            elif start < semis[1]:
                cond = ch
            else:
                inc = ch
        return init, cond, inc, body

    def for_stmt(self, c: ci.Cursor) -> None:
        init, cond_c, inc, body_c = self.for_parts(c)
        counted = self.counted_loop(c, init, cond_c, inc, body_c)
        if counted is not None:
            self.emit(counted)
            return
        if init is not None:
            self.statement(init)
        with self.sub_block() as cond_stmts:
            cond = self.condition(cond_c) if cond_c is not None else n.Const(True, BOOL)
        body = self.loop_body(body_c)
        with self.sub_block() as update:
            if inc is not None:
                self.expr(inc, discard=True)
        self.emit(self.make_loop(cond, tuple(cond_stmts), tuple(body), tuple(update), c))

    def counted_loop(self, c, init, cond_c, inc, body_c) -> n.For | None:
        """``for (int i = a; i < b; i += s)`` with invariant b, s and i not assigned in the body."""
        if init is None or cond_c is None or inc is None or init.kind != CK.DECL_STMT:
            return None
        decls = list(init.get_children())
        if len(decls) != 1 or decls[0].kind != CK.VAR_DECL:
            return None
        var_decl = decls[0]
        vt = tm.scalar_type(var_decl.type)
        start_c = self.initializer(var_decl)
        if vt is None or not vt.is_int or start_c is None:
            return None
        key = decl_key(var_decl)
        cond = _strip(cond_c)
        if cond.kind != CK.BINARY_OPERATOR or binary_operator(cond) not in ("<", "<=", ">", ">="):
            return None
        lhs, rhs = (_strip(x) for x in cond.get_children())
        op = binary_operator(cond)
        if _is_ref_to(lhs, key) and op in ("<", "<="):
            bound_c = list(cond.get_children())[1]
        elif _is_ref_to(rhs, key) and op in (">", ">="):
            bound_c = list(cond.get_children())[0]
            op = {">": "<", ">=": "<="}[op]
        else:
            return None
        if op == "<=" and not vt.is_signed:
            return None
        step_c = _increment_of(inc, key)
        if step_c is None:
            return None
        # The counter, the bound and the step must not change in the body (checked on the source,
        # before anything is lowered, so that a refusal leaves no trace).
        invariant = [key] + [decl_key(r.referenced) for x in (bound_c, step_c) if not isinstance(x, int)
                             for r in x.walk_preorder() if r.kind == CK.DECL_REF_EXPR and r.referenced is not None]
        if any(_assigns(body_c, k) for k in invariant):
            return None
        # The pieces must be pure and load-free; otherwise this is a while loop.
        with self.sub_block() as pre:
            bound = self.scalar(bound_c)
            step = n.Const(1, vt) if isinstance(step_c, int) else self.scalar(step_c)
            start = convert(self.scalar(start_c), vt)
        if pre or bound.type != vt:
            return None
        if any(isinstance(x, n.Load) for e in (bound, step) for x in _walk_expr(e)):
            return None
        step = convert(step, vt)
        if op == "<=":
            bound = n.Binary("add", bound, n.Const(1, vt))
        var = self.names.fresh(var_decl.spelling)
        self.bind(var_decl, VarLV(var, vt))
        body = self.loop_body(body_c)
        return n.For(var, vt, start, bound, step, tuple(body), loc=self.loc(c))

    def break_stmt(self, c: ci.Cursor) -> None:
        if self.loop_depth == 0:
            raise self.error("break outside a loop is not supported", c)
        self.emit(n.Break(loc=self.loc(c)))

    def continue_stmt(self, c: ci.Cursor) -> None:
        self.emit(n.Continue(loc=self.loc(c)))

    def return_stmt(self, c: ci.Cursor) -> None:
        children = list(c.get_children())
        frame = self.frame
        if children and frame.result is not None:
            value = self.expr(children[0])
            self.assign(frame.result, value, children[0])
        elif children:
            self.expr(children[0], discard=True)
        self.emit(n.Return(loc=self.loc(c)))

    # ------------------------------------------------------------------ expressions
    def expr(self, c: ci.Cursor, *, discard: bool = False) -> Value | None:
        handler = _EXPR_HANDLERS.get(c.kind)
        if handler is None:
            if c.kind in (CK.CXX_NULL_PTR_LITERAL_EXPR, CK.GNU_NULL_EXPR):
                raise self.error("null pointers are not supported in device code", c)
            if c.kind == CK.LAMBDA_EXPR:
                raise self.error("lambdas are not supported in device code", c)
            if c.kind == CK.CXX_THIS_EXPR:
                raise self.error("member functions are not supported in device code", c)
            if c.kind == CK.STRING_LITERAL:
                raise self.error("string literals are not supported in device code", c)
            raise self.error(f"unsupported expression ({c.kind.name.lower()})", c)
        return handler(self, c, discard)

    def scalar(self, c: ci.Cursor) -> n.Expr:
        """A scalar rvalue, of the IR type of ``c``'s C type."""
        v = self.expr(c)
        if not isinstance(v, n.Expr):
            raise self.error(f"expected a number here, found a {_describe(v)}", c)
        st = tm.scalar_type(c.type)
        if st is not None:
            v = convert(v, st)
        return v

    def condition(self, c: ci.Cursor) -> n.Expr:
        if tm.is_pointer(c.type):
            raise self.error("pointer tests are not supported in device code", c)
        return truth(self.scalar(c))

    def literal(self, c: ci.Cursor, discard: bool) -> n.Expr:
        st = tm.scalar_type(c.type)
        value = evaluate(c)
        if value is None:
            tokens = [t.spelling for t in c.get_tokens()]
            if c.kind == CK.CXX_BOOL_LITERAL_EXPR and tokens:
                value = tokens[0] == "true"
            else:
                raise self.error("cannot evaluate this literal", c)
        if st is None:
            raise self.error(f"literal of type '{c.type.spelling}' is not supported", c)
        return n.Const(value, st, loc=self.loc(c))

    def paren(self, c: ci.Cursor, discard: bool) -> Value | None:
        return self.expr(next(iter(c.get_children())), discard=discard)

    def unexposed(self, c: ci.Cursor, discard: bool) -> Value | None:
        children = list(c.get_children())
        if not children:
            return _DEFAULT  # a default argument or an implicit zero: the caller knows which
        if len(children) > 1:
            raise self.error("unsupported expression", c)
        v = self.expr(children[0], discard=discard)
        if discard:
            return v
        return self.implicit_conversion(v, c)

    def implicit_conversion(self, v: Value | None, c: ci.Cursor) -> Value | None:
        st = tm.scalar_type(c.type)
        if st is not None and isinstance(v, n.Expr):
            return convert(v, st)
        if st is not None and v is _DEFAULT:
            return v
        if st is not None and isinstance(v, (Pointer, VarAddress)):
            raise self.error("pointer-to-number conversions are not supported in device code", c)
        if tm.is_pointer(c.type) and isinstance(v, _ArrayRef):
            if tm.is_array(tm.pointee(c.type)):
                return v  # `tile` as a pointer to its rows: indexing it is indexing the array
            return v.decay(self)
        return v

    def decl_ref(self, c: ci.Cursor, discard: bool) -> Value:
        r = c.referenced
        if r is None:
            # A substituted template argument (`BLOCK` in an instance of template <int BLOCK>).
            inner = [ch for ch in c.get_children() if ch.kind.is_expression()]
            if len(inner) == 1:
                return self.implicit_conversion(self.expr(inner[0]), c)
            value = evaluate(c)
            st = tm.scalar_type(c.type)
            if value is not None and st is not None:
                return n.Const(value, st, loc=self.loc(c))
            raise self.error(f"unsupported reference to '{c.spelling}'", c)
        if r.kind == CK.ENUM_CONSTANT_DECL:
            st = tm.scalar_type(c.type) or I32
            return n.Const(r.enum_value, st, loc=self.loc(c))
        if r.kind == CK.FUNCTION_DECL:
            raise self.error(f"function '{r.spelling}' used as a value (function pointers are not supported)", c)
        if r.kind == CK.VAR_DECL and r.spelling in GPU_BUILTINS and is_prelude_decl(r):
            cls = GPU_BUILTINS[r.spelling]
            loc = self.loc(c)
            return Aggregate({".x": cls(0, loc=loc), ".y": cls(1, loc=loc), ".z": cls(2, loc=loc)}, r.type.spelling)
        binding = self.lookup(r, c)
        return self.binding_value(binding, c)

    def lookup(self, r: ci.Cursor, c: ci.Cursor) -> Binding:
        key = decl_key(r)
        binding = self.frame.env.get(key)
        if binding is not None:
            return binding
        if key in self.shared:
            return self.shared[key]
        if r.kind == CK.VAR_DECL and r.semantic_parent is not None and \
                r.semantic_parent.kind in (CK.TRANSLATION_UNIT, CK.NAMESPACE):
            return self.global_binding(r, c)
        if r.kind == CK.VAR_DECL and r.storage_class == ci.StorageClass.STATIC and \
                r.type.is_const_qualified():
            return self.global_binding(r, c)
        raise self.error(f"'{r.spelling}' is not visible here (unsupported use of a variable)", c)

    def global_binding(self, r: ci.Cursor, c: ci.Cursor) -> Binding:
        if has_attr(r, CK.CUDASHARED_ATTR, "polypy_shared"):
            return self.shared_array(r)
        if has_attr(r, CK.CUDACONSTANT_ATTR, "polypy_constant") or has_attr(r, CK.CUDADEVICE_ATTR, "polypy_device"):
            binding = self.ctx.global_array(r, self.loc(r))
            buffer = self.ctx.globals[decl_key(r)]
            self.buffers.setdefault(buffer.name, buffer)
            self.names.taken.add(buffer.name)
            if not tm.is_array(r.type):
                return _ScalarArray(binding)
            return binding
        if r.type.is_const_qualified() and tm.scalar_type(r.type) is not None:
            init = self.initializer(r)
            value = evaluate(init) if init is not None else None
            if value is None:
                raise self.error(f"'{r.spelling}' is a host variable; device code can only read constants", c)
            return ConstBinding(n.Const(value, tm.scalar_type(r.type), loc=self.loc(c)))
        raise self.error(f"'{r.spelling}' is a host variable and cannot be used in device code "
                         "(declare it __constant__ or __device__)", c)

    def binding_value(self, b: Binding, c: ci.Cursor) -> Value:
        if isinstance(b, ConstBinding):
            return b.value
        if isinstance(b, RefBinding):
            return self.read(b.target, c)
        if isinstance(b, ArrayBinding):
            return _ArrayRef(b, ())
        if isinstance(b, _ScalarArray):
            return self.read(self.element_lv(b.binding, (n.Const(0, I32),), c), c)
        if isinstance(b, VarAddress):
            return b
        return self.read(b, c)

    def read(self, lv: LValue, c: ci.Cursor) -> Value:
        loc = self.loc(c)
        if isinstance(lv, VarLV):
            return n.Var(lv.name, lv.type, loc=loc)
        if isinstance(lv, MemLV):
            return n.Load(lv.buffer, lv.index, lv.type, loc=loc)
        if isinstance(lv, AggLV):
            return Aggregate({k: self.read(v, c) for k, v in lv.fields.items()}, lv.spelling)
        if isinstance(lv, PtrVarLV):
            if lv.offset_var is None:
                return lv.base
            return dataclasses.replace(lv.base, offset=n.Var(lv.offset_var.name, lv.offset_var.type, loc=loc))
        raise AssertionError(lv)

    # -- lvalues
    def lvalue(self, c: ci.Cursor) -> LValue:
        kind = c.kind
        if kind in (CK.PAREN_EXPR, CK.UNEXPOSED_EXPR):
            children = list(c.get_children())
            if len(children) == 1:
                return self.lvalue(children[0])
        if kind == CK.DECL_REF_EXPR:
            r = c.referenced
            if r is not None and r.kind == CK.VAR_DECL and r.spelling in GPU_BUILTINS and is_prelude_decl(r):
                raise self.error(f"'{r.spelling}' is read-only", c)
            b = self.lookup(r, c) if r is not None else None
            if isinstance(b, RefBinding):
                return b.target
            if isinstance(b, _ScalarArray):
                return self.element_lv(b.binding, (n.Const(0, I32),), c)
            if isinstance(b, (VarLV, MemLV, AggLV, PtrVarLV)):
                return b
            raise self.error(f"cannot assign to '{c.spelling}'", c)
        if kind == CK.ARRAY_SUBSCRIPT_EXPR:
            base_c, index_c = list(c.get_children())
            if tm.scalar_type(base_c.type) is not None and not tm.is_pointer(base_c.type):
                base_c, index_c = index_c, base_c
            base = self.expr(base_c)
            index = self.scalar(index_c)
            return self.subscript(base, index, c)
        if kind == CK.UNARY_OPERATOR and unary_operator(c) == "*":
            ptr = self.expr(next(iter(c.get_children())))
            return self.deref(ptr, c)
        if kind == CK.MEMBER_REF_EXPR:
            base_c = next(iter(c.get_children()), None)
            if base_c is None:
                raise self.error("member functions are not supported in device code", c)
            if tm.is_pointer(base_c.type):
                base_lv = self.deref(self.expr(base_c), c)
            else:
                base_lv = self.lvalue(base_c)
            return self.member_lv(base_lv, c.spelling, c)
        raise self.error("expression is not assignable here", c)

    def subscript(self, base: Value | None, index: n.Expr, c: ci.Cursor) -> LValue | "_ArrayRef":
        if isinstance(base, _ArrayRef):
            return base.index(self, index, c)
        if isinstance(base, Pointer):
            return self.pointer_element(base, index, c)
        if isinstance(base, VarAddress):
            if isinstance(index, n.Const) and index.value == 0:
                return base.target
            raise self.error("only element 0 of the address of a local variable can be accessed", c)
        raise self.error(f"cannot index a {_describe(base)}", c)

    def pointer_element(self, ptr: Pointer, j: n.Expr | None, c: ci.Cursor) -> LValue:
        off = add_offsets(ptr.offset, j)
        layout = ptr.layout
        if layout.is_scalar:
            return MemLV(ptr.buffer, ptr.prefix + (off,), layout.scalar)
        base = scale(off, layout.stride)
        fields = {path: MemLV(ptr.buffer, ptr.prefix + (plus(base, slot),), layout.scalar) for path, slot in layout.slots}
        return AggLV(fields, layout.ctype_spelling)

    def deref(self, ptr: Value | None, c: ci.Cursor) -> LValue:
        if isinstance(ptr, _ArrayRef):
            ptr = ptr.decay(self)
        if isinstance(ptr, Pointer):
            return self.pointer_element(ptr, None, c)
        if isinstance(ptr, VarAddress):
            return ptr.target
        raise self.error(f"cannot dereference a {_describe(ptr)}", c)

    def member_lv(self, base: LValue, member: str, c: ci.Cursor) -> LValue:
        if not isinstance(base, AggLV):
            raise self.error(f"'.{member}' of something that is not a record", c)
        return _select_member(base.fields, member, c, lambda fields, sp: AggLV(fields, sp), self)

    # -- operators
    def array_subscript(self, c: ci.Cursor, discard: bool) -> Value:
        lv = self.lvalue(c)
        if isinstance(lv, _ArrayRef):
            return lv
        return self.read(lv, c)

    def member_ref(self, c: ci.Cursor, discard: bool) -> Value:
        base_c = next(iter(c.get_children()), None)
        if base_c is None:
            raise self.error("member functions are not supported in device code", c)
        if tm.is_pointer(base_c.type):
            return self.read(self.member_lv(self.deref(self.expr(base_c), c), c.spelling, c), c)
        base = self.expr(base_c)
        if not isinstance(base, Aggregate):
            raise self.error(f"'.{c.spelling}' of a {_describe(base)}", c)
        return _select_member(base.fields, c.spelling, c, lambda fields, sp: Aggregate(fields, sp), self)

    def unary(self, c: ci.Cursor, discard: bool) -> Value | None:
        op = unary_operator(c)
        operand = next(iter(c.get_children()))
        loc = self.loc(c)
        if op in ("++", "--"):
            lv = self.lvalue(operand)
            return self.increment(lv, op, is_postfix(c), c, discard)
        if op == "&":
            return self.address_of(operand, c)
        if op == "*":
            return self.read(self.deref(self.expr(operand), c), c)
        if op in ("+", "__extension__"):
            return self.expr(operand, discard=discard)
        if op == "-":
            return n.Unary("neg", self.scalar(operand), loc=loc)
        if op == "~":
            return n.Unary("bnot", self.scalar(operand), loc=loc)
        if op == "!":
            result = n.Unary("not", self.condition(operand), loc=loc)
            st = tm.scalar_type(c.type)
            return convert(result, st) if st is not None else result
        raise self.error(f"unsupported operator '{op}'", c)

    def address_of(self, operand: ci.Cursor, c: ci.Cursor) -> Value:
        inner = _strip_parens(operand)
        if inner.kind == CK.ARRAY_SUBSCRIPT_EXPR:
            base_c, index_c = list(inner.get_children())
            if tm.scalar_type(base_c.type) is not None and not tm.is_pointer(base_c.type):
                base_c, index_c = index_c, base_c
            base = self.expr(base_c)
            index = self.scalar(index_c)
            if isinstance(base, _ArrayRef):
                if len(base.prefix) + 1 < len(base.binding.dims):
                    return base.index(self, index, c).decay(self)  # address of a row
                return Pointer(base.binding.buffer, base.prefix, index, base.binding.layout)
            if isinstance(base, Pointer):
                return dataclasses.replace(base, offset=add_offsets(base.offset, index))
            raise self.error(f"cannot take the address of an element of a {_describe(base)}", c)
        if inner.kind == CK.UNARY_OPERATOR and unary_operator(inner) == "*":
            return self.expr(next(iter(inner.get_children())))
        if inner.kind == CK.DECL_REF_EXPR:
            r = inner.referenced
            b = self.lookup(r, inner) if r is not None else None
            if isinstance(b, ArrayBinding):
                return _ArrayRef(b, ()).decay(self)
            if isinstance(b, _ScalarArray):
                return Pointer(b.binding.buffer, (), None, b.binding.layout)
            if isinstance(b, RefBinding):
                b = b.target
            if isinstance(b, MemLV):
                return Pointer(b.buffer, b.index[:-1], b.index[-1], tm.ElemLayout(b.type, 1, (("", 0),), b.type.c_name))
            if isinstance(b, (VarLV, AggLV)):
                return VarAddress(b)
        raise self.error("unsupported address-of expression", c)

    def increment(self, lv: LValue, op: str, postfix: bool, c: ci.Cursor, discard: bool) -> Value | None:
        if isinstance(lv, PtrVarLV):
            if lv.offset_var is None:
                raise self.error("pointer is not assignable here", c)
            var = lv.offset_var
            delta = n.Const(1 if op == "++" else -1, var.type)
            self.emit(n.Assign(var.name, n.Binary("add", n.Var(var.name, var.type), delta), loc=self.loc(c)))
            return None if discard else self.read(lv, c)
        if not isinstance(lv, (VarLV, MemLV)):
            raise self.error("++/-- of this kind of value is not supported", c)
        old = self.read(lv, c)
        assert isinstance(old, n.Expr)
        saved: n.Expr | None = None
        if postfix and not discard:
            saved = n.Var(self.temp(lv.type, old, "old", c).name, lv.type)
        ct = promote(lv.type)
        one = n.Const(1, ct)
        new = convert(n.Binary("add" if op == "++" else "sub", convert(old, ct), one, loc=self.loc(c)), lv.type)
        self.store(lv, new, c)
        if discard:
            return None
        return saved if saved is not None else self.read(lv, c)

    def binary(self, c: ci.Cursor, discard: bool) -> Value | None:
        op = binary_operator(c)
        lhs_c, rhs_c = list(c.get_children())
        loc = self.loc(c)
        if op == "=":
            lv = self.lvalue(lhs_c)
            value = self.expr(rhs_c)
            self.assign(lv, value, c)
            return None if discard else self.read(lv, c)
        if op.endswith("=") and op not in ("==", "!=", "<=", ">="):
            return self.compound_assign(c, op[:-1], lhs_c, rhs_c, discard)
        if op == ",":
            self.expr(lhs_c, discard=True)
            return self.expr(rhs_c, discard=discard)
        if op in ("&&", "||"):
            return self.logical(op, lhs_c, rhs_c, c)
        if op not in _BINARY:
            raise self.error(f"unsupported operator '{op}'", c)
        a = self.expr(lhs_c)
        b = self.expr(rhs_c)
        if isinstance(a, _ArrayRef):
            a = a.decay(self)
        if isinstance(b, _ArrayRef):
            b = b.decay(self)
        if isinstance(a, Pointer) or isinstance(b, Pointer):
            return self.pointer_arith(op, a, b, c)
        if not isinstance(a, n.Expr) or not isinstance(b, n.Expr):
            raise self.error(f"operator '{op}' on a {_describe(a if not isinstance(a, n.Expr) else b)}", c)
        result = n.Binary(_BINARY[op], a, b, loc=loc)
        if result.op not in ("shl", "shr") and a.type != b.type:
            raise self.error(f"operands of '{op}' have different types", c)
        st = tm.scalar_type(c.type)
        return convert(result, st) if st is not None else result

    def pointer_arith(self, op: str, a: Value | None, b: Value | None, c: ci.Cursor) -> Value:
        if op == "+" and isinstance(a, Pointer) and isinstance(b, n.Expr):
            return dataclasses.replace(a, offset=add_offsets(a.offset, b))
        if op == "+" and isinstance(b, Pointer) and isinstance(a, n.Expr):
            return dataclasses.replace(b, offset=add_offsets(b.offset, a))
        if op == "-" and isinstance(a, Pointer) and isinstance(b, n.Expr):
            return dataclasses.replace(a, offset=add_offsets(a.offset, n.Unary("neg", b)))
        raise self.error(f"pointer operation '{op}' is not supported in device code", c)

    def logical(self, op: str, lhs_c: ci.Cursor, rhs_c: ci.Cursor, c: ci.Cursor) -> n.Expr:
        loc = self.loc(c)
        a = self.condition(lhs_c)
        with self.sub_block() as rhs_stmts:
            b = self.condition(rhs_c)
        st = tm.scalar_type(c.type) or BOOL
        if not rhs_stmts:
            return convert(n.Binary("land" if op == "&&" else "lor", a, b, loc=loc), st)
        # The right operand has side effects: evaluate it only when C would.
        t = self.temp(BOOL, a, "cond", c)
        test = n.Var(t.name, BOOL) if op == "&&" else n.Unary("not", n.Var(t.name, BOOL))
        self.emit(n.If(test, tuple(rhs_stmts) + (n.Assign(t.name, b, loc=loc),), loc=loc))
        return convert(n.Var(t.name, BOOL), st)

    def compound_assign(self, c, op: str, lhs_c, rhs_c, discard: bool) -> Value | None:
        lv = self.lvalue(lhs_c)
        rhs = self.expr(rhs_c)
        if isinstance(lv, PtrVarLV):
            if op not in ("+", "-") or not isinstance(rhs, n.Expr) or lv.offset_var is None:
                raise self.error("unsupported pointer update", c)
            var = lv.offset_var
            delta = convert(rhs if op == "+" else n.Unary("neg", rhs), var.type)
            self.emit(n.Assign(var.name, n.Binary("add", n.Var(var.name, var.type), delta), loc=self.loc(c)))
            return None if discard else self.read(lv, c)
        if isinstance(lv, AggLV) or not isinstance(rhs, n.Expr):
            raise self.error(f"'{op}=' on records is not supported", c)
        old = self.read(lv, c)
        assert isinstance(old, n.Expr)
        ct = promote(lv.type) if op in ("<<", ">>") else usual_arithmetic(lv.type, rhs.type)
        if op in ("<<", ">>"):
            rhs_ct = rhs
        else:
            rhs_ct = convert(rhs, ct)
        new = convert(n.Binary(_BINARY[op], convert(old, ct), rhs_ct, loc=self.loc(c)), lv.type)
        self.store(lv, new, c)
        return None if discard else self.read(lv, c)

    def conditional(self, c: ci.Cursor, discard: bool) -> Value:
        cond_c, a_c, b_c = list(c.get_children())
        cond = self.condition(cond_c)
        with self.sub_block() as a_stmts:
            a = self.expr(a_c)
        with self.sub_block() as b_stmts:
            b = self.expr(b_c)
        loc = self.loc(c)
        if isinstance(a, _ArrayRef):
            a = a.decay(self)
        if isinstance(b, _ArrayRef):
            b = b.decay(self)
        st = tm.scalar_type(c.type)
        if isinstance(a, n.Expr) and isinstance(b, n.Expr):
            if st is not None:
                a, b = convert(a, st), convert(b, st)
            if not a_stmts and not b_stmts:
                return n.Select(cond, a, b, loc=loc)
            t = self.temp(a.type, None, "sel", c)
            self.emit(n.If(cond, tuple(a_stmts) + (n.Assign(t.name, a, loc=loc),),
                           tuple(b_stmts) + (n.Assign(t.name, b, loc=loc),), loc=loc))
            return n.Var(t.name, t.type)
        if isinstance(a, Aggregate) and isinstance(b, Aggregate) and set(a.fields) == set(b.fields):
            if not all(isinstance(v, n.Expr) for v in list(a.fields.values()) + list(b.fields.values())):
                raise self.error("conditional between records holding pointers is not supported", c)
            if not a_stmts and not b_stmts:
                return Aggregate({k: n.Select(cond, a.fields[k], b.fields[k], loc=loc)  # type: ignore[arg-type]
                                  for k in a.fields}, a.spelling)
            temps = {k: self.temp(v.type, None, "sel", c) for k, v in a.fields.items()}  # type: ignore[union-attr]
            self.emit(n.If(cond,
                           tuple(a_stmts) + tuple(n.Assign(t.name, a.fields[k], loc=loc) for k, t in temps.items()),  # type: ignore[arg-type]
                           tuple(b_stmts) + tuple(n.Assign(t.name, b.fields[k], loc=loc) for k, t in temps.items()),  # type: ignore[arg-type]
                           loc=loc))
            return Aggregate({k: n.Var(t.name, t.type) for k, t in temps.items()}, a.spelling)
        if isinstance(a, Pointer) and isinstance(b, Pointer) and not a_stmts and not b_stmts \
                and a.buffer == b.buffer and a.prefix == b.prefix and a.layout == b.layout:
            oa = a.offset if a.offset is not None else n.Const(0, I32)
            ob = b.offset if b.offset is not None else n.Const(0, I32)
            if oa.type != ob.type:
                oa, ob = convert(oa, I64), convert(ob, I64)
            return dataclasses.replace(a, offset=n.Select(cond, oa, ob, loc=loc))
        raise self.error("this conditional expression is not supported in device code "
                         "(both sides must be numbers, or records, or pointers into one buffer)", c)

    def cast(self, c: ci.Cursor, discard: bool) -> Value | None:
        operand = [ch for ch in c.get_children() if ch.kind.is_expression()]
        if not operand:
            raise self.error("unsupported cast", c)
        v = self.expr(operand[-1], discard=discard)
        if discard:
            return None
        if isinstance(v, _ArrayRef):
            v = v.decay(self)
        st = tm.scalar_type(c.type)
        if st is not None:
            if not isinstance(v, n.Expr):
                raise self.error(f"cannot convert a {_describe(v)} to a number", c)
            return convert(v, st)
        if tm.is_pointer(c.type):
            if isinstance(v, Pointer):
                target = tm.pointee(c.type)
                if target.get_canonical().kind == ci.TypeKind.VOID:
                    return v
                layout = tm.elem_layout(target, self.loc(c))
                if layout.scalar != v.layout.scalar:
                    raise self.error("pointer casts between different element types are not supported", c)
                if layout.stride == v.layout.stride:
                    return dataclasses.replace(v, layout=layout)
                if v.offset is None and v.layout.stride == 1:
                    return dataclasses.replace(v, layout=layout)  # e.g. reinterpret_cast<float4*>(x)
                raise self.error("this pointer reinterpretation is not supported (only whole buffers can be "
                                 "viewed as vectors)", c)
            if isinstance(v, VarAddress):
                return v
        if tm.is_record(c.type) and isinstance(v, Aggregate):
            return v
        if c.type.get_canonical().kind == ci.TypeKind.VOID:
            return None
        raise self.error(f"unsupported conversion to '{c.type.spelling}'", c)

    def sizeof(self, c: ci.Cursor, discard: bool) -> n.Expr:
        value = evaluate(c)
        st = tm.scalar_type(c.type)
        if value is None or st is None:
            raise self.error("unsupported expression (only sizeof/alignof of types are supported)", c)
        return n.Const(value, st, loc=self.loc(c))

    def init_list(self, c: ci.Cursor, discard: bool) -> Value:
        return self.record_value(c, c.type)

    # ------------------------------------------------------------------ records
    def record_value(self, c: ci.Cursor, t: ci.Type | None, target: AggLV | None = None) -> Aggregate:
        """The value of a record-typed expression (init lists included)."""
        if c.kind == CK.INIT_LIST_EXPR:
            rt = t if t is not None else c.type
            layout = tm.leaves(rt)
            items = [ch for ch in c.get_children()]
            values: dict[str, Value] = {}
            flat: list[Value] = []
            for item in items:
                if tm.is_record(item.type):
                    flat.extend(self.record_value(item, item.type).fields.values())
                else:
                    flat.append(self.scalar(item))
            for i, leaf in enumerate(layout):
                lst = leaf.scalar
                if i < len(flat):
                    v = flat[i]
                    values[leaf.path] = convert(v, lst) if isinstance(v, n.Expr) and lst is not None else v
                elif lst is not None:
                    values[leaf.path] = n.Const(0, lst)
            return Aggregate(values, rt.spelling)
        v = self.expr(c)
        if not isinstance(v, Aggregate):
            raise self.error(f"expected a record value, found a {_describe(v)}", c)
        return v

    # ------------------------------------------------------------------ stores
    def assign(self, lv: LValue, value: Value | None, c: ci.Cursor) -> None:
        if isinstance(lv, AggLV):
            if not isinstance(value, Aggregate):
                raise self.error(f"cannot assign a {_describe(value)} to a record", c)
            for path, field_lv in lv.fields.items():
                if path not in value.fields:
                    raise self.error(f"record value has no member '{path}'", c)
                self.assign(field_lv, value.fields[path], c)
            return
        if isinstance(lv, PtrVarLV):
            if isinstance(value, _ArrayRef):
                value = value.decay(self)
            if not isinstance(value, Pointer) or value.buffer != lv.base.buffer or value.prefix != lv.base.prefix:
                raise self.error("a pointer variable may only be re-pointed within the buffer it was first "
                                 "pointed into", c)
            if lv.offset_var is None:
                raise self.error("this pointer cannot be reassigned here", c)
            off = value.offset if value.offset is not None else n.Const(0, lv.offset_var.type)
            self.emit(n.Assign(lv.offset_var.name, convert(off, lv.offset_var.type), loc=self.loc(c)))
            return
        if not isinstance(value, n.Expr):
            raise self.error(f"cannot store a {_describe(value)} here", c)
        self.store(lv, convert(value, lv.type), c)

    def store(self, lv: LValue, value: n.Expr, c: ci.Cursor) -> None:
        loc = self.loc(c)
        if isinstance(lv, VarLV):
            self.emit(n.Assign(lv.name, value, loc=loc))
        elif isinstance(lv, MemLV):
            self.check_writable(lv.buffer, c)
            self.emit(n.Store(lv.buffer, lv.index, value, loc=loc))
        else:
            raise self.error("unsupported assignment", c)

    def check_writable(self, buffer: str, c: ci.Cursor) -> None:
        b = self.buffers.get(buffer)
        if b is not None and b.space == "constant":
            raise self.error(f"__constant__ memory '{buffer}' is read-only in device code", c)

    # ------------------------------------------------------------------ calls
    def call(self, c: ci.Cursor, discard: bool) -> Value | None:
        fn = c.referenced
        children = list(c.get_children())
        if any(ch.kind == CK.CALL_EXPR and ch.spelling in ("__cudaPushCallConfiguration", "cudaConfigureCall")
               for ch in children):
            raise self.error("kernel launches from device code (dynamic parallelism) are not supported", c)
        if fn is None:
            raise self.error("calls through function pointers are not supported", c)
        if fn.kind == CK.CONSTRUCTOR:
            return self.constructor(c, fn, children)
        if fn.spelling.startswith("operator"):
            # An overloaded operator (clang lists the operands around the operator's name).
            operands = [ch for ch in children
                        if not (_strip(ch).kind == CK.DECL_REF_EXPR and _strip(ch).spelling == fn.spelling)]
            if fn.kind == CK.CXX_METHOD and fn.spelling == "operator=" and \
                    (fn.is_copy_assignment_operator_method() or fn.is_move_assignment_operator_method()):
                lv = self.lvalue(operands[0])
                self.assign(lv, self.expr(operands[1]), c)
                return None if discard else self.read(lv, c)
            if fn.kind == CK.FUNCTION_DECL:
                return self.inline(fn.get_definition() or fn, operands, c, discard)
            raise self.error(f"'{fn.spelling}' as a member function is not supported in device code", c)
        if fn.kind not in (CK.FUNCTION_DECL, CK.FUNCTION_TEMPLATE):
            if fn.kind == CK.CXX_METHOD:
                raise self.error("member functions are not supported in device code", c)
            raise self.error("calls through function pointers are not supported", c)
        callee = children[0] if children else None
        if callee is not None and _strip(callee).kind not in (CK.DECL_REF_EXPR, CK.OVERLOADED_DECL_REF) and \
                _strip(callee).kind != CK.MEMBER_REF_EXPR:
            raise self.error("calls through function pointers are not supported", c)
        args = children[1:]
        name = fn.spelling
        base = name[len("__builtin_"):] if name.startswith("__builtin_") else name
        if base in _REFUSED_CALLS:
            raise self.error(_REFUSED_CALLS[base], c)
        if base.startswith("tex") or base.startswith("surf"):
            raise self.error("textures and surfaces are not supported", c)
        body = function_body(fn.get_definition() or fn)
        if body is None or (fn.location.is_in_system_header and base in CUDA_MATH_NAMES):
            # Declared by the prelude or the C library: a CUDA built-in, mapped by name.
            return self.intrinsic(base, fn, args, c, discard)
        return self.inline(fn.get_definition() or fn, args, c, discard)

    def constructor(self, c: ci.Cursor, fn: ci.Cursor, children: list[ci.Cursor]) -> Value:
        args = [ch for ch in children if ch.kind.is_expression()]
        rt = c.type
        if len(args) == 1 and (fn.is_copy_constructor() or fn.is_move_constructor()):
            return self.record_value(args[0], rt)
        if tm.is_record(rt) and rt.get_canonical().spelling in ("dim3",):
            values = [self.scalar(a) for a in args]
            vals = [convert(v, U32) for v in values] + [n.Const(1, U32)] * (3 - len(values))
            return Aggregate({".x": vals[0], ".y": vals[1], ".z": vals[2]}, "dim3")
        if tm.is_record(rt) and not args:
            return Aggregate({leaf.path: n.Const(0, leaf.scalar) for leaf in tm.leaves(rt) if leaf.scalar}, rt.spelling)
        raise self.error(f"constructor of '{rt.spelling}' is not supported in device code", c)

    def intrinsic(self, name: str, fn: ci.Cursor, args: list[ci.Cursor], c: ci.Cursor, discard: bool) -> Value | None:
        loc = self.loc(c)
        if name == "__syncthreads":
            if not discard:
                raise self.error("__syncthreads() has no value", c)
            self.emit(n.Barrier(loc=loc))
            return None
        if name in _ATOMICS:
            return self.atomic(_ATOMICS[name], args, c, discard)
        if name in _SHUFFLES:
            return self.shuffle(_SHUFFLES[name], fn, args, c)
        if name in _VOTES:
            return self.vote(_VOTES[name], args, c)
        if name == "__ldg":
            ptr = self.expr(args[0])
            return self.read(self.deref(ptr if not isinstance(ptr, _ArrayRef) else ptr.decay(self), c), c)
        if name in CUDA_ARITH_INTRINSICS:
            a, b = (self.scalar(x) for x in args)
            return n.Binary(CUDA_ARITH_INTRINSICS[name], a, b, loc=loc)
        canonical = CUDA_MATH_NAMES.get(name) or CUDA_MATH_NAMES.get(name.replace("std::", ""))
        if canonical is not None:
            values = [self.arg_value(a, fn, i) for i, a in enumerate(args)]
            rt = tm.scalar_type(tm.strip_reference(fn.result_type))  # std::max returns const T&
            if rt is None or not all(isinstance(v, n.Expr) for v in values):
                raise self.error(f"unsupported use of '{name}'", c)
            parent = fn.semantic_parent
            if canonical in ("min", "max") and parent is not None and parent.spelling == "std" and len(values) == 2:
                # std::min/max are defined by comparison (unlike fmin/fmax for NaN and signed zeros).
                a_, b_ = values
                if canonical == "min":
                    return n.Select(n.Binary("lt", b_, a_, loc=loc), b_, a_, loc=loc)  # type: ignore[arg-type]
                return n.Select(n.Binary("lt", a_, b_, loc=loc), b_, a_, loc=loc)  # type: ignore[arg-type]
            if canonical in ("min", "max", "abs") and rt.is_float:
                canonical = {"min": "fmin", "max": "fmax", "abs": "fabs"}[canonical]
            fn_info = MATH_FUNCTIONS[canonical]
            if fn_info.domain == "float" and not all(v.type.is_float for v in values):  # type: ignore[union-attr]
                raise self.error(f"'{name}' on integers is not supported", c)
            if len(values) != fn_info.arity:
                raise self.error(f"'{name}' takes {fn_info.arity} argument(s)", c)
            return convert(n.Call(canonical, tuple(values), BOOL if fn_info.returns_bool else values[0].type, loc=loc), rt)  # type: ignore[union-attr,arg-type]
        if name in ("sincosf", "sincos", "__sincosf"):
            x = self.scalar(args[0])
            for target_c, fname in ((args[1], "sin"), (args[2], "cos")):
                target = self.expr(target_c)
                lv = self.deref(target, c)
                self.assign(lv, n.Call(fname, (x,), x.type, loc=loc), c)
            return None
        if name in ("__popc", "__popcll", "__clz", "__ffs"):
            raise self.error(f"'{name}' is not supported yet", c)
        raise self.error(f"call to '{name}', which has no definition polypy can translate", c)

    def arg_value(self, a: ci.Cursor, fn: ci.Cursor, i: int) -> Value | None:
        v = self.expr(a)
        if v is _DEFAULT:
            params = list(fn.get_arguments())
            default = [ch for ch in params[i].get_children() if ch.kind.is_expression()]
            if not default:
                raise self.error("missing argument", a)
            v = self.expr(default[-1])
            st = tm.scalar_type(params[i].type)
            if st is not None and isinstance(v, n.Expr):
                v = convert(v, st)
        return v

    def atomic(self, op: str, args: list[ci.Cursor], c: ci.Cursor, discard: bool) -> Value | None:
        ptr = self.expr(args[0])
        if isinstance(ptr, _ArrayRef):
            ptr = ptr.decay(self)
        lv = self.deref(ptr, c)
        if not isinstance(lv, MemLV):
            raise self.error("atomics need an address in global or shared memory", c)
        self.check_writable(lv.buffer, c)
        compare = None
        if op == "cas":
            compare = convert(self.scalar(args[1]), lv.type)
            value = convert(self.scalar(args[2]), lv.type)
        else:
            value = convert(self.scalar(args[1]), lv.type)
        dest = None
        if not discard:
            dest = self.temp(lv.type, None, "old", c)
        self.emit(n.AtomicRMW(op, lv.buffer, lv.index, value, dest.name if dest else None, compare, loc=self.loc(c)))
        return n.Var(dest.name, dest.type) if dest is not None else None

    def shuffle(self, mode: str, fn: ci.Cursor, args: list[ci.Cursor], c: ci.Cursor) -> n.Expr:
        values = [self.arg_value(a, fn, i) for i, a in enumerate(args)]
        mask, value, lane, width = values  # type: ignore[misc]
        for v in values:
            if not isinstance(v, n.Expr):
                raise self.error("warp shuffles take numbers", c)
        dest = self.temp(value.type, None, "shfl", c)  # type: ignore[union-attr]
        self.emit(n.Shuffle(dest.name, mode, value, lane, width, mask, loc=self.loc(c)))  # type: ignore[arg-type]
        return n.Var(dest.name, dest.type)

    def vote(self, mode: str, args: list[ci.Cursor], c: ci.Cursor) -> n.Expr:
        if mode == "activemask":
            mask: n.Expr = n.Const(0xFFFFFFFF, U32)
            pred: n.Expr = n.Const(True, BOOL)
        else:
            mask = convert(self.scalar(args[0]), U32)
            pred = truth(self.scalar(args[1]))
        dt = U32 if mode in ("ballot", "activemask") else I32
        dest = self.temp(dt, None, "vote", c)
        self.emit(n.Vote(dest.name, mode, pred, mask, loc=self.loc(c)))
        return n.Var(dest.name, dt)

    # ------------------------------------------------------------------ inlining
    def inline(self, fn: ci.Cursor, args: list[ci.Cursor], c: ci.Cursor, discard: bool) -> Value | None:
        key = decl_key(fn)
        if any(f.key == key for f in self.frames):
            raise self.error(f"recursive call to '{fn.spelling}' is not supported", c)
        if is_kernel_decl(fn):
            raise self.error("kernels cannot be called from device code", c)
        body = function_body(fn)
        if body is None:
            raise self.error(f"call to '{fn.spelling}', which has no definition polypy can translate", c)
        params = list(fn.get_arguments())
        if len(args) != len(params):
            raise self.error(f"call to '{fn.spelling}' with {len(args)} arguments, expected {len(params)}", c)
        mutated = self.assigned_decls(fn)
        env: dict[tuple, Binding] = {}
        # Arguments are evaluated in the caller's frame, before the callee runs.
        for i, (p, a) in enumerate(zip(params, args)):
            env[decl_key(p)] = self.bind_argument(p, a, fn, i, mutated, c)
        result: LValue | None = None
        rt = fn.result_type
        if rt.get_canonical().kind != ci.TypeKind.VOID:
            st = tm.scalar_type(rt)
            if st is not None:
                result = self.temp(st, None, fn.spelling + "_ret", c)
            elif tm.is_record(rt):
                fields: dict[str, LValue] = {}
                for leaf in tm.leaves(rt):
                    if leaf.scalar is None:
                        raise self.error(f"'{fn.spelling}' returns a record holding pointers, which is not supported", c)
                    fields[leaf.path] = self.temp(leaf.scalar, None, fn.spelling + "_ret" + leaf.path, c)
                result = AggLV(fields, rt.spelling)
            else:
                raise self.error(f"'{fn.spelling}' returns '{rt.spelling}', which is not supported", c)
        self.frames.append(Frame(key, fn, env, result=result))
        saved_depth = self.loop_depth
        self.loop_depth = 0
        try:
            with self.sub_block() as out:
                self.statement(body)
        finally:
            self.loop_depth = saved_depth
            self.frames.pop()
        for s in remove_returns(tuple(out), self.names.fresh):
            self.emit(s)
        if result is None or discard:
            return None
        return self.read(result, c)

    def bind_argument(self, p: ci.Cursor, a: ci.Cursor, fn: ci.Cursor, i: int, mutated: set[tuple],
                      c: ci.Cursor) -> Binding:
        pt = p.type
        name = p.spelling or f"arg{i}"
        if tm.is_reference(pt):
            target_t = tm.strip_reference(pt)
            inner = _strip(a)
            try:
                return RefBinding(self.lvalue(inner))
            except UserError:
                if not target_t.is_const_qualified():
                    raise
            value = self.arg_value(a, fn, i)  # const T& bound to a temporary
            return self.copy_to_local(value, target_t, name, a)
        value = self.arg_value(a, fn, i)
        if isinstance(value, _ArrayRef):
            value = value.decay(self)
        if tm.is_pointer(pt) or tm.is_array(pt):
            if isinstance(value, VarAddress):
                return value
            if not isinstance(value, Pointer):
                raise self.error(f"argument for pointer parameter '{name}' must point into a buffer", a)
            return self.pointer_binding(value, decl_key(p) in mutated, name, a)
        return self.copy_to_local(value, pt, name, a)

    def copy_to_local(self, value: Value | None, t: ci.Type, name: str, a: ci.Cursor) -> Binding:
        st = tm.scalar_type(t)
        if st is not None:
            if not isinstance(value, n.Expr):
                raise self.error(f"argument '{name}' must be a number", a)
            return self.temp(st, convert(value, st), name, a)
        if tm.is_record(t):
            if not isinstance(value, Aggregate):
                raise self.error(f"argument '{name}' must be a record", a)
            fields: dict[str, LValue] = {}
            for path, v in value.fields.items():
                if isinstance(v, Pointer):
                    fields[path] = PtrVarLV(v, None)
                elif isinstance(v, n.Expr):
                    fields[path] = self.temp(v.type, v, name + path, a)
                else:
                    raise self.error(f"unsupported member '{path}' in argument '{name}'", a)
            return AggLV(fields, value.spelling)
        raise self.error(f"parameter '{name}' of type '{t.spelling}' is not supported", a)


# --------------------------------------------------------------------------- helper values


class _Default:
    """Placeholder for an argument clang fills in from a default (no cursor children)."""

    def __repr__(self) -> str:
        return "<default>"


_DEFAULT = _Default()


@dataclasses.dataclass(frozen=True)
class _ScalarArray:
    """A scalar (or record) variable that lives in a one-element buffer (``__shared__ float s;``)."""

    binding: ArrayBinding


@dataclasses.dataclass(frozen=True)
class _ArrayRef:
    """A C array, possibly partly indexed (``tile`` or ``tile[ty]`` of ``float tile[16][16]``)."""

    binding: ArrayBinding
    prefix: tuple[n.Expr, ...]

    def index(self, builder: KernelBuilder, i: n.Expr, c: ci.Cursor) -> LValue | "_ArrayRef":
        prefix = self.prefix + (i,)
        if len(prefix) < len(self.binding.dims):
            return _ArrayRef(self.binding, prefix)
        return builder.element_lv(self.binding, prefix, c)

    def decay(self, builder: KernelBuilder) -> Pointer:
        if len(self.prefix) + 1 != len(self.binding.dims):
            raise UserError("pointers to rows of arrays with more than two dimensions are not supported")
        return Pointer(self.binding.buffer, self.prefix, None, self.binding.layout)


def _select_member(fields: dict, member: str, c: ci.Cursor, make, builder: KernelBuilder):
    key = "." + member
    if key in fields:
        return fields[key]
    sub = {k[len(key):]: v for k, v in fields.items() if k.startswith(key + ".") or k.startswith(key + "[")}
    if not sub:
        raise builder.error(f"no member '{member}'", c)
    return make(sub, c.type.spelling)


def _is_trivial_construction(init: ci.Cursor) -> bool:
    """``T t;`` of a record: clang shows a call of the default constructor; C leaves t unset."""
    init = _strip(init)
    return init.kind == CK.CALL_EXPR and init.referenced is not None and \
        init.referenced.kind == CK.CONSTRUCTOR and not any(ch.kind.is_expression() for ch in init.get_children())


def _zero_of(lv: LValue) -> Value:
    if isinstance(lv, AggLV):
        return Aggregate({k: _zero_of(v) for k, v in lv.fields.items()}, lv.spelling)
    assert isinstance(lv, (VarLV, MemLV))
    return n.Const(0, lv.type)


def _describe(v: object) -> str:
    if isinstance(v, Aggregate):
        return "record"
    if isinstance(v, (Pointer, _ArrayRef)):
        return "pointer"
    if isinstance(v, VarAddress):
        return "address of a local variable"
    if v is None:
        return "void value"
    return "value"


def _strip(c: ci.Cursor) -> ci.Cursor:
    while c.kind in (CK.UNEXPOSED_EXPR, CK.PAREN_EXPR):
        children = list(c.get_children())
        if len(children) != 1:
            break
        c = children[0]
    return c


def _strip_parens(c: ci.Cursor) -> ci.Cursor:
    while c.kind == CK.PAREN_EXPR:
        c = next(iter(c.get_children()))
    return c


def _is_ref_to(c: ci.Cursor, key: tuple) -> bool:
    return c.kind == CK.DECL_REF_EXPR and c.referenced is not None and decl_key(c.referenced) == key


def _increment_of(inc: ci.Cursor, key: tuple) -> ci.Cursor | int | None:
    """The step of ``i++``, ``++i``, ``i += s``, ``i = i + s``; None for anything else."""
    inc = _strip_parens(inc)
    if inc.kind == CK.UNARY_OPERATOR and unary_operator(inc) == "++":
        return 1 if _is_ref_to(_strip(next(iter(inc.get_children()))), key) else None
    if inc.kind == CK.COMPOUND_ASSIGNMENT_OPERATOR and binary_operator(inc) == "+=":
        target, step = list(inc.get_children())
        return step if _is_ref_to(_strip(target), key) else None
    if inc.kind == CK.BINARY_OPERATOR and binary_operator(inc) == "=":
        target, value = list(inc.get_children())
        value = _strip(value)
        if _is_ref_to(_strip(target), key) and value.kind == CK.BINARY_OPERATOR and binary_operator(value) == "+":
            a, b = list(value.get_children())
            if _is_ref_to(_strip(a), key):
                return b
    return None


def _assigns(body: ci.Cursor, key: tuple) -> bool:
    for c in body.walk_preorder():
        target = None
        if c.kind in (CK.BINARY_OPERATOR, CK.COMPOUND_ASSIGNMENT_OPERATOR):
            op = binary_operator(c)
            if op.endswith("=") and op not in ("==", "!=", "<=", ">="):
                target = next(iter(c.get_children()), None)
        elif c.kind == CK.UNARY_OPERATOR and unary_operator(c) in ("++", "--", "&"):
            target = next(iter(c.get_children()), None)
        elif c.kind == CK.CALL_EXPR:
            # A reference parameter could modify the counter: be conservative.
            for a in list(c.get_children())[1:]:
                if _is_ref_to(_strip(a), key) and a.kind == CK.DECL_REF_EXPR:
                    return True
        if target is not None and _is_ref_to(_strip(target), key):
            return True
    return False


def _walk_expr(e: n.Expr):
    from polypy.ir.visitor import walk

    return walk(e)


_STMT_HANDLERS = {
    CK.COMPOUND_STMT: KernelBuilder.compound,
    CK.DECL_STMT: KernelBuilder.decl_stmt,
    CK.IF_STMT: KernelBuilder.if_stmt,
    CK.FOR_STMT: KernelBuilder.for_stmt,
    CK.WHILE_STMT: KernelBuilder.while_stmt,
    CK.DO_STMT: KernelBuilder.do_stmt,
    CK.BREAK_STMT: KernelBuilder.break_stmt,
    CK.CONTINUE_STMT: KernelBuilder.continue_stmt,
    CK.RETURN_STMT: KernelBuilder.return_stmt,
    CK.NULL_STMT: KernelBuilder.null_stmt,
}

_EXPR_HANDLERS = {
    CK.INTEGER_LITERAL: KernelBuilder.literal,
    CK.FLOATING_LITERAL: KernelBuilder.literal,
    CK.CHARACTER_LITERAL: KernelBuilder.literal,
    CK.CXX_BOOL_LITERAL_EXPR: KernelBuilder.literal,
    CK.PAREN_EXPR: KernelBuilder.paren,
    CK.UNEXPOSED_EXPR: KernelBuilder.unexposed,
    CK.DECL_REF_EXPR: KernelBuilder.decl_ref,
    CK.MEMBER_REF_EXPR: KernelBuilder.member_ref,
    CK.ARRAY_SUBSCRIPT_EXPR: KernelBuilder.array_subscript,
    CK.UNARY_OPERATOR: KernelBuilder.unary,
    CK.BINARY_OPERATOR: KernelBuilder.binary,
    CK.COMPOUND_ASSIGNMENT_OPERATOR: KernelBuilder.binary,
    CK.CONDITIONAL_OPERATOR: KernelBuilder.conditional,
    CK.CALL_EXPR: KernelBuilder.call,
    CK.CXX_UNARY_EXPR: KernelBuilder.sizeof,
    CK.INIT_LIST_EXPR: KernelBuilder.init_list,
    **{k: KernelBuilder.cast for k in _CASTS},
}

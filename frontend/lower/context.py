"""The module being lowered and small questions about clang cursors: which declarations are
kernels, device or host functions, the names a kernel may use, global and file-scope arrays."""
from __future__ import annotations

import dataclasses
import functools
import pathlib

import clang.cindex as ci

from polypy.curand import TABLE as CURAND_TABLE, matrix_words as curand_matrix_words
from polypy.errors import Loc, UserError
from polypy.ir import nodes as n
from polypy.ir.names import NameSupply
from polypy.ir.types import I32, U8, U16, U32, U64

from frontend import ctypes_map as tm
from frontend.clang_setup import RUNTIME_DIR, cursor_loc, evaluate, file_name, instantiation, string_literal_bytes, \
    unary_operator
from frontend.function_ids import function_id, is_function_type
from frontend.values import ArrayBinding, Binding, LValue, RecordAddress


CK = ci.CursorKind
GPU_BUILTINS = {"threadIdx": n.ThreadIdx, "blockIdx": n.BlockIdx, "blockDim": n.BlockDim, "gridDim": n.GridDim}


def is_prelude_decl(cursor: ci.Cursor) -> bool:
    """Declared by polypy's device prelude or runtime header (not by the user)."""
    name = file_name(cursor)
    if name is None:
        return False
    name = name.replace("\\", "/")
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


@functools.lru_cache(maxsize=256)
def is_library_header(path: str) -> bool:  # a cache: asked for every location
    """A header of polypy's whose device code is inlined as a library's (``<cuda/barrier>``,
    ``<cuda/pipeline>``, ``<cuda_pipeline.h>``, ``<cooperative_groups/memcpy_async.h>``, ``<mma.h>``)."""
    p = pathlib.Path(path).resolve()
    return p.parent == _LIBRARY_DIRS[0] or p in _LIBRARY_DIRS[1:]


_LIBRARY_DIRS = (
    (RUNTIME_DIR / "cuda").resolve(), (RUNTIME_DIR / "cuda_pipeline.h").resolve(),
    (RUNTIME_DIR / "cooperative_groups" / "memcpy_async.h").resolve(), (RUNTIME_DIR / "mma.h").resolve(),
)


def decl_key(cursor: ci.Cursor) -> tuple:
    """A key identifying a declaration across the cursors that refer to it."""
    name, _, _, offset = instantiation(cursor.location, getattr(cursor, "_tu", None))
    if cursor.kind == CK.PARM_DECL:
        # The parameters a pack expands to (`Ts... xs` called with three arguments) share their
        # name and place: each is a declaration of its own (clang's cursor hash tells them apart).
        return (name or "", offset, cursor.spelling, cursor.kind.value, cursor.hash)
    return (name or "", offset, cursor.spelling, cursor.kind.value)


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


@dataclasses.dataclass(frozen=True)
class HeldPointers:
    """A ``__constant__``/``__device__`` array of ``count`` records holding pointers (Rodinia
    heartwall's ``params_unique d_unique[51]``), or of ``count`` pointers (``__device__ float*
    d_scratch;``, ``__device__ int* table[4];``: ``ctype`` is the pointer type, ``dims`` the C
    dimensions), by its ``u64`` view: what a launch validates."""

    symbol: str
    ctype: ci.Type  # the record's type, or the pointer's
    size: int  # bytes of one record (8 for a pointer)
    count: int
    dims: tuple[int, ...] | None = None  # a pointer variable (``()``) or array of pointers
    layout: tm.ElemLayout | None = None  # (a pointer variable's elements, as its binding sees them)


@dataclasses.dataclass
class Frame:
    """One function being lowered: the kernel or an inlined device function."""

    key: tuple
    cursor: ci.Cursor
    env: dict[tuple, Binding]
    result: LValue | None = None  # where `return e` stores e (device functions)
    is_kernel: bool = False
    this: LValue | None = None  # the object of a member function (its place)


class ModuleContext:
    """What kernels of one translation unit share: module-level arrays and constants."""

    def __init__(self, language: str):
        self.language = language
        self.globals: dict[tuple, n.Buffer] = {}
        self.global_layouts: dict[tuple, ArrayBinding] = {}
        self.held_pointers: dict[str, HeldPointers] = {}  # u64 views of records holding pointers
        self.names = NameAllocator()
        # Per kernel, its hidden parameters (texture references, surfaces' memory) in order:
        # (parameter name, what it is, what a launch passes: C text where ``{k}`` is the text of
        # the launch's argument k). See frontend.lower.textures.hidden_param.
        self.textures: dict[str, list[tuple[str, tuple, str]]] = {}
        # Device functions defined in other files (``translate --device-sources``), by USR: the
        # definitions a call to a function only declared here is inlined from (a
        # ``frontend.kernel_values.DeviceSources``: ``get(usr)``, ``files()``).
        self.device_definitions = None
        self.global_usrs: dict[str, tuple] = {}  # a module variable's USR -> its key (alike in every file)
        # The IR name of a kernel launched from device code (its definition's cursor), given a name
        # and queued for lowering where it is not yet among the module's kernels (frontend.module).
        self.kernel_named = None
        self.closures: dict = {}  # lambdas made in host code that kernels take (frontend.closures.host_closure)

    def global_array(self, decl: ci.Cursor, where: Loc | None) -> ArrayBinding:
        # One variable, however many times declared (``extern __constant__ float c[4];`` in a
        # header, then its definition): keyed by its first declaration, read from its definition.
        key = decl_key(decl.canonical)
        decl = decl.get_definition() or decl
        foreign = self.device_definitions.files() if self.device_definitions is not None else set()
        if key[0] in foreign and key not in self.global_layouts:
            # Read by a device function of another file (--device-sources): the variable this
            # file declares too (the same USR), else this file's translation would name a
            # variable it does not declare.
            known = self.global_usrs.get(decl.get_usr())
            if known is not None:
                return self.global_layouts[known]
            raise UserError(f"'{decl.spelling}' is a variable of {key[0]}, used by its device functions, that this "
                            "file does not declare: declare it here too (extern __constant__/__device__ ..., as "
                            "in a header both files include)", where)
        self.global_usrs.setdefault(decl.get_usr(), key)
        if key in self.global_layouts:
            return self.global_layouts[key]
        space = "constant" if has_attr(decl, CK.CUDACONSTANT_ATTR, "polypy_constant") else "device"
        dims, elem = _array_dims(decl.type)
        if tm.is_pointer(elem):
            return self.pointer_global(decl, dims, elem, space, where)
        layout = tm.array_layout(elem, where, pointers=True)
        if layout.record is not None:
            return self.record_global(decl, dims, layout, space, where)
        shape = _buffer_shape(dims, layout, where, decl.spelling)
        init = _constant_initializer(decl, layout, shape)
        if init is None and _is_curand_table(decl):
            init = curand_matrix_words()  # computed, not carried as text (curand_jump_tables.h)
        name = self.names.fresh(decl.spelling)
        # An array of float3 or of records is a flat buffer of scalars viewing the C variable; so is
        # an array of enumerations (C++ converts an ``enum class`` to its integer type only by a cast).
        enum = elem.get_canonical().kind == ci.TypeKind.ENUM
        # So is an array of device function pointers (their ids: frontend.function_ids).
        symbol = decl.spelling if layout.stride > 1 or enum or tm.is_function_pointer(elem) else None
        buffer = n.Buffer(name, layout.scalar, shape, space, init=init, symbol=symbol, loc=cursor_loc(decl))
        self.globals[key] = buffer
        binding = ArrayBinding(name, dims, layout)
        self.global_layouts[key] = binding
        return binding


    def record_global(self, decl: ci.Cursor, dims: tuple[int | None, ...], layout: tm.ElemLayout, space: str,
                      where: Loc | None) -> ArrayBinding:
        """A module array of records of mixed member types: one buffer per member type, each viewing
        the source variable (``Buffer.symbol``), with its part of the initializer."""
        assert layout.record is not None
        key = decl_key(decl.canonical)
        if _buffer_shape(dims, layout, where, decl.spelling) is None:
            raise UserError(f"'{decl.spelling}' needs a constant size", where)
        count = 1
        for d in dims:
            count *= d or 1
        found = module_initializer(decl)
        if layout.record.overlaps:
            return self.union_global(decl, dims, layout, space, count, found, where)
        if found is not None and found.kind != CK.INIT_LIST_EXPR:
            raise UserError(f"'{decl.spelling}' must be initialized with a brace list of constants", where)
        holds_pointers = any(tm.is_pointer(leaf.ctype) for leaf in tm.leaves(layout.record.ctype))
        if found is not None and holds_pointers:
            raise UserError(f"'{decl.spelling}' holds pointers: an initializer of a __device__ or __constant__ record "
                            "holding pointers is not supported (set it with cudaMemcpyToSymbol)", where)
        init = _constant_initializer(decl, layout, None) if found is not None else None
        views = []
        for st in layout.record.scalars:
            name = self.names.fresh(f"{decl.spelling}_{st.name}")
            length = tm.view_length(count, layout.record, st)
            values = tm.view_initializer(list(init), count, layout.record, st) if init is not None else None
            self.globals[key + (st.name,)] = n.Buffer(name, st, (n.Const(length, I32),), space, init=values,
                                                      symbol=decl.spelling, loc=cursor_loc(decl))
            views.append((st, name))
            if st == U64 and holds_pointers:  # its pointers: frontend.lower.held_pointers
                self.held_pointers[name] = HeldPointers(decl.spelling, layout.record.ctype, layout.record.size, count)
        binding = ArrayBinding(views[0][1], dims or (1,), layout, RecordAddress(tuple(views)))
        self.global_layouts[key] = binding
        return binding

    def pointer_global(self, decl: ci.Cursor, dims: tuple[int | None, ...], elem: ci.Type, space: str,
                       where: Loc | None) -> ArrayBinding:
        """A module pointer variable or array of pointers (``__device__ float* d_scratch;``): a
        ``u64`` view of the C variable's bytes, each element the address the host stored, read in
        kernels as a pointer into a pool (``frontend.lower.held_pointers``)."""
        key = decl_key(decl.canonical)
        if any(d is None or d <= 0 for d in dims):
            raise UserError(f"'{decl.spelling}' needs a constant size", where)
        init = module_initializer(decl)
        if init is not None and not _all_null(init):  # `= 0`, `= nullptr`, `{}`: zero, as static storage is
            raise UserError(f"'{decl.spelling}' holds pointers: an initializer of a __device__ or __constant__ pointer "
                            "variable other than null pointers is not supported (set it with cudaMemcpyToSymbol or "
                            "in a kernel)", where)
        count = 1
        for d in dims:
            count *= d
        name = self.names.fresh(f"{decl.spelling}_u64")
        self.globals[key] = n.Buffer(name, U64, (n.Const(count, I32),), space, symbol=decl.spelling,
                                     loc=cursor_loc(decl))
        layout = tm.ElemLayout(U64, 1, (("", 0),), elem.spelling)
        self.held_pointers[name] = HeldPointers(decl.spelling, elem, 8, count, tuple(d or 1 for d in dims), layout)
        binding = ArrayBinding(name, dims or (1,), layout)
        self.global_layouts[key] = binding
        return binding

    def union_global(self, decl: ci.Cursor, dims: tuple[int | None, ...], layout: tm.ElemLayout, space: str,
                     count: int, found: ci.Cursor | None, where: Loc | None) -> ArrayBinding:
        """A module array of records holding unions: one pool of its bytes, in elements of the
        narrowest member type's size, viewing the source variable; each member a typed view of its
        bytes at its offset, as for shared and local memory (docs/typed_views.md)."""
        assert layout.record is not None
        if found is not None:
            raise UserError(f"'{decl.spelling}' holds a union: an initializer of a __device__ or __constant__ "
                            "variable holding a union is not supported (it sets the first member of each union "
                            "only)", where)
        if any(st.is_bool for st in layout.record.scalars):
            raise UserError(f"'{layout.record.spelling}' holds a union and a bool: records with both are not "
                            "supported in __device__ or __constant__ memory (a bool's bytes other than 0 and 1 "
                            "have no value)", where)
        size = min(st.itemsize for st in layout.record.scalars)
        pool = {1: U8, 2: U16, 4: U32, 8: U64}[size]
        name = self.names.fresh(decl.spelling)
        self.globals[decl_key(decl.canonical)] = n.Buffer(
            name, pool, (n.Const(tm.view_length(count, layout.record, pool), I32),), space, symbol=decl.spelling,
            loc=cursor_loc(decl))
        address = RecordAddress(tuple((st, name) for st in layout.record.scalars), stored=pool)
        binding = ArrayBinding(name, dims or (1,), layout, address)
        self.global_layouts[decl_key(decl.canonical)] = binding
        return binding

    def global_buffers(self, binding: ArrayBinding) -> list[n.Buffer]:
        """The module buffers of a module array (one per view for records of mixed member types)."""
        names = [v for _, v in binding.record.views] if binding.record is not None else [binding.buffer]
        by_name = {b.name: b for b in self.globals.values()}
        return [by_name[name] for name in names]


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
    for arrays only a brace list or a string literal (``char tab[] = "ABCD"``) counts."""
    exprs = [ch for ch in d.get_children() if ch.kind.is_expression()]
    if tm.is_array(d.type):
        lists = [ch for ch in exprs if ch.kind in (CK.INIT_LIST_EXPR, CK.STRING_LITERAL)]
        return lists[-1] if lists else None
    return exprs[-1] if exprs else None


def string_initializer(c: ci.Cursor) -> tuple[int, ...]:
    """The element values a string literal gives the ``char`` array (or row) it initializes
    (clang gives the literal that array's type), or a located refusal."""
    length = c.type.get_canonical().element_count
    data = string_literal_bytes(c, length)
    if data is None:
        raise UserError("string literal not supported as an array initializer here: it is wide, or it has escape "
                        "sequences and the array holds more than its leading characters (an embedded NUL "
                        "polypy cannot read past); write the array as a brace list", cursor_loc(c))
    signed = c.type.get_canonical().element_type.kind in (ci.TypeKind.CHAR_S, ci.TypeKind.SCHAR)
    return tuple(b - 256 if signed and b > 127 else b for b in data)


def _is_curand_table(decl: ci.Cursor) -> bool:
    """The jump matrices that polypy's curand_jump_tables.h declares without their values."""
    where = decl.location.file
    return (decl.spelling == CURAND_TABLE and where is not None
            and pathlib.Path(where.name).resolve() == (RUNTIME_DIR / "curand_jump_tables.h").resolve())


def is_default_construction(init: ci.Cursor) -> bool:
    """``T v;`` of a record type: clang shows a call of its default constructor, with no arguments."""
    return init.kind == CK.CALL_EXPR and not any(ch.kind.is_expression() for ch in init.get_children())


def _empty_construction(t: ci.Type) -> bool:
    """Whether default construction of a ``t`` sets nothing (so that a module variable of type
    ``t`` keeps static storage's zeros): no default member initializers, and each default
    constructor, of ``t``'s records and of their members and bases, defaulted or empty."""
    c = t.get_canonical()
    while c.kind in (ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY):
        c = c.element_type.get_canonical()
    if c.kind != ci.TypeKind.RECORD:
        return True
    for ch in c.get_declaration().get_children():
        if ch.kind == CK.FIELD_DECL:
            if _has_member_initializer(ch) or not _empty_construction(ch.type):
                return False
        elif ch.kind == CK.CXX_BASE_SPECIFIER:
            if not _empty_construction(ch.type):
                return False
        elif ch.kind == CK.CONSTRUCTOR and ch.is_default_constructor() and not ch.is_default_method():
            body = function_body(ch)
            if body is None or any(True for _ in body.get_children()) or any(
                    e.kind in (CK.MEMBER_REF, CK.TYPE_REF) or e.kind.is_expression() for e in ch.get_children()):
                return False
    return True


def _has_member_initializer(field: ci.Cursor) -> bool:
    """``int d = 3;`` or ``int e{4};`` in a record: an ``=`` or ``{`` after the member's name outside
    brackets and parentheses (array sizes and bit-field widths are expression children of the
    field too; ``union { ... } v;`` has braces before it)."""
    depth = 0
    name = field.location.offset
    for t in field.get_tokens():
        if t.extent.start.offset <= name:
            continue
        if t.spelling in ("(", "["):
            depth += 1
        elif t.spelling in (")", "]"):
            depth -= 1
        elif depth == 0 and t.spelling in ("=", "{"):
            return True
    return False


def _all_null(c: ci.Cursor) -> bool:
    """Whether an initializer holds null pointers only (``0``, ``NULL``, ``nullptr``, ``(T*)0``, brace
    lists of them)."""
    if c.kind == CK.INIT_LIST_EXPR:
        return all(_all_null(x) for x in c.get_children())
    while c.kind in (CK.UNEXPOSED_EXPR, CK.PAREN_EXPR, CK.CSTYLE_CAST_EXPR, CK.CXX_STATIC_CAST_EXPR):
        kids = [x for x in c.get_children() if x.kind.is_expression()]
        if len(kids) != 1:
            return False
        c = kids[0]
    if c.kind in (CK.CXX_NULL_PTR_LITERAL_EXPR, CK.GNU_NULL_EXPR):
        return True
    return c.kind == CK.INTEGER_LITERAL and evaluate(c) == 0


def module_initializer(decl: ci.Cursor) -> ci.Cursor | None:
    """The initializer of a ``__constant__``/``__device__`` variable; None where there is none:
    without one (``__constant__ Params p;``) it is zero, as static storage is, when its default
    construction sets nothing; a constructor that sets values (clang accepts ``constexpr`` ones)
    is refused."""
    init = initializer_of(decl)
    if init is not None and not is_default_construction(init) and init.kind != CK.INIT_LIST_EXPR:
        return init
    # (Arrays of records show no construction of their own; a brace list leaving members out
    # would take their default member initializers.)
    if not _empty_construction(decl.type):
        raise UserError(f"'{decl.spelling}' is initialized by a constructor or default member initializers: "
                        "not supported for __device__ or __constant__ variables (set it with cudaMemcpyToSymbol or "
                        "in a kernel)", cursor_loc(decl))
    return init if init is not None and init.kind == CK.INIT_LIST_EXPR else None


def function_constant(c: ci.Cursor) -> int | None:
    """The id of the device function a module variable's initializer names (``add``, ``&add``), 0 for
    a null function pointer, or None (frontend.function_ids)."""
    if not (tm.is_function_pointer(c.type) or is_function_type(c.type)):
        return None
    inner = c
    while inner.kind in (CK.UNEXPOSED_EXPR, CK.PAREN_EXPR, CK.CSTYLE_CAST_EXPR, CK.CXX_STATIC_CAST_EXPR) or \
            (inner.kind == CK.UNARY_OPERATOR and unary_operator(inner) == "&"):
        below = [ch for ch in inner.get_children() if ch.kind.is_expression()]
        if len(below) != 1:
            return None
        inner = below[0]
    if inner.kind in (CK.CXX_NULL_PTR_LITERAL_EXPR, CK.GNU_NULL_EXPR) or \
            (inner.kind == CK.INTEGER_LITERAL and evaluate(inner) == 0):
        return 0
    r = inner.referenced if inner.kind == CK.DECL_REF_EXPR else None
    if r is None or r.kind != CK.FUNCTION_DECL:
        return None
    k = function_id(r)
    if k is None:
        raise UserError(f"'{r.spelling}' is not a __device__ function: a device function pointer cannot point to it",
                        cursor_loc(inner))
    return k


def _constant_initializer(decl: ci.Cursor, layout: tm.ElemLayout, shape) -> tuple | None:
    init = module_initializer(decl)
    if init is None:
        return None
    values: list[int | float] = []

    def collect(c: ci.Cursor) -> None:
        if c.kind == CK.STRING_LITERAL:
            values.extend(string_initializer(c))
            return
        if c.kind == CK.INIT_LIST_EXPR:
            start = len(values)
            for ch in c.get_children():
                collect(ch)
            # Elements a list leaves out are zero (`{{1}, {2, 3}}` for int[2][3] is 1 0 0 2 3 0):
            # pad each list, not only the whole, to the leaves of its type.
            values.extend([0] * (start + len(tm.leaves(c.type)) - len(values)))
            return
        v = evaluate(c)
        if v is None:
            v = function_constant(c)  # `__device__ op_t ops[] = {add, mul}`: their ids
        if v is None:
            raise UserError("initializers of __constant__/__device__ arrays must be constants", cursor_loc(c))
        values.append(v)

    collect(init)
    return tuple(values)

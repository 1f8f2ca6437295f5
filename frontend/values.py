"""What lowering an expression can produce, and what a name can be bound to.

C values are richer than IR values: besides scalars there are aggregates (records, seen through
their flat layout), pointers into buffers, and lvalues. The frontend keeps these shapes while it
lowers one function and only emits scalar IR.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from polypy.ir import nodes as n
from polypy.ir.types import I32, I64, ScalarType

from frontend.arith import add_offsets, convert
from frontend.ctypes_map import ElemLayout, RecordLayout

# --------------------------------------------------------------------------- values


@dataclasses.dataclass(frozen=True)
class Aggregate:
    """A record value: member path → scalar expression or ``Pointer`` (flat, e.g. ".x", ".a.b")."""

    fields: dict[str, "Value"]
    spelling: str


@dataclasses.dataclass(frozen=True)
class RecordAddress:
    """A byte address in memory holding records of mixed member types (``ctypes_map.RecordLayout``):
    ``sum(e * k for e, k in terms) + const`` bytes from the start, seen through one IR buffer per
    scalar type (``views``: type → buffer). Every ``k`` and ``const`` is a multiple of the sizes of
    the types read there, so each view's index is exact and affine where ``e`` is."""

    views: tuple[tuple[ScalarType, str], ...]
    terms: tuple[tuple[n.Expr, int], ...] = ()
    const: int = 0
    # Shared or local memory holding unions: every view names one byte pool of these elements
    # (the narrowest member type's size), each member a typed view of its bytes (``views.element``).
    stored: ScalarType | None = None

    def plus(self, e: n.Expr | None, bytes_per_unit: int) -> RecordAddress:
        if e is None or (isinstance(e, n.Const) and e.value == 0):
            return self
        if isinstance(e, n.Const):
            return dataclasses.replace(self, const=self.const + int(e.value) * bytes_per_unit)
        return dataclasses.replace(self, terms=self.terms + ((e, bytes_per_unit),))

    def shifted(self, nbytes: int) -> RecordAddress:
        return dataclasses.replace(self, const=self.const + nbytes)

    def view(self, t: ScalarType) -> str | None:
        for st, name in self.views:
            if st == t:
                return name
        return None

    def index(self, t: ScalarType) -> n.Expr:
        """The element of the ``t`` view at this address."""
        size = t.itemsize
        exprs = [e if k == size else n.Binary("mul", e, n.Const(k // size, e.type), loc=e.loc)
                 for e, k in self.terms]
        wide = any(e.type != exprs[0].type for e in exprs) if exprs else False
        if wide:
            exprs = [convert(e, I64) for e in exprs]
        ty = exprs[0].type if exprs else I64
        total: n.Expr | None = None
        for e in exprs:
            total = e if total is None else n.Binary("add", total, e, loc=e.loc)
        if self.const or total is None:
            c = n.Const(self.const // size, ty)
            total = c if total is None else n.Binary("add", total, c, loc=total.loc)
        return total


@dataclasses.dataclass(frozen=True)
class Pointer:
    """A pointer into a buffer.

    Element ``j`` (in units of the pointee type) is at ``prefix + ((offset + j) * stride + slot,)``
    of ``buffer``: ``prefix`` holds the leading indices of a multi-dimensional array (a row
    pointer such as ``tile[ty]``), ``offset`` is None for the start of the buffer/row.

    A pointer to records of mixed member types (``layout.record`` set) has ``record``: element
    ``j`` is at byte ``record + (offset + j) * layout.record.size``; ``buffer`` names its first view.

    A typed view (``(int*)float_buf``, ``reinterpret_cast<uint4*>(float_buf)``) has ``stored``:
    the buffer's own element type, another type than ``layout.scalar``. Of the same size, its
    elements are the buffer's, read and written through a bit cast (``bitcasts.reinterpret``),
    so the buffer, its indices and the isl access relations stay those of the typed array. Of
    another size (``(float*)bytes``, ``(unsigned char*)floats``), ``offset`` counts elements of
    the view and each element is the bytes it covers (``PartLV``).
    """

    buffer: str
    prefix: tuple[n.Expr, ...]
    offset: n.Expr | None
    layout: ElemLayout
    record: RecordAddress | None = None
    stored: ScalarType | None = None


@dataclasses.dataclass(frozen=True)
class PointerChoice:
    """A pointer that may point into one of several buffers (``c ? A + x : B + y``, a pointer
    variable re-pointed from ``A`` to ``B``): it is ``options[k]`` where ``sel == k`` (``sel``
    an integer expression). The options point to elements of one type (each may be a typed view
    of its buffer). Every access through it is a branch over the options, as statements
    (``frontend.lower.pointer_choice``), so only the chosen buffer is touched."""

    sel: n.Expr
    options: tuple[Pointer, ...]


@dataclasses.dataclass(frozen=True)
class PointerTable:
    """A ``T**`` kernel parameter: an array of pointers into one buffer (Rodinia leukocyte's
    ``float** I_array``). The IR sees the table as 64-bit addresses (``table``), the memory they
    point into (``pool``, of ``T``) and the pool's address (``base``, a ``u64`` scalar): pointer
    ``k`` is element ``(table[k] - base) / sizeof(T)`` of ``pool``."""

    table: str
    pool: str
    base: str
    layout: ElemLayout

    def element(self, k: n.Expr) -> Pointer:
        from polypy.ir.types import U64

        address = n.Load(self.table, (k,), U64, loc=k.loc)
        diff = convert(n.Binary("sub", address, n.Var(self.base, U64), loc=k.loc), I64)
        size = self.layout.scalar.itemsize
        offset = diff if size == 1 else n.Binary("div", diff, n.Const(size, I64), loc=k.loc)
        return Pointer(self.pool, (), offset, self.layout)


@dataclasses.dataclass(frozen=True)
class Accessor:
    """One of PyTorch's tensor accessors (``frontend.lower.accessors``): element
    ``[i0][i1]...`` is element ``i0 * strides[0] + i1 * strides[1] + ...`` of ``data``; ``sizes``
    and ``strides`` (scalar expressions of the accessor's ``index_t``) are those of the dimensions
    not indexed yet."""

    data: Pointer
    sizes: tuple[n.Expr, ...]
    strides: tuple[n.Expr, ...]
    spelling: str


@dataclasses.dataclass(frozen=True)
class VarAddress:
    """``&x`` of a local scalar or record (only usable as ``*p``, ``p[0]`` or ``p->field``)."""

    target: "LValue"


@dataclasses.dataclass(frozen=True)
class HeldPointer(Pointer):
    """A pointer read from a module pointer variable or array of pointers (``__device__ float*
    d_keep[4];``, ``frontend/lower/held_pointers.py``) that remembers where: element ``slot`` of
    the variable's ``u64`` view ``view``, so that an assignment can store a new address there."""

    view: str = ""
    slot: n.Expr | None = None


@dataclasses.dataclass(frozen=True)
class HeapBlock:
    """What device ``malloc`` gives (a ``void*``): the block's address, a ``u64`` (0: a null
    pointer), until a cast to a pointer type makes it a pointer into the heap's pool of that type
    (``frontend/lower/heap.py``)."""

    address: n.Expr


Value = n.Expr | Aggregate | Pointer | PointerChoice | VarAddress | PointerTable | Accessor | HeapBlock

# --------------------------------------------------------------------------- lvalues


@dataclasses.dataclass(frozen=True)
class VarLV:
    name: str
    type: ScalarType


@dataclasses.dataclass(frozen=True)
class BitsLV:
    """Local scalar ``var`` seen through a pointer to another type of its size (``*(int*)&f``):
    reads are ``bitcast<type>(var)``, writes store ``bitcast<var.type>(value)`` in ``var``. A
    narrower ``type`` (a member of a struct in a union, ``bitcasts.read_bits``) is the bits
    ``[shift, shift + type.bits)`` of ``var``, an unsigned integer: the bytes of a little-endian
    layout, as on the GPU."""

    var: VarLV
    type: ScalarType
    shift: int = 0


@dataclasses.dataclass(frozen=True)
class PackLV:
    """A scalar place of ``type`` whose bytes are those of several scalar places: the leaves of a
    local record seen through a pointer to a type of its size (``*(uint32_t*)&rgba`` of a
    ``uchar4``, ``bitcasts.record_view``). ``parts``: each leaf place and the bit where its bytes
    start (little-endian, as on the GPU); they tile ``type``'s bits without a gap. A read ors
    their bits into place; a write sets each to its slice of the value's bits. ``whole``: the
    record, for a cast of the pointer back to another type."""

    parts: tuple[tuple["LValue", int], ...]
    type: ScalarType
    whole: "LValue | None" = dataclasses.field(default=None, compare=False)  # (a record: no hash)


@dataclasses.dataclass(frozen=True)
class MemLV:
    buffer: str
    index: tuple[n.Expr, ...]
    type: ScalarType


@dataclasses.dataclass(frozen=True)
class ViewLV:
    """An element of memory (``mem``, of the buffer's element type) seen through a typed view as
    ``type``, another scalar type of its size (``((int*)x)[i]`` of a float buffer ``x``): reads are
    ``reinterpret<type>(mem)``, writes store ``reinterpret<mem.type>(value)`` (bit casts, never
    value conversions)."""

    mem: MemLV
    type: ScalarType


@dataclasses.dataclass(frozen=True)
class PartLV:
    """Memory of ``stored`` elements seen through a view of another size (the byte-addressed
    model): element ``index`` (in units of ``type``) of the view covers bytes
    ``[index * size(type), (index + 1) * size(type))`` of row ``prefix`` of ``buffer``
    (``views.read_part`` / ``views.store_part``: the stored elements it covers, little-endian)."""

    buffer: str
    prefix: tuple[n.Expr, ...]
    index: n.Expr
    stored: ScalarType
    type: ScalarType


@dataclasses.dataclass(frozen=True)
class AggLV:
    """A record lvalue: member path → leaf lvalue."""

    fields: dict[str, "LValue"]
    spelling: str


@dataclasses.dataclass(frozen=True)
class BaseLV(AggLV):
    """A base subobject ``name`` (``__base0``) of the record at place ``whole``: known to lie
    inside that derived object, so a downcast back to its class (CRTP's
    ``static_cast<Derived*>(this)``) finds ``whole`` exactly (``frontend.lower.inheritance``)."""

    whole: "LValue" = None  # type: ignore[assignment]
    name: str = ""
    whole_class: str = ""  # the USR of the class of ``whole``


@dataclasses.dataclass(frozen=True)
class BoundCopyLV(AggLV):
    """A local copy of the value a ``const T&`` parameter is bound to (a temporary, or an object
    polypy found no place of): its class is ``T``, maybe not the object's, so a virtual call on
    it is refused (``frontend.lower.virtual_calls``)."""


@dataclasses.dataclass(frozen=True)
class UnionLV(AggLV):
    """A local union whose members are scalars of one size: one variable, each member a view of
    its bits (``VarLV`` or ``BitsLV``). Its members are places; the union as a whole value is
    not (a copy would part the members)."""


@dataclasses.dataclass(frozen=True)
class ChoiceLV:
    """A scalar place among ``options`` (one per option of a ``PointerChoice``, each a
    ``MemLV``, ``ViewLV`` or ``PartLV`` of ``type``), the one where ``sel`` is its position:
    reads and writes are branches over ``sel``, as statements."""

    sel: n.Expr
    options: tuple["LValue", ...]
    type: ScalarType


@dataclasses.dataclass(frozen=True)
class PtrVarLV:
    """A pointer variable: fixed target buffer, offset held in an integer local (None: immutable).
    ``hint``: the variable's key among the pointer variables of the kernel
    (``KernelBuilder.pointer_hint``), for one assigned a pointer into another buffer."""

    base: Pointer
    offset_var: VarLV | None
    hint: tuple | None = None


@dataclasses.dataclass(frozen=True)
class ChoiceVarLV:
    """A pointer variable that may point into one of several buffers (``options``, each with
    ``offset`` None): the option in ``sel_var``, the offset (in elements) in ``offset_var``.
    ``hint`` as for ``PtrVarLV``."""

    options: tuple[Pointer, ...]
    sel_var: VarLV
    offset_var: VarLV
    hint: tuple | None = None


@dataclasses.dataclass(frozen=True)
class RecLV:
    """A record of mixed member types in memory: members are found lazily, by clang's layout."""

    address: RecordAddress
    layout: RecordLayout


@dataclasses.dataclass(frozen=True)
class PendingPtrLV:
    """A pointer variable declared without initializer (``T* p; ... p = &a[i];``): its buffer is
    fixed by its first assignment, which rebinds ``key`` to a ``PtrVarLV`` over ``offset_var``
    (declared where the pointer is, so that it is in scope wherever the pointer is)."""

    key: tuple
    name: str
    offset_var: VarLV
    hint: tuple | None = None


LValue = VarLV | BitsLV | PackLV | MemLV | ViewLV | PartLV | ChoiceLV | AggLV | UnionLV | PtrVarLV | ChoiceVarLV | RecLV | \
    PendingPtrLV

# --------------------------------------------------------------------------- bindings of names


@dataclasses.dataclass(frozen=True)
class ArrayBinding:
    """A C array (shared, local, constant or device): its IR buffer and C dimensions.

    An array of records of mixed member types (``layout.record``) is one buffer per member type:
    ``record`` is the address of its first element (``buffer`` names the first view).
    """

    buffer: str
    dims: tuple[int | None, ...]
    layout: ElemLayout
    record: RecordAddress | None = None
    stored: ScalarType | None = None  # a typed view of the buffer (another extern __shared__ array)

    def address(self, index: tuple[n.Expr, ...]) -> RecordAddress:
        """Where the row or element ``index`` (leading C indices) of an array of records starts."""
        assert self.record is not None and self.layout.record is not None
        address = self.record
        for m, i in enumerate(index):
            row = self.layout.record.size
            for d in self.dims[m + 1:]:
                row *= d or 1
            address = address.plus(i, row)
        return address

    @property
    def rows(self) -> bool:
        """Whether this is ``extern __shared__ T s[][C]``: the launch's dynamic shared buffer (one
        dimension, sized at launch) seen as rows of ``C`` elements, indexed through ``flat``."""
        return len(self.dims) > 1 and self.dims[0] is None

    def flat(self, index: tuple[n.Expr, ...]) -> tuple[n.Expr, ...]:
        """The buffer's index of C indices ``index`` (one per dimension): unchanged, except for
        rows of the dynamic shared buffer, where ``s[r][c]`` is element ``r * C + c``."""
        if not self.rows:
            return index
        total: n.Expr | None = None
        for m, i in enumerate(index):
            row = 1
            for d in self.dims[m + 1:]:
                row *= d or 1
            term = i if row == 1 else n.Binary("mul", i, n.Const(row, i.type), loc=i.loc)
            total = term if total is None else add_offsets(total, term)
        return (total,) if total is not None else ()

    def pointer(self, prefix: tuple[n.Expr, ...], offset: n.Expr | None) -> Pointer:
        """A pointer to element ``offset`` of row ``prefix``."""
        if self.rows:
            start = self.flat(prefix + (n.Const(0, I32),))[0] if prefix else None
            return Pointer(self.buffer, (), add_offsets(start, offset), self.layout, stored=self.stored)
        if self.record is None:
            return Pointer(self.buffer, prefix, offset, self.layout, stored=self.stored)
        return Pointer(self.buffer, (), offset, self.layout, self.address(prefix))


@dataclasses.dataclass(frozen=True)
class RefBinding:
    """A reference parameter of an inlined function, bound to the caller's lvalue."""

    target: LValue


@dataclasses.dataclass(frozen=True)
class ConstBinding:
    """A name whose value is a compile-time constant (``const int N = 64;`` at namespace scope)."""

    value: n.Expr


@dataclasses.dataclass(eq=False)
class RefResult:
    """Where ``return e`` of an inlined function returning a reference puts the place ``e`` names."""

    target: "LValue | None" = None
    # Several `return`s (frontend.lower.place_choice): the places they name, and the selector
    # variable the one taken sets.
    choices: "list | None" = None
    sel: "VarLV | None" = None


@dataclasses.dataclass(eq=False)
class ClosureResult:
    """Where ``return [s](float x) { ... };`` of an inlined function returning a lambda puts the
    closure it makes."""

    closure: "Closure | None" = None


@dataclasses.dataclass(frozen=True, eq=False)
class PlaceOf:
    """What an inlined call returning a reference gives ``lvalue`` (which asked for it): the place."""

    place: "LValue"


@dataclasses.dataclass(frozen=True, eq=False)
class Closure:
    """A lambda's closure object: its call operator and the bindings of the variables it captured
    (the caller's own bindings for captures by reference, copies made where the lambda was
    evaluated for captures by value)."""

    operator: Any  # the closure type's operator() (a clang cursor)
    captures: dict
    # `mutable`, with copies of its own (a lambda made in host code, frontend.closures): a copy
    # of it would need copies of those, which are not made; only the object itself is used.
    mutable: bool = False
    # The object `this` names in the body (a lambda capturing `this` in a member function).
    this: Any = None
    # The captures a `mutable` lambda made in device code holds by value (its own copies, which
    # its calls change): a copy of the closure copies them (``inlining.closure_copy``).
    owned: tuple = ()
    # A `mutable` `[*this]` lambda: ``this`` is its own copy of the object, which a copy of the
    # closure copies too.
    owns_this: bool = False
    # The declarations it captured by reference (cursors; None for a reference init-capture):
    # a function returning the lambda must not let them end with its call.
    by_reference: tuple = ()

    def shared_copy(self, error, c) -> "Closure":
        """The closure a copy of this one may be (itself: its copies never change), or refused."""
        if self.mutable or self.owned or self.owns_this:
            raise error("copies of a mutable lambda in device code are not supported (pass it by reference)", c)
        return self


Binding = LValue | ArrayBinding | RefBinding | ConstBinding | VarAddress | PointerTable | Closure | Accessor


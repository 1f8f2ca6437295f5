"""``KernelBuilder``: the state of one kernel's lowering; its parts are the sibling modules (one job each)."""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Iterator

import clang.cindex as ci

from polypy.errors import Loc, UserError
from polypy.ir import nodes as n
from polypy.ir.visitor import has_kind, walk
from polypy.ir.nodes import TABLE_BASE, TABLE_POOL
from polypy.ir.types import BOOL, I32, I64, U32, U64, PointerType, ScalarType

from frontend import ctypes_map as tm
from frontend.bases import is_dynamic
from frontend.clang_setup import child_cursors, cursor_loc, instantiation
from frontend.closures import closure_declaration, host_closure
from frontend.lower import accessors, calls, declarations, expressions, inlining, lambdas, places, statements
from frontend.lower import untyped as untyped_buffers
from frontend.lower.held_pointers import refuse_stores
from frontend.lower.accessors import accessor_type
from frontend.lower.cccl import refuse_in_device_code
from frontend.function_scan import scan
from frontend.lower.context import Frame, ModuleContext, NameAllocator, decl_key, function_body, \
    is_library_header
from frontend.lower.graph_conditional import check_handle_uses, is_condition_handle
from frontend.lower.loops import AssignmentIndex
from frontend.lower.param_arrays import runtime_indexed_arrays
from frontend.lower.pointer_choice import pointer_hint, pointer_variable
from frontend.lower.traps import stop_faulted_threads
from frontend.lower.webs import split_variable_webs
from frontend.values import (
    Aggregate, AggLV, ArrayBinding, Binding, ChoiceVarLV, LValue, MemLV, PendingPtrLV, Pointer, PointerChoice,
    PointerTable, PtrVarLV, RecLV, RecordAddress, Value, VarLV,
)


class KernelBuilder:
    """The state of one kernel's lowering (see ``frontend.lower``): the kernel's parameters and
    buffers, the frames of the functions being inlined, the block statements are emitted into,
    names, caches. The parts are modules of functions taking it as their first argument ``kb``
    (as JAX's ``backward_pass`` keeps its state in one environment); it keeps the small helpers
    every part uses (``error``, ``loc``, ``emit``, ``sub_block``, ``temp``...), the entry points
    below, and ``build``, which lowers the kernel's parameters and body."""

    def __init__(self, ctx: ModuleContext, cursor: ci.Cursor, name: str,
                 pointer_sets: dict[tuple, tuple[Pointer, ...]] | None = None):
        self.ctx = ctx
        # The buffers each pointer variable may point into, where an earlier round of lowering
        # found several (pointer_choice.py), and how many variables of each declaration were made.
        self.pointer_sets = pointer_sets or {}
        self.pointer_counts: dict[tuple, int] = {}
        self.discovered: dict[tuple, tuple[Pointer, ...]] = {}  # found pointing into more: lower again
        self.cursor = cursor
        self.kernel_name = name
        self.names = NameAllocator(set(ctx.names.taken))
        self.params: list[n.Param] = []
        # pointer parameters viewed with a stricter alignment: name -> (bytes, cast), ``Kernel.aligned``
        self.aligned: dict[str, tuple[int, Any]] = {}
        # pools of the pointers read from module records (held_pointers.py), ``Kernel.held_pointers``
        self.held_pointers: dict[tuple, n.HeldPointerSlots] = {}
        self.pointer_stores: list[tuple[str, Loc | None]] = []  # (u64 view, where): held_pointers.store_held
        self.volatile_params: list[str] = []  # pointer parameters to volatile elements (Kernel.volatile_params)
        self.source_params: list[n.SourceParam] = []
        self.buffers: dict[str, n.Buffer] = {}
        self.shared: dict[tuple, ArrayBinding] = {}
        self.dynamic_shared: ArrayBinding | None = None
        self.frames: list[Frame] = []
        self.call_sites: list[ci.Cursor] = []  # the calls being inlined, outermost first (``loc``)
        # Calls of functions returning a reference whose place (not value) ``lvalue`` asks for.
        self.place_calls: list[ci.Cursor] = []
        self.block: list[n.Stmt] = []
        self.outer_blocks: list[list[n.Stmt]] = []  # the blocks enclosing ``block`` (``sub_block``), outermost first
        self.mutated_cache: dict[tuple, set[tuple]] = {}
        self.closure_types: set[tuple] = set()  # the closure types of the lambdas lowered (lambdas.py)
        self.lowered_as_cache: dict[str, ci.Cursor] = {}  # polypy_lower_as targets by name (calls.py)
        self.loop_depth = 0
        self.locations: dict[ci.Cursor, ci.SourceLocation] = {}  # of binary operators (``location``)
        self.assignments = AssignmentIndex()  # which loop bodies assign a loop's counter or bound (loops.py)
        self.switch_markers: list[dict[int, n.Return]] = []  # the breaks of the switches being lowered
        self.goto_targets: dict[tuple, Any] = {}  # labels jumped to forward, by key: gotos.Target
        self.clock: str | None = None  # the thread's clock() counter, declared at the top once used
        self.launch_error: str | None = None  # the thread's last launch error (launches.py), likewise
        self.assert_flag: str | None = None  # set by a failed assert in a device function (printing.py)
        self.recursion = None  # the recursive group being lowered (recursion.Group), if any
        self.abandoned_locals: set[str] = set()  # local arrays of a lowering given up for a call machine

    # ------------------------------------------------------------------ utilities
    def error(self, message: str, cursor: ci.Cursor | None) -> UserError:
        return UserError(message, self.loc(cursor) if cursor is not None else None)

    def loc(self, cursor: ci.Cursor) -> Loc | None:
        """Where ``cursor`` is, or, for code of polypy's library headers whose definitions are
        inlined (``<cuda/barrier>``...: ``is_library_header``), the user's call that reached it:
        a barrier of ``bar.arrive_and_wait()`` or an assert of ``cuda::memcpy_async`` is reported
        at the call."""
        name, line, column, _ = instantiation(self.location(cursor), getattr(cursor, "_tu", None))
        if name is None:
            return None
        if is_library_header(name):
            for site in reversed(self.call_sites):
                if site.location.file is not None and not is_library_header(site.location.file.name):
                    return cursor_loc(site)
        return Loc(name, line, column)

    def location(self, cursor: ci.Cursor) -> ci.SourceLocation:
        """``cursor.location``. Clang places a binary operator where its left operand begins,
        and libclang finds that place by going down the chain of left operands each time it is
        asked: asked at every level of a left-deep sum, that is quadratic (a 30,000-term sum
        spent 8 s there). Here the chain is gone down once and each of its operators
        remembered."""
        binary = (ci.CursorKind.BINARY_OPERATOR, ci.CursorKind.COMPOUND_ASSIGNMENT_OPERATOR)
        if cursor.kind not in binary:
            return cursor.location
        chain: list[ci.Cursor] = []
        c: ci.Cursor | None = cursor
        while c is not None and c.kind in binary and c not in self.locations:
            chain.append(c)
            c = next(iter(child_cursors(c)), None)
        if c is None:  # no operand listed: libclang's own answer
            where = chain[-1].location
            chain.pop()
        else:  # where the first operand begins (its location may be elsewhere: a member's name)
            where = self.locations[c] if c in self.locations else c.extent.start
        for c in chain:
            self.locations[c] = where
        return self.locations.get(cursor, where)

    def emit(self, stmt: n.Stmt) -> None:
        self.block.append(stmt)

    @contextlib.contextmanager
    def sub_block(self) -> Iterator[list[n.Stmt]]:
        saved = self.block
        self.outer_blocks.append(saved)
        self.block = []
        try:
            yield self.block
        finally:
            self.block = saved
            self.outer_blocks.pop()

    @property
    def frame(self) -> Frame:
        return self.frames[-1]

    def bind(self, decl: ci.Cursor, binding: Binding) -> None:
        self.frame.env[decl_key(decl)] = binding

    def temp(self, ty: ScalarType, init: n.Expr | None, base: str, cursor: ci.Cursor | None) -> VarLV:
        name = self.names.fresh(base)
        self.emit(n.Decl(name, ty, init, loc=self.loc(cursor) if cursor is not None else None))
        return VarLV(name, ty)

    def binder(self, cursor: ci.Cursor) -> Callable[[n.Expr, str], n.Expr]:
        """``let(e, base)``: ``e`` held in a fresh local (named after ``base``, declared at
        ``cursor``) and read back; what IR builders such as ``FloatParts`` and ``MoreMath`` take."""
        loc = self.loc(cursor)

        def let(e: n.Expr, base: str) -> n.Expr:
            v = self.temp(e.type, e, base, cursor)
            return n.Var(v.name, v.type, loc=loc)
        return let

    # ------------------------------------------------------------------ entry points
    # The constructs any part may meet inside the one it lowers (an expression in a call's
    # argument, a statement in an inlined body, a place in an initializer): each part reaches them
    # through these, and imports the parts below it (lambdas, accessors, members, inlining,
    # cooperative, ...) directly, so that no two parts import each other.
    def statement(self, c: ci.Cursor) -> None:
        return statements.statement(self, c)

    def expr(self, c: ci.Cursor, *, discard: bool = False) -> Value | None:
        return expressions.expr(self, c, discard=discard)

    def scalar(self, c: ci.Cursor) -> n.Expr:
        return expressions.scalar(self, c)

    def condition(self, c: ci.Cursor) -> n.Expr:
        return expressions.condition(self, c)

    def read(self, lv: LValue, c: ci.Cursor) -> Value:
        return expressions.read(self, lv, c)

    def lookup(self, r: ci.Cursor, c: ci.Cursor) -> Binding:
        return expressions.lookup(self, r, c)

    def binding_value(self, b: Binding, c: ci.Cursor) -> Value:
        return expressions.binding_value(self, b, c)

    def in_memory(self, c: ci.Cursor) -> bool:
        return expressions.in_memory(self, c)

    def lvalue(self, c: ci.Cursor) -> LValue:
        return places.lvalue(self, c)

    def deref(self, ptr: Value | None, c: ci.Cursor) -> LValue:
        return places.deref(self, ptr, c)

    def pointer_element(self, ptr: Pointer, j: n.Expr | None, c: ci.Cursor) -> LValue:
        return places.pointer_element(self, ptr, j, c)

    def member_lv(self, base: LValue, member: str, c: ci.Cursor) -> LValue:
        return places.member_lv(self, base, member, c)

    def record_array(self, base: str, dims: tuple[int | None, ...], layout: tm.ElemLayout, space: str,
                     where) -> ArrayBinding:
        return places.record_array(self, base, dims, layout, space, where)

    def expand_record(self, rec: RecLV, c: ci.Cursor) -> AggLV:
        return places.expand_record(self, rec, c)

    def record_value(self, c: ci.Cursor, t: ci.Type | None, target: AggLV | None = None) -> Aggregate:
        return places.record_value(self, c, t, target)

    def assign(self, lv: LValue, value: Value | None, c: ci.Cursor) -> None:
        return places.assign(self, lv, value, c)

    def assign_pending(self, lv: PendingPtrLV, value: Value | None, c: ci.Cursor) -> PtrVarLV:
        return places.assign_pending(self, lv, value, c)

    def store(self, lv: LValue, value: n.Expr, c: ci.Cursor) -> None:
        return places.store(self, lv, value, c)

    def check_writable(self, buffer: str, c: ci.Cursor) -> None:
        return places.check_writable(self, buffer, c)

    def element_lv(self, binding: ArrayBinding, index: tuple[n.Expr, ...], where: ci.Cursor) -> LValue:
        return declarations.element_lv(self, binding, index, where)

    def call(self, c: ci.Cursor, discard: bool) -> Value | None:
        return calls.call(self, c, discard)

    def arg_value(self, a: ci.Cursor, fn: ci.Cursor, i: int) -> Value | None:
        return calls.arg_value(self, a, fn, i)

    def bit_intrinsic(self, name: str, args: list[n.Expr], c: ci.Cursor) -> n.Expr:
        return calls.bit_intrinsic(self, name, args, c)

    def texture_fetch(self, args: list[ci.Cursor], c: ci.Cursor) -> Value:
        return calls.texture_fetch(self, args, c)

    # ------------------------------------------------------------------ kernel entry
    def build(self) -> n.Kernel:
        body = function_body(self.cursor)
        if body is None:
            raise self.error(f"kernel '{self.cursor.spelling}' has no body", self.cursor)
        refuse_in_device_code(self.cursor, self.error)  # Thrust, CUB, libcu++ (frontend.cccl_refusals)
        self.frames.append(Frame(decl_key(self.cursor), self.cursor, {}, is_kernel=True))
        mutated = self.assigned_decls(self.cursor)
        for p in self.cursor.get_arguments():
            try:
                self.kernel_param(p, mutated)
            except UserError as e:
                if e.loc is None:  # raised by a type's layout (a union, ...): the parameter's place
                    e.loc = self.loc(p)
                raise
        statements.statement(self, body)
        stmts = tuple(self.block)
        if self.clock is not None:
            stmts = (n.Decl(self.clock, I64, n.Const(0, I64), loc=self.loc(self.cursor)),) + stmts
        if self.launch_error is not None:
            stmts = (n.Decl(self.launch_error, I32, n.Const(0, I32), loc=self.loc(self.cursor)),) + stmts
        if self.assert_flag is not None:
            stmts = (n.Decl(self.assert_flag, BOOL, n.Const(False, BOOL), loc=self.loc(self.cursor)),) + stmts
        self.frames.pop()
        refuse_stores(self, stmts)  # to module pointer variables (held_pointers.py)
        if self.abandoned_locals:
            used = {x.buffer for s in stmts for x in walk(s) if isinstance(x, (n.Load, n.Store, n.AtomicRMW))}
            buffers = tuple(b for b in self.buffers.values() if b.name in used or b.name not in self.abandoned_locals)
        else:
            buffers = tuple(self.buffers.values())
        kernel = n.Kernel(self.kernel_name, tuple(self.params), buffers, stmts, stage="gpu",
                          source_params=tuple(self.source_params), loc=self.loc(self.cursor))
        kernel = split_variable_webs(kernel, self.names.fresh)
        if has_kind(tuple(stmts), n.AssertFail):
            # A fault a barrier can follow stops the launch, not the thread (traps.py).
            flag = self.assert_flag or self.names.fresh("assert_failed")
            stopped = stop_faulted_threads(kernel, flag)
            if stopped is not kernel and self.assert_flag is None:
                decl = n.Decl(flag, BOOL, n.Const(False, BOOL), loc=self.loc(self.cursor))
                stopped = dataclasses.replace(stopped, body=(decl,) + stopped.body)
            kernel = stopped
        if self.volatile_params:
            kernel = dataclasses.replace(kernel, volatile_params=tuple(self.volatile_params))
        if self.aligned:
            kernel = dataclasses.replace(kernel, aligned=tuple((p, a, loc) for p, (a, loc) in self.aligned.items()))
        if self.held_pointers:
            kernel = dataclasses.replace(kernel, held_pointers=tuple(self.held_pointers.values()))
        return kernel

    def kernel_param(self, p: ci.Cursor, mutated: set[tuple]) -> None:
        name = p.spelling or f"arg{len(self.params)}"
        where = self.loc(p)
        t = p.type
        if tm.is_reference(t) or tm.is_array(t):
            raise UserError(f"kernel parameter '{name}' of type '{t.spelling}' is not supported", where)
        self.names.taken.add(name)
        if is_condition_handle(t):
            # A graph's conditional handle: a pointer to its condition here (the launcher casts
            # the handle), which cudaGraphSetConditional stores through (graph_conditional.py).
            check_handle_uses(self.cursor, p)
            self.params.append(n.Param(name, PointerType(U32), loc=where))
            self.source_params.append(n.SourceParam(name, t.spelling, (("", name),)))
            self.bind(p, PtrVarLV(Pointer(name, (), None, tm.ElemLayout(U32, 1, (("", 0),), "unsigned int")), None))
            return
        st = tm.scalar_type(t)
        if st is not None:
            self.params.append(n.Param(name, st, loc=where))
            self.source_params.append(n.SourceParam(name, _scalar_spelling(t), (("", name),)))
            self.bind(p, VarLV(name, st))
            if decl_key(p) in mutated:
                # Assigned in the kernel: work on a local copy so the parameter itself stays read-only.
                copy = self.temp(st, n.Var(name, st), name, p)
                self.bind(p, copy)
            return
        if tm.is_pointer(t) and tm.is_pointer(tm.pointee(t)):
            table = self.pointer_table(name, t, where)
            if decl_key(p) in mutated:
                raise UserError(f"pointer-to-pointer parameter '{name}' cannot be reassigned", where)
            members = (("", table.table), (TABLE_POOL, table.pool), (TABLE_BASE, table.base))
            self.source_params.append(n.SourceParam(name, t.spelling, members))
            self.bind(p, table)
            return
        if tm.is_pointer(t):
            # `void* p`: a buffer of the types the kernel casts it to (untyped.py); the host passes
            # `void*` (its canonical spelling, which the launchers recognize).
            untyped = untyped_buffers.buffer_layout(self.cursor, p) if untyped_buffers.is_void_pointer(t) else None
            binding = self.pointer_param(name, t, where, untyped)
            views = binding.record.views if binding.record is not None else ((None, name),)
            spelling = tm.canonical(t).spelling if untyped is not None else t.spelling
            self.source_params.append(n.SourceParam(name, spelling, tuple(("", v) for _, v in views)))
            self.bind(p, self.pointer_binding(binding, decl_key(p) in mutated, name, p, decl_key(p)))
            return
        accessor = accessor_type(t)
        if accessor is not None:
            accessors.accessor_param(self, p, accessor, mutated)
            return
        closure = closure_declaration(t)
        if closure is not None:  # a lambda made in host code (frontend.closures)
            lambdas.closure_param(self, p, host_closure(closure, self.ctx.closures), mutated)
            return
        if tm.is_record(t) and is_dynamic(t):
            raise UserError(f"kernel parameter '{name}' is an object of a class with virtual functions ('{t.spelling}'), "
                            "which CUDA does not allow to pass to a kernel", where)
        if tm.is_record(t):
            members: list[tuple[str, str]] = []
            fields: dict[str, LValue] = {}
            # Array members indexed at run time: one pointer parameter each (param_arrays.py).
            arrays = {} if decl_key(p) in mutated else {a: "" for a in runtime_indexed_arrays(self.cursor, p)}
            for leaf in tm.leaves(t):
                array = next((a for a in arrays if leaf.path.startswith(a + "[")
                              and leaf.path[len(a) + 1:-1].isdigit()), None)
                if array is not None and leaf.scalar is not None:
                    if not arrays[array]:
                        arrays[array] = self.names.fresh(name + array)
                        self.params.append(n.Param(arrays[array], PointerType(leaf.scalar, const=True), loc=where))
                        members.append((array, arrays[array]))
                    k = int(leaf.path[len(array) + 1:-1])
                    fields[leaf.path] = MemLV(arrays[array], (n.Const(k, I64),), leaf.scalar)
                    continue
                pname = self.names.fresh(name + leaf.path)
                members.append((leaf.path, pname))
                lst = leaf.scalar
                if lst is not None:
                    self.params.append(n.Param(pname, lst, loc=where))
                    fields[leaf.path] = VarLV(pname, lst)
                elif tm.is_pointer(leaf.ctype):
                    ptr = self.pointer_param(pname, leaf.ctype, where)
                    if ptr.record is not None:  # a record of mixed types: one IR parameter per view
                        members.pop()
                        members.extend((leaf.path, v) for _, v in ptr.record.views)
                    fields[leaf.path] = PtrVarLV(ptr, None)
                else:
                    raise UserError(f"member '{leaf.path}' of type '{leaf.ctype.spelling}' in kernel parameter "
                                    f"'{name}' is not supported", where)
            self.source_params.append(n.SourceParam(name, t.spelling, tuple(members)))
            self.bind(p, AggLV(fields, t.spelling))
            if any("][" in leaf.path for leaf in tm.leaves(t)) and \
                    not any(tm.is_pointer(leaf.ctype) for leaf in tm.leaves(t)):
                # `struct M { float a[3][3]; }`: each thread's copy in memory, so that `m.a[r][s]`
                # is an element at run-time indices (member_rows.py)
                self.bind(p, inlining.record_copy_in_memory(self, self.read(AggLV(fields, t.spelling), p), t, name, p))
            return
        raise UserError(f"kernel parameter '{name}' of type '{t.spelling}' is not supported", where)

    def pointer_param(self, name: str, t: ci.Type, where: Loc | None, layout: tm.ElemLayout | None = None
                      ) -> Pointer:
        """Pointer parameter ``name`` of type ``t``; ``layout``: its elements' (a ``void*``'s buffer)."""
        target = tm.pointee(t)
        if tm.is_pointer(target):
            raise UserError(f"pointer-to-pointer parameter '{name}' is not supported", where)
        ptype, layout = tm.pointer_param_type(t, where, layout)
        if layout.record is not None:
            # Records of mixed member types: one IR pointer parameter per member scalar type, all
            # holding the same address (``frontend.values.RecordAddress``).
            views = []
            if layout.record.overlaps:  # a union inside: the views share bytes, none is `restrict`
                ptype = dataclasses.replace(ptype, restrict=False)
            for st in layout.record.scalars:
                view = self.names.fresh(f"{name}_{st.name}")
                self.params.append(n.Param(view, dataclasses.replace(ptype, elem=st), loc=where))
                views.append((st, view))
            return Pointer(views[0][1], (), None, layout, RecordAddress(tuple(views)))
        self.params.append(n.Param(name, ptype, loc=where))
        if target.is_volatile_qualified():
            self.volatile_params.append(name)
        return Pointer(name, (), None, layout)

    def pointer_table(self, name: str, t: ci.Type, where: Loc | None) -> PointerTable:
        """A ``T**`` parameter (``frontend.values.PointerTable``): its table, pool and pool address."""
        target = tm.pointee(tm.pointee(t))
        st = tm.scalar_type(target)
        if st is None:
            raise UserError(f"pointer-to-pointer parameter '{name}' is supported for pointers to scalars only "
                            f"(not '{target.spelling}')", where)
        self.params.append(n.Param(name, PointerType(U64, const=True), loc=where))
        pool = self.names.fresh(name + "_pool")
        self.params.append(n.Param(pool, PointerType(st, const=target.is_const_qualified()), loc=where))
        base = self.names.fresh(name + "_base")
        self.params.append(n.Param(base, U64, loc=where))
        return PointerTable(name, pool, base, tm.ElemLayout(st, 1, (("", 0),), target.spelling))

    def pointer_binding(self, value: Pointer | PointerChoice, mutable: bool, name: str, cursor: ci.Cursor,
                        key: tuple) -> PtrVarLV | ChoiceVarLV:
        """A pointer variable (declaration ``key``) holding ``value``; ``mutable``: assigned later."""
        return pointer_variable(self, value, pointer_hint(self, key) if mutable else None, name, cursor)

    def assigned_decls(self, fn: ci.Cursor) -> set[tuple]:
        """Declarations of variables that ``fn`` assigns (``p = q``, ``p += k``, ``p++``)."""
        key = decl_key(fn)
        cached = self.mutated_cache.get(key)
        if cached is not None:
            return cached
        out = {decl_key(d) for d in scan(fn).assigned}  # (one walk for several questions: frontend.function_scan)
        self.mutated_cache[key] = out
        return out


def _scalar_spelling(t: ci.Type) -> str:
    """How a whole program's launcher spells a scalar kernel parameter: ``enum E`` for a named
    enumeration (the launch passes an ``E``, which an ``enum class`` converts to its integer type
    only by a cast: the launcher takes the enumeration and casts), else the source spelling."""
    canonical = t.get_canonical()
    if tm.is_function_pointer(canonical):  # the host passes its function pointer (the launcher casts)
        return f"decltype(({canonical.spelling})0)"
    if canonical.kind == ci.TypeKind.ENUM and "(" not in canonical.spelling:  # not "(unnamed enum at ...)"
        return "enum " + canonical.spelling.removeprefix("const ").removeprefix("volatile ")
    return t.spelling

"""Inlining device functions: parameters become fresh locals (or bindings of the caller's pointers
and references); ``return`` becomes an assignment to a result local plus structured control flow."""
from __future__ import annotations

import clang.cindex as ci

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.types import BOOL
from polypy.ir.visitor import walk
from polypy.passes.eliminate_returns import remove_returns

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.lower.context import Frame, decl_key, function_body, is_kernel_decl
from frontend.lower.helpers import _ArrayRef, _strip
from frontend.values import (
    Aggregate, AggLV, Binding, LValue, Pointer, PtrVarLV, RefBinding, Value, VarAddress,
)


class InliningLowering:
    """Part of ``KernelBuilder`` (see ``frontend.lower``)."""

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
        if self.assert_flag is not None and any(isinstance(x, n.Assign) and x.name == self.assert_flag
                                                for s in out for x in walk(s)):
            # A failed assert in the callee stops the thread: the caller returns too.
            self.emit(n.If(n.Var(self.assert_flag, BOOL), (n.Return(loc=self.loc(c)),), loc=self.loc(c)))
        if result is None or discard:
            return None
        return self.read(result, c)

    def bind_argument(self, p: ci.Cursor, a: ci.Cursor, fn: ci.Cursor, i: int, mutated: set[tuple],
                      c: ci.Cursor) -> Binding:
        pt = p.type
        name = p.spelling or f"arg{i}"
        if tm.is_reference(pt):
            target_t = tm.strip_reference(pt)
            if tm.is_array(target_t):
                raise self.error(f"parameter '{name}' of '{fn.spelling}' is a reference to an array "
                                 f"('{pt.spelling}'), which is not supported: declare it as a pointer to the "
                                 "elements", a)
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
            value = value.decay(self, a)
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

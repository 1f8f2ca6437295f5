"""Calls: math functions and CUDA intrinsics, atomics, warp shuffles and votes, refused calls;
calls of device functions go to ``inlining``."""
from __future__ import annotations

import pathlib
from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.errors import InternalError
from polypy.ir import nodes as n
from polypy.ir.atomics import atomic_result
from polypy.ir.mathfns import CUDA_ARITH_INTRINSICS, CUDA_MATH_NAMES, MATH_FUNCTIONS
from polypy.ir.types import BOOL, F32, F64, I32, I64, U32, PointerType

from frontend import ctypes_map as tm
from frontend.arith import convert, truth
from frontend.clang_setup import RUNTIME_DIR, preorder
from frontend.lower import accessors, cooperative, function_pointers, heap, inlining, members
from frontend.lower.bitcasts import BIT_CAST_CALLS, bit_cast_call, reinterpret
from frontend.lower.byte_copies import device_memcpy, device_memset
from frontend.lower.context import CK, function_body, is_prelude_decl
from frontend.lower.accessors import accessor_class
from frontend.lower.c10_lowp import c10_lowp_function, c10_lowp_primitive
from frontend.lower.groups import is_cooperative
from frontend.lower.helpers import ArrayRef, DEFAULT, strip
from frontend.lower.printing import assert_fail, device_printf
from frontend.lower.math_calls import fast_divide, float_part, more_math
from frontend.lower.more_math import MORE_MATH, REFUSED as REFUSED_MATH
from frontend.lower.norm_array import NORM_ARRAY, norm_array
from frontend.lower.null_tests import is_null_pointer
from frontend.lower.bessel_n import BESSEL_N, bessel_n
from frontend.lower.graph_conditional import set_conditional
from frontend.lower.textures import hidden_param, is_texture_call, texture_call
from frontend.lower.launches import device_launch, device_runtime_call, is_device_runtime_call
from frontend.lower.int_intrinsics import INT_INTRINSICS, int_intrinsic
from frontend.lower.simd_intrinsics import SIMD_INTRINSICS, simd_intrinsic
from frontend.lower.rounding import REFUSED as REFUSED_ROUNDING, ROUNDING_INTRINSICS, rounding_intrinsic
from frontend.lower.warp_collectives import WARP_COLLECTIVES, warp_collective
from frontend.lower.pointer_choice import atomic_choice
from frontend.values import Aggregate, ChoiceLV, MemLV, PartLV, Pointer, Value, ViewLV

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


_ATOMICS = {"atomicAdd": "add", "atomicSub": "sub", "atomicExch": "exch", "atomicMin": "min", "atomicMax": "max",
            "atomicAnd": "and", "atomicOr": "or", "atomicXor": "xor", "atomicInc": "inc", "atomicDec": "dec",
            "atomicCAS": "cas"}
# The scoped atomics (``atomicAdd_system``, ``atomicAdd_block``...) are the plain ones: with one
# device and no peer or host thread touching device memory during a launch, the system scope
# orders nothing more than the device scope, and the block scope promises atomicity only among
# the block's threads, which an atomic among all threads also gives (the plain atomic is a legal
# implementation of a weaker scope).
_ATOMICS.update({f"{name}{scope}": op for name, op in list(_ATOMICS.items()) for scope in ("_system", "_block")})
_SHUFFLES = {"__shfl_sync": "idx", "__shfl_up_sync": "up", "__shfl_down_sync": "down", "__shfl_xor_sync": "xor"}
_VOTES = {"__ballot_sync": "ballot", "__any_sync": "any", "__all_sync": "all", "__activemask": "activemask"}
_FENCES = {"__threadfence_block": "block", "__threadfence": "device", "__threadfence_system": "system"}
_FLOAT_PARTS = {"frexp": "frexp", "frexpf": "frexp", "ldexp": "ldexp", "ldexpf": "ldexp", "modf": "modf",
                "modff": "modf"}
_CACHED_LOADS = ("__ldg", "__ldcg", "__ldca", "__ldcs", "__ldlu", "__ldcv")
_CACHED_STORES = ("__stcg", "__stcs", "__stwb", "__stwt")
# What <math.h>'s INFINITY, HUGE_VAL(F) and NAN expand to (``__builtin_`` taken off), and their type.
_FLOAT_CONSTANTS = {"inff": F32, "inf": F64, "huge_valf": F32, "huge_val": F64, "nanf": F32, "nan": F64}
_REFUSED_CALLS: dict[str, str] = {}


def _in_std(fn: ci.Cursor) -> bool:
    """Whether ``fn`` is declared in namespace std (or an inline namespace of it: libstdc++'s ``__1``...)."""
    parent = fn.semantic_parent
    while parent is not None and parent.kind == CK.NAMESPACE:
        if parent.spelling == "std":
            return True
        parent = parent.semantic_parent
    return False


# ------------------------------------------------------------------ calls
def call(kb: KernelBuilder, c: ci.Cursor, discard: bool) -> Value | None:
    fn = c.referenced
    children = list(c.get_children())
    if any(ch.kind == CK.CALL_EXPR and ch.spelling in ("__cudaPushCallConfiguration", "cudaConfigureCall")
           for ch in children):
        return device_launch(kb, c, children, discard)
    if fn is not None and fn.kind == CK.CONVERSION_FUNCTION and tm.is_function_pointer(fn.result_type):
        raise kb.error("an object or lambda converted to a function pointer is not supported in device code", c)
    if children and function_pointers.is_pointer_call(children[0]):  # a dispatch (function_pointers.py)
        return function_pointers.pointer_call(kb, c, children[0], children[1:], discard)
    if fn is None:
        raise kb.error("calls through function pointers are not supported", c)
    if is_cooperative(fn):
        return cooperative.cooperative_call(kb, c, fn, children, discard)  # type: ignore[attr-defined]
    if fn.kind in (CK.CXX_METHOD, CK.CONSTRUCTOR) and accessor_class(fn.semantic_parent) is not None:
        return accessors.accessor_call(kb, c, fn, children, discard)  # type: ignore[attr-defined]
    c10 = c10_lowp_primitive(fn)
    if c10 == "half_neg":  # c10::Half's unary minus, as the device computes it (__hneg)
        operands = [ch for ch in children if ch.kind.is_expression() and
                    not (strip(ch).kind == CK.DECL_REF_EXPR and strip(ch).spelling == fn.spelling)]
        return inlining.inline(kb, c10_lowp_function(fn, c10, kb.lowered_as_cache), operands, c, discard)
    target = lowered_as(kb, fn, c) if c10 is None else c10_lowp_function(fn, c10, kb.lowered_as_cache)
    if target is not None:
        # A constructor or conversion of polypy's own headers (cuda_fp16.h) that names the
        # free function meaning it, or one of the two conversions of c10::Half / c10::BFloat16
        # (c10_lowp.py): that function, called with the constructor's arguments or with the
        # converted object.
        args = [ch for ch in children if ch.kind.is_expression()]
        if fn.kind == CK.CONVERSION_FUNCTION:  # `obj.operator float()`: the object
            member = strip(args[0]) if args else None
            if member is not None and member.kind == CK.MEMBER_REF_EXPR:
                args = list(member.get_children())[:1]
            if len(args) != 1:
                raise kb.error(f"'{fn.spelling}' without an object is not supported in device code", c)
        return inlining.inline(kb, target, args, c, discard)
    if fn.kind == CK.CONSTRUCTOR:
        if members.is_user_construction(kb, fn, c):
            return members.construct_value(kb, c, fn, _constructor_arguments(fn, children))
        return constructor(kb, c, fn, children)
    if fn.kind in (CK.CXX_METHOD, CK.CONVERSION_FUNCTION) and not fn.is_default_method() and \
            function_body(fn.get_definition() or fn) is not None:
        return members.method_call(kb, c, fn, children, discard)
    if fn.spelling.startswith("operator"):
        # An overloaded operator (clang lists the operands around the operator's name).
        operands = [ch for ch in children
                    if not (strip(ch).kind == CK.DECL_REF_EXPR and strip(ch).spelling == fn.spelling)]
        if fn.kind == CK.CXX_METHOD and fn.spelling == "operator=" and \
                (fn.is_copy_assignment_operator_method() or fn.is_move_assignment_operator_method()):
            lv = kb.lvalue(operands[0])
            kb.assign(lv, kb.expr(operands[1]), c)
            return None if discard else kb.read(lv, c)
        if fn.kind == CK.FUNCTION_DECL:
            return inlining.inline(kb, fn.get_definition() or fn, operands, c, discard)
        raise kb.error(f"'{fn.spelling}' as a member function is not supported in device code", c)
    if fn.kind not in (CK.FUNCTION_DECL, CK.FUNCTION_TEMPLATE):
        if fn.kind == CK.CXX_METHOD:
            raise kb.error(f"member function '{fn.spelling}' has no definition polypy can translate", c)
        raise kb.error("calls through function pointers are not supported", c)
    callee = children[0] if children else None
    if callee is not None and strip(callee).kind not in (CK.DECL_REF_EXPR, CK.OVERLOADED_DECL_REF) and \
            strip(callee).kind != CK.MEMBER_REF_EXPR:
        raise kb.error("calls through function pointers are not supported", c)
    args = children[1:]
    name = fn.spelling
    base = name[len("__builtin_"):] if name.startswith("__builtin_") else name
    if base == "printf":
        return device_printf(kb, args, c, discard)
    if base == "__assert_fail":
        return assert_fail(kb, args, c)
    if base in ("memcpy", "memset") and fn.location.is_in_system_header is False and \
            function_body(fn.get_definition() or fn) is None:
        return (device_memcpy if base == "memcpy" else device_memset)(kb, args, c, discard)
    if base in ("malloc", "free") and function_body(fn.get_definition() or fn) is None and len(args) == 1:
        return heap_call(kb, base, args[0], c)  # the device heap (heap.py)
    if base in _REFUSED_CALLS:
        raise kb.error(_REFUSED_CALLS[base], c)
    if base == "cudaGraphSetConditional" and is_prelude_decl(fn):
        return set_conditional(kb, args, c, discard)
    if is_device_runtime_call(base, fn):
        return device_runtime_call(kb, base, args, c, discard)
    if is_texture_call(base, fn):
        return texture_call(kb, base, fn, args, c)
    if base.startswith(("tex", "surf")) and fn.location.is_in_system_header:
        raise kb.error(f"'{base}' is not supported (texture and surface functions: docs/textures.md)", c)
    if base in ("move", "forward") and len(args) == 1 and _in_std(fn):
        # std::move(x) / std::forward<T>(x): x itself (an rvalue reference to it, read as a value).
        return kb.expr(args[0], discard=discard) if discard else kb.expr(args[0])
    if base == "is_constant_evaluated" and name != base or \
            base in ("is_constant_evaluated", "__is_constant_evaluated") and _in_std(fn):
        # `__builtin_is_constant_evaluated()` (libstdc++'s assertions in std::clamp...): what
        # polypy translates runs on the device, never in a constant evaluation (a constant
        # initializer takes clang's value)
        return None if discard else n.Const(False, BOOL, loc=kb.loc(c))
    body = function_body(fn.get_definition() or fn)
    if body is not None and base in ("min", "max") and _in_std(fn) and \
            (len(args) != 2 or tm.scalar_type(tm.strip_reference(fn.result_type)) is None):
        # std::min/max of records (their operator<) or with a comparator: the library's own
        # definition, inlined as written
        return inlining.inline(kb, fn.get_definition() or fn, args, c, discard)
    if body is None or (fn.location.is_in_system_header and (base in CUDA_MATH_NAMES or base in MORE_MATH)):
        # Declared by the prelude or the C library: a CUDA built-in, mapped by name.
        return intrinsic(kb, base, fn, args, c, discard)
    return inlining.inline(kb, fn.get_definition() or fn, args, c, discard)


def heap_call(kb: KernelBuilder, name: str, arg: ci.Cursor, c: ci.Cursor) -> Value | None:
    """Device ``malloc(size)`` (a block of the heap, as a ``HeapBlock`` until a cast types it) or
    ``free(p)``."""
    if name == "malloc":
        return heap.device_malloc(kb, kb.scalar(arg), c)
    if is_null_pointer(arg):
        return None  # free(NULL) does nothing
    heap.device_free(kb, heap.address_of(kb, kb.expr(arg), arg), c)
    return None


def lowered_as(kb: KernelBuilder, fn: ci.Cursor, c: ci.Cursor) -> ci.Cursor | None:
    """The free function that ``__attribute__((annotate("polypy_lower_as:NAME")))`` on a member
    of one of polypy's runtime headers names (its definition at namespace scope), or None."""
    if fn.kind not in (CK.CONSTRUCTOR, CK.CONVERSION_FUNCTION) or fn.location.file is None or \
            pathlib.Path(fn.location.file.name).resolve().parent != RUNTIME_DIR.resolve():
        return None
    name = next((a.spelling.split(":", 1)[1] for a in fn.get_children()
                 if a.kind == CK.ANNOTATE_ATTR and a.spelling.startswith("polypy_lower_as:")), None)
    if name is None:
        return None
    if name not in kb.lowered_as_cache:
        scope = fn.semantic_parent.semantic_parent if fn.semantic_parent is not None else None
        found = [d for d in (scope.get_children() if scope is not None else ())
                 if d.kind == CK.FUNCTION_DECL and d.spelling == name and d.is_definition()]
        if len(found) != 1:
            raise InternalError(f"'{fn.spelling}' is lowered as '{name}', which has {len(found)} definitions",
                                kb.loc(c))
        kb.lowered_as_cache[name] = found[0]
    return kb.lowered_as_cache[name]


def constructor(kb: KernelBuilder, c: ci.Cursor, fn: ci.Cursor, children: list[ci.Cursor]) -> Value:
    args = [ch for ch in children if ch.kind.is_expression()]
    rt = c.type
    if len(args) == 1 and (fn.is_copy_constructor() or fn.is_move_constructor()):
        return kb.record_value(args[0], rt)
    if tm.is_record(rt) and rt.get_canonical().spelling in ("dim3",):
        values = [kb.scalar(a) for a in args]
        vals = [convert(v, U32) for v in values] + [n.Const(1, U32)] * (3 - len(values))
        return Aggregate({".x": vals[0], ".y": vals[1], ".z": vals[2]}, "dim3")
    if tm.is_record(rt) and not args:
        return Aggregate({leaf.path: n.Const(0, leaf.scalar) for leaf in tm.leaves(rt) if leaf.scalar}, rt.spelling)
    raise kb.error(f"constructor of '{rt.spelling}' is not supported in device code", c)


def intrinsic(kb: KernelBuilder, name: str, fn: ci.Cursor, args: list[ci.Cursor], c: ci.Cursor,
              discard: bool) -> Value | None:
    loc = kb.loc(c)
    if name == "__syncthreads":
        if not discard:
            raise kb.error("__syncthreads() has no value", c)
        kb.emit(n.Barrier(loc=loc))
        return None
    if name in _ATOMICS:
        return atomic(kb, _ATOMICS[name], args, c, discard)
    if name in _SHUFFLES:
        return shuffle(kb, _SHUFFLES[name], fn, args, c)
    if name in _VOTES:
        return vote(kb, _VOTES[name], args, c)
    if name in cooperative.BLOCK_VOTES:
        return cooperative.block_vote(kb, name, args, c)
    if name in WARP_COLLECTIVES:
        return warp_collective(kb, name, fn, args, c)
    if name in _CACHED_LOADS:
        ptr = kb.expr(args[0])
        return kb.read(kb.deref(ptr if not isinstance(ptr, ArrayRef) else ptr.decay(kb), c), c)
    if name in _CACHED_STORES:
        ptr = kb.expr(args[0])
        lv = kb.deref(ptr if not isinstance(ptr, ArrayRef) else ptr.decay(kb), c)
        kb.assign(lv, kb.expr(args[1]), c)
        return None
    if name == "__syncwarp":
        if not discard:
            raise kb.error("__syncwarp() has no value", c)
        mask = arg_value(kb, args[0], fn, 0) if args else n.Const(0xFFFFFFFF, U32)
        if not isinstance(mask, n.Expr):
            raise kb.error("__syncwarp takes a mask", c)
        kb.emit(n.WarpSync(convert(mask, U32), loc=loc))
        return None
    if name in _FENCES:
        if not discard:
            raise kb.error(f"{name}() has no value", c)
        kb.emit(n.Fence(_FENCES[name], loc=loc))
        return None
    if name in ("clock", "clock64"):
        return clock_read(kb, name, c)
    if name == "__nanosleep":
        # PTX's nanosleep suspends the thread for a duration in [0, 2 t]: zero is one of the
        # allowed durations, and sleeping changes nothing the kernel computes. The argument
        # is still evaluated (it may load).
        kb.scalar(args[0])
        return None
    if name in _FLOAT_CONSTANTS:
        return float_constant(kb, name, args, c)
    if name == "__dp4a" and tm.scalar_type(c.type) == U32:
        name = "__dp4a_u"  # the unsigned overload
    if name in INT_INTRINSICS:
        return bit_intrinsic(kb, name, [kb.scalar(a) for a in args], c)
    if name in ROUNDING_INTRINSICS:
        return bit_intrinsic(kb, name, [kb.scalar(a) for a in args], c, rounding_intrinsic)
    if name in SIMD_INTRINSICS:
        return bit_intrinsic(kb, name, [kb.scalar(a) for a in args], c, simd_intrinsic)
    if name in REFUSED_ROUNDING:
        raise kb.error(f"'{name}': {REFUSED_ROUNDING[name]} is not supported", c)
    if name in BIT_CAST_CALLS:
        return bit_cast_call(name, [kb.scalar(a) for a in args], loc)
    if name == "__fdividef":
        return fast_divide(kb, args, c)
    if name in CUDA_ARITH_INTRINSICS:
        a, b = (kb.scalar(x) for x in args)
        return n.Binary(CUDA_ARITH_INTRINSICS[name], a, b, loc=loc)
    canonical = CUDA_MATH_NAMES.get(name) or CUDA_MATH_NAMES.get(name.replace("std::", ""))
    if canonical is not None:
        values = [arg_value(kb, a, fn, i) for i, a in enumerate(args)]
        rt = tm.scalar_type(tm.strip_reference(fn.result_type))  # std::max returns const T&
        if rt is None or not all(isinstance(v, n.Expr) for v in values):
            raise kb.error(f"unsupported use of '{name}'", c)
        parent = fn.semantic_parent
        if canonical in ("min", "max") and parent is not None and parent.spelling == "std" and len(values) == 2:
            # std::min/max are defined by comparison (unlike fmin/fmax for NaN and signed zeros).
            a_, b_ = values
            if canonical == "min":
                return n.Select(n.Binary("lt", b_, a_, loc=loc), b_, a_, loc=loc)  # type: ignore[arg-type]
            return n.Select(n.Binary("lt", a_, b_, loc=loc), b_, a_, loc=loc)  # type: ignore[arg-type]
        if canonical in ("min", "max") and rt.is_int:
            # The mixed overloads (`unsigned min(unsigned, int)`) compare in the result type.
            values = [convert(v, rt) for v in values]  # type: ignore[arg-type]
        if canonical in ("min", "max", "abs") and rt.is_float:
            canonical = {"min": "fmin", "max": "fmax", "abs": "fabs"}[canonical]
        fn_info = MATH_FUNCTIONS[canonical]
        if fn_info.domain == "float" and rt.is_float and not fn_info.returns_bool:
            # C++'s mixed overloads (`pow(float, int)` from <cmath>) compute in the result type.
            values = [convert(v, rt) for v in values]  # type: ignore[arg-type]
        if fn_info.domain == "float" and not all(v.type.is_float for v in values):  # type: ignore[union-attr]
            raise kb.error(f"'{name}' on integers is not supported", c)
        if len(values) != fn_info.arity:
            raise kb.error(f"'{name}' takes {fn_info.arity} argument(s)", c)
        return convert(n.Call(canonical, tuple(values), BOOL if fn_info.returns_bool else values[0].type, loc=loc), rt)  # type: ignore[union-attr,arg-type]
    if name in _FLOAT_PARTS:
        return float_part(kb, _FLOAT_PARTS[name], fn, args, c)
    if name in MORE_MATH:
        return more_math(kb, name, fn, args, c)
    if name in NORM_ARRAY:
        return norm_array(kb, name, fn, args, c)
    if name in BESSEL_N:
        return bessel_n(kb, name, fn, args, c)
    if name in REFUSED_MATH:
        raise kb.error(f"'{name}': {REFUSED_MATH[name]} is not supported in device code (docs/math.md)", c)
    if name in ("sincosf", "sincos", "__sincosf"):
        x = kb.scalar(args[0])
        for target_c, fname in ((args[1], "sin"), (args[2], "cos")):
            target = kb.expr(target_c)
            lv = kb.deref(target, c)
            kb.assign(lv, n.Call(fname, (x,), x.type, loc=loc), c)
        return None
    if fn.location.file is not None and not fn.location.is_in_system_header and not is_prelude_decl(fn) and \
            pathlib.Path(fn.location.file.name).resolve().parent != RUNTIME_DIR.resolve():
        # The user's declaration without a definition here: nvcc -rdc=true links it from
        # another file's device code; polypy inlines device functions, so it needs the body:
        # from a file given with --device-sources.
        elsewhere = kb.ctx.device_definitions.get(fn.get_usr()) if kb.ctx.device_definitions else None
        if elsewhere is not None:
            return inlining.inline(kb, elsewhere, args, c, discard)
        raise kb.error(f"device function '{name}' is defined in another translation unit (separate "
                       "compilation of device code, nvcc -rdc=true): polypy inlines device functions into "
                       "kernels, so it needs the definition: pass the file that defines it with "
                       "--device-sources FILE, or define it in a header this file includes", c)
    raise kb.error(f"call to '{name}', which has no definition polypy can translate", c)


def texture_fetch(kb: KernelBuilder, args: list[ci.Cursor], c: ci.Cursor) -> Value:
    """``tex1Dfetch(t, i)`` of a file-scope ``texture<T, 1, cudaReadModeElementType> t`` bound to
    linear memory: element ``i`` of the bound buffer, which the kernel receives as a hidden
    read-only pointer parameter named after the texture (launches pass ``t``'s binding)."""
    # The argument is a copy of the reference (texture<...> is passed by value): find the name.
    refs = [r for r in preorder(args[0]) if r.kind == CK.DECL_REF_EXPR]
    decl = refs[0].referenced if len(refs) == 1 else None
    if decl is None or decl.kind != CK.VAR_DECL or tm.is_pointer(decl.type) or \
            decl.type.get_canonical().spelling.split("<")[0].split("::")[-1] != "texture":
        raise kb.error("tex1Dfetch of a texture reference that is not a file-scope texture<...> variable is "
                       "not supported", args[0])
    t = decl.type.get_canonical()
    if t.get_num_template_arguments() != 3:
        raise kb.error("textures: unexpected texture type", args[0])
    # The read mode, as clang spells the type (defaults left out): element reads only.
    spelled = t.spelling[t.spelling.index("<") + 1:t.spelling.rindex(">")]
    if spelled.count(",") >= 2 and spelled.rsplit(",", 1)[1].strip() not in ("cudaReadModeElementType", "0"):
        raise kb.error("textures with cudaReadModeNormalizedFloat are not supported", args[0])
    elem = t.get_template_argument_type(0)
    layout = tm.elem_layout(elem, kb.loc(decl))
    pname = hidden_param(kb, ("pointer", decl.spelling), decl.spelling, PointerType(layout.scalar, const=True),
                         f"const {elem.spelling} *", f"(const {elem.spelling}*){decl.spelling}.polypy_ptr",
                         kb.loc(decl))
    index = kb.scalar(args[1])
    return kb.read(kb.pointer_element(Pointer(pname, (), None, layout), index, c), c)


def bit_intrinsic(kb: KernelBuilder, name: str, args: list[n.Expr], c: ci.Cursor, lower=int_intrinsic) -> n.Expr:
    """CUDA's integer intrinsics (``frontend.lower.int_intrinsics``) and rounding intrinsics
    (``frontend.lower.rounding``), written in IR by ``lower``, temporaries declared here."""
    loc = kb.loc(c)

    let = kb.binder(c)

    return lower(name, args, let, loc)


def clock_read(kb: KernelBuilder, name: str, c: ci.Cursor) -> n.Expr:
    """``clock()`` / ``clock64()``: the number of ``clock()`` / ``clock64()`` calls the thread has
    made so far, this one included (1, 2, 3 ...). CUDA's counter is a per-multiprocessor cycle
    count whose only promise a program can rely on is that, read by one thread, it does not go
    back (and that it moves on: busy-wait loops ``while (clock64() - t0 < n)`` end); a count of
    the reads keeps both and is the same on every backend and every run. Elapsed "cycles" a
    program prints are therefore call counts, not time."""
    loc = kb.loc(c)
    if kb.clock is None:
        kb.clock = kb.names.fresh("clock")
    kb.emit(n.Assign(kb.clock, n.Binary("add", n.Var(kb.clock, I64, loc=loc), n.Const(1, I64), loc=loc),
                     loc=loc))
    value = kb.temp(I64, n.Var(kb.clock, I64, loc=loc), "clk", c)
    return n.Var(value.name, I64, loc=loc)


def float_constant(kb: KernelBuilder, name: str, args: list[ci.Cursor], c: ci.Cursor) -> n.Expr:
    """``__builtin_inff()``, ``__builtin_huge_val()``, ``__builtin_nanf("")`` (what ``INFINITY``,
    ``HUGE_VAL`` and ``NAN`` expand to): the constant; a NaN only with the empty payload string."""
    ty = _FLOAT_CONSTANTS[name]
    if name.startswith("nan"):
        literals = [x for a in args for x in preorder(a) if x.kind == CK.STRING_LITERAL]
        if len(literals) != 1 or literals[0].spelling != '""':
            raise kb.error(f"'{name}' with a NaN payload is not supported (only {name}(\"\"))", c)
        return n.Const(float("nan"), ty, loc=kb.loc(c))
    return n.Const(float("inf"), ty, loc=kb.loc(c))


def arg_value(kb: KernelBuilder, a: ci.Cursor, fn: ci.Cursor, i: int) -> Value | None:
    v = kb.expr(a)
    if v is DEFAULT:
        params = list(fn.get_arguments())
        default = [ch for ch in params[i].get_children() if ch.kind.is_expression()]
        if not default:
            raise kb.error("missing argument", a)
        v = kb.expr(default[-1])
        st = tm.scalar_type(params[i].type)
        if st is not None and isinstance(v, n.Expr):
            v = convert(v, st)
    return v


def atomic(kb: KernelBuilder, op: str, args: list[ci.Cursor], c: ci.Cursor, discard: bool) -> Value | None:
    ptr = kb.expr(args[0])
    if isinstance(ptr, ArrayRef):
        ptr = ptr.decay(kb)
    lv = kb.deref(ptr, c)
    if isinstance(lv, ChoiceLV):  # into one of several buffers: the atomic on the one it points into
        operands = [kb.scalar(a) for a in args[1:]]
        operands = [v if isinstance(v, (n.Var, n.Const)) else n.Var(kb.temp(v.type, v, "arg", c).name, v.type)
                    for v in operands]  # evaluated once, before the branch
        return atomic_choice(kb, lv, lambda place: atomic_at(kb, op, place, operands, c, discard), discard, c)
    return atomic_at(kb, op, lv, [kb.scalar(a) for a in args[1:]], c, discard)


def atomic_at(kb: KernelBuilder, op: str, lv, operands: list[n.Expr], c: ci.Cursor, discard: bool) -> n.Expr | None:
    """The atomic ``op`` on place ``lv`` with ``operands`` (values)."""
    if isinstance(lv, PartLV):
        raise kb.error(f"atomics through a pointer that views {lv.stored.c_name} memory as {lv.type.c_name} "
                       "(another size) are not supported", c)
    seen = lv.type if isinstance(lv, (MemLV, ViewLV)) else None
    if isinstance(lv, ViewLV):
        # Through a typed view (`atomicCAS((int*)&x[i], ...)` of a float buffer): an atomic on
        # the buffer itself, operands and result bit cast. Exact for the operations that only
        # move bits (cas compares bits, see ``AtomicRMW``), and for the ones two's complement
        # computes alike for both signednesses of one width; the others would compute with
        # the stored type's meaning of the bits.
        # A float seen in integer memory (a union's member in its pool, `(float*)ints`): its
        # arithmetic is the float's, by compare-and-swap on the bits (never an integer add).
        signless = ("add", "sub", "and", "or", "xor")
        if lv.mem.type.is_int and (op in ("min", "max", "inc", "dec") or (op in ("add", "sub") and lv.type.is_float)):
            return atomic_loop(kb, op, lv, convert(operands[0], lv.type), c, discard)
        if not (op in ("cas", "exch") or (op in signless and lv.mem.type.is_int and lv.type.is_int)):
            raise kb.error(f"this atomic operation through a pointer that views {lv.mem.type.c_name} memory "
                           f"as {lv.type.c_name} is not supported (only atomicCAS and atomicExch act on the "
                           "bits alone)", c)
        lv = lv.mem
    if not isinstance(lv, MemLV) or seen is None:
        raise kb.error("atomics need an address in global or shared memory", c)
    kb.check_writable(lv.buffer, c)
    loc = kb.loc(c)
    compare = None
    if op == "cas":
        compare = reinterpret(convert(operands[0], seen), lv.type, loc)
        value = reinterpret(convert(operands[1], seen), lv.type, loc)
    else:
        value = reinterpret(convert(operands[0], seen), lv.type, loc)
    dest = None
    if not discard:
        dest = kb.temp(lv.type, None, "old", c)
    kb.emit(n.AtomicRMW(op, lv.buffer, lv.index, value, dest.name if dest else None, compare, loc=loc))
    return reinterpret(n.Var(dest.name, dest.type), seen, loc) if dest is not None else None


def atomic_loop(kb: KernelBuilder, op: str, lv: ViewLV, value: n.Expr, c: ci.Cursor, discard: bool) -> n.Expr | None:
    """``atomicInc((unsigned*)&int_buf[i], m)`` and the other atomics whose result depends on
    the signedness: a compare-and-swap loop on the buffer that computes with the view's
    meaning of the bits (CUDA's definition of the operation, ``atomic_result``)::

        old = atomic.add buf[i], 0               (an atomic read)
        while (true) {
          got = atomic.cas buf[i], old, bits(op(view(old), value))
          if (got == old) break
          old = got
        }
    """
    mem, loc = lv.mem, kb.loc(c)
    kb.check_writable(mem.buffer, c)
    old = kb.temp(mem.type, None, "old", c)
    got = kb.temp(mem.type, None, "got", c)
    old_v, got_v = n.Var(old.name, mem.type, loc=loc), n.Var(got.name, mem.type, loc=loc)
    kb.emit(n.AtomicRMW("add", mem.buffer, mem.index, n.Const(0, mem.type), old.name, loc=loc))
    new = reinterpret(atomic_result(op, reinterpret(old_v, lv.type, loc), value, None, lv.type), mem.type, loc)
    body = (n.AtomicRMW("cas", mem.buffer, mem.index, new, got.name, old_v, loc=loc),
            n.If(n.Binary("eq", got_v, old_v, loc=loc), (n.Break(loc=loc),), loc=loc),
            n.Assign(old.name, got_v, loc=loc))
    kb.emit(n.While(n.Const(True, BOOL), body, loc=loc))
    return None if discard else reinterpret(old_v, lv.type, loc)


def shuffle(kb: KernelBuilder, mode: str, fn: ci.Cursor, args: list[ci.Cursor], c: ci.Cursor) -> n.Expr:
    values = [arg_value(kb, a, fn, i) for i, a in enumerate(args)]
    mask, value, lane, width = values  # type: ignore[misc]
    for v in values:
        if not isinstance(v, n.Expr):
            raise kb.error("warp shuffles take numbers", c)
    dest = kb.temp(value.type, None, "shfl", c)  # type: ignore[union-attr]
    kb.emit(n.Shuffle(dest.name, mode, value, lane, width, mask, loc=kb.loc(c)))  # type: ignore[arg-type]
    return n.Var(dest.name, dest.type)


def vote(kb: KernelBuilder, mode: str, args: list[ci.Cursor], c: ci.Cursor) -> n.Expr:
    if mode == "activemask":
        mask: n.Expr = n.Const(0xFFFFFFFF, U32)
        pred: n.Expr = n.Const(True, BOOL)
    else:
        mask = convert(kb.scalar(args[0]), U32)
        pred = truth(kb.scalar(args[1]))
    dt = U32 if mode in ("ballot", "activemask") else I32
    dest = kb.temp(dt, None, "vote", c)
    kb.emit(n.Vote(dest.name, mode, pred, mask, loc=kb.loc(c)))
    return n.Var(dest.name, dt)


def _constructor_arguments(fn: ci.Cursor, children: list[ci.Cursor]) -> list[ci.Cursor]:
    """The arguments of a call of constructor ``fn`` (``children``: the call's). Clang lists the
    value template arguments written in the type's name first (``cuda::aligned_size_t<alignof(T)>{n}``:
    ``alignof(T)``, then ``n``); a constructor without default arguments takes exactly as many
    arguments as it has parameters, so the leading extra expressions after the template's name are
    those template arguments."""
    exprs = [ch for ch in children if ch.kind.is_expression()]
    params = list(fn.get_arguments())
    extra = len(exprs) - len(params)
    if extra <= 0 or not any(ch.kind == CK.TEMPLATE_REF for ch in children) or \
            any(any(g.kind.is_expression() for g in p.get_children()) for p in params):  # a default argument
        return exprs
    return exprs[extra:]

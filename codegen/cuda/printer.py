"""GPU-form IR -> CUDA C++ source (what ``polypy grad --emit cuda`` writes).

The output is meant to be read and to go back through our own frontend and through ``nvcc -c``:
one statement per line, the IR's names, C types spelled out, a comment with the source line of
each kernel. Semantics are those of the IR: narrow integer results are cast back to their type
(C promotes them to ``int``), float literals carry their precision, math functions get the
precision-specific CUDA name (``expf`` / ``exp``).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Mapping, Sequence

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.cexpr import ATOM, UNARY, CExprPrinter, right_operand
from polypy.ir.mathfns import bit_cast_spelling
from polypy.ir.printer import format_const as ir_format_const
from polypy.ir.printf import c_library_format, c_string
from polypy.ir.rewrite import rename_locals
from polypy.ir.types import PointerType, ScalarType
from polypy.ir.visitor import walk_only
from polypy.stack import on_big_stack

_ATOMICS = {
    "add": "atomicAdd", "sub": "atomicSub", "max": "atomicMax", "min": "atomicMin", "exch": "atomicExch",
    "cas": "atomicCAS", "and": "atomicAnd", "or": "atomicOr", "xor": "atomicXor", "inc": "atomicInc",
    "dec": "atomicDec",
}
_SHUFFLES = {"idx": "__shfl_sync", "up": "__shfl_up_sync", "down": "__shfl_down_sync", "xor": "__shfl_xor_sync"}
_VOTES = {"ballot": "__ballot_sync", "any": "__any_sync", "all": "__all_sync"}
# Functions whose CUDA spelling does not follow "name" / "namef".
_PLAIN_NAMES = {"isnan", "isinf", "isfinite", "signbit"}
_INT_FUNCS = {"min": "min", "max": "max", "abs": "abs"}


def c_type(t: ScalarType) -> str:
    return t.c_name


def param_decl(p: n.Param) -> str:
    if isinstance(p.ptype, PointerType):
        const = "const " if p.ptype.const else ""
        restrict = " __restrict__" if p.ptype.restrict else ""
        return f"{const}{c_type(p.ptype.elem)}*{restrict} {p.name}"
    return f"{c_type(p.ptype)} {p.name}"


def format_const(c: n.Const) -> str:
    t = c.ctype
    if t.is_bool:
        return "true" if c.value else "false"
    if t.is_int:
        v = int(c.value)
        if t.name == "i32":
            return str(v) if v != -(1 << 31) else "(-2147483647 - 1)"
        if t.name == "u32":
            return f"{v}u"
        if t.name == "i64":
            return f"{v}ll" if v != -(1 << 63) else "(-9223372036854775807ll - 1)"
        if t.name == "u64":
            return f"{v}ull"
        return f"(({c_type(t)}){v})"
    value = float(c.value)
    suffix = "f" if t.name == "f32" else ""
    if math.isnan(value):
        return f"({'0.0f' if suffix else '0.0'} / {'0.0f' if suffix else '0.0'})"
    if math.isinf(value):
        one = "1.0" + suffix
        return f"({'-' if value < 0 else ''}{one} / {'0.0' + suffix})"
    return ir_format_const(c)  # finite floats are spelled as in the IR text: `1.5f`, `0.1`


def call_name(e: n.Call) -> str:
    """The CUDA function for canonical ``e.fn`` at the precision of its arguments."""
    fn = e.fn
    ty = e.args[0].type
    if fn in _INT_FUNCS:
        if fn == "abs" and ty.bits == 64:
            return "llabs"
        return _INT_FUNCS[fn]
    if fn in _PLAIN_NAMES:
        return fn
    if fn == "saturate":
        return "__saturatef"  # f32 only; f64 is printed as fmin(fmax(x, 0.0), 1.0)
    return fn + ("f" if ty.name == "f32" else "")


class CudaExprPrinter(CExprPrinter):
    """Expressions in CUDA C++. Operands of unary operators and casts are parenthesized unless
    they are atoms (``-(-x)``, ``(int)(-x)``); a ``?:`` inside a ``?:`` is parenthesized."""

    promoted = frozenset({"i8", "u8", "i16", "u16"})  # bool `&`, `|`, `^` give 0 or 1, as bool would

    def const(self, c: n.Const) -> tuple[str, int]:
        text = format_const(c)
        return text, (UNARY if text.startswith("-") else ATOM)

    def unknown(self, e: n.Expr) -> tuple[str, int]:
        raise UserError(f"cannot print {type(e).__name__} as CUDA", e.loc)

    def extra_parens(self, child: n.Expr, text: str, level: int, parent: n.Expr) -> bool:
        if isinstance(parent, (n.Unary, n.Cast)):
            return level <= UNARY
        return isinstance(parent, n.Select) and isinstance(child, n.Select)

    def call(self, e: n.Call) -> tuple[str, int]:
        if e.fn == "texture":
            raise UserError("texture fetches cannot be written back as CUDA source (polypy grad)", e.loc)
        if e.fn == "bitcast":
            return self.bit_cast(e)
        if e.fn == "saturate" and e.args[0].type.name != "f32":
            return f"fmin(fmax({self.expr(e.args[0])}, 0.0), 1.0)", ATOM
        return self.call_text(call_name(e), e.args), ATOM

    def bit_cast(self, e: n.Call) -> tuple[str, int]:
        """The intrinsic back (``__float_as_int(x)``); CUDA has none for ``unsigned long long``,
        which goes through ``long long`` (a conversion that keeps the bits)."""
        x = e.args[0]
        name, source, target = bit_cast_spelling(x.type, e.rtype)
        arg = self.expr(x) if x.type == source else f"({self.type_name(source)}){self.operand(x, UNARY, e)}"
        text = f"{name}({arg})"
        if target != e.rtype:
            return f"({self.type_name(e.rtype)}){text}", UNARY
        return text, ATOM

    def binary(self, e: n.Binary) -> tuple[str, int]:
        if e.op == "rem" and e.type.is_float:  # C has no % on floating types; the IR's is fmod
            return self.call(n.Call("fmod", (e.a, e.b), e.type))
        return super().binary(e)


_EXPR = CudaExprPrinter()
_top = _EXPR.expr  # an expression in a position that takes any expression but a comma


def format_expr(e: n.Expr) -> str:
    return _EXPR.expr(e)


class _Printer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.labels = 0

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def block(self, stmts: tuple[n.Stmt, ...], depth: int, continue_label: str | None = None) -> None:
        for s in stmts:
            self.stmt(s, depth, continue_label)

    def stmt(self, s: n.Stmt, depth: int, continue_label: str | None = None) -> None:
        if isinstance(s, n.Decl):
            init = f" = {_top(s.init)}" if s.init is not None else ""
            self.emit(depth, f"{c_type(s.vtype)} {s.name}{init};")
        elif isinstance(s, n.Assign):
            self.emit(depth, f"{s.name} = {_top(s.value)};")
        elif isinstance(s, n.Store):
            index = "".join(f"[{format_expr(i)}]" for i in s.index)
            self.emit(depth, f"{s.buffer}{index} = {_top(s.value)};")
        elif isinstance(s, n.AtomicRMW):
            index = "".join(f"[{format_expr(i)}]" for i in s.index)
            args = [f"&{s.buffer}{index}"]
            if s.compare is not None:
                args.append(_top(s.compare))
            args.append(_top(s.value))
            call = f"{_ATOMICS[s.op]}({', '.join(args)})"
            if s.op == "cas" and s.value.type.is_float:  # CUDA's atomicCAS is on integers: the bits
                assert s.compare is not None
                if s.value.type.bits == 32:
                    bits, to_bits, back = "int", "__float_as_int", "__int_as_float"
                else:
                    bits, to_bits, back = ("unsigned long long", "(unsigned long long)__double_as_longlong",
                                           "__longlong_as_double((long long)")
                cas = (f"atomicCAS(({bits}*)&{s.buffer}{index}, {to_bits}({_top(s.compare)}), "
                       f"{to_bits}({_top(s.value)}))")
                call = f"{back}({cas})" if s.value.type.bits == 32 else f"{back}{cas})"
            self.emit(depth, f"{s.dest} = {call};" if s.dest is not None else f"{call};")
        elif isinstance(s, n.Barrier):
            self.emit(depth, "__syncthreads();")
        elif isinstance(s, n.WarpSync):
            self.emit(depth, f"__syncwarp({_top(s.mask)});")
        elif isinstance(s, n.Fence):
            self.emit(depth, {"block": "__threadfence_block();", "device": "__threadfence();",
                              "system": "__threadfence_system();"}[s.scope])
        elif isinstance(s, n.Print) and s.strings:
            raise UserError("printf '%s' of a character array cannot be written back as CUDA source (polypy grad "
                            "--emit cuda); --emit cpp translates it", s.loc)
        elif isinstance(s, n.Print):
            args = "".join(f", {_top(a)}" for a in s.args)
            self.emit(depth, f"printf({c_string(c_library_format(s.format))}{args});")
        elif isinstance(s, n.AssertFail) and s.fault == "misaligned":
            # On a GPU the access itself faults (cudaErrorMisalignedAddress); the IR holds the
            # check, not the vector access, and an assert would fail with another error.
            raise UserError("a typed view at an offset checked at run time cannot be written back as CUDA source "
                            "(polypy grad --emit cuda); --emit cpp translates it", s.loc)
        elif isinstance(s, n.AssertFail):
            self.emit(depth, f"__assert_fail({c_string(s.text)}, {c_string(s.file)}, {s.line}, "
                             f"{c_string(s.function)});")
        elif isinstance(s, n.Shuffle):
            args = ", ".join(_top(a) for a in (s.mask, s.value, s.lane, s.width))
            self.emit(depth, f"{s.dest} = {_SHUFFLES[s.mode]}({args});")
        elif isinstance(s, n.Vote):
            if s.mode == "activemask":
                self.emit(depth, f"{s.dest} = __activemask();")
            else:
                self.emit(depth, f"{s.dest} = {_VOTES[s.mode]}({_top(s.mask)}, {_top(s.pred)});")
        elif isinstance(s, n.If):
            self.emit(depth, f"if ({_top(s.cond)}) {{")
            self.block(s.then, depth + 1, continue_label)
            orelse = s.orelse
            while len(orelse) == 1 and isinstance(orelse[0], n.If):
                inner = orelse[0]
                self.emit(depth, f"}} else if ({_top(inner.cond)}) {{")
                self.block(inner.then, depth + 1, continue_label)
                orelse = inner.orelse
            if orelse:
                self.emit(depth, "} else {")
                self.block(orelse, depth + 1, continue_label)
            self.emit(depth, "}")
        elif isinstance(s, n.For):
            step = f"{s.var}++" if isinstance(s.step, n.Const) and s.step.value == 1 else f"{s.var} += {_top(s.step)}"
            self.emit(depth, f"for ({c_type(s.vtype)} {s.var} = {_top(s.start)}; "
                             f"{s.var} < {_EXPR.expr(s.stop, right_operand('lt'))}; {step}) {{")
            self.block(s.body, depth + 1)
            self.emit(depth, "}")
        elif isinstance(s, n.While):
            self._while(s, depth)
        elif isinstance(s, n.Break):
            self.emit(depth, "break;")
        elif isinstance(s, n.Continue):
            self.emit(depth, f"goto {continue_label};" if continue_label else "continue;")
        elif isinstance(s, n.Return):
            self.emit(depth, "return;")
        else:
            raise UserError(f"cannot print {type(s).__name__} as CUDA", s.loc)

    def _while(self, s: n.While, depth: int) -> None:
        if not s.update:
            self.emit(depth, f"while ({_top(s.cond)}) {{")
            self.block(s.body, depth + 1)
            self.emit(depth, "}")
            return
        if all(isinstance(u, n.Assign) for u in s.update):
            update = ", ".join(f"{u.name} = {_top(u.value)}" for u in s.update)  # type: ignore[union-attr]
            self.emit(depth, f"for (; {_top(s.cond)}; {update}) {{")
            self.block(s.body, depth + 1)
            self.emit(depth, "}")
            return
        # General update block: ``continue`` must still run it.
        self.labels += 1
        label = f"polypy_continue_{self.labels}"
        self.emit(depth, f"while ({_top(s.cond)}) {{")
        self.block(s.body, depth + 1, continue_label=label)
        self.emit(depth, f"{label}:;")
        self.block(s.update, depth + 1)
        self.emit(depth, "}")

    def buffer(self, b: n.Buffer, depth: int) -> None:
        if b.space == "shared":
            if b.shape is None:
                self.emit(depth, f"extern __shared__ {c_type(b.elem)} {b.name}[];")
            else:
                self.emit(depth, f"__shared__ {c_type(b.elem)} {b.name}{_dims(b)};")
        elif b.space == "local":
            self.emit(depth, f"{c_type(b.elem)} {b.name}{_dims(b)};")

    def kernel(self, k: n.Kernel, capacities: Sequence[tuple[n.Expr, str]] = ()) -> None:
        if k.stage != "gpu":
            raise UserError(f"kernel '{k.name}' is in {k.stage} form; the CUDA printer needs GPU form", k.loc)
        if k.loc is not None:
            self.emit(0, f"// from {k.loc}")
        params = ", ".join(param_decl(p) for p in k.params)
        self.emit(0, f"__global__ void {k.name}({params})")
        self.emit(0, "{")
        for b in k.buffers:
            self.buffer(b, 1)
        self.capacity_checks(capacities)
        self.block(k.body, 1)
        self.emit(0, "}")

    def capacity_checks(self, capacities: Sequence[tuple[n.Expr, str]]) -> None:
        """Each thread checks, before it runs, that what it needs of each fixed capacity
        ``(need, MACRO)`` fits: a device-side assertion failure otherwise, the way ``assert``
        fails (``__assert_fail`` directly, so ``-DNDEBUG`` keeps the check). The launch then
        fails with ``cudaErrorAssert`` instead of running past the end of per-thread arrays.
        Only nvcc's device pass sees it: polypy's own frontend, which reads kernels as nvcc's
        device pass does when a file names ``__CUDA_ARCH__`` (``frontend.device_pass``), has no
        device-side assert, and skips it by its prelude's guard ``POLYPY_DEVICE_H``."""
        if not capacities:
            return
        self.lines.append("#if defined(__CUDA_ARCH__) && !defined(POLYPY_DEVICE_H)")
        for need, name in capacities:
            text = format_expr(need)
            message = (f"polypy: the tapes of this launch need {name} >= ({text}), "
                       f"compile with a larger -D{name}=N")
            message = message.replace("\\", "\\\\").replace('"', '\\"')
            self.emit(1, f"if (({text}) > {name})")
            self.emit(2, f'__assert_fail("{message}", __FILE__, __LINE__, __func__);')
        self.lines.append("#endif")


def _dims(b: n.Buffer) -> str:
    return "".join(f"[{format_expr(d)}]" for d in (b.shape or ()))


def _global(b: n.Buffer) -> str:
    qualifier = "__constant__" if b.space == "constant" else "__device__"
    init = ""
    if b.init is not None:
        init = " = {" + ", ".join(format_const(n.Const(v, b.elem)) for v in b.init) + "}"
    return f"{qualifier} {c_type(b.elem)} {b.name}{_dims(b)}{init};"


@on_big_stack
def print_cuda_kernel(kernel: n.Kernel, *, capacities: Sequence[tuple[n.Expr, str]] = ()) -> str:
    """``kernel`` as CUDA. ``capacities``: ``(need, MACRO)`` pairs, a per-thread extent ``need``
    (an expression of the arguments and thread indices) that a fixed capacity ``MACRO`` stands
    for; each thread checks ``need <= MACRO`` on entry (see ``_Printer.capacity_checks``)."""
    p = _Printer()
    p.kernel(_unshadowed(kernel), capacities)
    return "\n".join(p.lines) + "\n"


def _called(kernel: n.Kernel) -> set[str]:
    """The functions the printed kernel calls by name (its math, and those the printer spells)."""
    names = {"fmod", "fmin", "fmax", "__saturatef"}
    for e in walk_only(kernel, n.Call):
        names.add(call_name(e) if e.args else e.fn)
    return names


def _unshadowed(kernel: n.Kernel) -> n.Kernel:
    """``kernel`` with each local named like a function it calls renamed (``erfc_``): the
    expansions of the frontend name their temporaries after what they compute (``normcdf``
    holds ``erfc = erfc(z)``), and C++ looks a call's name up among the locals first, so the
    local would hide the function (nvcc: "expression preceding parentheses of apparent call
    must have (pointer-to-) function type")."""
    called = _called(kernel)
    params = {p.name for p in kernel.params}
    locals_ = {x.name if isinstance(x, n.Decl) else x.var for x in walk_only(kernel, n.Decl, n.For)}
    taken = params | locals_ | called | {b.name for b in kernel.buffers}
    mapping: dict[str, str] = {}
    for name in sorted((locals_ - params) & called):
        new = name + "_"
        while new in taken:
            new += "_"
        taken.add(new)
        mapping[name] = new
    if not mapping:
        return kernel
    return dataclasses.replace(kernel, body=rename_locals(kernel.body, mapping))


@on_big_stack
def print_cuda_module(module: n.Module, kernels: tuple[n.Kernel, ...] | None = None, *,
                      capacities: Mapping[str, Sequence[tuple[n.Expr, str]]] | None = None) -> str:
    """Module arrays and kernels (all of the module's, or ``kernels``) as one CUDA source;
    ``capacities``: by kernel name, as for ``print_cuda_kernel``."""
    lines = []
    ks = module.kernels if kernels is None else kernels
    for g in module.globals:
        lines.append(_global(g))
    if module.globals:
        lines.append("")
    for k in ks:
        lines.append(print_cuda_kernel(k, capacities=(capacities or {}).get(k.name, ())))
    return "\n".join(lines)

"""CPU-form IR -> C/C++ statements and expressions (a Python visitor, no template logic).

C semantics are exact for every IR operation the IR defines:

* operands of IR binary operations have equal types, so C's usual arithmetic conversions do
  nothing to ``int``/``unsigned``/``long long``/floating operands. Types narrower than ``int``
  (``i8``, ``u8``, ``i16``, ``u16``, ``bool``) are promoted by C, so their results are cast back
  to the IR type, and unsigned narrow arithmetic that can leave ``int``'s range (``u16 * u16``,
  shifts) is done in ``unsigned int``;
* comparisons of equal types, ``/`` and ``%`` truncating, ``>>`` arithmetic on signed values
  (GCC and Clang define it so) are C's own; ``%`` on floating values is ``fmod``;
* signed ``int``/``long long`` overflow is left as in the CUDA source (undefined in C and CUDA);
* math functions by precision (``expf`` for f32, ``exp`` for f64; ``rsqrt`` is ``1/sqrt``;
  ``exp`` is the prelude's ``polypy_expf``/``polypy_exp`` and f32 ``tanh`` its ``polypy_tanhf``,
  which vectorize);
  f32 arithmetic stays in ``float`` (no ``-ffast-math``).

Buffers are addressed according to a ``Layout``: pointer parameters take one index; arrays with
constant inner extents keep C's ``a[i][j]``; arrays sized by the block shape are flattened.
With ``check_bounds`` every index goes through ``polypy_check_index`` (see the prelude).
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from typing import Sequence

from polypy.analysis.float_ranges import FloatRanges
from polypy.errors import InternalError, Loc, UserError
from polypy.ir import nodes as n
from polypy.ir.cexpr import ADDITIVE, ATOM, MULTIPLICATIVE, UNARY, CExprPrinter, parenthesize, right_operand
from polypy.ir.printer import format_const
from polypy.ir.textures import TEXTURE
from polypy.ir.types import PointerType, ScalarType
from polypy.ir.visitor import has_kind

from codegen.lanes import scatter_loop, vector_loop
from codegen.c.printing import assert_fail_lines, print_call
from codegen.c.readable import BarrierNote, BarrierPlacer, OverflowFlag, thread_axis

INDENT = "    "

# Operators whose binary operands get parentheses unless they are the same operator (keeps
# `-Wparentheses` quiet and the intent obvious: `(a + b) << 2`, `(a ^ b) | c`).
_FUSSY = {"band", "bor", "bxor", "shl", "shr"}
_NARROW = {"bool", "i8", "u8", "i16", "u16"}

# Canonical math function -> (f32 spelling, f64 spelling); "{}" marks an expression template.
MATH: dict[str, tuple[str, str]] = {
    **{fn: (fn + "f", fn) for fn in (
        "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "sin", "cos", "tan",
        "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc",
        "fabs", "floor", "ceil", "trunc", "round", "rint", "pow", "atan2", "fmin", "fmax", "fmod",
        "hypot", "copysign", "fdim", "fma")},
    "fmin": ("polypy_fminf", "polypy_fmin"),
    "fmax": ("polypy_fmaxf", "polypy_fmax"),
    "exp": ("polypy_expf", "polypy_exp"),  # vectorizable (see the prelude)
    "tanh": ("polypy_tanhf", "polypy_tanh"),  # vectorizable (see the prelude)
    "exp10": ("polypy_exp10f", "polypy_exp10"),
    "rsqrt": ("(1.0f / sqrtf({}))", "(1.0 / sqrt({}))"),
    "saturate": ("polypy_saturatef", "polypy_saturate"),
    "isnan": ("(bool)isnan", "(bool)isnan"),
    "isinf": ("(bool)isinf", "(bool)isinf"),
    "isfinite": ("(bool)isfinite", "(bool)isfinite"),
    "signbit": ("(bool)signbit", "(bool)signbit"),
}
_INT_MATH = ("min", "max", "abs", "bitcast")  # the prelude's polypy_<fn>_<result type>

C_KEYWORDS = frozenset("""
    auto break case char const continue default do double else enum extern float for goto if inline int
    long register restrict return short signed sizeof static struct switch typedef union unsigned void
    volatile while bool true false alignas alignof and asm catch class constexpr delete explicit export
    friend mutable namespace new noexcept not nullptr operator or private protected public template this
    throw try typeid typename using virtual wchar_t xor NAN INFINITY blockIdx blockDim gridDim threadIdx
    dim3 uint3 abs labs llabs min max errno assert
""".split())


def _defined_count(count: n.Expr, t: ScalarType) -> bool:
    """A shift count for which C's ``<<``/``>>`` on ``t`` (promoted to ``int`` when narrower) is
    defined, and printed as C's own operator: a constant below the width, or a count masked
    below it (``s & 31``)."""
    limit = max(t.bits, 32)
    if isinstance(count, n.Const):
        return 0 <= int(count.value) < limit
    if isinstance(count, n.Binary) and count.op == "band":
        return any(isinstance(m, n.Const) and 0 <= int(m.value) < limit for m in (count.a, count.b))
    return False


def c_type(t: ScalarType) -> str:
    return t.c_name


def short_loc(loc: Loc | None) -> str:
    if loc is None:
        return ""
    return f"{os.path.basename(loc.file)}:{loc.line}"


def literal(c: n.Const) -> tuple[str, int]:
    """A C literal of ``c``'s type and its level (``polypy.ir.cexpr``)."""
    t = c.ctype
    if t.is_bool:
        return ("true" if c.value else "false"), ATOM
    if t.is_float:
        v = float(c.value)
        suffix = "f" if t.name == "f32" else ""
        if math.isnan(v):
            return ("NAN" if suffix else "(double)NAN"), (ATOM if suffix else UNARY)
        if math.isinf(v):
            text = "INFINITY" if suffix else "(double)INFINITY"
            return (text, ATOM if suffix else UNARY) if v > 0 else ("-" + text, UNARY)
        text = format_const(c)
        return text, (UNARY if text.startswith("-") else ATOM)
    v = int(c.value)
    if t.name == "i32":
        if v == -(1 << 31):
            return "(-2147483647 - 1)", ATOM
        return str(v), (UNARY if v < 0 else ATOM)
    if t.name == "u32":
        return f"{v}u", ATOM
    if t.name == "i64":
        if v == -(1 << 63):
            return "(-9223372036854775807LL - 1LL)", ATOM
        return f"{v}LL", (UNARY if v < 0 else ATOM)
    if t.name == "u64":
        return f"{v}ULL", ATOM
    # i8/u8/i16/u16: C computes with them as int anyway, and every use converts back.
    return str(v), (UNARY if v < 0 else ATOM)


@dataclasses.dataclass(frozen=True)
class Layout:
    """How the C code addresses one IR buffer.

    ``kind``: ``pointer`` (a pointer parameter, one index), ``array`` (C array or pointer to
    arrays with constant inner extents: ``a[i][j]``), ``flat`` (extents known at run time:
    ``a[(i * d1 + j) * d2 + k]``), ``alias`` (a module global that host code may have declared as
    a scalar: ``((T*)&g)[i]``). ``extents`` are C expressions for flattening and checks, each an
    atom (a name, a literal, a call or in parentheses) so that it can go anywhere in an expression.
    """

    name: str
    kind: str
    elem: ScalarType
    extents: tuple[str, ...] = ()


class Renderer(CExprPrinter):
    """Renders statements and expressions of one CPU-form kernel."""

    promoted = frozenset(_NARROW)

    def __init__(self, kernel: n.Kernel, layouts: dict[str, Layout], *, check_bounds: bool,
                 names: dict[str, str], comments: bool = True, flags: Sequence[OverflowFlag] = (),
                 barriers: Sequence[BarrierNote] = (), taken: set[str] | None = None,
                 program: bool = False):
        self.program = program  # a whole program: polypy's runtime (texture objects) is in the file
        self.comments = comments  # `// file:line` before block-level statements and thread loops
        self.in_threads = 0
        self.in_simd = 0  # depth of `omp simd` loops around the statement being rendered
        self.kernel = kernel
        # Which float -> integer conversions cannot saturate: those are written as C casts.
        self.float_ranges = FloatRanges(kernel.body, tuple(p.name for p in kernel.params))
        self.fenced = has_kind(kernel.body, n.Fence)
        self.layouts = layouts
        self.check_bounds = check_bounds
        self.names = names  # IR local/param name -> C name (only where they differ)
        self.loops: list[str | None] = []  # per enclosing loop: the label `continue` jumps to
        self.label_count = 0
        # Readability (codegen.c.readable): overflow tests computed once, by name; removed
        # barriers still to be noted; thread counters renamed per nest (tz0/ty0/tx0, ...).
        self.flags = {f.test: f.name for f in flags}
        self.barriers = BarrierPlacer(barriers, kernel.loc)
        self.taken = set(taken) if taken is not None else set()
        self.nests = 0
        self.counters: list[dict[str, str]] = []  # per enclosing thread loop: IR counter -> C name

    def name(self, ir_name: str) -> str:
        for scope in reversed(self.counters):
            if ir_name in scope:
                return scope[ir_name]
        return self.names.get(ir_name, ir_name)

    def render(self, e: n.Expr) -> tuple[str, int]:
        if self.flags and isinstance(e, n.Binary) and e.op == "le":
            flag = self.flags.get(e)
            if flag is not None:
                return flag, ATOM
        return super().render(e)

    def unnamed(self, e: n.Expr) -> str:
        """``e`` spelled out, even where it is an overflow test that has a name."""
        flags, self.flags = self.flags, {}
        try:
            return self.expr(e)
        finally:
            self.flags = flags

    # ------------------------------------------------------------------ expressions
    # `expr(e, level)` and the parenthesization rule come from CExprPrinter; these spell leaves
    # and the C-specific conversions.
    def unknown(self, e: n.Expr) -> tuple[str, int]:
        raise InternalError(f"cannot render {type(e).__name__} as C", e.loc)

    def extra_parens(self, child: n.Expr, text: str, level: int, parent: n.Expr) -> bool:
        if isinstance(parent, n.Binary):
            return (isinstance(child, n.Binary) and level < ATOM and child.op != parent.op
                    and (parent.op in _FUSSY or (parent.op == "lor" and child.op == "land")))
        if isinstance(parent, n.Unary) and parent.op != "not":
            return isinstance(child, n.Unary) or (isinstance(child, n.Const) and text.startswith("-"))
        return False

    def const(self, c: n.Const) -> tuple[str, int]:
        return literal(c)

    def var(self, e: n.Var) -> tuple[str, int]:
        return self.name(e.name), ATOM

    def gpu_index(self, e: n.GpuIndex) -> tuple[str, int]:
        if isinstance(e, n.ThreadIdx):
            raise InternalError("threadIdx in CPU-form code given to the C backend", e.loc)
        return super().gpu_index(e)

    def load(self, e: n.Load) -> tuple[str, int]:
        if e.buffer in self.kernel.host_polls:  # polled until the host stores: read every time
            return f"*(volatile {c_type(e.etype)}*)&{self.access(e.buffer, e.index, e.loc)}", UNARY
        return self.access(e.buffer, e.index, e.loc), ATOM

    def cast(self, e: n.Cast) -> tuple[str, int]:
        if e.to == e.x.type:
            return self.render(e.x)
        if (e.x.type.name in ("f32", "f64") and e.to.is_int and not e.to.is_bool
                and not self.float_ranges.exact_conversion(e)):
            # The GPU's saturating conversion (the prelude's polypy_cvt_*): NaN -> 0, out of range
            # -> the nearest bound, as the emulator and the LLVM backend compute it; C's cast
            # where the operand is provably not NaN and in range (polypy.analysis.float_ranges).
            form = "cvtv" if self.in_simd else "cvt"  # the vectorizable form in `omp simd` loops
            return f"polypy_{form}_{e.to.name}_{e.x.type.name}({self.expr(e.x)})", ATOM
        return super().cast(e)

    def binary(self, e: n.Binary) -> tuple[str, int]:
        t = e.a.type
        if e.op == "rem" and t.is_float:
            fn = "fmodf" if t.name == "f32" else "fmod"
            return f"{fn}({self.expr(e.a)}, {self.expr(e.b)})", ATOM
        if e.op in ("shl", "shr") and not _defined_count(e.b, t):
            return self.gpu_shift(e)
        return super().binary(e)

    def gpu_shift(self, e: n.Binary) -> tuple[str, int]:
        """A shift whose count C may leave undefined (not a constant below the width): the
        prelude's ``polypy_shl_u32`` etc. give the GPU's result for every count (see there).
        Types C promotes to ``int`` shift in their promoted type, then are cast back."""
        t = e.a.type
        wide = t.name if t.bits >= 32 else ("i32" if t.is_signed else "u32")
        text = f"polypy_{e.op}_{wide}({self.expr(e.a)}, {self.expr(e.b)})"
        if wide != t.name:
            return f"({self.type_name(e.type)}){text}", UNARY
        return text, ATOM

    def call(self, e: n.Call) -> tuple[str, int]:
        args = [self.expr(a) for a in e.args]
        if e.fn == TEXTURE:
            if not self.program:
                raise UserError("texture fetches are only translated in whole programs (the texture object is "
                                "the runtime's: translate the file with its host code)", e.loc)
            return f"polypy_tex_{e.rtype.name}({', '.join(args)})", ATOM
        if e.fn in _INT_MATH:
            return f"polypy_{e.fn}_{e.rtype.name}({', '.join(args)})", ATOM
        spelling = MATH.get(e.fn)
        if spelling is None:
            raise InternalError(f"no C spelling for math function {e.fn!r}", e.loc)
        arg_type = e.args[0].type
        text = spelling[0] if arg_type.name == "f32" else spelling[1]
        if "{}" in text:
            return text.format(*args), ATOM
        if text.startswith("(bool)"):
            return f"({text}({', '.join(args)}))", ATOM
        return f"{text}({', '.join(args)})", ATOM

    # ------------------------------------------------------------------ memory
    def access(self, buffer: str, index: tuple[n.Expr, ...], loc: Loc | None, *, checked: bool = True) -> str:
        layout = self.layouts.get(buffer)
        if layout is None:
            raise InternalError(f"no layout for buffer {buffer!r}", loc)
        where = str(loc) if loc is not None else self.kernel.name
        if self.check_bounds and checked:
            if layout.kind == "pointer":
                parts = [(f"polypy_check_index({self.expr(index[0])}, polypy_lo_{layout.name}, "
                          f"polypy_hi_{layout.name}, \"{layout.name}\", \"{where}\")", ATOM)]
            else:
                parts = [(f"polypy_check_index({self.expr(i)}, 0, (long long){ext}, \"{layout.name}\", \"{where}\")",
                          ATOM) for i, ext in zip(index, layout.extents)]
        else:
            parts = [self.render(i) for i in index]
        if layout.kind == "pointer":
            return f"{layout.name}[{parts[0][0]}]"
        if layout.kind == "array":
            return layout.name + "".join(f"[{text}]" for text, _ in parts)
        if layout.kind == "alias":
            return f"(({c_type(layout.elem)}*)&{layout.name})[{_flat(parts, layout.extents)}]"
        return f"{layout.name}[{_flat(parts, layout.extents)}]"

    # ------------------------------------------------------------------ statements
    def block(self, stmts: tuple[n.Stmt, ...], depth: int, out: list[str]) -> None:
        last = None
        for s in stmts:
            if self.comments and self.in_threads == 0:
                self.note_barriers(s.loc, depth, out)
                where = short_loc(s.loc)
                nest = isinstance(s, n.For) and s.kind == "threads"  # always labelled: its number
                if where and (where != last or nest):
                    what = ""
                    if nest:
                        what = f" (threads, nest {self.nests})" if self.nests else " (threads)"
                    out.append(f"{INDENT * depth}// {where}{what}")
                    last = where
            self.stmt(s, depth, out)

    def note_barriers(self, loc: Loc | None, depth: int, out: list[str]) -> None:
        """``// __syncthreads() removed (file:line): why`` for the removed barriers of the source
        that belong before a statement at ``loc`` (all that are left when ``loc`` is None: the
        end of the block function)."""
        for b in self.barriers.before(loc):
            out.append(f"{INDENT * depth}// __syncthreads() removed ({short_loc(b.loc)}): {b.reason}")

    def stmt(self, s: n.Stmt, depth: int, out: list[str]) -> None:
        ind = INDENT * depth
        if isinstance(s, n.Decl):
            init = self.expr(s.init) if s.init is not None else "0"
            const = "const " if s.let else ""  # a binding: nothing assigns it again
            out.append(f"{ind}{const}{c_type(s.vtype)} {self.name(s.name)} = {init};")
        elif isinstance(s, n.Assign):
            out.append(f"{ind}{self.name(s.name)} = {self.expr(s.value)};")
        elif isinstance(s, n.Store):
            out.append(f"{ind}{self.access(s.buffer, s.index, s.loc)} = {self.expr(s.value)};")
        elif isinstance(s, n.AtomicRMW):
            out.append(ind + self.atomic(s) + ";")
            if self.fenced:
                # The prelude's atomics are relaxed; in a kernel with fences, what other threads
                # wrote before their fences and atomics is seen after this one (n.Fence).
                out.append(f"{ind}__atomic_thread_fence(__ATOMIC_SEQ_CST);")
        elif isinstance(s, n.Prefetch):
            out.append(f"{ind}{self.prefetch(s)};")
        elif isinstance(s, n.Fence):
            out.append(f"{ind}__atomic_thread_fence(__ATOMIC_SEQ_CST); /* __threadfence ({s.scope}) */")
        elif isinstance(s, n.Barrier) and s.scope == "grid":  # the block waits for the grid (cooperative launch)
            site = s.loc.line * 4096 + s.loc.col if s.loc is not None else 0
            out.append(f"{ind}polypy_grid_sync({site}); /* grid.sync() */")
        elif isinstance(s, n.Print):
            out.append(f"{ind}{print_call(s, self.expr)};")
        elif isinstance(s, n.AssertFail):
            out.extend(ind + line for line in assert_fail_lines(s, self.expr))
        elif isinstance(s, n.Launch):
            out.extend(ind + line for line in self.launch(s))
        elif isinstance(s, n.If):
            self.if_chain(s, depth, out)
        elif isinstance(s, n.For):
            self.for_loop(s, depth, out)
        elif isinstance(s, n.While):
            self.while_loop(s, depth, out)
        elif isinstance(s, n.Break):
            out.append(f"{ind}break;")
        elif isinstance(s, n.Continue):
            label = self.loops[-1] if self.loops else None
            out.append(f"{ind}goto {label};" if label is not None else f"{ind}continue;")
        else:
            raise InternalError(f"{type(s).__name__} in CPU-form code given to the C backend", s.loc)

    def launch(self, s: n.Launch) -> list[str]:
        """A launch from device code (``n.Launch``): the configuration and arguments evaluated now,
        the child's launcher called with them when this grid is done (``parts/dynamic.h``)."""
        if not self.program:
            raise UserError(f"kernel launches from device code (dynamic parallelism: '{s.kernel}' launched here) "
                            "are supported in whole programs only", s.loc)
        lines = ["{  /* " + f"{s.kernel}<<<...>>> from device code: runs when this grid is done" + " */",
                 f"{INDENT}const dim3 polypy_grid({', '.join(self.expr(e) for e in s.grid)});",
                 f"{INDENT}const dim3 polypy_block({', '.join(self.expr(e) for e in s.block)});",
                 f"{INDENT}const size_t polypy_shmem = {self.expr(s.shmem)};"]
        names = []
        for i, (a, p) in enumerate(zip(s.args, s.pointers)):
            value = self.expr(a) if p is None else f"{self.name(p)} + ({self.expr(a)})"
            lines.append(f"{INDENT}const auto polypy_arg{i} = {value};")
            names.append(f"polypy_arg{i}")
        stream = {"stream": "polypy_rt_cdp_ordinary", "tail": "polypy_rt_cdp_tail",
                  "fire_and_forget": "polypy_rt_cdp_fire_and_forget"}[s.stream]
        call = ", ".join(["polypy_grid", "polypy_block", "polypy_shmem"] + names)
        lines.append(f"{INDENT}polypy_rt_device_launch({stream}, [=]() {{ {s.kernel}_launch({call}); }});")
        lines.append("}")
        return lines

    def prefetch(self, s: n.Prefetch) -> str:
        """The element is not accessed and its index may lie outside the array: no bounds check,
        and for a pointer the address is computed in integers (no out-of-range pointer)."""
        layout = self.layouts.get(s.buffer)
        if layout is not None and layout.kind == "pointer":
            return f"POLYPY_PREFETCH_AT({layout.name}, {self.expr(s.index[0])})"
        return f"POLYPY_PREFETCH(&{self.access(s.buffer, s.index, s.loc, checked=False)})"

    def atomic(self, s: n.AtomicRMW) -> str:
        ty = self.kernel.elem_type(s.buffer)
        target = "&" + self.access(s.buffer, s.index, s.loc)
        args = [target]
        if s.compare is not None:
            args.append(self.expr(s.compare))
        args.append(self.expr(s.value))
        call = f"polypy_atomic_{s.op}_{ty.name}({', '.join(args)})"
        if s.dest is not None:
            return f"{self.name(s.dest)} = {call}"
        return f"(void){call}"

    def if_chain(self, s: n.If, depth: int, out: list[str]) -> None:
        ind = INDENT * depth
        ranges = self.float_ranges  # what each condition says holds in its branches
        with contextlib.ExitStack() as elses:
            out.append(f"{ind}if ({self.expr(s.cond)}) {{")
            with ranges.assuming(s.cond, True, s.then):
                self.block(s.then, depth + 1, out)
            elses.enter_context(ranges.assuming(s.cond, False, s.orelse))
            orelse = s.orelse
            while len(orelse) == 1 and isinstance(orelse[0], n.If):
                inner = orelse[0]
                out.append(f"{ind}}} else if ({self.expr(inner.cond)}) {{")
                with ranges.assuming(inner.cond, True, inner.then):
                    self.block(inner.then, depth + 1, out)
                elses.enter_context(ranges.assuming(inner.cond, False, inner.orelse))
                orelse = inner.orelse
            if orelse:
                out.append(f"{ind}}} else {{")
                self.block(orelse, depth + 1, out)
        out.append(f"{ind}}}")

    def for_loop(self, s: n.For, depth: int, out: list[str]) -> None:
        ind = INDENT * depth
        v = self.name(s.var)
        step = s.step
        if isinstance(step, n.Const) and step.value == 1:
            incr = f"++{v}"
        else:
            incr = f"{v} += {self.expr(step)}"
        threads = s.kind == "threads"
        simd = False
        if threads:
            # An innermost thread loop whose iterations provably touch different elements: a
            # vector loop without the compiler's run-time alias checks (see ``codegen.lanes``).
            sums = vector_loop(self.kernel, s)
            if sums is not None:
                reduction = f" reduction(+:{', '.join(self.name(x) for x in sums)})" if sums else ""
                out.append(f"{ind}#pragma omp simd{reduction}")
                simd = True
            elif scatter_loop(s):
                out.append(f"{ind}POLYPY_SCATTER_LOOP")
            else:
                out.append(f"{ind}POLYPY_THREAD_LOOP")
        start = self.expr(s.start)
        stop = self.expr(s.stop, right_operand("lt"))  # `v < (0 < q ? q : 0)`
        if threads:
            v = self.counter_name(s.var)
            if v is not None:
                self.counters.append({s.var: v})
                incr = f"++{v}" if incr.startswith("++") else f"{v} += {self.expr(step)}"
            else:
                v = self.name(s.var)
                self.counters.append({})
        out.append(f"{ind}for ({c_type(s.vtype)} {v} = {start}; {v} < {stop}; {incr}) {{")
        self.in_threads += threads
        self.in_simd += simd
        self.loops.append(None)
        self.block(s.body, depth + 1, out)
        self.loops.pop()
        self.in_threads -= threads
        self.in_simd -= simd
        if threads:
            self.counters.pop()
            if self.in_threads == 0:
                self.nests += 1
        out.append(f"{ind}}}")

    def counter_name(self, var: str) -> str | None:
        """The thread counter ``var`` of the current nest, numbered by nest: ``tx`` in the first
        nest of the block function, ``tx1``, ``tx2``... in the next ones."""
        axis = thread_axis(var)
        if axis is None:
            return None
        base = f"t{axis}{self.nests or ''}"
        visible = {c for scope in self.counters for c in scope.values()}
        name = base
        while name in self.taken or name in visible:
            name += "_"
        return name

    def while_loop(self, s: n.While, depth: int, out: list[str]) -> None:
        ind = INDENT * depth
        label = None
        if s.update and _continues(s.body):
            self.label_count += 1
            label = f"polypy_next_{self.label_count}"
        out.append(f"{ind}while ({self.expr(s.cond)}) {{")
        self.loops.append(label)
        if label is not None:
            # The body in a block of its own: its `goto` to the update leaves the scope of the
            # body's declarations (C++ refuses a jump across an initialization in one scope).
            out.append(f"{ind}{INDENT}{{")
            self.block(s.body, depth + 2, out)
            out.append(f"{ind}{INDENT}}}")
        else:
            self.block(s.body, depth + 1, out)
        self.loops.pop()
        if label is not None:
            out.append(f"{ind}{label}:;")
        self.loops.append(None)  # `continue` in the update (not produced by the frontend) re-tests
        self.block(s.update, depth + 1, out)
        self.loops.pop()
        out.append(f"{ind}}}")


def _flat(parts: list[tuple[str, int]], extents: tuple[str, ...]) -> str:
    """Row-major ``((size_t)i0 * e1 + i1) * e2 + i2`` of indices given as (text, level); the
    extents are atoms and the first one is not needed.

    In ``size_t``: 32-bit unsigned offsets could wrap, which stops the compiler from seeing
    the access as affine in the thread counter (and from vectorizing the thread loop).
    """
    if len(parts) == 1:
        return parts[0][0]
    text, level = f"(size_t){parenthesize(*parts[0], UNARY)}", UNARY
    for (p, p_level), ext in zip(parts[1:], extents[1:]):
        text = f"{parenthesize(text, level, MULTIPLICATIVE)} * {ext} + {parenthesize(p, p_level, ADDITIVE + 1)}"
        level = ADDITIVE
    return text


def _continues(stmts: tuple[n.Stmt, ...]) -> bool:
    """Whether a ``continue`` in ``stmts`` targets the loop they are the body of."""
    for s in stmts:
        if isinstance(s, n.Continue):
            return True
        if isinstance(s, n.If) and (_continues(s.then) or _continues(s.orelse)):
            return True
    return False


def pointer_decl(p: n.Param, name: str) -> str:
    """``const float* POLYPY_RESTRICT x`` for a pointer parameter, ``int n`` for a scalar."""
    t = p.ptype
    if isinstance(t, PointerType):
        const = "const " if t.const else ""
        restrict = " POLYPY_RESTRICT" if t.restrict else ""
        return f"{const}{c_type(t.elem)}*{restrict} {name}"
    return f"{c_type(t)} {name}"


# Nodes through which a thread counter keeps a constant, nonzero stride (``affine_in``).


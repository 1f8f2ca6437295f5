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
* math functions by precision (``expf`` for f32, ``exp`` for f64; ``rsqrt`` is ``1/sqrt``);
  f32 arithmetic stays in ``float`` (no ``-ffast-math``).

Buffers are addressed according to a ``Layout``: pointer parameters take one index; arrays with
constant inner extents keep C's ``a[i][j]``; arrays sized by the block shape are flattened.
With ``check_bounds`` every index goes through ``polypy_check_index`` (see the prelude).
"""
from __future__ import annotations

import dataclasses
import math
import os

from polypy.errors import InternalError, Loc
from polypy.ir import nodes as n
from polypy.ir.printer import format_const
from polypy.ir.types import PointerType, ScalarType

INDENT = "    "

# C precedence, higher binds tighter.
_PREC = {
    "lor": 4, "land": 5, "bor": 6, "bxor": 7, "band": 8, "eq": 9, "ne": 9,
    "lt": 10, "le": 10, "gt": 10, "ge": 10, "shl": 11, "shr": 11, "add": 12, "sub": 12,
    "mul": 13, "div": 13, "rem": 13,
}
_SYMBOL = {
    "add": "+", "sub": "-", "mul": "*", "div": "/", "rem": "%", "shl": "<<", "shr": ">>",
    "band": "&", "bor": "|", "bxor": "^", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
    "eq": "==", "ne": "!=", "land": "&&", "lor": "||",
}
_SELECT, _UNARY, _ATOM = 3, 14, 16
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
    "exp10": ("polypy_exp10f", "polypy_exp10"),
    "rsqrt": ("(1.0f / sqrtf({}))", "(1.0 / sqrt({}))"),
    "saturate": ("polypy_saturatef", "polypy_saturate"),
    "isnan": ("(bool)isnan", "(bool)isnan"),
    "isinf": ("(bool)isinf", "(bool)isinf"),
    "isfinite": ("(bool)isfinite", "(bool)isfinite"),
    "signbit": ("(bool)signbit", "(bool)signbit"),
}
_INT_MATH = ("min", "max", "abs")

C_KEYWORDS = frozenset("""
    auto break case char const continue default do double else enum extern float for goto if inline int
    long register restrict return short signed sizeof static struct switch typedef union unsigned void
    volatile while bool true false alignas alignof and asm catch class constexpr delete explicit export
    friend mutable namespace new noexcept not nullptr operator or private protected public template this
    throw try typeid typename using virtual wchar_t xor NAN INFINITY blockIdx blockDim gridDim threadIdx
    dim3 uint3 abs labs llabs min max errno assert
""".split())


def c_type(t: ScalarType) -> str:
    return t.c_name


def short_loc(loc: Loc | None) -> str:
    if loc is None:
        return ""
    return f"{os.path.basename(loc.file)}:{loc.line}"


def literal(c: n.Const) -> tuple[str, int]:
    """A C literal of ``c``'s type and its precedence."""
    t = c.ctype
    if t.is_bool:
        return ("true" if c.value else "false"), _ATOM
    if t.is_float:
        v = float(c.value)
        suffix = "f" if t.name == "f32" else ""
        if math.isnan(v):
            return ("NAN" if suffix else "(double)NAN"), (_ATOM if suffix else _UNARY)
        if math.isinf(v):
            text = "INFINITY" if suffix else "(double)INFINITY"
            return (text, _ATOM if suffix else _UNARY) if v > 0 else ("-" + text, _UNARY)
        text = format_const(c)
        return text, (_UNARY if text.startswith("-") else _ATOM)
    v = int(c.value)
    if t.name == "i32":
        if v == -(1 << 31):
            return "(-2147483647 - 1)", _ATOM
        return str(v), (_UNARY if v < 0 else _ATOM)
    if t.name == "u32":
        return f"{v}u", _ATOM
    if t.name == "i64":
        if v == -(1 << 63):
            return "(-9223372036854775807LL - 1LL)", _ATOM
        return f"{v}LL", (_UNARY if v < 0 else _ATOM)
    if t.name == "u64":
        return f"{v}ULL", _ATOM
    # i8/u8/i16/u16: C computes with them as int anyway, and every use converts back.
    return str(v), (_UNARY if v < 0 else _ATOM)


@dataclasses.dataclass(frozen=True)
class Layout:
    """How the C code addresses one IR buffer.

    ``kind``: ``pointer`` (a pointer parameter, one index), ``array`` (C array or pointer to
    arrays with constant inner extents: ``a[i][j]``), ``flat`` (extents known at run time:
    ``a[(i * d1 + j) * d2 + k]``), ``alias`` (a module global that host code may have declared as
    a scalar: ``((T*)&g)[i]``). ``extents`` are C expressions (for flattening and checks).
    """

    name: str
    kind: str
    elem: ScalarType
    extents: tuple[str, ...] = ()


class Renderer:
    """Renders statements and expressions of one CPU-form kernel."""

    def __init__(self, kernel: n.Kernel, layouts: dict[str, Layout], *, check_bounds: bool,
                 names: dict[str, str], comments: bool = True):
        self.comments = comments  # `// file:line` before block-level statements and thread loops
        self.in_threads = 0
        self.kernel = kernel
        self.layouts = layouts
        self.check_bounds = check_bounds
        self.names = names  # IR local/param name -> C name (only where they differ)
        self.loops: list[str | None] = []  # per enclosing loop: the label `continue` jumps to
        self.label_count = 0

    def name(self, ir_name: str) -> str:
        return self.names.get(ir_name, ir_name)

    # ------------------------------------------------------------------ expressions
    def expr(self, e: n.Expr) -> str:
        return self._expr(e)[0]

    def _wrap(self, e: n.Expr, parent_prec: int, *, right: bool = False, parent_op: str | None = None) -> str:
        text, prec = self._expr(e)
        need = prec < parent_prec or (right and prec == parent_prec)
        if parent_op is not None and isinstance(e, n.Binary) and prec < _ATOM and e.op != parent_op:
            if parent_op in _FUSSY or (parent_op == "lor" and e.op == "land"):
                need = True
        return f"({text})" if need else text

    def _expr(self, e: n.Expr) -> tuple[str, int]:
        if isinstance(e, n.Const):
            return self.const(e)
        if isinstance(e, n.Var):
            return self.name(e.name), _ATOM
        if isinstance(e, n.GpuIndex):
            base = {n.BlockIdx: "blockIdx", n.BlockDim: "blockDim", n.GridDim: "gridDim"}.get(type(e))
            if base is None:
                raise InternalError("threadIdx in CPU-form code given to the C backend", e.loc)
            return f"{base}.{'xyz'[e.dim]}", _ATOM
        if isinstance(e, n.Load):
            return self.access(e.buffer, e.index, e.loc), _ATOM
        if isinstance(e, n.Unary):
            return self.unary(e)
        if isinstance(e, n.Binary):
            return self.binary(e)
        if isinstance(e, n.Select):
            c = self._wrap(e.cond, _SELECT + 1)
            a = self._wrap(e.a, _SELECT + 1)
            b = self._wrap(e.b, _SELECT)
            return f"{c} ? {a} : {b}", _SELECT
        if isinstance(e, n.Cast):
            if e.to == e.x.type:
                return self._expr(e.x)
            return f"({c_type(e.to)}){self._wrap(e.x, _UNARY)}", _UNARY
        if isinstance(e, n.Call):
            return self.call(e), _ATOM
        raise InternalError(f"cannot render {type(e).__name__} as C", e.loc)

    def const(self, c: n.Const) -> tuple[str, int]:
        return literal(c)

    def unary(self, e: n.Unary) -> tuple[str, int]:
        t = e.type
        if e.op == "not":
            return "!" + self._wrap(e.x, _UNARY), _UNARY
        sym = "-" if e.op == "neg" else "~"
        inner = self._wrap(e.x, _UNARY)
        if isinstance(e.x, n.Unary) or (isinstance(e.x, n.Const) and inner.startswith("-")):
            inner = f"({inner})"
        text = sym + inner
        if t.name in _NARROW:
            return f"({c_type(t)})({text})", _UNARY
        return text, _UNARY

    def binary(self, e: n.Binary) -> tuple[str, int]:
        op = e.op
        t = e.a.type
        if op == "rem" and t.is_float:
            fn = "fmodf" if t.name == "f32" else "fmod"
            return f"{fn}({self.expr(e.a)}, {self.expr(e.b)})", _ATOM
        p = _PREC[op]
        widen = t.name in ("u8", "u16") and op in ("add", "sub", "mul", "shl")
        if widen:
            a = f"(unsigned int){self._wrap(e.a, _UNARY)}"
            b = self._wrap(e.b, p, right=True, parent_op=op)
        else:
            a = self._wrap(e.a, p, parent_op=op)
            b = self._wrap(e.b, p, right=True, parent_op=op)
        text = f"{a} {_SYMBOL[op]} {b}"
        result = e.type
        if result.name in _NARROW and op not in ("land", "lor") and op not in n.COMPARE_OPS:
            return f"({c_type(result)})({text})", _UNARY
        return text, p

    def call(self, e: n.Call) -> str:
        args = [self.expr(a) for a in e.args]
        if e.fn in _INT_MATH:
            return f"polypy_{e.fn}_{e.rtype.name}({', '.join(args)})"
        spelling = MATH.get(e.fn)
        if spelling is None:
            raise InternalError(f"no C spelling for math function {e.fn!r}", e.loc)
        arg_type = e.args[0].type
        text = spelling[0] if arg_type.name == "f32" else spelling[1]
        if "{}" in text:
            return text.format(*args)
        if text.startswith("(bool)"):
            return f"({text}({', '.join(args)}))"
        return f"{text}({', '.join(args)})"

    # ------------------------------------------------------------------ memory
    def access(self, buffer: str, index: tuple[n.Expr, ...], loc: Loc | None) -> str:
        layout = self.layouts.get(buffer)
        if layout is None:
            raise InternalError(f"no layout for buffer {buffer!r}", loc)
        where = str(loc) if loc is not None else self.kernel.name
        parts = [self.expr(i) for i in index]
        if self.check_bounds:
            if layout.kind == "pointer":
                parts = [f"polypy_check_index({parts[0]}, polypy_lo_{layout.name}, polypy_hi_{layout.name}, "
                         f"\"{layout.name}\", \"{where}\")"]
            else:
                parts = [f"polypy_check_index({p}, 0, (long long)({ext}), \"{layout.name}\", \"{where}\")"
                         for p, ext in zip(parts, layout.extents)]
        if layout.kind == "pointer":
            return f"{layout.name}[{parts[0]}]"
        if layout.kind == "array":
            return layout.name + "".join(f"[{p}]" for p in parts)
        if layout.kind == "alias":
            return f"(({c_type(layout.elem)}*)&{layout.name})[{_flat(parts, layout.extents)}]"
        return f"{layout.name}[{_flat(parts, layout.extents)}]"

    # ------------------------------------------------------------------ statements
    def block(self, stmts: tuple[n.Stmt, ...], depth: int, out: list[str]) -> None:
        last = None
        for s in stmts:
            if self.comments and self.in_threads == 0:
                where = short_loc(s.loc)
                if where and where != last:
                    what = " (threads)" if isinstance(s, n.For) and s.kind == "threads" else ""
                    out.append(f"{INDENT * depth}// {where}{what}")
                    last = where
            self.stmt(s, depth, out)

    def stmt(self, s: n.Stmt, depth: int, out: list[str]) -> None:
        ind = INDENT * depth
        if isinstance(s, n.Decl):
            init = self.expr(s.init) if s.init is not None else "0"
            out.append(f"{ind}{c_type(s.vtype)} {self.name(s.name)} = {init};")
        elif isinstance(s, n.Assign):
            out.append(f"{ind}{self.name(s.name)} = {self.expr(s.value)};")
        elif isinstance(s, n.Store):
            out.append(f"{ind}{self.access(s.buffer, s.index, s.loc)} = {self.expr(s.value)};")
        elif isinstance(s, n.AtomicRMW):
            out.append(ind + self.atomic(s) + ";")
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
        out.append(f"{ind}if ({self.expr(s.cond)}) {{")
        self.block(s.then, depth + 1, out)
        orelse = s.orelse
        while len(orelse) == 1 and isinstance(orelse[0], n.If):
            inner = orelse[0]
            out.append(f"{ind}}} else if ({self.expr(inner.cond)}) {{")
            self.block(inner.then, depth + 1, out)
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
        if threads:
            out.append(f"{ind}POLYPY_THREAD_LOOP")
        out.append(f"{ind}for ({c_type(s.vtype)} {v} = {self.expr(s.start)}; {v} < {self.expr(s.stop)}; {incr}) {{")
        self.in_threads += threads
        self.loops.append(None)
        self.block(s.body, depth + 1, out)
        self.loops.pop()
        self.in_threads -= threads
        out.append(f"{ind}}}")

    def while_loop(self, s: n.While, depth: int, out: list[str]) -> None:
        ind = INDENT * depth
        label = None
        if s.update and _continues(s.body):
            self.label_count += 1
            label = f"polypy_next_{self.label_count}"
        out.append(f"{ind}while ({self.expr(s.cond)}) {{")
        self.loops.append(label)
        self.block(s.body, depth + 1, out)
        self.loops.pop()
        if label is not None:
            out.append(f"{ind}{label}:;")
        self.loops.append(None)  # `continue` in the update (not produced by the frontend) re-tests
        self.block(s.update, depth + 1, out)
        self.loops.pop()
        out.append(f"{ind}}}")


def _flat(parts: list[str], extents: tuple[str, ...]) -> str:
    """Row-major ``((size_t)i0 * e1 + i1) * e2 + i2`` (the first extent is not needed).

    In ``size_t``: 32-bit unsigned offsets could wrap, which stops the compiler from seeing
    the access as affine in the thread counter (and from vectorizing the thread loop).
    """
    if len(parts) == 1:
        return parts[0]
    text = f"(size_t){_paren(parts[0])}"
    for p, ext in zip(parts[1:], extents[1:]):
        text = f"({text} * {_paren(ext)} + {_paren(p)})"
    return text[1:-1]


def _paren(text: str) -> str:
    simple = text.replace(".", "").replace("_", "").replace("[", "").replace("]", "")
    return text if simple.isalnum() else f"({text})"


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

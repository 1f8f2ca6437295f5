"""Textual form of the IR: C-like expressions, one statement per line, typed declarations.

::

    kernel saxpy(n: i32, a: f32, x: const f32*, y: f32*) {
      var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
      if (i < n) {
        y[i] = a * x[i] + y[i]
      }
    }

Literals carry their type: ``5`` is i32, ``5u`` u32, ``5l`` i64, ``5ul`` u64, ``5:i8`` (any
other integer type), ``1.5f`` f32, ``1.5`` f64, ``true``. ``polypy.ir.parser`` reads this
text back, so golden pass tests are written in it. With ``locs=True`` every statement gets a
``// file:line`` comment.
"""
from __future__ import annotations

import json
import math

import numpy as np

from polypy.ir import nodes as n
from polypy.ir.cexpr import BINARY_SYMBOLS, UNARY_SYMBOLS  # noqa: F401 (re-exported)
from polypy.ir.cexpr import ATOM, BINARY_PREC, TOP, UNARY, CExprPrinter, parenthesize
from polypy.ir.types import PointerType, ScalarType

# The grammar (precedence table, symbols) is C's and lives in polypy.ir.cexpr; these names are
# kept for the parser and older imports.
PRECEDENCE = BINARY_PREC

_INT_SUFFIX = {"i32": "", "u32": "u", "i64": "l", "u64": "ul"}


def format_const(c: n.Const) -> str:
    t = c.ctype
    if t.is_bool:
        return "true" if c.value else "false"
    if t.is_int:
        suffix = _INT_SUFFIX.get(t.name)
        if suffix is None:
            return f"{int(c.value)}:{t.name}"
        return f"{int(c.value)}{suffix}"
    value = float(c.value)
    if math.isnan(value):
        text = "nan"
    elif math.isinf(value):
        text = "inf" if value > 0 else "-inf"
    elif t.name == "f32":
        text = np.format_float_positional(np.float32(value), unique=True, trim="0") if _plain(value) else \
            np.format_float_scientific(np.float32(value), unique=True, trim="0")
    else:
        text = repr(value)
    if not any(ch in text for ch in ".eni"):
        text += ".0"
    if text.endswith("."):
        text += "0"
    return text + ("f" if t.name == "f32" else "")


def _plain(value: float) -> bool:
    return value == 0.0 or 1e-4 <= abs(value) < 1e16


def format_type(t: ScalarType | PointerType) -> str:
    if isinstance(t, PointerType):
        text = ("const " if t.const else "") + f"{t.elem}*"
        return text + (" restrict" if t.restrict else "")
    return t.name


def _is_negative(c: n.Const) -> bool:
    value = c.value
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and (value < 0 or (isinstance(value, float) and math.copysign(1.0, value) < 0 and value == 0)))


class IrExprPrinter(CExprPrinter):
    """Expressions of the IR text form: C syntax with IR type names and typed literals.

    Operands of unary operators and casts are parenthesized unless they are atoms, and so is a
    non-negative literal under a unary operator: ``-(5)`` is ``neg`` of ``5`` where ``-5`` is one
    literal, which is how ``polypy.ir.parser`` tells them apart. A ``?:`` inside a ``?:`` is
    parenthesized.
    """

    def type_name(self, t: ScalarType) -> str:
        return t.name

    def const(self, c: n.Const) -> tuple[str, int]:
        return format_const(c), (UNARY if not c.ctype.is_bool and _is_negative(c) else ATOM)

    def call(self, e: n.Call) -> tuple[str, int]:
        if e.fn in ("bitcast", "texture"):  # the result type is not the argument's: spelled out
            return f"{e.fn}<{e.rtype.name}>({', '.join(self.expr(a) for a in e.args)})", ATOM
        return super().call(e)

    def extra_parens(self, child: n.Expr, text: str, level: int, parent: n.Expr) -> bool:
        if isinstance(parent, n.Unary):
            return level <= UNARY or isinstance(child, n.Const)
        if isinstance(parent, n.Cast):
            return level <= UNARY
        return isinstance(parent, n.Select) and isinstance(child, n.Select)


_EXPR = IrExprPrinter()


def format_expr(e: n.Expr) -> str:
    return _EXPR.expr(e)


class ExprFormatter(IrExprPrinter):
    """``format_expr`` for a caller that prints many nested subtrees of one tree (the polyhedral
    builder names every level of ``n | n | ...`` it cannot convert): the text of each expression
    asked for is remembered, and printing a parent reuses its children's text instead of printing
    them again (each level re-printed its whole subtree: quadratic). Only the expressions asked
    for are remembered, so printing one long tree once holds no more than its own text."""

    def __init__(self) -> None:
        self._remembered: dict[n.Expr, tuple[str, int]] = {}

    def format(self, e: n.Expr) -> str:
        rendered = self._remembered.get(e)
        if rendered is None:
            rendered = self._remembered[e] = super().render(e)
        return parenthesize(*rendered, TOP)

    def render(self, e: n.Expr) -> tuple[str, int]:
        rendered = self._remembered.get(e)
        return rendered if rendered is not None else super().render(e)


class _Printer:
    def __init__(self, locs: bool, module_globals: frozenset[str] = frozenset()):
        self.locs = locs
        self.module_globals = module_globals  # printed at module level, referenced in kernels
        self.lines: list[str] = []

    def emit(self, depth: int, text: str, node: n.Node | None = None) -> None:
        line = "  " * depth + text
        if self.locs and node is not None and node.loc is not None:
            line += f"  // {node.loc}"
        self.lines.append(line)

    def block(self, stmts: tuple[n.Stmt, ...], depth: int) -> None:
        for s in stmts:
            self.stmt(s, depth)

    def stmt(self, s: n.Stmt, depth: int) -> None:
        if isinstance(s, n.Decl):
            init = f" = {format_expr(s.init)}" if s.init is not None else ""
            self.emit(depth, f"{'let' if s.let else 'var'} {s.name}: {s.vtype}{init}", s)
        elif isinstance(s, n.Assign):
            self.emit(depth, f"{s.name} = {format_expr(s.value)}", s)
        elif isinstance(s, n.Store):
            index = "".join(f"[{format_expr(i)}]" for i in s.index)
            self.emit(depth, f"{s.buffer}{index} = {format_expr(s.value)}", s)
        elif isinstance(s, n.AtomicRMW):
            index = "".join(f"[{format_expr(i)}]" for i in s.index)
            operands = [f"{s.buffer}{index}"]
            if s.compare is not None:
                operands.append(format_expr(s.compare))
            operands.append(format_expr(s.value))
            dest = f"{s.dest} = " if s.dest is not None else ""
            self.emit(depth, f"{dest}atomic.{s.op} {', '.join(operands)}", s)
        elif isinstance(s, n.Barrier):
            self.emit(depth, "barrier" if s.scope == "block" else "barrier.grid", s)
        elif isinstance(s, n.WarpSync):
            self.emit(depth, f"syncwarp({format_expr(s.mask)})", s)
        elif isinstance(s, n.Fence):
            self.emit(depth, f"fence.{s.scope}", s)
        elif isinstance(s, n.Print):
            strings = f" strings({', '.join(map(str, s.strings))})" if s.strings else ""
            head = json.dumps(s.format) + strings
            self.emit(depth, "print " + ", ".join([head] + [format_expr(a) for a in s.args]), s)
        elif isinstance(s, n.Launch):
            self.emit(depth, format_launch(s), s)
        elif isinstance(s, n.AssertFail):
            head = "assert.fail" if s.fault == "assert" else f"fault.{s.fault}"
            at = f"{s.line}" if s.fault == "assert" else f"{s.line}:{s.col}"
            self.emit(depth, f"{head} {json.dumps(s.text)} at {json.dumps(s.file)}:{at} "
                             f"in {json.dumps(s.function)}" + "".join(", " + format_expr(w) for w in s.where), s)
        elif isinstance(s, n.Prefetch):
            self.emit(depth, f"prefetch {s.buffer}{''.join(f'[{format_expr(i)}]' for i in s.index)}", s)
        elif isinstance(s, n.Shuffle):
            args = ", ".join(format_expr(a) for a in (s.mask, s.value, s.lane, s.width))
            self.emit(depth, f"{s.dest} = shfl.{s.mode}({args})", s)
        elif isinstance(s, n.Vote):
            self.emit(depth, f"{s.dest} = vote.{s.mode}({format_expr(s.mask)}, {format_expr(s.pred)})", s)
        elif isinstance(s, n.If):
            self.emit(depth, f"if ({format_expr(s.cond)}) {{", s)
            self.block(s.then, depth + 1)
            orelse = s.orelse
            while len(orelse) == 1 and isinstance(orelse[0], n.If):
                inner = orelse[0]
                self.emit(depth, f"}} else if ({format_expr(inner.cond)}) {{", inner)
                self.block(inner.then, depth + 1)
                orelse = inner.orelse
            if orelse:
                self.emit(depth, "} else {")
                self.block(orelse, depth + 1)
            self.emit(depth, "}")
        elif isinstance(s, n.For):
            kind = ("threads(ordered) " if s.ordered else "threads ") if s.kind == "threads" else ""
            self.emit(depth, f"for {kind}{s.var}: {s.vtype} = {format_expr(s.start)} to {format_expr(s.stop)} "
                             f"step {format_expr(s.step)} {{", s)
            self.block(s.body, depth + 1)
            self.emit(depth, "}")
        elif isinstance(s, n.While):
            self.emit(depth, f"while ({format_expr(s.cond)}) {{", s)
            self.block(s.body, depth + 1)
            if s.update:
                self.emit(depth, "} update {")
                self.block(s.update, depth + 1)
            self.emit(depth, "}")
        elif isinstance(s, n.Break):
            self.emit(depth, "break", s)
        elif isinstance(s, n.Continue):
            self.emit(depth, "continue", s)
        elif isinstance(s, n.Return):
            self.emit(depth, "return", s)
        else:
            raise TypeError(f"cannot print {type(s).__name__}")

    def buffer(self, b: n.Buffer, depth: int, with_init: bool = True) -> None:
        if b.shape is None:
            shape = "[]"
            prefix = "extern "
        else:
            shape = "".join(f"[{format_expr(d)}]" for d in b.shape)
            prefix = ""
        init = ""
        if b.init is not None and with_init:
            init = " = {" + ", ".join(_format_init(v, b.elem) for v in b.init) + "}"
        part = f" part {b.part[0]}/{b.part[1]}" if b.part is not None else ""
        view = f" in {b.symbol}" if b.symbol is not None else ""
        if b.frame:
            prefix = "frame " + prefix
        self.emit(depth, f"{prefix}{b.space} {b.name}: {b.elem}{shape}{init}{part}{view}", b)

    def kernel(self, k: n.Kernel) -> None:
        params = ", ".join(f"{p.name}: {format_type(p.ptype)}" for p in k.params)
        stage = " stage cpu" if k.stage == "cpu" else ""
        if k.coarsen != (1, 1, 1):
            stage += " coarsen (" + ", ".join(str(f) for f in k.coarsen) + ")"
        if k.bounds_checks:
            stage += " checks (" + ", ".join(k.bounds_checks) + ")"
        if k.checked_slices:
            stage += " sliced (" + ", ".join(k.checked_slices) + ")"
        self.emit(0, f"kernel {k.name}({params}){stage} {{", k)
        for sp in k.source_params:
            if sp.members == (("", sp.name),):
                continue
            members = ", ".join(f"{path} = {name}" for path, name in sp.members)
            self.emit(1, f'source {sp.name}: "{sp.ctype}" ({members})')
        for b in k.buffers:
            self.buffer(b, 1, with_init=b.name not in self.module_globals)
        self.block(k.body, 1)
        self.emit(0, "}")


def _format_init(value: int | float, elem: ScalarType) -> str:
    return format_const(n.Const(value, elem))


def print_kernel(kernel: n.Kernel, *, locs: bool = False) -> str:
    p = _Printer(locs)
    p.kernel(kernel)
    return "\n".join(p.lines) + "\n"


def print_module(module: n.Module, *, locs: bool = False) -> str:
    p = _Printer(locs, frozenset(g.name for g in module.globals))
    for g in module.globals:
        p.buffer(g, 0)
    for i, k in enumerate(module.kernels):
        if i or module.globals:
            p.lines.append("")
        p.kernel(k)
    return "\n".join(p.lines) + "\n"


def print_stmts(stmts: tuple[n.Stmt, ...], *, locs: bool = False) -> str:
    p = _Printer(locs)
    p.block(stmts, 0)
    return "\n".join(p.lines) + "\n"


def print_ir(node: n.Node, *, locs: bool = False) -> str:
    """Any node as text: modules, kernels, statements, expressions."""
    if isinstance(node, n.Module):
        return print_module(node, locs=locs)
    if isinstance(node, n.Kernel):
        return print_kernel(node, locs=locs)
    if isinstance(node, n.Stmt):
        return print_stmts((node,), locs=locs)
    if isinstance(node, n.Expr):
        return format_expr(node)
    raise TypeError(f"cannot print {type(node).__name__}")


def format_launch(s: n.Launch) -> str:
    """``launch.tail child grid(gx, gy, gz) block(bx, by, bz) shmem(s) (a, &p[off])``."""
    args = [format_expr(a) if p is None else f"&{p}[{format_expr(a)}]" for a, p in zip(s.args, s.pointers)]
    stream = "" if s.stream == "stream" else "." + s.stream
    grid = ", ".join(format_expr(e) for e in s.grid)
    block = ", ".join(format_expr(e) for e in s.block)
    return (f"launch{stream} {s.kernel} grid({grid}) block({block}) shmem({format_expr(s.shmem)}) "
            f"({', '.join(args)})")

"""C expression syntax in one place: precedence, associativity, parentheses.

Three printers spell IR expressions in C syntax: the IR text form (``polypy.ir.printer``), CUDA
(``codegen.cuda``) and C/C++ (``codegen.c``). They differ in literals, type names, math function
names and a few readability habits, never in grammar, so the grammar lives here and each
printer subclasses ``CExprPrinter``.

Every printed expression has the *level* of its outermost operator (``a + b`` is ``ADDITIVE``,
``x[i]`` is ``ATOM``); every place an expression goes *requires* a level (the right operand of
``<`` requires ``RELATIONAL + 1``: C's binary operators associate to the left). A child is
parenthesized iff its level is lower than required, or a subclass asks for parentheses for
readability (``extra_parens``)::

    select(0 < q, q, 0) as the bound of `t < _`:    t < (0 < q ? q : 0)
    as an initializer (TOP):                          int n = 0 < q ? q : 0;

Statement printers never splice text by hand: they ask ``expr(e, level)`` for the level of the
position (``TOP`` for initializers, right-hand sides, conditions, call arguments and indices;
``right_operand("lt")`` after ``v <``; ``UNARY`` after a cast).
"""
from __future__ import annotations

from polypy.ir import nodes as n

# Levels of C's expression grammar, loosest first (C11 6.5; C++ [expr] agrees for these).
COMMA, ASSIGN, SELECT, LOR, LAND, BOR, BXOR, BAND, EQUALITY, RELATIONAL, SHIFT, ADDITIVE, MULTIPLICATIVE, \
    UNARY, ATOM = range(15)
# Initializers, right-hand sides, conditions, call arguments and array indices all take an
# assignment-expression: anything but a comma expression (which no printer produces).
TOP = ASSIGN

BINARY_PREC = {
    "lor": LOR, "land": LAND, "bor": BOR, "bxor": BXOR, "band": BAND,
    "eq": EQUALITY, "ne": EQUALITY, "lt": RELATIONAL, "le": RELATIONAL, "gt": RELATIONAL, "ge": RELATIONAL,
    "shl": SHIFT, "shr": SHIFT, "add": ADDITIVE, "sub": ADDITIVE, "mul": MULTIPLICATIVE, "div": MULTIPLICATIVE,
    "rem": MULTIPLICATIVE,
}
BINARY_SYMBOLS = {
    "add": "+", "sub": "-", "mul": "*", "div": "/", "rem": "%",
    "shl": "<<", "shr": ">>", "band": "&", "bor": "|", "bxor": "^",
    "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=",
    "land": "&&", "lor": "||",
}
UNARY_SYMBOLS = {"neg": "-", "not": "!", "bnot": "~"}
GPU_NAMES = {n.ThreadIdx: "threadIdx", n.BlockIdx: "blockIdx", n.BlockDim: "blockDim", n.GridDim: "gridDim"}


def left_operand(op: str) -> int:
    """The level the left operand of binary ``op`` needs (C's binary operators are left-associative)."""
    return BINARY_PREC[op]


def right_operand(op: str) -> int:
    """The level the right operand of binary ``op`` needs."""
    return BINARY_PREC[op] + 1


def parenthesize(text: str, level: int, required: int) -> str:
    """``text`` (an expression of ``level``) where ``required`` is needed."""
    return f"({text})" if level < required else text


class CExprPrinter:
    """IR expressions as C text. Subclasses spell leaves (literals, names, calls, types).

    ``render(e)`` gives ``(text, level)``; ``expr(e, required)`` gives text that parses as ``e``
    where ``required`` is needed. Node methods return ``(text, level)`` and print their children
    through ``operand`` so that every child goes through the one parenthesization rule.

    With ``promoted`` (the types C promotes to ``int``: set by the C and CUDA printers, empty for
    the IR text, whose operators work in their own type), arithmetic of those types gets C's
    promotion undone: the result is cast back (``(short)(a + b)``), and ``u8``/``u16`` ``+ - * <<``
    are done in ``unsigned int``, where ``int`` could overflow (``65535 * 65535``).
    """

    promoted: frozenset[str] = frozenset()

    # ------------------------------------------------------------------ entry points
    def expr(self, e: n.Expr, required: int = TOP) -> str:
        text, level = self.render(e)
        return parenthesize(text, level, required)

    def render(self, e: n.Expr) -> tuple[str, int]:
        method = _DISPATCH.get(type(e))
        if method is None:
            return self.unknown(e)
        return getattr(self, method)(e)

    def operand(self, child: n.Expr, required: int, parent: n.Expr) -> str:
        """``child`` of ``parent`` in a position that needs ``required``."""
        text, level = self.render(child)
        if level < required or self.extra_parens(child, text, level, parent):
            return f"({text})"
        return text

    # ------------------------------------------------------------------ hooks
    def extra_parens(self, child: n.Expr, text: str, level: int, parent: n.Expr) -> bool:
        """Parentheses the grammar does not need but a printer wants (readability, re-parsing)."""
        return False

    def unknown(self, e: n.Expr) -> tuple[str, int]:
        raise TypeError(f"cannot print {type(e).__name__}")

    def type_name(self, t) -> str:
        return t.c_name

    def const(self, c: n.Const) -> tuple[str, int]:
        raise NotImplementedError

    def var(self, e: n.Var) -> tuple[str, int]:
        return e.name, ATOM

    def gpu_index(self, e: n.GpuIndex) -> tuple[str, int]:
        return f"{GPU_NAMES[type(e)]}.{'xyz'[e.dim]}", ATOM

    def load(self, e: n.Load) -> tuple[str, int]:
        return e.buffer + "".join(f"[{self.expr(i)}]" for i in e.index), ATOM

    def call(self, e: n.Call) -> tuple[str, int]:
        return self.call_text(e.fn, e.args), ATOM

    def call_text(self, fn: str, args: tuple[n.Expr, ...]) -> str:
        return f"{fn}({', '.join(self.expr(a) for a in args)})"

    # ------------------------------------------------------------------ operators
    def unary(self, e: n.Unary) -> tuple[str, int]:
        sym = UNARY_SYMBOLS[e.op]
        text, level = self.render(e.x)
        # `- -x` must not become the decrement token `--x`.
        if level < UNARY or self.extra_parens(e.x, text, level, e) or (sym == "-" and text.startswith("-")):
            text = f"({text})"
        if e.op != "not" and e.type.name in self.promoted:
            return f"({self.type_name(e.type)})({sym}{text})", UNARY
        return sym + text, UNARY

    def binary(self, e: n.Binary) -> tuple[str, int]:
        op = e.op
        if e.a.type.name in ("u8", "u16") and op in ("add", "sub", "mul", "shl") and e.a.type.name in self.promoted:
            a = "(unsigned int)" + self.expr(e.a, UNARY)
        else:
            a = self.operand(e.a, left_operand(op), e)
        text = f"{a} {BINARY_SYMBOLS[op]} {self.operand(e.b, right_operand(op), e)}"
        if e.type.name in self.promoted and op not in n.COMPARE_OPS and op not in n.LOGIC_OPS:
            return f"({self.type_name(e.type)})({text})", UNARY
        return text, BINARY_PREC[op]

    def select(self, e: n.Select) -> tuple[str, int]:
        # C: logical-OR-expression ? expression : conditional-expression. The middle operand
        # could be anything; a nested `?:` there is parenthesized to be read easily.
        c = self.operand(e.cond, LOR, e)
        a = self.operand(e.a, LOR, e)
        b = self.operand(e.b, SELECT, e)
        return f"{c} ? {a} : {b}", SELECT

    def cast(self, e: n.Cast) -> tuple[str, int]:
        return f"({self.type_name(e.to)}){self.operand(e.x, UNARY, e)}", UNARY


_DISPATCH = {
    n.Const: "const", n.Var: "var", n.ThreadIdx: "gpu_index", n.BlockIdx: "gpu_index", n.BlockDim: "gpu_index",
    n.GridDim: "gpu_index", n.Load: "load", n.Call: "call", n.Unary: "unary", n.Binary: "binary",
    n.Select: "select", n.Cast: "cast",
}

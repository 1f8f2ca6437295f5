"""The tokens of the textual IR (``polypy.ir.printer``'s output) and a cursor over them, for
``polypy.ir.parser``. The IR text is polypy's own small language, not C: C and CUDA are read by
libclang only.
"""
from __future__ import annotations

import json
import re

from polypy.errors import Loc, UserError

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\n]+|//[^\n]*)
  | (?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?(?:ul|u|l|f|:[a-z0-9]+)?)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<id>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<op><<|>>|<=|>=|==|!=|&&|\|\||[-+*/%<>&|^!~?:=(){}\[\],.])
    """,
    re.VERBOSE,
)


class Tok:
    __slots__ = ("kind", "text", "line", "col")

    def __init__(self, kind: str, text: str, line: int, col: int):
        self.kind, self.text, self.line, self.col = kind, text, line, col


def lex(text: str, filename: str) -> list[Tok]:
    tokens = []
    pos = 0
    line, line_start = 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise UserError(f"unexpected character {text[pos]!r} in IR text", Loc(filename, line, pos - line_start + 1))
        kind = m.lastgroup
        value = m.group()
        if kind != "ws":
            tokens.append(Tok(kind, value, line, pos - line_start + 1))
        newlines = value.count("\n")
        if newlines:
            line += newlines
            line_start = pos + value.rindex("\n") + 1
        pos = m.end()
    tokens.append(Tok("eof", "", line, pos - line_start + 1))
    return tokens


class Tokens:
    """A cursor over the tokens of one IR text, with located errors."""

    def __init__(self, text: str, filename: str):
        self.filename = filename
        self.toks = lex(text, filename)
        self.i = 0

    def peek(self, k: int = 0) -> Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def loc(self) -> Loc:
        t = self.peek()
        return Loc(self.filename, t.line, t.col)

    def error(self, message: str) -> UserError:
        return UserError(message, self.loc())

    def next(self) -> Tok:
        t = self.peek()
        self.i += 1
        return t

    def at(self, text: str) -> bool:
        return self.peek().text == text and self.peek().kind != "str"

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.i += 1
            return True
        return False

    def expect(self, text: str) -> Tok:
        if not self.at(text):
            raise self.error(f"expected {text!r}, found {self.peek().text!r}")
        return self.next()

    def ident(self) -> str:
        t = self.peek()
        if t.kind != "id":
            raise self.error(f"expected a name, found {t.text!r}")
        self.i += 1
        return t.text

    def string(self) -> str:
        t = self.peek()
        if t.kind != "str":
            raise self.error(f"expected a string, found {t.text!r}")
        self.i += 1
        return json.loads(t.text)


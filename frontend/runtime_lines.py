"""polypy's runtime headers line by line, as clang's lexer reads them (``frontend.runtime_slice``
decides what a program uses; this module, which lines go with what it leaves out): the
directives, comments and code lines of each header, the include guard, the groups of
``#ifdef __cplusplus`` and of ``push_macro``/``pop_macro``, and the conditions a line is compiled
under."""
from __future__ import annotations

import dataclasses
import os

import clang.cindex as ci


@dataclasses.dataclass
class Lexed:
    """One runtime header as clang's lexer reads it: its preprocessor directives by line
    (``#if``... and ``#undef``, each with the names on its line), its comments (first line,
    last line, the line of the next token that is not a comment) and the lines holding tokens
    other than comments."""

    directives: list[tuple[int, str, list[str]]]
    comments: list[tuple[int, int, int | None]]
    code: set[int]
    tested: set[str]
    continued: set[int]  # lines that end with a backslash (a directive continues on the next line)
    identifiers: dict[int, set[str]] = dataclasses.field(default_factory=dict)  # by line
    spellings: dict[int, list[str]] = dataclasses.field(default_factory=dict)  # each line's tokens, in order
    keep_comments: bool = True
    guard: tuple[int, int, str] | None = None  # the include guard: its #ifndef's line, its #endif's, its name

    def also_gone(self, gone: set[int], defined: set[str], macros: set[str]) -> set[int]:
        """``gone`` (the lines of the units left out) with what goes with them: the ``#undef`` of a
        macro no longer defined, a one-line definition of such a macro in a branch the parse did
        not take (``macros``: the names of the runtime's macros), the C branches of ``#ifdef
        __cplusplus`` groups and their directives, the include guard (the runtime is pasted once),
        each comment written above something left out, and each conditional group left empty."""
        gone = set(gone)
        for line, kind, names in self.directives:
            if kind in ("undef", "define") and names and names[0] not in defined and \
                    (kind == "undef" or names[0] in macros and line not in self.continued):
                gone.add(line)
        gone |= self.other_language()
        gone |= self.empty_pushes(gone)
        if self.guard is not None and self.guard[2] not in defined:  # pasted once: no guard needed
            gone |= {self.guard[0], self.guard[1]}
        for first, last, before in reversed(self.comments):  # a comment above a comment left out goes too
            if before is not None and before in gone:
                gone.update(x for x in range(first, last + 1) if x not in self.code)
        if not self.keep_comments:
            # Every comment on lines of its own (the runtime's sources document it; a program
            # needs none of it). Not the last line of a continued macro: the line before it would
            # continue onto the next one.
            for first, last, _ in self.comments:
                lines = range(first, last + 1)
                if not any(x in self.code for x in lines) and first - 1 not in self.continued:
                    gone.update(lines)
        stack: list[list[int]] = []
        for line, kind, _ in self.directives:
            if kind in ("if", "ifdef", "ifndef"):
                stack.append([line])
            elif kind in ("elif", "else") and stack:
                stack[-1].append(line)
            elif kind == "endif" and stack:
                group = stack.pop() + [line]
                inside = set(range(group[0] + 1, line)) - set(group)
                filled = (self.code | {x for a, b, _ in self.comments for x in range(a, b + 1)}) & inside
                if filled <= gone:
                    gone.update(group)
        return gone


    def conditions(self, at: int) -> tuple[tuple[str, str], ...] | None:
        """The conditions line ``at`` is compiled under, outermost first, as (``ifdef``/``ifndef``,
        name), the include guard's and ``#ifdef __cplusplus``'s C++ branch left out (always true
        here); None where one is of another form (``#if`` expressions, ``#else`` branches)."""
        stack: list[tuple[str, str] | None] = []
        for line, kind, names in self.directives:
            if line >= at:
                break
            if kind in ("if", "ifdef", "ifndef"):
                guard = self.guard is not None and line == self.guard[0]
                plain = kind != "if" and len(names) == 1
                stack.append(("", "") if guard or plain and names[0] == "__cplusplus" and kind == "ifdef"
                             else (kind, names[0]) if plain else None)
            elif kind in ("elif", "else") and stack:
                top = stack[-1]
                stack[-1] = ("", "") if top == ("ifndef", "__cplusplus") and kind == "else" else None
            elif kind == "endif" and stack:
                stack.pop()
        if any(c is None for c in stack):
            return None
        return tuple(c for c in stack if c is not None and c != ("", ""))

    def empty_pushes(self, gone: set[int]) -> set[int]:
        """Each ``#pragma push_macro("X")`` ... ``#pragma pop_macro("X")`` with nothing left between
        them but an ``#undef X``: the three lines."""
        out: set[int] = set()
        pushed: dict[str, int] = {}
        for line, kind, _ in self.directives:
            toks = self.spellings.get(line, [])
            if kind != "pragma" or len(toks) != 6 or toks[3] != "(" or toks[5] != ")":
                continue
            if toks[2] == "push_macro":
                pushed[toks[4]] = line
            elif toks[2] == "pop_macro" and toks[4] in pushed:
                first = pushed.pop(toks[4])
                name = toks[4].strip('"')
                left = [x for x in self.code if first < x < line and x not in gone]
                if all(self.spellings.get(x, []) == ["#", "undef", name] for x in left):
                    out |= {first, line, *left}
        return out

    def other_language(self) -> set[int]:
        """The lines of each ``#ifdef __cplusplus`` (``#ifndef``) group but its C++ branch's: its
        directives and its branch for C (the program is C++: ``unused_runtime_lines`` parses it so,
        and the file is compiled so)."""
        out: set[int] = set()
        stack: list[list[tuple[int, str, list[str]]]] = []
        for d in self.directives:
            line, kind, names = d
            if kind in ("if", "ifdef", "ifndef"):
                stack.append([d])
            elif kind in ("elif", "else") and stack:
                stack[-1].append(d)
            elif kind == "endif" and stack:
                group = stack.pop() + [d]
                (first, head, tested), rest = group[0], [x[1] for x in group[1:-1]]
                if head not in ("ifdef", "ifndef") or tested[:1] != ["__cplusplus"] or rest not in ([], ["else"]):
                    continue
                split = group[1][0] if rest else line  # the #else (or the #endif)
                out |= {first, split, line}
                out |= set(range(split + 1, line) if head == "ifdef" else range(first + 1, split))
        return out


def header_tokens(tu: ci.TranslationUnit, name: str, texts: dict[str, str]) -> list[ci.Token]:
    """All tokens of the file ``name`` of ``tu`` (comments included), as clang's lexer reads them."""
    if name in texts:
        size = len(texts[name].encode("utf-8"))
    else:
        size = os.path.getsize(name)
    return list(tu.get_tokens(extent=tu.get_extent(name, (0, size))))


def lex_header(tu: ci.TranslationUnit, name: str, units: list, texts: dict[str, str],
                comments_stay: bool = True) -> Lexed:
    """The directives, comments and code lines of the runtime header ``name`` (``Lexed``)."""
    real = os.path.realpath(name)
    # Lines inside a macro's definition (its continuation lines): a `#` there is its body's.
    in_macros = {x for u in units if u.macro and u.file == real for x in range(u.first_line + 1, u.last_line + 1)}
    tokens = header_tokens(tu, name, texts)
    directives: list[tuple[int, str, list[str]]] = []
    comments: list[tuple[int, int, int | None]] = []
    code: set[int] = set()
    tested: set[str] = set()
    identifiers: dict[int, set[str]] = {}
    spellings: dict[int, list[str]] = {}
    prev_line = 0
    for i, t in enumerate(tokens):
        line = t.location.line
        if t.kind == ci.TokenKind.COMMENT:
            nxt = next((u.location.line for u in tokens[i + 1:] if u.kind != ci.TokenKind.COMMENT), None)
            comments.append((t.extent.start.line, t.extent.end.line, nxt))
            continue
        code.add(line)
        spellings.setdefault(line, []).append(t.spelling)
        if t.kind == ci.TokenKind.IDENTIFIER:
            identifiers.setdefault(line, set()).add(t.spelling)
        first_on_line = line != prev_line
        prev_line = line
        if not (first_on_line and t.spelling == "#" and line not in in_macros) or i + 1 >= len(tokens):
            continue
        kind = tokens[i + 1].spelling
        names = [u.spelling for u in tokens[i + 2:] if u.location.line == line and u.kind == ci.TokenKind.IDENTIFIER]
        directives.append((line, kind, names))
    text = texts[name] if name in texts else open(name, encoding="utf-8").read()
    continued = {i + 1 for i, row in enumerate(text.split("\n")) if row.rstrip().endswith("\\")}
    guard = _include_guard(directives, code)
    for i, (line, kind, names) in enumerate(directives):
        # `#ifndef X` around X's own default definition alone does not use X, nor an include guard's.
        if kind in ("define", "undef") or kind == "ifndef" and (_default_definition(directives, i, code, continued)
                                                                or guard is not None and line == guard[0]):
            continue
        tested.update(names)
    return Lexed(directives, comments, code, tested, continued, identifiers, spellings, comments_stay, guard)


def _include_guard(directives: list[tuple[int, str, list[str]]], code: set[int]) -> tuple[int, int, str] | None:
    """The header's include guard: its first code is `#ifndef G` then `#define G` (alone), its last
    `#endif`, the one that closes the `#ifndef`."""
    if len(directives) < 3 or not code:
        return None
    (first, kind, names), (_, define, defined) = directives[:2]
    last, end, _ = directives[-1]
    if kind != "ifndef" or len(names) != 1 or define != "define" or defined != names or end != "endif" or \
            first != min(code) or last != max(code):
        return None
    depth = 0
    for line, k, _ in directives:
        depth += k in ("if", "ifdef", "ifndef")
        depth -= k == "endif"
        if depth == 0:
            return (first, last, names[0]) if line == last else None
    return None


def _default_definition(directives: list[tuple[int, str, list[str]]], i: int, code: set[int],
                        continued: set[int]) -> bool:
    """Whether directive ``i`` is ``#ifndef X`` whose group holds nothing but definitions of ``X``
    (``#define X ...``, also in the branches of conditionals inside it: one per compiler) up to
    its ``#endif``."""
    if not directives[i][2]:
        return False
    x = directives[i][2][0]
    allowed = {directives[i][0]}
    depth = 0
    for line, kind, names in directives[i + 1:]:
        allowed.add(line)
        if kind in ("if", "ifdef", "ifndef"):
            depth += 1
        elif kind == "endif":
            if depth == 0:
                end = line
                break
            depth -= 1
        elif kind == "define":
            if not names or names[0] != x:
                return False
            while line in continued:
                line += 1
                allowed.add(line)
        elif kind not in ("elif", "else"):
            return False
    else:
        return False
    return all(y in allowed for y in code if directives[i][0] <= y <= end)

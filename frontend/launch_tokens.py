"""Edits and finds in clang's raw token stream of a file, before or beside its parse: the C++03
launch spelling ``k<< <g, b>> >(...)`` closed up, and the file's explicit kernel-template
instantiations (which libclang lists as no cursor); and the launches of kernel templates whose
instances no cursor shows (refused)."""
from __future__ import annotations

import clang.cindex as ci

from frontend.clang_setup import cursor_loc
from frontend.lower.context import is_kernel_decl
from polypy.errors import UserError
from polypy.sources import read_source


def respace_launches(path: str, text: str | None) -> str | None:
    """``text`` (or the file) with the C++03 launch spelling ``k<< <g, b>> >(...)`` closed up to
    ``k<<<g, b>>>(...)``, which nvcc accepts and clang does not; None or ``text`` when there is none.

    Found in clang's raw token stream of the file (no preprocessing): ``<<`` then ``<`` with a gap
    opens a launch, and the first ``>>`` then ``>`` outside parentheses closes it. The gap moves
    behind the third character, so every offset and line outside the two brackets stays valid.
    """
    source = text if text is not None else read_source(path)
    if "<< " not in source and "<<\t" not in source and "<<\n" not in source:
        return text
    raw = ci.Index.create().parse(path, args=["-x", "c++", "-nostdinc", "-fsyntax-only"],
                                  unsaved_files=[(path, source)],
                                  options=ci.TranslationUnit.PARSE_SKIP_FUNCTION_BODIES)
    tokens = [t for t in raw.get_tokens(extent=raw.cursor.extent)
              if t.location.file is not None and t.location.file.name == path]
    data = source.encode("utf-8")
    edits: list[tuple[int, int]] = []  # (offset of the first bracket token, offset of the second)
    i = 0
    while i + 1 < len(tokens):
        a, b = tokens[i], tokens[i + 1]
        if a.spelling == "<<" and b.spelling == "<" and b.extent.start.offset > a.extent.end.offset:
            depth, j = 0, i + 2
            while j + 1 < len(tokens):
                s = tokens[j].spelling
                depth += {"(": 1, ")": -1, "[": 1, "]": -1, "{": 1, "}": -1}.get(s, 0)
                if depth == 0 and s == ">>" and tokens[j + 1].spelling == ">":
                    break
                if depth < 0 or s == ";":
                    j = len(tokens)
                j += 1
            if j + 1 < len(tokens):
                edits.append((a.extent.end.offset, b.extent.start.offset))
                edits.append((tokens[j].extent.end.offset, tokens[j + 1].extent.start.offset))
                i = j + 2
                continue
        i += 1
    if not edits:
        return text
    out = bytearray(data)
    for end, start in edits:  # `<<` gap `<`  ->  `<<<` gap (and alike for `>>` gap `>`)
        bracket = out[start:start + 1]
        out[end + 1:start + 1] = out[end:start]
        out[end:end + 1] = bracket
    return out.decode("utf-8")


def explicit_instantiations(tu: ci.TranslationUnit, path: str, text: str | None = None) -> list[str]:
    """``name<args>`` of each explicit kernel-template instantiation in the main file (whose
    contents are ``text``, or those of ``path`` when None).

    libclang does not list explicit instantiations as cursors, so they are found in clang's token
    stream: the keyword ``template`` not followed by ``<`` starts one. An instantiation of a class
    template (``template class Engine<float>;``) is host code, compiled as written: not one.
    A main file whose characters nowhere spell ``template`` has no such token, and its tokens
    are not listed (libclang's tokens cost about 30 us each: 3 s for a 10,000-term sum).
    """
    if text is None:
        try:
            with open(path, "rb") as f:
                spelled = b"template" in f.read()
        except OSError:
            spelled = True
    else:
        spelled = "template" in text
    if not spelled:
        return []
    tokens = [t for t in tu.get_tokens(extent=tu.cursor.extent)
              if t.location.file is not None and t.location.file.name == path]
    found = []
    for i, t in enumerate(tokens):
        if t.spelling != "template" or i + 1 >= len(tokens) or tokens[i + 1].spelling in ("<", "class", "struct",
                                                                                           "union"):
            continue
        if i > 0 and tokens[i - 1].spelling in ("::", ".", "->"):
            continue  # `this->template get<N>()`, `T::template f<N>`: the disambiguator, no instantiation
        j = i + 1
        while j + 1 < len(tokens) and not (tokens[j].kind == ci.TokenKind.IDENTIFIER and tokens[j + 1].spelling == "<"):
            if tokens[j].spelling in (";", "{"):
                break
            j += 1
        if j + 1 >= len(tokens) or tokens[j + 1].spelling != "<":
            continue
        depth, k = 0, j + 1
        while k < len(tokens):
            depth += {"<": 1, ">": -1, ">>": -2}.get(tokens[k].spelling, 0)
            if depth <= 0:
                break
            k += 1
        found.append(tokens[j].spelling + " ".join(tok.spelling for tok in tokens[j + 1:k + 1]).replace(" ", ""))
    return found


def refuse_dependent_template_launch(call: ci.Cursor) -> None:
    """``k<T><<<...>>>`` where no instance of the enclosing template names ``T`` (a member
    function of a class template): the launch is not through a pointer, and the kernel
    template's instances are not known, so it is refused rather than left unresolved. (The
    callee is an overload set; libclang's C API lists it, its Python binding does not.)"""
    callee = next(iter(call.get_children()), None)
    refs = [callee, *callee.get_children()] if callee is not None else []
    for ref in refs:
        if ref.kind != ci.CursorKind.OVERLOADED_DECL_REF:
            continue
        for i in range(ci.conf.lib.clang_getNumOverloadedDecls(ref)):
            decl = ci.conf.lib.clang_getOverloadedDecl(ref, i)
            if decl.kind == ci.CursorKind.FUNCTION_TEMPLATE and is_kernel_decl(decl):
                raise UserError(f"a launch of kernel template '{decl.spelling}' whose template arguments depend on "
                                "an enclosing class template's parameters is not supported: launch it from a "
                                "function template or with explicit template arguments", cursor_loc(call))

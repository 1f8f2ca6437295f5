"""Which declarations of polypy's C++ runtime a translated program uses (``polypy translate``
pastes only those): a dependency graph over the runtime's top-level declarations, read by
libclang from the program itself.

The program is parsed as the C++ file it will be compiled as (``c++ -fopenmp``, no CUDA mode),
with the runtime's headers included as files rather than pasted. Each top-level declaration of a
runtime header is a *unit*; a unit depends on the units its cursors refer to (by the declaration
a cursor references, and by name: overloads, specializations and dependent calls in templates
come along with the name). The roots are the units the rest of the file refers to (the emitted
kernels and launchers, the user's host code, the kernel prelude) and the runtime's objects with
initializers (they run at start-up). A unit reached from no root is dropped with the comment
just above it; lines that belong to no unit (preprocessor lines, comments between declarations)
stay. Where the parse fails the answer is None and the whole runtime is pasted.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib

import clang.cindex as ci

from frontend.copy_sizes import bounded_calls
from frontend.clang_setup import PRELUDE_DIR, RUNTIME_DIR, index, preorder, system_include_dirs
from frontend.runtime_lines import Lexed, header_tokens, lex_header

CK = ci.CursorKind

# Cursors whose meaning is a reference to a declaration.
_REFERENCES = frozenset({CK.DECL_REF_EXPR, CK.MEMBER_REF_EXPR, CK.TYPE_REF, CK.TEMPLATE_REF, CK.OVERLOADED_DECL_REF,
                         CK.CALL_EXPR, CK.MACRO_INSTANTIATION, CK.MEMBER_REF, CK.NAMESPACE_REF})
_CLASSES = frozenset({CK.STRUCT_DECL, CK.CLASS_DECL, CK.CLASS_TEMPLATE, CK.UNION_DECL})
# The prefixes of the toolkit's macro names (see unused_runtime_lines).
_TOOLKIT_MACROS = ("__", "CUDART_", "THRUST_")
# What nvcc predefines: they always stay (see unused_runtime_lines).
_NVCC_PREDEFINED = ("__CUDACC__", "__NVCC__", "__CUDACC_VER_")
# Containers whose children are top-level declarations too.
_CONTAINERS = frozenset({CK.LINKAGE_SPEC, CK.NAMESPACE})


@dataclasses.dataclass
class _Unit:
    file: str
    start: int  # byte offsets in the file
    end: int
    first_line: int  # 1-based, inclusive
    last_line: int
    names: set[str]
    root: bool
    macro: bool = False
    refs: set[str] = dataclasses.field(default_factory=set)  # names referred to
    parents: set[str] = dataclasses.field(default_factory=set)  # the class an out-of-line member belongs to


def unused_runtime_lines(text: str, path: str, *, runtime_dir: pathlib.Path = RUNTIME_DIR,
                         extra_dirs: tuple[str, ...] = (), extra_files: dict[str, str] | None = None,
                         exports: bool = True, comments: bool = True) -> dict[str, list[tuple[int, int]]] | None:
    """Per runtime header (its path), the line ranges (1-based, inclusive) of the declarations that
    ``text`` (a whole translated program that includes the runtime with ``#include``, named
    ``path``) never uses, directly or through other declarations; None when clang cannot parse it.
    ``extra_dirs``: more include directories (the user's headers); ``extra_files``: more headers
    of the runtime (name -> text: the kernel prelude), read as files of ``runtime_dir``.
    ``exports``: whether the runtime's C-linkage definitions stay whatever uses them (a file
    linked with others; a whole program in one file, ``main`` included, has no other objects).
    ``comments``: whether the comments of what stays stay (False: every comment on lines of its
    own goes too; one after code on its line stays).
    A ``POLYPY_RT_LARGE(...);`` statement (a copy's, fill's or allocation's path for large sizes)
    goes where only calls the program makes with sizes known below it reach its declaration
    (``frontend.copy_sizes``).

    Macros are units too: one stays where a unit that stays, the program or a conditional of the
    runtime (``#if``, ``#ifdef``...) names it; an ``#undef`` goes with the definitions it undoes.
    A comment goes with the declaration (or macro) it is written above, and a conditional group
    left with nothing in it goes too (``_directives``)."""
    runtime = os.path.realpath(runtime_dir)
    # polypy's own omp.h first: GCC's uses attributes clang does not take.
    args = ["-x", "c++", "-std=c++17", "-fopenmp", "-nostdinc", "-nostdinc++", "-w", "-isystem", str(PRELUDE_DIR)]
    for d in system_include_dirs("c++"):
        args += ["-isystem", d]
    for d in extra_dirs:
        args += ["-I", d]
    args += ["-I", str(runtime_dir)]
    try:
        unsaved = [(path, text)] + [(str(pathlib.Path(runtime) / name), body) for name, body in (extra_files or {}).items()]
        tu = index().parse(path, args=args, unsaved_files=unsaved,
                           options=ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD)
    except ci.TranslationUnitLoadError:
        return None
    if any(d.severity >= ci.Diagnostic.Error for d in tu.diagnostics):
        return None

    places: dict[str, str | None] = {}

    def in_runtime(c: ci.Cursor) -> str | None:
        f = c.location.file
        if f is None:
            return None
        if f.name not in places:
            real = os.path.realpath(f.name)
            places[f.name] = real if real.startswith(runtime + os.sep) else None
        return places[f.name]

    units: list[_Unit] = []
    includes: list[tuple[str, int, str]] = []  # the runtime's #include lines: file, line, file included
    roots: set[str] = set()  # names referred to from outside the runtime
    outside: list[ci.Cursor] = []
    # The runtime's C-linkage definitions (``extern "C"``: the entry points plain C files of the
    # program call by their C names, the exports other objects link against) are used by objects
    # this file cannot see: they always stay.
    exported: list[_Unit] = []
    top = list(tu.cursor.get_children())
    todo = [(c, False) for c in top]
    for c in top:  # (in the parse's order)
        fname = in_runtime(c)
        if fname is not None and c.kind == CK.INCLUSION_DIRECTIVE and c.get_included_file() is not None:
            includes.append((fname, c.location.line, os.path.realpath(c.get_included_file().name)))
    while todo:
        c, in_c_linkage = todo.pop()
        fname = in_runtime(c)
        if fname is None:
            outside.append(c)
            continue
        if c.kind in _CONTAINERS:
            todo.extend((child, in_c_linkage or c.kind == CK.LINKAGE_SPEC) for child in c.get_children())
            continue
        if c.kind in (CK.MACRO_INSTANTIATION, CK.INCLUSION_DIRECTIVE):
            continue
        # Macros stay (preprocessor lines are never left out), but what their bodies name is used
        # where they are.
        units.append(_cached_unit(c, fname))
        if exports and in_c_linkage and c.kind in (CK.FUNCTION_DECL, CK.VAR_DECL):
            exported.append(units[-1])
    used_files: set[str] = set()  # the files of the declarations the program's code refers to
    templates = [False]  # whether the program's code has templates (their dependent names refer to nothing yet)
    for c in outside:  # the program's own code (the system's headers use nothing of polypy's)
        if c.location.file is not None and not c.location.is_in_system_header:
            roots |= _referred(c, used_files, templates)
    # Every name the program's files spell, their own conditionals (#ifdef CUDART_VERSION) included.
    texts = dict(unsaved)
    for name in {path} | {c.location.file.name for c in outside
                           if c.location.file is not None and not c.location.is_in_system_header}:
        roots |= {t.spelling for t in header_tokens(tu, name, texts) if t.kind == ci.TokenKind.IDENTIFIER}
    files = {real: name for name, real in places.items() if real is not None}
    lexed = {real: lex_header(tu, name, units, texts, comments) for real, name in files.items()}
    for d in lexed.values():  # names a runtime conditional tests (#if, #ifdef, #pragma...) stay defined
        roots |= d.tested
    # What nvcc predefines (__CUDACC__, __NVCC__) stays whatever the program spells: so that the
    # system's headers take the branches they took in the frontend's parse. The toolkit's other
    # macros (__global__, CUDART_VERSION...) stay where a header the program includes spells them.
    toolkit = {name for u in units if u.macro for name in u.names if name.startswith(_TOOLKIT_MACROS)}
    roots |= {name for name in toolkit if name.startswith(_NVCC_PREDEFINED)}
    roots |= _spelled_in_headers(tu, toolkit - roots, runtime)
    # What a unit's lines spell, as the file's lexer reads them: a declaration that starts with a
    # macro (`POLYPY_RT_STATE cudaError_t* polypy_rt_last_error()`) needs the macro's definition
    # although libclang may give the declaration no tokens of its own (a precompiled header's).
    spelled: dict[int, set[str]] = {}
    for u in units:
        found = lexed.get(u.file)
        if found is not None and not u.macro:
            spelled[id(u)] = set().union(*(found.identifiers.get(x, set())
                                           for x in range(u.first_line, u.last_line + 1))) - u.names
    by_name: dict[str, list[_Unit]] = {}
    for u in units:
        for name in u.names:
            by_name.setdefault(name, []).append(u)
    members: dict[str, list[_Unit]] = {}  # class name -> its out-of-line members
    for u in units:
        for p in u.parents:
            members.setdefault(p, []).append(u)
    # (In a file linked with others, another object may install a hook: its statements all stay.)
    hooked = {} if exports else _hooked_statements(units, lexed)
    start = [u for u in units if u.root] + exported

    def reach(names: set[str], large: bool) -> tuple[set[int], set[int]]:
        """The units that stay (ids) and the lines of the hooked statements that stay, from the
        root units and those of ``names``; ``large``: whether the POLYPY_RT_LARGE statements stay."""
        keep: set[int] = set()
        work = start + [u for name in names for u in by_name.get(name, ())]
        live: set[int] = set()
        while work:
            while work:
                u = work.pop()
                if id(u) in keep:
                    continue
                keep.add(id(u))
                weak = hooked[id(u)].weak | {_HOOKED, _LARGE} if id(u) in hooked else set()
                for name in (u.refs | u.names | spelled.get(id(u), set())) - weak:
                    work.extend(v for v in by_name.get(name, []) + members.get(name, []) if id(v) not in keep)
            # A hooked statement of a unit that stays, stays where what it waits for (the hook's
            # function) stays: then so does everything it names.
            kept_names = {name for u in units if id(u) in keep for name in u.names}
            for u in units:
                for line, (installed, names_) in hooked.get(id(u), _Hooked()).lines.items():
                    if id(u) in keep and line not in live and \
                            (large if installed == _LARGE else installed in kept_names):
                        live.add(line)
                        macro = _LARGE if installed == _LARGE else _HOOKED
                        work.extend(v for name in names_ | {macro} for v in by_name.get(name, []) if id(v) not in keep)
        return keep, live

    # The statements for sizes beyond the bound (POLYPY_RT_LARGE) stay where a unit holding one is
    # reached from a root other than the functions the program calls only with smaller sizes.
    bounded = bounded_calls([c for c in outside if c.location.file is not None and not c.location.is_in_system_header],
                            lambda name: texts[name] if name in texts else open(name, encoding="utf-8").read())
    probe, _ = reach(roots - bounded, True)
    large = not bounded or any(id(u) in probe and installed == _LARGE
                               for u in units for installed, _ in hooked.get(id(u), _Hooked()).lines.values())
    keep, live = reach(roots, large)
    dropped: dict[str, set[int]] = {}
    kept: dict[str, set[int]] = {}
    for u in units:
        (kept if id(u) in keep else dropped).setdefault(u.file, set()).update(range(u.first_line, u.last_line + 1))
    defined = {name for u in units if u.macro and id(u) in keep for name in u.names}
    macros = {name for u in units if u.macro for name in u.names}
    # (A function left out may be a macro in the branch the parse did not take: C's.)
    unused = {name for u in units if id(u) not in keep for name in u.names} - \
        {name for u in units if id(u) in keep for name in u.names}
    entries = _unused_entries(units, keep, roots, spelled, lexed)
    for f, line in _included_again(includes, lexed, {name for u in units if u.macro for name in u.names}):
        entries.setdefault(f, set()).add(line)
    # The C++ library's headers the runtime includes for its own parts (streams, graphs): where
    # nothing that stays spells `std` (nor a template of the program's, whose dependent names
    # refer to nothing yet, where the program does), those through which nothing the program
    # refers to came in go.
    if not any("std" in u.refs | spelled.get(id(u), set()) for u in units if id(u) in keep) and \
            not (templates[0] and "std" in roots):
        needed = _included_through(tu, used_files, runtime)
        for f, line, header in includes:
            if "." not in os.path.basename(header) and (f, line) not in needed and \
                    os.path.basename(header) not in _IMPLICIT_HEADERS:
                entries.setdefault(f, set()).add(line)
    for u in units:
        if id(u) in keep and id(u) in hooked:
            entries.setdefault(u.file, set()).update(set(hooked[id(u)].lines) - live)
    out = {}
    for f in set(dropped) | set(lexed):
        # A line shared with a declaration that stays, stays.
        gone = (dropped.get(f, set()) - kept.get(f, set())) | entries.get(f, set())
        if f in lexed:
            gone = lexed[f].also_gone(gone, defined, macros | unused)
        if gone:
            out[f] = _spans(gone)
    return out


# The C++ library's headers a program may need without spelling a name they declare (a range-for
# over `{1, 2}` needs std::initializer_list, `new (p) T` the placement operator new): never dropped.
_IMPLICIT_HEADERS = frozenset({"initializer_list", "new"})


def _included_through(tu: ci.TranslationUnit, files: set[str], runtime: str) -> set[tuple[str, int]]:
    """The ``#include`` lines of the runtime (file, line) through which each of ``files`` first came
    into ``tu`` (directly or through other headers)."""
    parent: dict[str, tuple[str, int]] = {}
    for inc in tu.get_includes():
        f = os.path.realpath(inc.include.name)
        if f not in parent and inc.source is not None:
            parent[f] = (os.path.realpath(inc.source.name), inc.location.line)
    out: set[tuple[str, int]] = set()
    for f in files:
        seen: set[str] = set()
        while f in parent and f not in seen:
            seen.add(f)
            source, line = parent[f]
            if source.startswith(runtime + os.sep):
                out.add((source, line))
                break
            f = source
    return out


def _included_again(includes: list[tuple[str, int, str]], lexed: dict[str, Lexed],
                    macros: set[str]) -> list[tuple[str, int]]:
    """The ``#include`` lines of the runtime (``includes``, in the parse's order) of a system header
    that a line before them included already, under the same conditions (``#ifdef X`` of names
    the runtime does not define: the compiler's, ``_OPENMP``): the kernel prelude's, after the
    runtime's. (Not <assert.h>: each inclusion reads ``NDEBUG`` again.)"""
    out: list[tuple[str, int]] = []
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for f, line, header in includes:
        found = lexed.get(f)
        where = found.conditions(line) if found is not None else None
        if where is None or any(name in macros for _, name in where) or os.path.basename(header) == "assert.h" or \
                header.startswith(os.path.realpath(RUNTIME_DIR) + os.sep):
            continue
        if (header, where) in seen:
            out.append((f, line))
        seen.add((header, where))
    return out


# `POLYPY_RT_HOOKED(installed, statement);` (polypy/runtime/cuda_runtime.h): a statement that does
# nothing until a part of the runtime installs the hook it reads, `installed` being that part's function.
_HOOKED = "POLYPY_RT_HOOKED"
# `POLYPY_RT_LARGE(statement);`: a statement for sizes from the runtime's bound up (large copies,
# fills and allocations), needed only where some call of the program's may be of such a size.
_LARGE = "POLYPY_RT_LARGE"


@dataclasses.dataclass
class _Hooked:
    """A unit's hooked statements: per line (each alone on its line), the function whose
    installation it waits for and the names it spells; ``weak``: the names the unit spells only
    there (they are needed only where the statement stays)."""

    lines: dict[int, tuple[str, set[str]]] = dataclasses.field(default_factory=dict)
    weak: set[str] = dataclasses.field(default_factory=set)


def _hooked_statements(units: list[_Unit], lexed: dict[str, Lexed]) -> dict[int, _Hooked]:
    """Per unit (its id) that holds hooked statements, those statements (``_Hooked``): lines whose
    tokens are exactly one ``POLYPY_RT_HOOKED(installed, ...);`` or ``POLYPY_RT_LARGE(...);`` (then
    ``_LARGE`` stands for what it waits for)."""
    out: dict[int, _Hooked] = {}
    for u in units:
        found = lexed.get(u.file)
        if found is None or u.macro:
            continue
        hooked = _Hooked()
        elsewhere: set[str] = set()
        for line in range(u.first_line, u.last_line + 1):
            toks = found.spellings.get(line, [])
            ids = found.identifiers.get(line, set())
            if _one_hooked_statement(toks):
                hooked.lines[line] = (toks[2], ids - {_HOOKED})
            elif _one_hooked_statement(toks, _LARGE):
                hooked.lines[line] = (_LARGE, ids - {_LARGE})
            else:
                elsewhere |= ids
        if hooked.lines:
            hooked.weak = set().union(*(names for _, names in hooked.lines.values())) - elsewhere
            out[id(u)] = hooked
    return out


def _one_hooked_statement(toks: list[str], macro: str = _HOOKED) -> bool:
    """Whether ``toks`` (a line's) are ``POLYPY_RT_HOOKED ( name , ... ) ;`` (``POLYPY_RT_LARGE ( ... ) ;``
    for ``macro`` ``_LARGE``): the parenthesis opened after the macro's name closes just before the
    last token."""
    if len(toks) < 4 or toks[:2] != [macro, "("] or toks[-1] != ";" or \
            macro == _HOOKED and (len(toks) < 6 or toks[3] != ","):
        return False
    depth = 0
    for i, t in enumerate(toks[1:-1], start=1):
        depth += t in "([{" and len(t) == 1
        depth -= t in ")]}" and len(t) == 1
        if depth == 0:
            return i == len(toks) - 2
    return False


def _spelled_in_headers(tu: ci.TranslationUnit, names: set[str], runtime: str) -> set[str]:
    """Those of ``names`` that a header of ``tu`` outside the runtime (``runtime``: its directory,
    real path) contains anywhere, comments and branches not taken included (a test of its bytes:
    it can only keep a macro that is not needed)."""
    out: set[str] = set()
    for inc in tu.get_includes():
        f = inc.include
        if f is None or not names - out or os.path.realpath(f.name).startswith(runtime + os.sep):
            continue
        data = _header_bytes(f.name)
        out |= {name for name in names - out if name.encode() in data}
    return out


# The bytes of each header read, by path and modification time.
_HEADERS: dict[tuple[str, int], bytes] = {}


def _header_bytes(path: str) -> bytes:
    try:
        key = (path, os.stat(path).st_mtime_ns)
    except OSError:
        return b""
    if key not in _HEADERS:
        with open(path, "rb") as fh:
            _HEADERS[key] = fh.read()
    return _HEADERS[key]


def _unused_entries(units: list[_Unit], keep: set[int], roots: set[str], spelled: dict[int, set[str]],
                    lexed: dict[str, Lexed]) -> dict[str, set[int]]:
    """Per file, the lines of list macros that name nothing used: a function-like macro ``L(X)``
    whose every continuation line is one entry ``X(name, ...)`` (the runtime's error codes), used
    by nothing that stays but the declaration of its names (``enum { L(AS_ENUMERATOR) }``),
    keeps the entries whose name something that stays (or the program) uses, and its last entry
    (where the enum's largest value is: the enum's range stays the same)."""
    out: dict[str, set[int]] = {}
    kept = [u for u in units if id(u) in keep]
    for m in kept:
        found = lexed.get(m.file)
        if not m.macro or found is None or m.last_line == m.first_line:
            continue
        head = found.spellings.get(m.first_line, [])
        if len(head) != 6 or head[:2] != ["#", "define"] or head[3] != "(" or head[5] != ")":
            continue  # not `#define L(X)` alone on its line
        param = head[4]
        lines = range(m.first_line + 1, m.last_line + 1)
        names = {}
        for x in lines:
            toks = found.spellings.get(x, [])
            if len(toks) < 4 or toks[0] != param or toks[1] != "(" or toks[3] != ",":
                break
            names[x] = toks[2]
        else:
            macro = next(iter(m.names))
            users = {id(u) for u in kept if u is not m and macro in (u.refs | spelled.get(id(u), set()))}
            # (A typedef of the enum is the same declaration: it shares the enum's lines.)
            declarers = [u for u in kept if id(u) in users and set(names.values()) <= u.names]
            if not all(any(d.file == u.file and d.first_line <= u.last_line and u.first_line <= d.last_line
                           for d in declarers) for u in kept if id(u) in users):
                continue
            needed = set(roots)
            for u in kept:
                if u is not m and id(u) not in users:
                    needed |= u.refs | u.names | spelled.get(id(u), set())
            out.setdefault(m.file, set()).update(x for x, name in names.items()
                                                 if name not in needed and x != m.last_line)
    return out


# The runtime's units, by place and file version: the same in every program (the runtime comes
# first in the file, before anything of the program's), so read once per process.
# (One macro's expansion may declare several: the key has the full name and kind too.)
_UNIT_CACHE: dict[tuple[str, int, int, int, str, int], _Unit] = {}


def _cached_unit(c: ci.Cursor, fname: str) -> _Unit:
    if not os.path.exists(fname):  # a header given as text (extra_files): not cached
        return _unit(c, fname)
    key = (fname, os.stat(fname).st_mtime_ns, c.extent.start.offset, c.extent.end.offset, c.displayname, c.kind.value)
    if key not in _UNIT_CACHE:
        _UNIT_CACHE[key] = _unit(c, fname)
    return _UNIT_CACHE[key]


def _unit(c: ci.Cursor, fname: str) -> _Unit:
    names = {c.spelling} if c.spelling else set()
    if c.kind == CK.ENUM_DECL:
        names |= {e.spelling for e in c.get_children() if e.kind == CK.ENUM_CONSTANT_DECL}
    if c.kind == CK.TYPEDEF_DECL:  # typedef struct {...} name;
        names |= {t.spelling for t in c.get_children() if t.kind in (CK.STRUCT_DECL, CK.ENUM_DECL) and t.spelling}
    parents = set()
    sp = c.semantic_parent
    if sp is not None and sp.kind in _CLASSES:
        parents.add(sp.spelling)
    # Kept whatever uses them: objects initialized at start-up, operators (used without their
    # names). Macros are never left out, but what they name is needed only where they are used.
    root = (c.kind == CK.VAR_DECL and _initializes(c)) or c.spelling.startswith("operator")
    u = _Unit(fname, c.extent.start.offset, c.extent.end.offset, c.extent.start.line, c.extent.end.line,
              names, root, c.kind == CK.MACRO_DEFINITION, parents=parents)
    u.refs = _referred(c) - names
    return u


def _initializes(var: ci.Cursor) -> bool:
    """A namespace-scope object whose initialization runs code (a constructor or a call)."""
    decl = var.type.get_canonical().get_declaration()
    if decl is not None and decl.kind in (CK.STRUCT_DECL, CK.CLASS_DECL):
        return True
    return any(x.kind == CK.CALL_EXPR for x in preorder(var))


_TEMPLATES = frozenset({CK.FUNCTION_TEMPLATE, CK.CLASS_TEMPLATE, CK.CLASS_TEMPLATE_PARTIAL_SPECIALIZATION})


def _referred(c: ci.Cursor, files: set[str] | None = None, templates: list[bool] | None = None) -> set[str]:
    """The names ``c`` refers to: its identifiers as clang's lexer reads them (also inside OpenMP
    regions and macro arguments, where libclang shows no cursors) and the declarations its
    cursors reference (a member brings its class). ``files``: gets the files of those
    declarations (real paths); ``templates``: its one item set where ``c`` holds a template."""
    out = {t.spelling for t in c.get_tokens() if t.kind == ci.TokenKind.IDENTIFIER}
    for x in preorder(c):
        if templates is not None and x.kind in _TEMPLATES:
            templates[0] = True
        if x.kind not in _REFERENCES:
            continue
        r = x.referenced
        if files is not None and r is not None and r.location.file is not None and r.kind != CK.NAMESPACE:
            # (A namespace is declared in every header that adds to it: which one says nothing.)
            files.add(os.path.realpath(r.location.file.name))
        if r is not None and r.spelling:
            out.add(r.spelling)
            top = r.semantic_parent
            if top is not None and top.kind in _CLASSES:
                out.add(top.spelling)
    return out


def _spans(lines: set[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for line in sorted(lines):
        if out and line == out[-1][1] + 1:
            out[-1] = (out[-1][0], line)
        else:
            out.append((line, line))
    return out

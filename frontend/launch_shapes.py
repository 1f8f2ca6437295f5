"""Launch configurations evaluated at compile time: the ``grid``/``block`` of ``K<<<grid, block>>>``
as constant ``(x, y, z)`` shapes where the program fixes them, with the reason either way.

A whole program gets versions of a kernel specialized for the block shapes it is launched with
(``codegen.c.versions.emit_kernel``), so the shapes must be known here. A shape is known when:

* the argument is a constant expression clang evaluates: ``256``, ``dim3(16, 16)``,
  ``dim3(BLOCK_SIZE)`` with ``#define BLOCK_SIZE 16`` (or ``-DBLOCK_SIZE=16``), a ``const int`` or
  ``constexpr`` variable;
* or it is a local ``dim3`` variable (or a ``dim3``/``int`` built from local ``int`` variables)
  whose value at the launch follows from its writes, all of them *statement-level*
  (``dim3 threads(BLOCK_SIZE, BLOCK_SIZE);``, ``threads = dim3(8);``, ``threads.x = 16;``,
  ``bs = 128;``) with constant right-hand sides, and all of them executed before the launch in
  straight-line code::

      { dim3 b(16, 16);          <- the declaration and every write sit in a block that
        b.x = 32;                   encloses the launch, before the statement holding it:
        for (...) {                 each runs, in source order, before every launch
          k<<<g, b>>>(...);         (no goto in the function, no switch around the launch)
      } }

  Any other use that may write the variable -- assigned in an ``if`` or after the launch in a
  loop, ``+=``/``++``, its address taken, passed or bound by non-const reference -- makes the
  shape unknown, and the launch runs the kernel's generic version. Reads (``b.x`` in an
  expression, a copy, a ``const dim3&`` argument) are harmless.

``LaunchShapes(functions, read).of(call, arg)`` answers for one argument of one launch; each
function's uses and writes are collected once, by one walk of clang's AST.
"""
from __future__ import annotations

import dataclasses
import functools
import re
from typing import Callable, Iterator, Sequence

import clang.cindex as ci

from frontend.clang_setup import binary_operator, evaluate

CK = ci.CursorKind
Shape = tuple[int, int, int]
Pos = int  # a cursor's place in its function: its number in a preorder walk (``HostFunction``)

_WRAPPERS = (CK.UNEXPOSED_EXPR, CK.PAREN_EXPR)
_INTEGER_TYPES = frozenset({
    ci.TypeKind.INT, ci.TypeKind.UINT, ci.TypeKind.LONG, ci.TypeKind.ULONG, ci.TypeKind.LONGLONG,
    ci.TypeKind.ULONGLONG, ci.TypeKind.SHORT, ci.TypeKind.USHORT, ci.TypeKind.CHAR_S, ci.TypeKind.UCHAR,
    ci.TypeKind.SCHAR, ci.TypeKind.CHAR_U,
})
_ARITH = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a // b, "%": lambda a, b: a % b, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
}
_MAX_DEPTH = 12  # variables defined from variables defined from ...
_INT_MAX = 2**31 - 1  # values are followed exactly only where every type holds them


@dataclasses.dataclass(frozen=True)
class ShapeOf:
    """A launch argument's shape, or None, and why: where it comes from (``dim3 threads(BLOCK_SIZE,
    BLOCK_SIZE)``) or why it is not known (``dimGrid.x = i (line 172) is not a constant``)."""

    shape: Shape | None
    why: str


class _Unknown(Exception):
    pass


def is_dim3(t: ci.Type) -> bool:
    return t.get_canonical().spelling.replace("const ", "").strip().endswith(("dim3", "uint3"))


def is_integer(t: ci.Type) -> bool:
    return t.get_canonical().kind in _INTEGER_TYPES


@dataclasses.dataclass
class _Ref:
    """One reference to a local variable: where, and (``ancestors``) the nodes above it."""

    pos: Pos
    cursor: ci.Cursor
    facts: "HostFunction"

    @functools.cached_property
    def ancestors(self) -> list[tuple[ci.Cursor, Pos]]:
        """The nodes above the reference, outermost first (the function's cursor first), with
        their positions; listed when first asked (most references never are)."""
        facts, out = self.facts, []
        p = facts.parent[self.pos]
        while p >= 0:
            out.append((facts.cursors[p], p))
            p = facts.parent[p]
        out.reverse()
        return out


@dataclasses.dataclass
class _Var:
    decl: ci.Cursor
    pos: Pos
    refs: list[_Ref] = dataclasses.field(default_factory=list)


class HostFunction:
    """One host function: every node's cursor, kind, parent and index among its parent's
    children, by position (``Pos``: the node's number in preorder, so that positions sort in
    source order), its local variables with every reference to them, and the position of each
    launch. One walk, kept linear in the nodes however deep the function's expressions nest (a
    path of child indices per node was quadratic: a 20,000-factor ``#define`` product used 25
    times took minutes and gigabytes here)."""

    def __init__(self, fn: ci.Cursor):
        self.fn = fn
        self.cursors: list[ci.Cursor] = []
        self.kinds: list[ci.CursorKind] = []
        self.parent: list[int] = []  # -1 above the function
        self.index: list[int] = []  # among the parent's children
        self.vars: dict[tuple, _Var] = {}
        self.launches: dict[tuple[int, int], Pos] = {}
        self.has_goto = False
        self._walk(fn)

    def _walk(self, fn: ci.Cursor) -> None:
        todo: list[tuple[ci.Cursor, int, int]] = [(fn, -1, 0)]
        while todo:
            c, parent, index = todo.pop()
            pos = len(self.kinds)
            kind = c.kind
            self.cursors.append(c)
            self.kinds.append(kind)
            self.parent.append(parent)
            self.index.append(index)
            children = list(c.get_children())
            if kind in (CK.GOTO_STMT, CK.INDIRECT_GOTO_STMT):
                self.has_goto = True
            elif kind == CK.VAR_DECL:
                self.vars[var_key(c)] = _Var(c, pos)
            elif kind == CK.DECL_REF_EXPR:
                target = c.referenced
                if target is not None and target.kind == CK.VAR_DECL:
                    var = self.vars.get(var_key(target))
                    if var is not None:
                        var.refs.append(_Ref(pos, c, self))
            elif kind == CK.CALL_EXPR and any(ch.kind == CK.CALL_EXPR and ch.spelling == "__cudaPushCallConfiguration"
                                              for ch in children):
                self.launches[(c.extent.start.offset, c.extent.end.offset)] = pos
            for i in range(len(children) - 1, -1, -1):  # pushed last to first: numbered in preorder
                todo.append((children[i], pos, i))

    def kind_above(self, pos: Pos) -> ci.CursorKind | None:
        """The kind of the node holding the one at ``pos`` (None above the function)."""
        p = self.parent[pos]
        return self.kinds[p] if p >= 0 else None

    def above(self, pos: Pos) -> Iterator[Pos]:
        """The positions of the nodes holding the one at ``pos``, innermost first."""
        p = self.parent[pos]
        while p >= 0:
            yield p
            p = self.parent[p]


def var_key(c: ci.Cursor) -> tuple:
    loc = c.location
    return (loc.file.name if loc.file is not None else None, loc.offset, c.spelling)


def _line(c: ci.Cursor) -> int:
    return c.location.line


class LaunchShapes:
    """The shapes of the launches in ``functions`` (the host functions of a translation unit);
    ``read(path)`` gives a file's text, for the reasons' quotes of the source."""

    def __init__(self, functions: Sequence[ci.Cursor], read: Callable[[str], str]):
        self.functions = list(functions)
        self.read = read
        self._facts: dict[int, HostFunction] = {}
        self._bytes: dict[str, bytes] = {}

    # -- entry point
    def of(self, call: ci.Cursor, arg: ci.Cursor) -> ShapeOf:
        """The shape of ``arg`` (a ``dim3`` argument of the launch ``call``)."""
        facts, pos = self._locate(call)
        try:
            value, sources = _Evaluator(self, facts).dim3(arg, pos, 0)
        except _Unknown as e:
            return ShapeOf(None, str(e))
        if not all(v >= 1 for v in value):
            return ShapeOf(None, f"{self.quote(arg)} evaluates to ({', '.join(map(str, value))}), not a shape")
        why = "; ".join(dict.fromkeys(sources)) if sources else self.quote(arg)
        return ShapeOf(value, why)

    def integer(self, call: ci.Cursor, arg: ci.Cursor) -> int | None:
        """The value of ``arg``, an integer argument of ``call`` (any call of a host function,
        not only a launch), where it follows as a launch's shapes do; None where it does not."""
        facts, pos = self._locate(call, any_call=True)
        try:
            return _Evaluator(self, facts).integer(arg, pos, 0)[0]
        except _Unknown:
            return None

    def _locate(self, call: ci.Cursor, any_call: bool = False) -> tuple[HostFunction | None, Pos | None]:
        f = call.location.file
        offset = call.extent.start.offset
        for i, fn in enumerate(self.functions):
            floc = fn.location.file
            if floc is None or f is None or floc.name != f.name:
                continue
            if not fn.extent.start.offset <= offset < fn.extent.end.offset:
                continue
            if i not in self._facts:
                self._facts[i] = HostFunction(fn)
            facts = self._facts[i]
            where = (call.extent.start.offset, call.extent.end.offset)
            pos = facts.launches.get(where)
            if pos is None and any_call:
                pos = next((i for i, c in enumerate(facts.cursors) if facts.kinds[i] == CK.CALL_EXPR and
                            (c.extent.start.offset, c.extent.end.offset) == where), None)
            if pos is not None:
                return facts, pos
        return None, None

    # -- quoting the source
    def quote(self, c: ci.Cursor, limit: int = 90) -> str:
        f = c.extent.start.file
        if f is None:
            return c.spelling or "?"
        data = self._bytes.get(f.name)
        if data is None:
            data = self._bytes[f.name] = self.read(f.name).encode("utf-8")
        text = data[c.extent.start.offset:c.extent.end.offset].decode("utf-8", errors="replace")
        text = re.sub(r"\s+", " ", text).strip()  # whitespace only: layout of a quote, not parsing
        return text if len(text) <= limit else text[:limit - 3] + "..."


class _Evaluator:
    def __init__(self, shapes: LaunchShapes, facts: HostFunction | None):
        self.shapes = shapes
        self.facts = facts

    def quote(self, c: ci.Cursor) -> str:
        return self.shapes.quote(c)

    # -- dim3 expressions
    def dim3(self, e: ci.Cursor, at: Pos | None, depth: int) -> tuple[Shape, list[str]]:
        node = _strip_dim3(e)
        if node.kind == CK.CALL_EXPR and node.spelling == "dim3":
            args = [c for c in node.get_children() if c.kind != CK.TYPE_REF]
            if not 1 <= len(args) <= 3:
                raise _Unknown(f"{self.quote(e)} is not a dim3 of 1 to 3 sizes")
            values, sources = [], []
            for a in args:
                v, s = self.integer(a, at, depth)
                values.append(v)
                sources += s
            values += [1] * (3 - len(values))
            return (values[0], values[1], values[2]), sources
        if node.kind == CK.DECL_REF_EXPR and is_dim3(node.type):
            return self.variable(node, at, depth)
        if is_integer(node.type):
            v, s = self.integer(node, at, depth)
            return (v, 1, 1), s
        raise _Unknown(f"{self.quote(e)} is computed at run time")

    # -- integer expressions
    def integer(self, e: ci.Cursor, at: Pos | None, depth: int) -> tuple[int, list[str]]:
        value = evaluate(e)  # a constant expression, or a default argument (dim3's sizes default to 1)
        if isinstance(value, int):
            return value, []
        node = e
        while node.kind in _WRAPPERS or node.kind == CK.CSTYLE_CAST_EXPR and is_integer(node.type):
            children = [c for c in node.get_children() if c.kind != CK.TYPE_REF]
            if len(children) != 1 or (is_integer(node.type) and node.type.get_canonical().get_size() < 4):
                break  # a conversion to a narrower type is not followed
            node = children[0]
        if node.kind == CK.DECL_REF_EXPR and is_integer(node.type):
            return self.variable(node, at, depth)
        if node.kind == CK.MEMBER_REF_EXPR and node.spelling in ("x", "y", "z"):
            base = [c for c in node.get_children()]
            if len(base) == 1 and base[0].kind == CK.DECL_REF_EXPR and is_dim3(base[0].type):
                shape, sources = self.variable(base[0], at, depth)
                return shape["xyz".index(node.spelling)], sources
        if node.kind == CK.BINARY_OPERATOR and binary_operator(node) in _ARITH:
            a, b = list(node.get_children())
            va, sa = self.integer(a, at, depth)
            vb, sb = self.integer(b, at, depth)
            op = binary_operator(node)
            if va < 0 or vb < 0 or (op in "/%" and vb == 0) or (op in ("<<", ">>") and vb > 62):
                raise _Unknown(f"{self.quote(node)} is not evaluated (negative, or a division by zero)")
            value = _ARITH[op](va, vb)
            if value > _INT_MAX:  # C would wrap or overflow: not followed
                raise _Unknown(f"{self.quote(node)} is not evaluated (beyond 32-bit int)")
            return value, sa + sb
        raise _Unknown(f"{self.quote(e)} is computed at run time")

    # -- variables
    def variable(self, ref: ci.Cursor, at: Pos | None, depth: int):
        """The value of the variable ``ref`` names, at the statement at ``at``: a shape for a
        ``dim3``, an int for an integer."""
        name = ref.spelling
        target = ref.referenced
        facts = self.facts
        if depth > _MAX_DEPTH:
            raise _Unknown(f"{name} is defined through too many variables")
        if facts is None or at is None or target is None:
            raise _Unknown(f"{name} is computed at run time")
        var = facts.vars.get(var_key(target))
        if var is None:
            kinds = {CK.PARM_DECL: "a parameter of the launching function",
                     CK.TEMPLATE_NON_TYPE_PARAMETER: "a parameter of the launching function's template"}
            raise _Unknown(f"{name} is {kinds.get(target.kind, 'not a local variable of the launching function')}")
        if target.storage_class == ci.StorageClass.STATIC:
            raise _Unknown(f"{name} is a static variable")
        if facts.has_goto:
            raise _Unknown(f"the function launching with {name} has a goto")
        if any(facts.kinds[a] in (CK.SWITCH_STMT, CK.LAMBDA_EXPR) for a in facts.above(at)):
            raise _Unknown(f"the launch with {name} is inside a switch or a lambda")
        if not self.dominates(facts.parent[var.pos], at):
            raise _Unknown(f"{name} is not declared in a block enclosing the launch")
        dim3 = is_dim3(target.type)
        writes: list[tuple[Pos, str | None, ci.Cursor, ci.Cursor]] = []  # (statement, member, value, stmt)
        for r in var.refs:
            what = self.classify(r, dim3)
            if what is None:
                continue
            stmt_pos, member, value, stmt = what
            if not self.dominates(stmt_pos, at):
                raise _Unknown(f"{name} is written by `{self.quote(stmt)}` (line {_line(stmt)}), which does not run "
                               f"before every launch in straight-line code")
            writes.append((stmt_pos, member, value, stmt))
        writes.sort(key=lambda w: w[0])
        decl_stmt = var.decl
        # The initializer of ``target``, not of ``var.decl``: in a host function template the
        # launch is an instance's, whose initializer has the template's arguments substituted.
        init = [c for c in target.get_children() if c.kind != CK.TYPE_REF and c.kind.is_expression()]
        sources: list[str] = []
        current: list[int | None]
        if init:
            if dim3:
                shape, s = self.dim3(init[-1], var.pos, depth + 1)
                current = list(shape)
            else:
                v, s = self.integer(init[-1], var.pos, depth + 1)
                current = [v]
            sources += s
        else:
            current = [1, 1, 1] if dim3 else [None]
        sources.append(self.quote(decl_stmt))
        for stmt_pos, member, value, stmt in writes:
            try:
                if member is None and dim3:
                    shape, s = self.dim3(value, stmt_pos, depth + 1)
                    current = list(shape)
                else:
                    v, s = self.integer(value, stmt_pos, depth + 1)
                    if member is None:
                        current = [v]
                    else:
                        current["xyz".index(member)] = v
            except _Unknown as e:
                raise _Unknown(f"`{self.quote(stmt)}` (line {_line(stmt)}) is not a constant: {e}") from None
            sources += s
            sources.append(self.quote(stmt))
        if any(v is None for v in current):
            raise _Unknown(f"{name} is not initialized before the launch")
        if not dim3 and not _fits(current[0], target.type):
            raise _Unknown(f"{name} = {current[0]} does not fit its type {target.type.spelling}")
        if dim3:
            return (current[0], current[1], current[2]), sources
        return current[0], sources

    def dominates(self, stmt: Pos, at: Pos) -> bool:
        """Whether the statement at ``stmt`` -- a direct child of a compound statement -- runs
        before the statement holding ``at`` each time that runs (straight-line code)."""
        facts = self.facts
        if facts is None or stmt < 0:
            return False
        block = facts.parent[stmt]
        if block < 0 or facts.kinds[block] != CK.COMPOUND_STMT:
            return False
        a = at  # ``at`` or the node above it that is a statement of ``block``
        while a >= 0 and facts.parent[a] != block:
            a = facts.parent[a]
        return a >= 0 and facts.index[a] > facts.index[stmt]

    def nested(self, write: ci.Cursor, parent: ci.Cursor) -> str:
        """Why a write that is not a statement of a block (``if (c) b.x = 32;``, ``f(b.x = 3)``)
        makes the value unknown."""
        if parent.kind.is_expression():
            return f"`{self.quote(write)}` (line {_line(write)}) is an assignment inside an expression"
        return (f"`{self.quote(write)}` (line {_line(write)}) does not run before every launch in straight-line "
                f"code")

    def classify(self, r: _Ref, dim3: bool):
        """None for a read; (statement position, member or None, value, statement) for a
        statement-level write; raises ``_Unknown`` for any other use."""
        name = r.cursor.spelling
        parent, ppos = r.ancestors[-1]
        where = f"(line {_line(r.cursor)})"
        if parent.kind == CK.MEMBER_REF_EXPR and dim3:
            grand, gpos = r.ancestors[-2]
            if grand.kind == CK.UNEXPOSED_EXPR:
                return None  # b.x read
            if grand.kind == CK.BINARY_OPERATOR and binary_operator(grand) == "=" and self.facts.index[ppos] == 0:
                if self.facts.kind_above(gpos) != CK.COMPOUND_STMT:
                    raise _Unknown(self.nested(grand, r.ancestors[-3][0]))
                if parent.spelling not in ("x", "y", "z"):
                    raise _Unknown(f"{name}.{parent.spelling} is assigned {where}")
                value = list(grand.get_children())[-1]
                return gpos, parent.spelling, value, grand
            raise _Unknown(f"{name}.{parent.spelling} may be modified by `{self.quote(grand)}` {where}")
        if parent.kind == CK.UNEXPOSED_EXPR:
            if not dim3 or parent.type.spelling.startswith("const "):
                return None  # a read, or a copy (binding to const dim3&)
        if dim3 and parent.kind == CK.CALL_EXPR and parent.spelling == "operator=" and self.facts.index[r.pos] == 0:
            i = len(r.ancestors) - 1  # the call of operator=, in its implicit wrappers
            while i > 0 and r.ancestors[i - 1][0].kind == CK.UNEXPOSED_EXPR:
                i -= 1
            stmt, spos = r.ancestors[i]
            if self.facts.kind_above(spos) != CK.COMPOUND_STMT:
                raise _Unknown(self.nested(stmt, r.ancestors[i - 1][0]))
            return spos, None, list(parent.get_children())[-1], stmt
        if not dim3 and parent.kind == CK.BINARY_OPERATOR and binary_operator(parent) == "=" and \
                self.facts.index[r.pos] == 0:
            if self.facts.kind_above(ppos) != CK.COMPOUND_STMT:
                raise _Unknown(self.nested(parent, r.ancestors[-2][0]))
            return ppos, None, list(parent.get_children())[-1], parent
        if parent.kind == CK.UNARY_OPERATOR:
            raise _Unknown(f"{name} is modified or its address taken in `{self.quote(parent)}` {where}")
        if parent.kind == CK.COMPOUND_ASSIGNMENT_OPERATOR:
            raise _Unknown(f"{name} is modified by `{self.quote(parent)}` {where}")
        if parent.kind == CK.CALL_EXPR:
            raise _Unknown(f"{name} is passed by reference to {parent.spelling or 'a function'} {where}")
        if parent.kind == CK.VAR_DECL:
            raise _Unknown(f"{name} is bound to the reference {parent.spelling} {where}")
        raise _Unknown(f"{name} is used in `{self.quote(parent)}` {where}, which may modify it")


def _fits(value: int, t: ci.Type) -> bool:
    """Whether an integer variable of type ``t`` holds ``value`` as it is (no truncation)."""
    bits = 8 * t.get_canonical().get_size()
    if bits <= 0:
        return False
    unsigned = t.get_canonical().kind in (ci.TypeKind.UINT, ci.TypeKind.ULONG, ci.TypeKind.ULONGLONG,
                                          ci.TypeKind.USHORT, ci.TypeKind.UCHAR, ci.TypeKind.CHAR_U)
    return 0 <= value < (2 ** bits if unsigned else 2 ** (bits - 1))


def _strip_dim3(e: ci.Cursor) -> ci.Cursor:
    """Through casts, parentheses and copies of a ``dim3`` to the expression that makes it."""
    node = e
    while True:
        children = [c for c in node.get_children() if c.kind != CK.TYPE_REF]
        if node.kind in _WRAPPERS + (CK.CXX_FUNCTIONAL_CAST_EXPR,) and len(children) == 1:
            node = children[0]
        elif node.kind == CK.CALL_EXPR and node.spelling == "dim3" and len(children) == 1 and is_dim3(children[0].type):
            node = children[0]  # a copy
        else:
            return node

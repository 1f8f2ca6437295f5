"""Device ``printf`` and ``assert``: calls that become the IR's ``Print`` and ``AssertFail``.

``printf(fmt, ...)`` needs a string-literal format; each argument must have the type its
conversion reads after C's default promotions (``%d`` an int of at most 32 bits, ``%ld`` a 64-bit
one, ``%f`` a float or double...): a mismatch prints garbage on a GPU, so it is refused here
rather than given a meaning. ``%s`` takes a string literal, folded into the format, a choice
between literals (``ok ? "yes" : "no"``: one print per choice, under ``if``), or a local ``char``
array (a row of one, a pointer into one at a constant offset): its bytes from there to the end of
the row are the print's arguments (``n.Print.strings``), printed up to the first 0 byte. A
pointer into shared or global memory is refused: its end is not known, and reading past the 0
byte would read what CUDA's printf does not.

``assert(e)`` expands to ``e ? (void)0 : __assert_fail("e", __FILE__, __LINE__, function)`` (the
conditional becomes an ``if``); the call becomes ``AssertFail`` followed by ``return``: the
thread stops there, as the GPU stops the kernel (the launch then fails with cudaErrorAssert). In
a device function a flag carries the stop out through every caller (``inline``)."""
from __future__ import annotations

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import BOOL, I8, I32, U8
from polypy.ir.printf import FormatError, fold_string, parse_format

from frontend.arith import convert
from frontend.clang_setup import evaluated_string, unary_operator
from frontend.lower.context import CK
from frontend.values import Pointer, Value


def _literal(arg: ci.Cursor) -> ci.Cursor | None:
    """The string literal (or ``__func__``-like predefined name) an argument is, through
    implicit conversions and parentheses."""
    while arg.kind in (CK.UNEXPOSED_EXPR, CK.PAREN_EXPR, CK.CSTYLE_CAST_EXPR) or \
            (arg.kind == CK.UNARY_OPERATOR and unary_operator(arg) == "__extension__"):
        children = [c for c in arg.get_children() if c.kind != CK.TYPE_REF]
        if len(children) != 1:
            break
        arg = children[0]
    return arg if arg.kind == CK.STRING_LITERAL else None


def _text(builder, arg: ci.Cursor, what: str) -> str:
    lit = _literal(arg)
    raw = evaluated_string(arg) if lit is not None else None
    if raw is None and lit is not None:
        # clang evaluates a literal that decays to a pointer, not one used as an array (the
        # branches of `c ? "+" : "-"`, both char[2]): one token without escapes spells itself.
        tokens = [t.spelling for t in lit.get_tokens()]
        if len(tokens) == 1 and tokens[0].startswith('"') and "\\" not in tokens[0]:
            raw = tokens[0][1:-1].encode("utf-8")
    if raw is not None and len(raw) + 1 != lit.type.get_canonical().get_array_size():
        raw = None  # an embedded NUL: clang's evaluation stops there
    if raw is None:
        raise builder.error(f"{what} must be a string literal (without an embedded NUL)", arg)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise builder.error(f"{what} must be UTF-8 text", arg) from None


def device_printf(builder, args: list[ci.Cursor], c: ci.Cursor, discard: bool) -> Value | None:
    if not discard:
        raise builder.error("the value of device printf is not supported", c)
    if not args:
        raise builder.error("printf needs a format", c)
    fmt = _text(builder, args[0], "the format of device printf")
    try:
        specs = parse_format(fmt, allow_strings=True)
    except FormatError as exc:
        raise builder.error(str(exc), args[0]) from None
    wanted = sum(1 if s.conv == "s" else len(s.arg_types()) for s in specs)
    if wanted != len(args) - 1:
        raise builder.error(f"printf format takes {wanted} arguments, not {len(args) - 1}", c)
    out: list[str] = []
    values: list[n.Expr] = []
    strings: list[int] = []
    pos = 0
    rest = iter(args[1:])
    for spec in specs:
        out.append(fmt[pos:spec.start])
        pos = spec.start + len(spec.text)
        if spec.conv == "%":
            out.append("%%")
            continue
        a = next(rest)
        if spec.conv == "s" and _is_text(a):
            out.append(_string_choice(builder, spec, a))
            continue
        if spec.conv == "s":
            chars = _array_bytes(builder, spec, a)
            out.append(spec.text)
            values += chars
            strings.append(len(chars))
            continue
        if spec.star:
            width = builder.scalar(a)
            if not (width.type.is_int or width.type.is_bool) or width.type.bits > 32:
                raise builder.error(f"printf '{spec.text}' needs an int width, not {width.type}", a)
            values.append(convert(width, I32))
            a = next(rest)
        v = builder.scalar(a)
        want = spec.arg_type()
        if want.is_float:
            if not v.type.is_float:
                raise builder.error(f"printf '{spec.text}' needs a floating-point argument, not {v.type}", a)
        elif not (v.type.is_int or v.type.is_bool):
            raise builder.error(f"printf '{spec.text}' needs an integer argument, not {v.type}", a)
        elif max(v.type.bits, 32) != want.bits:
            hint = " (use %l...)" if want.bits == 32 else ""
            raise builder.error(f"printf '{spec.text}' needs an integer of {want.bits} bits{hint}, not {v.type}", a)
        out.append(spec.text)
        values.append(convert(v, want))
    out.append(fmt[pos:])
    for stmt in _choose(out, tuple(values), tuple(strings), builder.loc(c)):
        builder.emit(stmt)
    return None


def _unwrapped(a: ci.Cursor) -> ci.Cursor:
    """``a`` without the implicit conversions and parentheses around it."""
    inner = a
    while inner.kind in (CK.UNEXPOSED_EXPR, CK.PAREN_EXPR):
        children = [ch for ch in inner.get_children() if ch.kind != CK.TYPE_REF]
        if len(children) != 1:
            break
        inner = children[0]
    return inner


def _is_text(a: ci.Cursor) -> bool:
    """Whether a ``%s`` argument is a string literal or a choice (``?:``) between texts."""
    inner = _unwrapped(a)
    return inner.kind == CK.CONDITIONAL_OPERATOR or _literal(a) is not None


def _array_bytes(builder, spec, a: ci.Cursor) -> list[n.Expr]:
    """The bytes a ``%s`` of a local ``char`` array (or a pointer into one at a constant offset)
    may print: every element from the pointer to the end of its row, as i32 (``Print.strings``:
    printed up to the first 0 byte, as C's ``%s``). Reading them all reads no other memory than
    the thread's own array."""
    value = builder.expr(a)
    if hasattr(value, "decay"):
        value = value.decay(builder, a)
    buffer = builder.buffers.get(getattr(value, "buffer", None)) if isinstance(value, Pointer) else None
    refused = (f"printf '{spec.text}' takes a string literal or a local character array (of constant size, "
               "at a constant offset)")
    if buffer is None or buffer.space != "local" or value.record is not None or value.stored is not None \
            or value.layout.scalar not in (I8, U8) or value.layout.stride != 1:
        raise builder.error(refused + ": not this argument", a)
    offset = 0 if value.offset is None else value.offset
    size = buffer.shape[len(value.prefix)] if len(buffer.shape) == len(value.prefix) + 1 else None
    if isinstance(offset, n.Const):
        offset = int(offset.value)
    if not isinstance(offset, int) or not isinstance(size, n.Const) or not 0 <= offset < int(size.value):
        raise builder.error(refused + ": polypy cannot tell which elements it points to", a)
    loc = builder.loc(a)
    return [convert(n.Load(value.buffer, value.prefix + (n.Const(j, I32),), value.layout.scalar, loc=loc), I32)
            for j in range(offset, int(size.value))]


def _string_choice(builder, spec, a: ci.Cursor, *, top: bool = True) -> str | tuple:
    """A ``%s`` argument folded into the format: its text, or ``(cond, then, else)`` for
    ``c ? "a" : "b"`` (conditions evaluated here, once, in argument order)."""
    inner = _unwrapped(a)
    if inner.kind == CK.CONDITIONAL_OPERATOR:
        cond_c, a_c, b_c = list(inner.get_children())
        if top:
            cond = builder.condition(cond_c)
        else:  # evaluated only on its branch: it must need no statements before it
            with builder.sub_block() as before:
                cond = builder.condition(cond_c)
            if before:
                raise builder.error("a nested choice of printf '%s' needs a condition without side effects", cond_c)
        return (cond, _string_choice(builder, spec, a_c, top=False), _string_choice(builder, spec, b_c, top=False))
    return fold_string(spec, _text(builder, a, "a printf '%s' argument (or each choice of one)"))


def _choose(parts: list, values: tuple[n.Expr, ...], strings: tuple[int, ...], loc) -> list[n.Stmt]:
    """One ``Print`` of the folded format, under an ``if`` per ``%s`` chosen by a condition
    (``printf("%s", ok ? "yes" : "no")``)."""
    for k, part in enumerate(parts):
        if isinstance(part, tuple):
            cond, then, orelse = part
            return [n.If(cond, tuple(_choose(parts[:k] + [then] + parts[k + 1:], values, strings, loc)),
                         tuple(_choose(parts[:k] + [orelse] + parts[k + 1:], values, strings, loc)), loc=loc)]
    return [n.Print("".join(parts), values, strings, loc=loc)]


def assert_fail(builder, args: list[ci.Cursor], c: ci.Cursor) -> None:
    if len(args) != 4:
        raise builder.error("__assert_fail takes 4 arguments", c)
    text = _text(builder, args[0], "the text of assert")
    file = _text(builder, args[1], "the file of assert")
    line = builder.scalar(args[2])
    if not isinstance(line, n.Const):
        raise builder.error("the line of assert must be a constant", args[2])
    fn = builder.frame.cursor
    function = f"{fn.result_type.spelling} {fn.displayname}"  # what __PRETTY_FUNCTION__ names
    loc = builder.loc(c)
    where = tuple(k(d, loc=loc) for k in (n.BlockIdx, n.ThreadIdx) for d in range(3))
    builder.emit(n.AssertFail(text, file, int(line.value), function, where, loc=loc))
    if not builder.frame.is_kernel:
        # A return here leaves the device function only: the flag makes every caller return too
        # (``inline``), up to the kernel, whose return stops the thread.
        if builder.assert_flag is None:
            builder.assert_flag = builder.names.fresh("assert_failed")
        builder.emit(n.Assign(builder.assert_flag, n.Const(True, BOOL), loc=loc))
    builder.emit(n.Return(loc=loc))
    return None


def misaligned_fault(builder, misaligned: n.Expr, text: str, c: ci.Cursor, fault: str = "misaligned") -> None:
    """``if (misaligned) { fault; return }``: an access at an address that is not a multiple of
    its size stops the thread, and the launch fails with cudaErrorMisalignedAddress, as on the
    GPU (``n.AssertFail`` with ``fault`` "misaligned"; the stop goes through the callers as for
    a failed assert). ``fault`` "assert": a failed device assertion named by ``text`` instead
    (cudaErrorAssert; the device heap's ``free`` of no block, ``frontend/lower/heap.py``)."""
    loc = builder.loc(c)
    fn = builder.frame.cursor
    where = tuple(k(d, loc=loc) for k in (n.BlockIdx, n.ThreadIdx) for d in range(3))
    file = c.location.file.name if c.location.file is not None else ""
    stop: list[n.Stmt] = [n.AssertFail(text, file, c.location.line, f"{fn.result_type.spelling} {fn.displayname}",
                                       where, fault=fault, col=c.location.column, loc=loc)]
    if not builder.frame.is_kernel:
        if builder.assert_flag is None:
            builder.assert_flag = builder.names.fresh("assert_failed")
        stop.append(n.Assign(builder.assert_flag, n.Const(True, BOOL), loc=loc))
    stop.append(n.Return(loc=loc))
    builder.emit(n.If(misaligned, tuple(stop), (), loc=loc))


__all__ = ["assert_fail", "device_printf", "misaligned_fault"]

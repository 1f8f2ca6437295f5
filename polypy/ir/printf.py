"""Device printf's format strings: the conversions polypy supports, what argument each takes, and
C's formatting of one conversion in Python (the emulator's output; the backends call the C
library's printf with the same format).

Supported, as CUDA's device printf: ``%d %i %u %x %X %o %c %f %F %e %E %g %G %a %A %%`` with the
flags ``- + space # 0``, a width (digits, or ``*``: an ``int`` argument before the value, negative
for left-justified), a precision (digits), and the length modifiers ``h``/``hh`` (the int
argument printed as a short / a char), ``l``/``ll`` (64-bit integers; no effect on floating-point conversions).
``%s`` takes a string literal, which the frontend folds into the format (``fold_string``), or a
character array of known length, whose bytes are its arguments (``Print.strings``: printed up to
the first 0 byte; ``string_bytes``).
``%p``, ``%n``, a ``*`` precision, ``L``/``z``/``j``/``t`` are refused.

The format is a printf mini-language, not C source: reading it here is not parsing C.
"""
from __future__ import annotations

import dataclasses
import math
import re

from polypy.ir.types import F64, I32, I64, U32, U64, ScalarType

_SPEC = re.compile(r"%(?P<flags>[-+ #0]*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d*))?"
                   r"(?P<length>hh|h|ll|l|L|z|j|t)?(?P<conv>[A-Za-z%])?")

INT_CONVERSIONS = "diuxXoc"
FLOAT_CONVERSIONS = "fFeEgGaA"


@dataclasses.dataclass(frozen=True)
class Spec:
    """One conversion of a format: ``text`` is its spelling (``%-08.3ld``) at ``start``."""

    start: int
    text: str
    flags: str
    width: int | None
    precision: int | None
    length: str
    conv: str
    star: bool = False  # the width is an int argument read before the value

    def arg_types(self) -> tuple[ScalarType, ...]:
        """The IR types of the arguments this conversion reads, in order."""
        value = self.arg_type()
        return ((I32,) if self.star else ()) + ((value,) if value is not None else ())

    def arg_type(self) -> ScalarType | None:
        """The IR type of the (promoted) argument this conversion reads; None for ``%%``."""
        if self.conv == "%":
            return None
        if self.conv in FLOAT_CONVERSIONS:
            return F64
        wide = self.length in ("l", "ll")
        if self.conv in "di" or self.conv == "c":
            return I64 if wide else I32
        return U64 if wide else U32


class FormatError(ValueError):
    """A format polypy does not translate; the message says which conversion and why."""


def parse_format(fmt: str, *, allow_strings: bool = False) -> list[Spec]:
    """The conversions of ``fmt`` in order (``%%`` included, with no argument); raises
    ``FormatError`` for one that is not supported (``%s`` only when ``allow_strings``)."""
    specs = []
    i = 0
    while True:
        i = fmt.find("%", i)
        if i < 0:
            return specs
        m = _SPEC.match(fmt, i)
        assert m is not None  # the pattern matches any '%'
        text, conv, length = m.group(), m.group("conv"), m.group("length") or ""
        if conv is None:
            raise FormatError(f"printf format has an incomplete conversion {text!r} at its end")
        if m.group("prec") == "*":
            raise FormatError(f"printf conversion {text!r}: a '*' precision is not supported")
        star = m.group("width") == "*"
        if star and conv == "s":
            raise FormatError(f"printf conversion {text!r}: a '*' width of '%s' is not supported")
        if conv == "%" and text != "%%":
            raise FormatError(f"printf conversion {text!r} is not supported (write '%%')")
        if conv in ("p", "n"):
            raise FormatError(f"printf conversion '%{conv}' is not supported")
        if conv not in INT_CONVERSIONS + FLOAT_CONVERSIONS + "%" + "s":
            raise FormatError(f"printf conversion {text!r} is not a conversion of device printf")
        if conv == "s" and not allow_strings:
            raise FormatError("printf '%s' takes a string literal only")
        if length not in ("", "hh", "h", "l", "ll") or (conv in "cs" and length) or \
                (conv in FLOAT_CONVERSIONS and length in ("hh", "h", "ll")):
            raise FormatError(f"printf conversion {text!r}: the length modifier '{length}' is not supported")
        prec = m.group("prec")
        specs.append(Spec(i, text, m.group("flags"), int(m.group("width")) if m.group("width") and not star else None,
                          (int(prec) if prec else 0) if prec is not None else None, length, conv, star))
        i = m.end()


def escape(text: str) -> str:
    """``text`` as format text that prints itself."""
    return text.replace("%", "%%")


def fold_string(spec: Spec, text: str) -> str:
    """What ``spec`` (a ``%s``) prints for the string literal ``text``, as format text."""
    if spec.precision is not None:
        text = text[: spec.precision]
    return escape(_pad(text, spec.width, "-" in spec.flags, zero=False))


def _pad(body: str, width: int | None, left: bool, *, zero: bool, sign_len: int = 0) -> str:
    if width is None or len(body) >= width:
        return body
    fill = width - len(body)
    if left:
        return body + " " * fill
    if zero:
        return body[:sign_len] + "0" * fill + body[sign_len:]
    return " " * fill + body


def format_one(spec: Spec, value: int | float) -> str:
    """C's output for conversion ``spec`` of ``value`` (an argument of ``spec.arg_type()``)."""
    left = "-" in spec.flags
    if spec.conv == "c":
        return _pad(chr(int(value) & 0xFF), spec.width, left, zero=False)
    if spec.conv in INT_CONVERSIONS:
        return _format_int(spec, int(value), left)
    return _format_float(spec, float(value), left)


def _format_int(spec: Spec, value: int, left: bool) -> str:
    bits = {"hh": 8, "h": 16, "l": 64, "ll": 64}.get(spec.length, 32)
    if spec.conv in "di":
        value = (value + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
    else:
        value %= 1 << bits
    sign = "-" if value < 0 else "+" if "+" in spec.flags and spec.conv in "di" else \
        " " if " " in spec.flags and spec.conv in "di" else ""
    magnitude = abs(value)
    digits = {"o": f"{magnitude:o}", "x": f"{magnitude:x}", "X": f"{magnitude:X}"}.get(spec.conv, str(magnitude))
    if spec.precision is not None:
        digits = "" if spec.precision == 0 and magnitude == 0 else digits.rjust(spec.precision, "0")
    prefix = ""
    if "#" in spec.flags:
        if spec.conv == "o" and not digits.startswith("0"):
            digits = "0" + digits
        elif spec.conv in "xX" and magnitude != 0:
            prefix = "0" + spec.conv
    body = sign + prefix + digits
    zero = "0" in spec.flags and spec.precision is None
    return _pad(body, spec.width, left, zero=zero, sign_len=len(sign + prefix))


def _format_float(spec: Spec, value: float, left: bool) -> str:
    negative = math.copysign(1.0, value) < 0
    sign = "-" if negative else "+" if "+" in spec.flags else " " if " " in spec.flags else ""
    upper = spec.conv.isupper()
    magnitude = abs(value)
    if math.isnan(value) or math.isinf(value):
        body = "nan" if math.isnan(value) else "inf"
        return _pad(sign + (body.upper() if upper else body), spec.width, left, zero=False)
    if spec.conv in "aA":
        body = _hex_float(magnitude, spec.precision, "#" in spec.flags)
        body = body.upper().replace("0X", "0X") if upper else body
        zero = "0" in spec.flags
        return _pad(sign + body, spec.width, left, zero=zero, sign_len=len(sign) + 2)
    flags = "#" if "#" in spec.flags else ""
    precision = 6 if spec.precision is None else spec.precision
    body = ("%" + flags + "." + str(precision) + spec.conv) % magnitude
    return _pad(sign + body, spec.width, left, zero="0" in spec.flags, sign_len=len(sign))


def _hex_float(x: float, precision: int | None, alternate: bool) -> str:
    """glibc's ``%a`` of a non-negative finite double: ``0x1.8p+1``; zero is ``0x0p+0``;
    subnormals are written ``0x0.xxxp-1022``."""
    if x == 0.0:
        mantissa, exponent, lead = 0, 0, 0
    else:
        m, e = math.frexp(x)  # x = m * 2**e, 0.5 <= m < 1
        exponent = e - 1
        if exponent < -1022:  # subnormal: glibc keeps the exponent at -1022
            lead, mantissa, exponent = 0, int(math.ldexp(x, 1022 + 52)), -1022
        else:
            bits = int(m * 2.0 ** 53)  # 1.xxx with 52 fraction bits
            lead, mantissa = 1, bits - (1 << 52)
    digits = f"{mantissa:013x}"
    if precision is None:
        digits = digits.rstrip("0")
    elif precision < 13:
        scaled = mantissa + (lead << 52)
        shift = 4 * (13 - precision)
        rounded = scaled >> shift
        rem = scaled - (rounded << shift)
        half = 1 << (shift - 1)
        if rem > half or (rem == half and rounded & 1):  # round half to even, as glibc does
            rounded += 1
        lead, frac = rounded >> (4 * precision), rounded & ((1 << (4 * precision)) - 1)
        digits = f"{frac:0{precision}x}" if precision else ""
    else:
        digits = digits.ljust(precision, "0")
    point = "." if digits or alternate else ""
    return f"0x{lead}{point}{digits}p{exponent:+d}"


def print_arg_types(fmt: str, strings: tuple[int, ...] = ()) -> list[tuple[ScalarType, str]]:
    """The IR types of a ``Print``'s arguments with the conversion each is for: each ``%s``
    (only with ``strings``) reads ``strings[k]`` bytes as i32; raises ``FormatError``."""
    lengths = iter(strings)
    out: list[tuple[ScalarType, str]] = []
    for spec in parse_format(fmt, allow_strings=bool(strings)):
        if spec.conv == "s":
            length = next(lengths, None)
            if length is None:
                raise FormatError("print has more '%s' conversions than strings")
            out += [(I32, spec.text)] * length
        else:
            out += [(t, spec.text) for t in spec.arg_types()]
    if next(lengths, None) is not None:
        raise FormatError("print has more strings than '%s' conversions")
    return out


def string_bytes(values: list[int]) -> bytes:
    """What ``%s`` prints of a character array's bytes: up to the first 0 byte."""
    raw = bytes(int(v) & 0xFF for v in values)
    end = raw.find(0)
    return raw if end < 0 else raw[:end]


def format_call(fmt: str, values: list[int | float], strings: tuple[int, ...] = ()) -> str:
    """The whole output of ``printf(fmt, values...)`` (``strings``: ``Print.strings``)."""
    out = []
    pos = 0
    args = iter(values)
    lengths = iter(strings)
    for spec in parse_format(fmt, allow_strings=bool(strings)):
        out.append(fmt[pos:spec.start])
        if spec.star:  # C: a negative width is the '-' flag and its magnitude
            width = int(next(args))
            flags = spec.flags + "-" if width < 0 else spec.flags
            spec = dataclasses.replace(spec, width=abs(width), flags=flags, star=False)
        if spec.conv == "s":  # C counts the precision and the width in bytes
            raw = string_bytes([int(next(args)) for _ in range(next(lengths))])
            if spec.precision is not None:
                raw = raw[:spec.precision]
            if spec.width is not None and len(raw) < spec.width:
                pad = b" " * (spec.width - len(raw))
                raw = raw + pad if "-" in spec.flags else pad + raw
            out.append(raw.decode("utf-8", "replace"))
        else:
            out.append("%" if spec.conv == "%" else format_one(spec, next(args)))
        pos = spec.start + len(spec.text)
    out.append(fmt[pos:])
    return "".join(out)


def c_library_format(fmt: str) -> str:
    """``fmt`` with ``%ld``/``%lu``... written ``%lld``/``%llu``: the arguments are cast to
    ``long long`` (64 bits on every platform)."""
    out, pos = [], 0
    for spec in parse_format(fmt, allow_strings=True):
        out.append(fmt[pos:spec.start])
        text = spec.text
        if spec.length == "l" and spec.conv in "diuxXo":
            text = text[:-2] + "ll" + spec.conv
        out.append(text)
        pos = spec.start + len(spec.text)
    out.append(fmt[pos:])
    return "".join(out)


def c_string(text: str) -> str:
    """A C string literal holding ``text`` (UTF-8); hex escapes are closed so that a following
    hex digit is not read into them."""
    out = []
    for b in text.encode("utf-8"):
        ch = chr(b)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif ch in "\n\t":
            out.append("\\n" if ch == "\n" else "\\t")
        elif 32 <= b < 127 and ch != "?":
            out.append(ch)
        else:
            out.append(f'\\{b:03o}')  # octal: at most three digits, never runs on
    return '"' + "".join(out) + '"'


def fault_format(s, quote=lambda text: text) -> str:
    """The message of a failed device assert or device fault (``n.AssertFail``), with six ``%u``
    for blockIdx.x..z and threadIdx.x..z; ``quote`` escapes the source's texts for C's printf."""
    if s.fault == "misaligned":
        return (f"{quote(s.file)}:{s.line}:{s.col}: {quote(s.function)}: block: [%u,%u,%u], thread: [%u,%u,%u] "
                f"misaligned address: {quote(s.text)}\n")
    return (f"{quote(s.file)}:{s.line}: {quote(s.function)}: block: [%u,%u,%u], thread: [%u,%u,%u] "
            f"Assertion `{quote(s.text)}` failed.\n")


def fault_summary(s) -> str:
    """One line for the exception a failed device assert or fault raises (emulator, JIT)."""
    if s.fault == "misaligned":
        return f"misaligned address (cudaErrorMisalignedAddress): {s.text}"
    return f"device-side assert triggered (cudaErrorAssert): Assertion `{s.text}` failed"

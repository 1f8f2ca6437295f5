"""Source locations and the two kinds of error polypy raises.

``UserError`` is for input we cannot (or will not) handle: it carries a location and
a message that says what to change, and the CLI prints it as ::

    file.cu:12:5: error: barrier under a thread-dependent condition
        if (threadIdx.x < 16) __syncthreads();
                              ^

``InternalError`` is a broken invariant inside polypy: a bug, reported with a traceback.
"""
from __future__ import annotations

import dataclasses

from polypy.sources import read_source


@dataclasses.dataclass(frozen=True, slots=True)
class Loc:
    """A position in a source file (1-based line and column)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class PolypyError(Exception):
    """Base class of every error polypy raises on purpose."""


class UserError(PolypyError):
    """Bad or unsupported input. Printed without a traceback by the CLI."""

    def __init__(self, message: str, loc: Loc | None = None, *, notes: tuple[tuple[str, Loc | None], ...] = ()):
        super().__init__(message)
        self.message = message
        self.loc = loc
        self.notes = notes

    def __str__(self) -> str:
        return format_diagnostic("error", self.message, self.loc, notes=self.notes, with_source=False)

    def render(self) -> str:
        """The full diagnostic: location, message, source line and caret, then notes."""
        return format_diagnostic("error", self.message, self.loc, notes=self.notes, with_source=True)


class InternalError(PolypyError):
    """A broken invariant inside polypy (a bug, not the user's fault)."""

    def __init__(self, message: str, loc: Loc | None = None):
        where = f"{loc}: " if loc is not None else ""
        super().__init__(f"{where}internal error: {message}")
        self.loc = loc


def source_line(loc: Loc) -> str | None:
    """The text of the line ``loc`` points into, or None if the file cannot be read."""
    try:
        text = read_source(loc.file)
    except OSError:
        return None
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")  # as clang counts lines
    if lines[-1] == "":
        lines.pop()  # after the last newline
    return lines[loc.line - 1] if 1 <= loc.line <= len(lines) else None


# Characters a terminal may break a line at or act on (form feed, vertical tab, escape, NEL,
# the Unicode line and paragraph separators...): the shown source line gets a space for each,
# so that it stays one line and the caret stays under its column. Tabs are kept.
_UNPRINTABLE = {c: " " for c in (*range(0x00, 0x09), *range(0x0A, 0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029)}


def caret_lines(loc: Loc) -> list[str]:
    """The source line and a caret under ``loc.col`` (tabs kept so the caret lines up)."""
    text = source_line(loc)
    if text is None:
        return []
    text = text.translate(_UNPRINTABLE)
    prefix = "".join(ch if ch == "\t" else " " for ch in text[: max(loc.col - 1, 0)])
    return [text, prefix + "^"]


def format_diagnostic(
    severity: str,
    message: str,
    loc: Loc | None,
    *,
    notes: tuple[tuple[str, Loc | None], ...] = (),
    with_source: bool = True,
) -> str:
    """``file:line:col: severity: message`` followed by the source line and a caret."""
    head = f"{loc}: {severity}: {message}" if loc is not None else f"polypy: {severity}: {message}"
    lines = [head]
    if with_source and loc is not None:
        lines.extend(caret_lines(loc))
    for note_message, note_loc in notes:
        lines.append(format_diagnostic("note", note_message, note_loc, with_source=with_source))
    return "\n".join(lines)



class DeviceAssertError(UserError):
    """A device ``assert`` failed during a launch: CUDA's ``cudaErrorAssert``."""

    cuda_error = "cudaErrorAssert"


class MisalignedAddressError(DeviceAssertError):
    """An access at an address that is not a multiple of its size stopped a launch (a typed view
    at an offset checked at run time): CUDA's ``cudaErrorMisalignedAddress``."""

    cuda_error = "cudaErrorMisalignedAddress"

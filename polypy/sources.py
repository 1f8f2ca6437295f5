"""Reading a source file, the one way every command and diagnostic reads it.

Source files are UTF-8, except the old ones with a Latin-1 comment or string: each byte that is
not valid UTF-8 becomes U+FFFD (so such a file translates, differentiates and runs like any
other, and its comments come out with U+FFFD). Newlines are kept as written: clang's offsets
and line numbers count them so.
"""
from __future__ import annotations

import os
import pathlib


def decode_source(data: bytes) -> str:
    """The text of a source file's bytes (UTF-8; a bad byte is U+FFFD)."""
    return data.decode("utf-8", errors="replace")


def read_source(path: str | os.PathLike) -> str:
    """The text of the source file at ``path`` (see ``decode_source``); OSError if it cannot be read."""
    return decode_source(pathlib.Path(path).read_bytes())


def is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class SystemIncludeDir(str):
    """An include directory of a library's headers (PyTorch's, for ``polypy.torch.load``): the
    frontend searches it as a system directory (``-isystem``), so that its declarations are the
    library's, not the user's (never walked for kernels and launches, never translated)."""

"""Writing a command's output: never half a file, never over an input (``polypy translate -o``)."""
from __future__ import annotations

import os
import stat
import sys
import tempfile
from typing import Sequence

from polypy.errors import UserError


def check_output(path: str | None, inputs: Sequence[str] = ()) -> None:
    """Refuse an output path that cannot be written or that names one of ``inputs`` (the same
    file under any spelling: ``..``, a symlink, a hard link). Run before any work is done."""
    if path is None:
        return
    if os.path.isdir(path):
        raise UserError(f"cannot write {path}: it is a directory")
    target = os.path.realpath(path)  # a symlink's target is what gets written
    directory = os.path.dirname(target)
    if not os.path.isdir(directory):
        shown = directory if os.path.islink(path) else os.path.dirname(path)
        raise UserError(f"cannot write {path}: directory {shown} does not exist")
    for source in inputs:
        try:
            same = os.path.samefile(path, source)
        except OSError:  # one of them does not exist (yet)
            continue
        if same:
            raise UserError(f"cannot write {path}: it is the input file {source}")


def write_output(path: str | None, text: str, inputs: Sequence[str] = ()) -> None:
    """Write ``text`` to ``path`` (stdout when ``path`` is None).

    A regular file (or a path that does not exist yet) is replaced atomically: the text goes to
    a temporary file in the same directory, which is renamed over it, so an error never leaves
    half a file. Anything else is written through, since renaming would replace the thing
    itself: a symlink keeps pointing where it did and its target gets the text; a FIFO, a
    terminal or ``/dev/null`` is opened and written like any other program would.
    A new file gets the mode ``open()`` would give it (0o666 minus the umask), an existing one
    keeps its mode.
    """
    if path is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    check_output(path, inputs)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    try:
        # A regular file with other hard links is written through too: renaming would split it from them.
        if st is not None and not (stat.S_ISREG(st.st_mode) and st.st_nlink == 1):
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            return
        _replace(path, text, None if st is None else stat.S_IMODE(st.st_mode))
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None


def _replace(path: str, text: str, mode: int | None) -> None:
    """Write a temporary file next to ``path`` and rename it over ``path``."""
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=".polypy-", dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)  # mkstemp made it 0o600
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise

"""The device prelude, precompiled.

Every CUDA source polypy parses starts with the force-included prelude (``polypy_device.h``), which
includes polypy's ``cuda_runtime.h`` and, through it, a good part of the C++ library: about 90% of
libclang's time on a small kernel file. So the prelude is parsed once per set of compiler flags
and saved as a clang precompiled header (``TranslationUnit.save`` of a translation unit holding
only the prelude) at the second parse with those flags; later parses with the same flags read it
(``-include-pch``) instead of ``-include``-ing the prelude again. The precompiled header holds no detailed preprocessing
record: the prelude's macro expansions and inclusions (12,000 cursors, listed through Python at
every walk of the unit's top level) are not cursors of the unit; the user's files' are.

Exactness: the key is every flag of the parse (the user's ``-D`` and ``-I`` included, so a
``-DNDEBUG`` prelude is another file), libclang's library, and the size and modification time of
every file of polypy's prelude and runtime headers; clang itself checks the system headers the
precompiled header read and refuses a stale one. A parse through the precompiled header that
reports any error is parsed again without it, so every error message comes from a plain parse.
A precompiled header that cannot be built or written is simply not used. The files live in
``pch/`` of polypy's cache (``polypy.cache``); ``POLYPY_CACHE_DIR=off`` turns this off too.
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import tempfile
from typing import Sequence

import clang.cindex as ci

from polypy.cache import cache_root

FORMAT = "3"  # bump when the way the precompiled header is built changes
BUILD_FLAGS = ("-fpch-instantiate-templates",)


def pch_arguments(args: Sequence[str], prelude: pathlib.Path, options: int, roots: Sequence[pathlib.Path],
                  index: ci.Index) -> list[str] | None:
    """``args`` with the force-include of ``prelude`` replaced by its precompiled header (built
    now if needed); None where there is none to use (caching off, no prelude in ``args``, or the
    prelude did not precompile cleanly)."""
    directory = cache_root()
    if directory is None:
        return None
    args = list(args)
    at = _include_position(args, prelude)
    if at is None:
        return None
    rest = args[:at] + args[at + 2:]
    path = directory / "pch" / f"prelude-{_key(args, options, roots)}.pch"
    if not path.exists() and (not _seen_before(path) or not _build(path, args, options, index)):
        return None
    return rest[:at] + ["-include-pch", str(path)] + rest[at:]


def forget(args: Sequence[str]) -> None:
    """Remove the precompiled header named in ``args`` (clang found it stale or unusable)."""
    args = list(args)
    if "-include-pch" in args:
        try:
            os.unlink(args[args.index("-include-pch") + 1])
        except OSError:
            pass


def _seen_before(path: pathlib.Path) -> bool:
    """Whether a parse with these flags came before (a marker file beside the header's place;
    made now if not): a header is built at the second parse with a set of flags, so that flags used
    once (a ``-D`` of one test, one translation) cost no header."""
    marker = path.with_suffix(".seen")
    if marker.exists():
        return True
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass
    return False


def _include_position(args: list[str], prelude: pathlib.Path) -> int | None:
    for i in range(len(args) - 1):
        if args[i] == "-include" and args[i + 1] == str(prelude):
            return i
    return None


def _key(args: Sequence[str], options: int, roots: Sequence[pathlib.Path]) -> str:
    h = hashlib.sha256()
    library = str(getattr(ci.conf.lib, "_name", ""))
    for part in (FORMAT, library, _stamp(pathlib.Path(library)), str(options), *args):
        h.update(str(part).encode("utf-8", "surrogateescape"))
        h.update(b"\0")
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                file = pathlib.Path(dirpath) / name
                h.update(f"{file}\0{_stamp(file)}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest()[:32]


def _stamp(path: pathlib.Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return "-"
    return f"{st.st_size}:{st.st_mtime_ns}"


def _build(path: pathlib.Path, args: list[str], options: int, index: ci.Index) -> bool:
    """Parse the prelude alone (an empty main file force-including it) and save it to ``path``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".prelude-", suffix=".pch")
        os.close(fd)
    except OSError:
        return False
    try:
        stub = str(path.parent / "polypy_prelude_stub.cu")
        # Without the detailed preprocessing record: the prelude's own 12,000 macro expansions,
        # definitions and inclusions are then not listed among the unit's top-level cursors (each
        # costs a call into Python per listing); the user's files' still are.
        options = (options & ~ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD) | ci.TranslationUnit.PARSE_INCOMPLETE
        # The prelude's pending template instantiations are done now, once, instead of at the end of
        # every unit that reads the header (they were 80% of such a parse: 0.13 s of 0.16 s for a
        # one-line kernel). Their point of instantiation moves from the end of the user's file to
        # the end of the prelude, which changes only programs that are ill-formed, no diagnostic
        # required ([temp.point]); the prelude is self-contained.
        tu = index.parse(stub, args=[*args, *BUILD_FLAGS], unsaved_files=[(stub, "")], options=options)
        if any(d.severity >= ci.Diagnostic.Error for d in tu.diagnostics):
            return False
        tu.save(tmp)
        os.replace(tmp, path)  # atomic: concurrent builders of one key agree
        return True
    except (ci.TranslationUnitLoadError, ci.TranslationUnitSaveError, OSError):
        return False
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass

"""The on-disk cache of compiled object code.

Key: a hash of the LLVM IR and of ``target.fingerprint()`` (triple, CPU, features, llvmlite and
LLVM versions, optimization options), so object code is reused only where it was built for the
same machine by the same compiler. Location: ``$POLYPY_CACHE_DIR``, else
``$XDG_CACHE_HOME/polypy``, else ``~/.cache/polypy``; ``POLYPY_CACHE_DIR=off`` disables it.
Entries are written atomically (temporary file, then rename), so concurrent processes never read
a partial file, and carry a SHA-256 of their contents, so a damaged entry is recompiled rather
than handed to the JIT; a cache that cannot be written is silently skipped.
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import tempfile

from polypy.cache import cache_root

# Bump when the object format of cache entries changes meaning (not for IR changes: those
# change the key by themselves).
CACHE_FORMAT = "1"


def cache_dir() -> pathlib.Path | None:
    return cache_root()


def cache_key(ir_text: str, fingerprint: str) -> str:
    h = hashlib.sha256()
    for part in (CACHE_FORMAT, fingerprint, ir_text):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def load(key: str) -> bytes | None:
    directory = cache_dir()
    if directory is None:
        return None
    try:
        data = (directory / f"{key}.o").read_bytes()
    except OSError:
        return None
    digest, payload = data[:32], data[32:]
    if len(data) < 32 or hashlib.sha256(payload).digest() != digest:
        return None
    return payload


def store(key: str, data: bytes) -> None:
    directory = cache_dir()
    if directory is None:
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{key[:16]}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(hashlib.sha256(data).digest())
                f.write(data)
            os.replace(tmp, directory / f"{key}.o")
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError:
        pass

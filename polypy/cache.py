"""Where polypy keeps what it builds once and reuses: ``$POLYPY_CACHE_DIR``, else
``$XDG_CACHE_HOME/polypy``, else ``~/.cache/polypy``; ``POLYPY_CACHE_DIR=off`` (or ``0``, ``none``,
``false``, empty) turns every cache off.

The layers keep their own entries under it: ``c/`` (compiled C kernel libraries), the LLVM object
cache, ``pch/`` (the frontend's precompiled prelude)."""
from __future__ import annotations

import os
import pathlib

_OFF = ("", "0", "off", "none", "false")


def cache_root() -> pathlib.Path | None:
    """The cache's root directory (not created here), or None when caching is off."""
    env = os.environ.get("POLYPY_CACHE_DIR")
    if env is not None:
        if env.strip().lower() in _OFF:
            return None
        return pathlib.Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = pathlib.Path(xdg) if xdg else pathlib.Path.home() / ".cache"
    return base / "polypy"

"""From source to the GPU-form module every other stage starts from: ``parse`` (the frontend
alone) and ``load`` (parse, then ``pipelines.GPU_PIPELINE``)."""
from __future__ import annotations

import os
import pathlib

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.stack import on_big_stack

# The file name diagnostics give source text that comes without a path (``compile(None, text=...)``).
TEXT_NAME = "<string>"


def source_path(path: str | os.PathLike | None, text: str | None) -> str:
    """The name the frontend parses under: ``path``, which must exist unless ``text`` is given,
    or ``TEXT_NAME`` for text alone."""
    if path is None:
        if text is None:
            raise UserError("nothing to parse: give a source file or the source text (text=...)")
        return TEXT_NAME
    if not isinstance(path, (str, os.PathLike)):
        raise UserError(f"the source file must be a path (str or os.PathLike), got {type(path).__name__}")
    name = os.fspath(path)
    if text is None:
        if os.path.isdir(name):
            raise UserError(f"{name} is a directory, not a source file")
        if not os.path.exists(name):
            raise UserError(f"no such file: {name}")
    return name


@on_big_stack
def parse(path: str | os.PathLike | None, *, defines: dict[str, str] | None = None,
          include_dirs: tuple[str, ...] = (), text: str | None = None, part: bool = False,
          device_sources: tuple[str, ...] = ()) -> n.Module:
    """The frontend alone: GPU-form IR exactly as the source says. Without ``path``, ``text`` is
    parsed as CUDA under the name ``<string>``. ``part``: the file is one part of a program built
    by separate compilation (``translate -c``; ``frontend.parse_file``); ``device_sources``: the
    program's other files whose device functions this one calls (``--device-sources``)."""
    from frontend import parse_file

    name = source_path(path, text)
    if text is None:
        text = lenient_text(name)
    for source in device_sources:
        source_path(source, None)  # a missing file is a user error
    return parse_file(name, text=text, defines=defines, include_dirs=tuple(include_dirs), part=part,
                      device_sources=tuple(os.fspath(s) for s in device_sources))


def lenient_text(path: str) -> str | None:
    """The text of a source file that is not valid UTF-8 (a Latin-1 comment, as old sources have),
    with each bad byte replaced by U+FFFD; None for a UTF-8 file, which the frontend reads itself.

    libclang hands token spellings back as UTF-8, so such a file is parsed from this text: clang's
    offsets are then offsets into it, and the emitted program carries it (comments keep U+FFFD).
    """
    from polypy.sources import decode_source, is_utf8

    data = pathlib.Path(path).read_bytes()
    return None if is_utf8(data) else decode_source(data)


@on_big_stack
def load(path: str | os.PathLike | None, *, defines: dict[str, str] | None = None,
         include_dirs: tuple[str, ...] = (), text: str | None = None,
         timings: dict[str, float] | None = None, part: bool = False,
         device_sources: tuple[str, ...] = ()) -> n.Module:
    """Parse and simplify: the GPU-form module every other stage starts from."""
    from polypy.driver.pipelines import GPU_PIPELINE, optimize_module

    module = parse(path, defines=defines, include_dirs=include_dirs, text=text, part=part,
                   device_sources=device_sources)
    return optimize_module(module, GPU_PIPELINE, timings=timings)

"""The golden-file format shared by the pass tests: IR text in, passes, IR text out.

A golden file is a header comment, then sections ``=== name`` followed by their text: ``input``
(IR text), the expected output per pass list, expected reports. ``POLYPY_UPDATE_GOLDEN=1`` makes
the tests rewrite the expected sections instead of comparing (check the diff before committing).
"""
from __future__ import annotations

import os
import pathlib

from polypy.ir import nodes as n
from polypy.ir import parse_kernel

UPDATE = os.environ.get("POLYPY_UPDATE_GOLDEN") == "1"


def read_sections(path: pathlib.Path) -> tuple[str, list[tuple[str, str]]]:
    """The header comment and the ``(name, text)`` sections of a golden file."""
    header: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    for line in path.read_text().splitlines():
        if line.startswith("=== "):
            sections.append((line[4:].strip(), []))
        elif sections:
            sections[-1][1].append(line)
        else:
            header.append(line)
    return "\n".join(header), [(name, "\n".join(lines).strip("\n") + "\n") for name, lines in sections]


def write_sections(path: pathlib.Path, header: str, sections: list[tuple[str, str]]) -> None:
    text = header.rstrip("\n") + "\n" if header.strip() else ""
    for name, body in sections:
        text += f"=== {name}\n{body.rstrip()}\n"
    path.write_text(text)


def parse_input(path: pathlib.Path, sections: list[tuple[str, str]]) -> n.Kernel:
    """The ``input`` section as a kernel whose locations point into the golden file."""
    text = dict(sections)["input"]
    lines = path.read_text().splitlines()
    first = lines.index("=== input") + 1  # the section starts after its marker line
    return parse_kernel("\n" * first + text, filename=path.name)

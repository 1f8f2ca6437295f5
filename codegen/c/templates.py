"""The jinja2 templates of the C backend (file-level boilerplate only, in ``codegen/templates``)."""
from __future__ import annotations

import functools
import pathlib

import jinja2

TEMPLATE_DIR = pathlib.Path(__file__).resolve().parent.parent / "templates"


@functools.lru_cache(maxsize=None)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)), trim_blocks=True,
                              lstrip_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined,
                              autoescape=False)


def render_template(name: str, **values: object) -> str:
    return _environment().get_template(name).render(**values)


def prelude() -> str:
    """The kernel support code every emitted file starts with (valid C99 and C++)."""
    return render_template("c_prelude.h.j2")

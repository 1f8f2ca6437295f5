"""The jinja2 templates of the C backend (file-level boilerplate only, in ``codegen/templates``)."""
from __future__ import annotations

import functools
import pathlib

import jinja2

from polypy.ir.mathfns import EXPF_CLAMP_BITS, EXPF_LN2, EXPF_LOG2E, EXPF_TAYLOR

TEMPLATE_DIR = pathlib.Path(__file__).resolve().parent.parent / "templates"


@functools.lru_cache(maxsize=None)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)), trim_blocks=True,
                              lstrip_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined,
                              autoescape=False)


def render_template(name: str, **values: object) -> str:
    return _environment().get_template(name).render(**values)


def fp_contract_off() -> str:
    """The pragma that opens every emitted file: no contraction of ``a * b + c`` into a fused
    multiply-add, whatever the build line (``-march=native`` allows it by default), and for GCC no
    distribution of short copy loops into memcpy calls. It comes before
    any code so that every function of the file, headers included, is compiled the same way (GCC
    does not inline between functions compiled with different options)."""
    return render_template("c_fp_contract.h.j2")


def prelude() -> str:
    """The kernel support code every emitted file starts with (valid C99 and C++)."""
    return render_template("c_prelude.h.j2", expf_log2e=repr(EXPF_LOG2E), expf_ln2=repr(EXPF_LN2),
                           expf_clamp=f"0x{EXPF_CLAMP_BITS:08x}u",
                           expf_horner=[repr(c) for c in reversed(EXPF_TAYLOR)])

"""The jinja2 templates of the C backend (file-level boilerplate only, in ``codegen/templates``)."""
from __future__ import annotations

import functools
import pathlib

import jinja2

from polypy.ir import mathfns

TEMPLATE_DIR = pathlib.Path(__file__).resolve().parent.parent / "templates"


@functools.lru_cache(maxsize=None)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)), trim_blocks=True,
                              lstrip_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined,
                              autoescape=False)


def render_template(name: str, **values: object) -> str:
    return _environment().get_template(name).render(**values)


def fp_contract_off() -> str:
    """The pragma that opens every emitted file. No contraction of ``a * b + c`` into a fused
    multiply-add, whatever the build line (``-march=native`` allows it by default): every
    floating-point operation is rounded separately, as polypy's IR and emulator define it and as
    nvcc builds host code. For GCC, no distribution of loops into library calls: it would turn a
    block's short copy loops (a tile's row from global into shared memory, 128 bytes) into calls
    of memcpy, each costing more than the copy (transpose_tiled and prefix_scan spent a third of
    their time in memmove). And no type-based alias analysis: typed views of one buffer (pointer
    casts, a union's members in a global record) read and write the same bytes through pointers
    of different types, which strict aliasing would let GCC reorder (a union member's 16-bit
    store, then the 32-bit load of its word, read the old word). It comes before any code so that
    every function of the file, headers included, is compiled the same way (GCC does not inline
    between functions compiled with different options)."""
    return render_template("c_fp_contract.h.j2")


def prelude() -> str:
    """The kernel support code every emitted file starts with (valid C99 and C++)."""
    m = mathfns
    return render_template(
        "c_prelude.h.j2", expf_log2e=repr(m.EXPF_LOG2E), expf_ln2=repr(m.EXPF_LN2),
        expf_clamp=f"0x{m.EXPF_CLAMP_BITS:08x}u", expf_horner=[repr(c) for c in reversed(m.EXPF_TAYLOR)],
        exp_table_hi=[repr(v) for v in m.EXP_TABLE_HI], exp_table_lo=[repr(v) for v in m.EXP_TABLE_LO],
        exp_size=m.EXP_TABLE_SIZE, exp_inv_size=repr(1.0 / m.EXP_TABLE_SIZE), exp_k_offset=repr(m.EXP_K_OFFSET),
        exp_shifter=repr(m.EXP_SHIFTER), exp_inv_step=repr(m.EXP_INV_STEP), exp_step_hi=repr(m.EXP_STEP_HI),
        exp_step_lo=repr(m.EXP_STEP_LO), exp_clamp=f"0x{m.EXP_CLAMP_BITS:016x}ull",
        exp_q=[repr(c) for c in reversed(m.EXP_Q)], tanhf_clamp=f"0x{m.TANHF_CLAMP_BITS:08x}u",
        tanhf_q=[repr(c) for c in reversed(m.TANHF_Q)], tanh_clamp=f"0x{m.TANH_CLAMP_BITS:016x}ull",
        tanh_split=repr(m.TANH_SPLIT))

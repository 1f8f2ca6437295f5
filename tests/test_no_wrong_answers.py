"""Regressions for constructs that were once translated with another meaning (issue 35): each
kernel here runs through the emulator, the LLVM JIT and the C backend against values computed by
hand, and each construct polypy cannot translate exactly is refused with a located error.

- string literals as array initializers (local, ``__constant__``, rows of 2-D arrays), and brace
  lists that leave out elements of nested rows (they used to shift the next row's values);
- pointer punning (``*(int*)&v``) and unions: refused, never converted by value.
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import run_c, run_emulated
from polypy.errors import UserError

TABLES = r"""
__constant__ char alphabet[] = "ACGT";
__constant__ unsigned char high[] = "\xff" "A";
__constant__ char rows[2][4] = {"ab", "cde"};
__constant__ int ragged[2][3] = {{1}, {2, 3}};

__global__ void tables(int* out, int n) {
  const char tab[] = "WXYZ";
  char padded[8] = "xy";
  signed char two[2][3] = {"p", "qr"};
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = tab[i % 5] + 1000 * alphabet[i % 4] + 100000 * padded[i % 8] + 1000000 * high[i % 3]
           + 7 * two[i % 2][i % 3] + 13 * rows[i % 2][i % 4] + 17 * ragged[i % 2][i % 3];
  }
}
"""


def _tables_ref(n: int) -> np.ndarray:
    tab = b"WXYZ\0"
    alphabet = b"ACGT"
    padded = b"xy" + bytes(6)
    high = [255, 65, 0]
    two = [b"p\0\0", b"qr\0"]
    rows = [b"ab\0\0", b"cde\0"]
    ragged = [[1, 0, 0], [2, 3, 0]]
    out = [tab[i % 5] + 1000 * alphabet[i % 4] + 100000 * padded[i % 8] + 1000000 * high[i % 3]
           + 7 * two[i % 2][i % 3] + 13 * rows[i % 2][i % 4] + 17 * ragged[i % 2][i % 3] for i in range(n)]
    return np.array(out, np.int32)


@pytest.fixture(scope="module")
def tables_source(tmp_path_factory):
    path = tmp_path_factory.mktemp("tables") / "tables.cu"
    path.write_text(TABLES)
    return path


@pytest.mark.parametrize("grid,block", [(1, 40), (3, 16), (6, 7)])
def test_string_literal_tables_on_every_backend(tables_source, grid, block):
    n = 40
    want = _tables_ref(n)
    module = polypy.load(str(tables_source))
    kernel = module.kernel("tables")
    args = {"out": np.zeros(n, np.int32), "n": n}
    emulated = run_emulated(kernel, grid, block, args)["out"]
    np.testing.assert_array_equal(emulated, want)
    jit = args["out"].copy()
    polypy.compile(str(tables_source)).tables[grid, block](jit, n)
    np.testing.assert_array_equal(jit, want)
    np.testing.assert_array_equal(run_c(kernel, grid, block, args, globals_=module.globals)["out"], want)


PUNNING = {
    "deref_cast": ("float v = x[i]; int b = *(int*)&v; out[i] = b;", "int *"),
    "through_void": ("float v = x[i]; void* p = &v; out[i] = *(unsigned*)p;", "unsigned int *"),
    "reinterpret": ("float v = x[i]; out[i] = *reinterpret_cast<const int*>(&v);", "const int *"),
    "fast_inverse_sqrt": ("float v = x[i]; int b = *(int*)&v; b = 0x5f3759df - (b >> 1); "
                          "out[i] = *(float*)&b;", "int *"),
    "record_as_scalar": ("struct P { float a, b; } p; p.a = x[i]; p.b = 1; out[i] = ((float*)&p)[0];", "float *"),
}


@pytest.mark.parametrize("case", sorted(PUNNING))
def test_pointer_punning_is_refused_where_written(tmp_path, case):
    body, spelled = PUNNING[case]
    src = tmp_path / "pun.cu"
    src.write_text("__global__ void k(float* out, const float* x, int n) {\n"
                   "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   f"  if (i < n) {{ {body} }}\n}}\n")
    with pytest.raises(UserError) as err:
        polypy.load(str(src))
    assert err.value.loc is not None and err.value.loc.line == 3
    assert "pointer punning" in err.value.message and f"'{spelled}'" in err.value.message


def test_union_is_refused_where_declared(tmp_path):
    src = tmp_path / "union.cu"
    src.write_text("union U { float f; int i; };\n"
                   "__global__ void k(float* out, const float* x) {\n"
                   "  U u; u.f = x[threadIdx.x];\n"
                   "  out[threadIdx.x] = u.i;\n}\n")
    with pytest.raises(UserError) as err:
        polypy.load(str(src))
    assert (err.value.loc.line, err.value.loc.col) == (3, 3)
    assert "unions are not supported" in err.value.message


def test_same_width_integer_views_read_the_bits(tmp_path):
    """``*(unsigned*)&int_var`` reads the same bits: the value conversion is exact there."""
    src = tmp_path / "ints.cu"
    src.write_text("__global__ void k(unsigned* out, const int* x, int n) {\n"
                   "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   "  if (i < n) { int v = x[i]; unsigned* p = (unsigned*)&v; out[i] = *p >> 28; }\n}\n")
    x = np.array([-1, -8, 5, 1 << 30, -(1 << 31)], np.int32)
    out = np.zeros(5, np.uint32)
    polypy.compile(str(src)).k[1, 8](out, x, 5)
    np.testing.assert_array_equal(out, x.view(np.uint32) >> 28)


def test_escaped_string_that_may_hide_a_nul_is_refused(tmp_path):
    src = tmp_path / "nul.cu"
    src.write_text('__global__ void k(char* out) {\n  const char t[] = "a\\0b";\n  out[threadIdx.x] = t[threadIdx.x % 4];\n}\n')
    with pytest.raises(UserError) as err:
        polypy.load(str(src))
    assert err.value.loc.line == 2 and "string literal" in err.value.message

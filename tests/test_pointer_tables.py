"""``T**`` pointer tables whose rows are not one array (issue 35, "exact or refused").

A whole program's rows may each be their own ``cudaMalloc``: the translation reads and writes
them where they are, and so does ``run --emulate`` (on a gathered copy, ``polypy.driver.
program_tables``). Through the Python API a row is a NumPy view of one array, read as consecutive
elements from its start: what would be read as other elements is a located error.
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

from c_support import need_compiler


def _polypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=300)


# Rows of a T** table in separate cudaMalloc allocations of different sizes, listed out of address
# order (the table's first row is the launcher's pool; the others lie above and below it).
SEPARATE_ROWS = r"""#include <cstdio>
#include <cuda_runtime.h>
__global__ void scale_rows(float** rows, const int* len, float* sums) {
  int i = blockIdx.x;
  float s = 0.0f;
  for (int j = threadIdx.x; j < len[i]; j += blockDim.x) {
    s += rows[i][j];
    rows[i][j] = rows[i][j] * (i + 2);
  }
  atomicAdd(&sums[i], s);
}
int main() {
  const int n = 4;
  int h_len[n] = {5, 37, 12, 70};
  float* rows[n];
  float host[70];
  for (int r = 0; r < n; r++) cudaMalloc(&rows[r], 100 * (r + 1) * sizeof(float));
  float* table_rows[n] = {rows[2], rows[0], rows[3], rows[1]};
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < h_len[i]; j++) host[j] = (float)(i * 100 + j);
    cudaMemcpy(table_rows[i], host, h_len[i] * sizeof(float), cudaMemcpyHostToDevice);
  }
  float** table;
  int* len;
  float* sums;
  cudaMalloc(&table, n * sizeof(float*));
  cudaMalloc(&len, n * sizeof(int));
  cudaMalloc(&sums, n * sizeof(float));
  cudaMemcpy(table, table_rows, n * sizeof(float*), cudaMemcpyHostToDevice);
  cudaMemcpy(len, h_len, n * sizeof(int), cudaMemcpyHostToDevice);
  cudaMemset(sums, 0, n * sizeof(float));
  scale_rows<<<n, 16>>>(table, len, sums);
  float h_sums[n];
  cudaMemcpy(h_sums, sums, n * sizeof(float), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; i++) {
    cudaMemcpy(host, table_rows[i], h_len[i] * sizeof(float), cudaMemcpyDeviceToHost);
    double total = 0.0;
    for (int j = 0; j < h_len[i]; j++) total += host[j];
    printf("row %d sum %.1f scaled %.1f\n", i, h_sums[i], total);
  }
  return 0;
}
"""


def test_rows_of_a_pointer_table_in_separate_allocations(tmp_path: pathlib.Path) -> None:
    """Each row its own cudaMalloc: every row is read and written where it is, natively and in
    the emulator (which before found every row but the first out of bounds of the first one)."""
    need_compiler(cpp=True)
    src = tmp_path / "rows.cu"
    src.write_text(SEPARATE_ROWS)
    lengths = [5, 37, 12, 70]
    expected = "".join(f"row {i} sum {sum(i * 100 + j for j in range(m)):.1f} "
                       f"scaled {(i + 2) * sum(i * 100 + j for j in range(m)):.1f}\n" for i, m in enumerate(lengths))
    for mode in ((), ("--emulate",)):
        r = _polypy("run", str(src), *mode)
        assert r.returncode == 0, r.stderr[-3000:]
        assert r.stdout == expected


def test_a_row_another_argument_reaches_is_refused_by_the_emulator(tmp_path: pathlib.Path) -> None:
    """The emulator runs a table whose rows lie in several allocations on a copy of them; another
    argument reaching one of those rows could not be kept coherent with it: a located error."""
    need_compiler(cpp=True)
    src = tmp_path / "alias.cu"
    src.write_text(SEPARATE_ROWS.replace("scale_rows<<<n, 16>>>(table, len, sums);",
                                         "scale_rows<<<n, 16>>>(table, len, rows[1]);"))
    r = _polypy("run", str(src), "--emulate")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert (f"{src}:3:17: error: kernel 'scale_rows': rows of pointer table 'rows' lie in several cudaMalloc "
            "allocations and argument 'sums' reaches one of them too") in r.stderr, r.stderr


@pytest.mark.parametrize("backend", ["llvm", "emulator"])
def test_rows_the_kernel_would_read_as_other_elements_are_refused(backend: str, tmp_path: pathlib.Path) -> None:
    """Through the Python API a row is read as consecutive elements from its start: a strided
    view, or one starting inside an element of the array it views, read other elements (before,
    silently: [0, 1, 10, 11] for rows pool[0:10:2], pool[10:20:3]); now a located error."""
    import polypy
    from polypy.errors import UserError

    src = tmp_path / "first_two.cu"
    src.write_text("__global__ void first_two(const float* const* rows, float* out) {\n"
                   "  out[2 * blockIdx.x] = rows[blockIdx.x][0];\n"
                   "  out[2 * blockIdx.x + 1] = rows[blockIdx.x][1];\n}\n")
    kernel = polypy.compile(str(src)).first_two
    launch = kernel if backend == "llvm" else kernel.emulate
    pool = np.arange(20, dtype=np.float32)
    out = np.zeros(4, np.float32)
    launch[2, 1]([pool[3:5], pool[7:9]], out)
    np.testing.assert_array_equal(out, [3, 4, 7, 8])
    for rows, why in (([pool[3:5], pool[10:20:3]], "row 1 is not contiguous"),
                      ([pool.view(np.uint8)[2:10].view(np.float32), pool[4:6]],
                       "row 0 does not start on an element of the array it views")):
        with pytest.raises(UserError, match=why) as err:
            launch[2, 1](rows, out)
        assert err.value.loc is not None and err.value.loc.file == str(src) and err.value.loc.line == 1


MISALIGNED_ROW = r"""#include <cstdio>
#include <cuda_runtime.h>
__global__ void pick(float** rows, float* out) {
  out[blockIdx.x] = rows[blockIdx.x][threadIdx.x];
}
int main() {
  float* buf;
  cudaMalloc(&buf, 64 * sizeof(float));
  float host[64];
  for (int j = 0; j < 64; j++) host[j] = (float)j;
  cudaMemcpy(buf, host, sizeof host, cudaMemcpyHostToDevice);
  float* table_rows[2] = {buf + 4, (float*)((char*)buf + 8)};
  float** table;
  float* out;
  cudaMalloc(&table, 2 * sizeof(float*));
  cudaMalloc(&out, 2 * sizeof(float));
  for (int offset = 8; offset >= 2; offset -= 6) {  /* aligned, then 2 bytes into an element */
    table_rows[1] = (float*)((char*)buf + offset);
    cudaMemcpy(table, table_rows, sizeof table_rows, cudaMemcpyHostToDevice);
    pick<<<2, 1>>>(table, out);
    float h[2];
    cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
    printf("%g %g\n", h[0], h[1]);
  }
  return 0;
}
"""


@pytest.mark.parametrize("mode", [(), ("--emulate",)], ids=["native", "emulator"])
def test_a_misaligned_row_is_a_located_error(mode: tuple[str, ...], tmp_path: pathlib.Path) -> None:
    """A row 2 bytes into a float array: a GPU faults (misaligned address); before, the launch read
    element 0 of the allocation (the pool index rounded down) and printed "4 0". Both the native
    launcher and the emulator stop there, naming the table and the row; the aligned launch before
    it runs."""
    need_compiler(cpp=True)
    src = tmp_path / "misaligned.cu"
    src.write_text(MISALIGNED_ROW)
    r = _polypy("run", str(src), *mode)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.stdout == "4 2\n"
    assert (f"{src}:3:30: error: row 1 of pointer table 'rows' in kernel pick is not aligned to its element type "
            "(4 bytes): reading through it on a GPU is a misaligned address (cudaErrorMisalignedAddress)") in r.stderr

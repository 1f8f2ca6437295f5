"""Device pointers held in ``__device__``/``__constant__`` pointer variables and arrays of pointers
(issue 36): ``__device__ float* d_scratch;``, ``__constant__ int* c_shift;``, ``__device__ float*
table[3];``, set from the host with ``cudaMemcpyToSymbol`` (or ``cudaGetSymbolAddress`` and
``cudaMemcpy``) and read in kernels. They extend the pools of pointers held in records
(``frontend/lower/held_pointers.py``, ``tests/test_constant_pointers.py``): each read pointer is an
offset into a pool the launcher finds and checks at each launch. Each program is written into
``tmp_path`` and its output compared with what the test computes by hand; ``polypy run`` (the C
backend) and ``polypy run --emulate``.
"""
from __future__ import annotations

import pathlib
import subprocess

import pytest

from c_support import assert_translate_refused, need_compiler, polypy_cli as _polypy, translate_and_compile


PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
__device__ float* d_scratch;
__constant__ int* c_shift;
__device__ float* table[3];
__device__ double* grid[2][2];
__device__ unsigned char* d_bytes;

__global__ void fill(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    d_scratch[i] = 2.0f * i + c_shift[i % 5];
    float* row = table[i % 3];
    out[i] = row[i] + d_scratch[i];
  }
}

__global__ void cells(double* out) {
  int r = blockIdx.x, c = threadIdx.x;
  double* cell = grid[r][c] + 1;
  cell[-1] += 10.0 * r + c;
  out[2 * r + c] = *grid[r][c] + cell[0] + d_bytes[2 * r + c];
}

int main() {
  const int n = 100;
  float *s, *o, *t0, *t1, *s2;
  int *c, *c2;
  cudaMalloc((void**)&s, n * sizeof(float));
  cudaMalloc((void**)&s2, (n + 8) * sizeof(float));
  cudaMalloc((void**)&o, n * sizeof(float));
  cudaMalloc((void**)&t0, 2 * n * sizeof(float));
  cudaMalloc((void**)&t1, n * sizeof(float));
  cudaMalloc((void**)&c, 5 * sizeof(int));
  cudaMalloc((void**)&c2, 5 * sizeof(int));
  int hc[5] = {1, 2, 3, 4, 5}, hc2[5] = {-7, 0, 7, 14, 21};
  cudaMemcpy(c, hc, sizeof(hc), cudaMemcpyHostToDevice);
  cudaMemcpy(c2, hc2, sizeof(hc2), cudaMemcpyHostToDevice);
  float h[2 * n];
  for (int i = 0; i < 2 * n; ++i) h[i] = 0.5f * i;
  cudaMemcpy(t0, h, sizeof(h), cudaMemcpyHostToDevice);
  for (int i = 0; i < n; ++i) h[i] = -1.0f * i;
  cudaMemcpy(t1, h, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpyToSymbol(d_scratch, &s, sizeof(float*));
  cudaMemcpyToSymbol(c_shift, &c, sizeof(int*));
  float* tab[3] = {t0, t1, t0 + n};  /* two entries into one allocation, one into its middle */
  cudaMemcpyToSymbol(table, tab, sizeof(tab));
  fill<<<4, 32>>>(o, n);
  float ho[n], hs[n];
  cudaMemcpy(ho, o, sizeof(ho), cudaMemcpyDeviceToHost);
  cudaMemcpy(hs, s, sizeof(hs), cudaMemcpyDeviceToHost);
  double a = 0, b = 0;
  for (int i = 0; i < n; ++i) { a += ho[i] * (i + 1); b += hs[i]; }
  printf("first %.2f %.2f\n", a, b);
  /* re-set between launches: d_scratch by cudaGetSymbolAddress + cudaMemcpy (8 elements into
     another allocation), c_shift by cudaMemcpyToSymbol, table[1] alone at an offset */
  float* moved = s2 + 8;
  void* where;
  cudaGetSymbolAddress(&where, d_scratch);
  cudaMemcpy(where, &moved, sizeof(float*), cudaMemcpyHostToDevice);
  cudaMemcpyToSymbol(c_shift, &c2, sizeof(int*));
  cudaMemcpyToSymbol(table, &t0, sizeof(float*), sizeof(float*));
  fill<<<4, 32>>>(o, n);
  cudaMemcpy(ho, o, sizeof(ho), cudaMemcpyDeviceToHost);
  cudaMemcpy(hs, s2 + 8, sizeof(hs), cudaMemcpyDeviceToHost);
  a = 0; b = 0;
  for (int i = 0; i < n; ++i) { a += ho[i] * (i + 1); b += hs[i] * (i % 7); }
  float* back = 0;
  cudaMemcpyFromSymbol(&back, d_scratch, sizeof(float*));
  printf("second %.2f %.2f %d\n", a, b, back == moved);

  double *g0, *g1, *go;
  unsigned char* bytes;
  cudaMalloc((void**)&g0, 4 * sizeof(double));
  cudaMalloc((void**)&g1, 4 * sizeof(double));
  cudaMalloc((void**)&go, 4 * sizeof(double));
  cudaMalloc((void**)&bytes, 8);
  double hg[4] = {1.5, 2.5, 3.5, 4.5};
  cudaMemcpy(g0, hg, sizeof(hg), cudaMemcpyHostToDevice);
  cudaMemcpy(g1, hg, sizeof(hg), cudaMemcpyHostToDevice);
  unsigned char hb[8] = {3, 1, 4, 1, 5, 9, 2, 6};
  cudaMemcpy(bytes, hb, 8, cudaMemcpyHostToDevice);
  double* gp[2][2] = {{g0, g0 + 2}, {g1, g1 + 2}};
  cudaMemcpyToSymbol(grid, gp, sizeof(gp));
  unsigned char* bp = bytes + 3;
  cudaMemcpyToSymbol(d_bytes, &bp, sizeof(bp));
  cells<<<2, 2>>>(go);
  double hgo[4];
  cudaMemcpy(hgo, go, sizeof(hgo), cudaMemcpyDeviceToHost);
  printf("cells %.2f %.2f %.2f %.2f\n", hgo[0], hgo[1], hgo[2], hgo[3]);
  return 0;
}
"""


def _expected() -> str:
    """What PROGRAM prints, computed by hand (every value is exact in float and double)."""
    n = 100
    t0 = [0.5 * j for j in range(2 * n)]
    t1 = [-1.0 * j for j in range(n)]
    lines = []
    for shift, rows, weight, name in (([1, 2, 3, 4, 5], [t0, t1, t0[n:]], lambda i: 1, "first"),
                                      ([-7, 0, 7, 14, 21], [t0, t0, t0[n:]], lambda i: i % 7, "second")):
        scratch = [2.0 * i + shift[i % 5] for i in range(n)]
        out = [rows[i % 3][i] + scratch[i] for i in range(n)]
        a = sum(out[i] * (i + 1) for i in range(n))
        b = sum(scratch[i] * weight(i) for i in range(n))
        lines.append(f"{name} {a:.2f} {b:.2f}" + (" 1" if name == "second" else ""))
    g = {0: [1.5, 2.5, 3.5, 4.5], 1: [1.5, 2.5, 3.5, 4.5]}
    hb = [3, 1, 4, 1, 5, 9, 2, 6]
    cells = []
    for r in range(2):
        for c in range(2):
            at = 2 * c  # grid[r][c] = g_r + 2c
            g[r][at] += 10.0 * r + c
            cells.append(g[r][at] + g[r][at + 1] + hb[3 + 2 * r + c])
    lines.append("cells " + " ".join(f"{v:.2f}" for v in cells))
    return "\n".join(lines) + "\n"


def _run_program(tmp_path: pathlib.Path, *mode: str) -> None:
    """PROGRAM's pointers read in kernels (indexed, copied into a local, moved, a 2-D array of
    pointers, a pointer to bytes), re-set between launches three ways (cudaGetSymbolAddress +
    cudaMemcpy, cudaMemcpyToSymbol whole and of one element at an offset), read back with
    cudaMemcpyFromSymbol. The 2-D array is named ``grid``, as the launchers' own parameter is."""
    need_compiler(cpp=True)
    src = tmp_path / "prog.cu"
    src.write_text(PROGRAM)
    result = _polypy("run", str(src), *mode, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == _expected()


def test_pointer_variables_in_module_memory_emulated(tmp_path: pathlib.Path) -> None:
    _run_program(tmp_path, "--emulate")


def test_pointer_variables_in_module_memory_native(tmp_path: pathlib.Path) -> None:
    """Through the C backend (extended tier: a C++ compile)."""
    _run_program(tmp_path)


def test_a_module_variable_named_grid_under_the_emulator(tmp_path: pathlib.Path) -> None:
    """The emulated launcher passes the module variables' addresses; ``grid`` (a launcher's parameter
    too) is the module's. Before: 1.4013e-45, the bits of the launch's grid.x."""
    need_compiler(cpp=True)
    src = tmp_path / "grid.cu"
    src.write_text("#include <cstdio>\n__device__ float grid;\n__global__ void k(float* out) { out[0] = grid; }\n"
                   "int main() {\n  float v = 2.5f, r = 0, *o;\n  cudaMalloc((void**)&o, 4);\n"
                   "  cudaMemcpyToSymbol(grid, &v, 4);\n  k<<<1, 1>>>(o);\n"
                   "  cudaMemcpy(&r, o, 4, cudaMemcpyDeviceToHost);\n  printf(\"%g\\n\", r);\n  return 0;\n}\n")
    result = _polypy("run", str(src), "--emulate", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "2.5\n"


BAD_POINTERS = r"""#include <cstdio>
#include <cstdlib>
__device__ float* d_src[2];
__global__ void k(float* out) { out[threadIdx.x] = d_src[blockIdx.x][threadIdx.x]; }
int main(int argc, char** argv) {
  float *a, *b, *out;
  float host[64];
  cudaMalloc((void**)&a, 64 * sizeof(float));
  cudaMalloc((void**)&b, 64 * sizeof(float));
  cudaMalloc((void**)&out, 64 * sizeof(float));
  float* p[2] = {a, b};
  int mode = atoi(argv[1]);
  if (mode == 1) cudaFree(b);
  if (mode == 2) p[1] = host;
  if (mode == 3) p[1] = (float*)((char*)b + 2);
  if (mode == 4) p[1] = 0;
  cudaMemcpyToSymbol(d_src, p, sizeof(p));
  k<<<mode == 4 ? 1 : 2, 32>>>(out);
  cudaDeviceSynchronize();
  printf("launched\n");
  return 0;
}
"""


@pytest.fixture(scope="module")
def bad_program(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, pathlib.Path]:
    """BAD_POINTERS through the CLI's ``translate`` and the C++ compiler, once: (source, binary)."""
    src = tmp_path_factory.mktemp("bad_symbol_pointers") / "bad.cu"
    src.write_text(BAD_POINTERS)
    return src, translate_and_compile(src)


@pytest.mark.parametrize("mode, what", [
    ("0", None),  # both pointers fine
    ("1", "freed"),  # b freed before the launch
    ("2", "host"),  # a host array
    ("3", "misaligned"),  # two bytes into b
    ("4", None),  # a null pointer the launch does not read
])
def test_a_pointer_to_no_allocation_stops_the_launch_located(mode: str, what: str | None, bad_program,
                                                             tmp_path: pathlib.Path) -> None:
    src, exe = bad_program
    result = subprocess.run([str(exe), mode], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    if what is None:
        assert result.returncode == 0, result.stderr
        assert result.stdout == "launched\n"
        return
    assert result.returncode == 1, (what, result.stdout, result.stderr)
    assert "launched" not in result.stdout
    assert (f"{src}:4:52: error: pointer 'd_src[1]' read from d_src here does not point into memory from "
            "cudaMalloc") in result.stderr, result.stderr


def test_an_emulated_launch_checks_the_pointers_too(tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    src = tmp_path / "bad.cu"
    src.write_text(BAD_POINTERS)
    result = _polypy("run", str(src), "--emulate", "--", "2", cwd=tmp_path)
    assert result.returncode == 1, result.stdout
    assert "launched" not in result.stdout
    assert f"{src}:4:52: error: pointer 'd_src[1]' read from d_src" in result.stderr, result.stderr


REFUSED = ("__device__ float* d_p;\n__device__ float* d_t[2];\n__constant__ float4* d_v;\n__device__ float** d_pp;\n"
           "__global__ void k(float* out) {{ {} }}\n"
           "int main() {{ float* o; cudaMalloc((void**)&o, 64); k<<<1, 1>>>(o); return 0; }}\n")


@pytest.mark.parametrize("body, message, column", [
    ("d_p = out;", "this pointer is not one polypy can pass to free or store to memory in device code", 33),
    ("d_t[1] = out + 2;", "this pointer is not one polypy can pass to free or store to memory in device code", 33),
    ("*(unsigned long long*)&d_p = 0ull; out[0] = d_p[0];", "'d_p' holds device pointers in __constant__ or "
     "__device__ memory: a kernel storing to it is not supported (set it from the host with cudaMemcpyToSymbol)", 33),
    ("out[0] = d_v[0].x;", "'d_v' of type 'float4 *': a pointer read from __constant__ or __device__ memory is "
     "supported to scalars only (not to 'float4')", 42),
    ("out[0] = d_pp[0][0];", "'d_pp' of type 'float **': a pointer read from __constant__ or __device__ memory is "
     "supported to scalars only (not to 'float *')", 42),
])
def test_what_is_not_supported_is_refused_located(body: str, message: str, column: int,
                                                  tmp_path: pathlib.Path) -> None:
    src = tmp_path / "refused.cu"
    src.write_text(REFUSED.format(body))
    assert_translate_refused(src, f"{src}:5:{column}", message)


def test_an_initializer_of_a_pointer_variable_is_refused(tmp_path: pathlib.Path) -> None:
    """Null initializers are supported (tests/test_device_heap.py); others are refused."""
    src = tmp_path / "init.cu"
    src.write_text("__device__ float d_x[4];\n__device__ float* d_p = d_x;\n"
                   "__global__ void k(float* out) { out[0] = d_p[0]; }\n")
    result = _polypy("translate", str(src), "-o", str(tmp_path / "init.cpp"))
    assert result.returncode == 1
    assert f"{src}:2:19: error: 'd_p' holds pointers: an initializer of a __device__ or __constant__ pointer " \
        "variable other than null pointers is not supported" in result.stderr, result.stderr


def test_races_through_a_held_pointer_are_reported_as_the_source_spells_them(tmp_path: pathlib.Path) -> None:
    """Two threads storing through the same pointer variable (the symbol cannot change during a
    launch): a certain race, located and spelled through the variable."""
    src = tmp_path / "race.cu"
    src.write_text("__device__ float* d_p;\n__device__ float* d_t[2];\n"
                   "__global__ void k(float* out) { d_p[0] = threadIdx.x; d_t[1][threadIdx.x / 2] = 1.f; "
                   "d_t[0][threadIdx.x] = 2.f; }\n"
                   "int main() { float* o; cudaMalloc((void**)&o, 4); k<<<1, 32>>>(o); return 0; }\n")
    result = _polypy("translate", "--report", str(src), "-o", str(tmp_path / "race.cpp"))
    assert result.returncode == 0, result.stderr
    assert f"{src}:3:33: warning: threads (tx=0, bx=0) and (tx=1, bx=0) both write 'd_p[0]'" in result.stderr
    assert f"{src}:3:55: warning: threads (tx=0, bx=0) and (tx=1, bx=0) both write " \
        "'d_t[1][(i64)(threadIdx.x / 2u)]'" in result.stderr, result.stderr
    assert result.stderr.count("warning: threads") == 2, result.stderr


def test_the_python_api_refuses_located(tmp_path: pathlib.Path) -> None:
    """NumPy arrays are no memory a pointer in ``__device__`` memory can point into."""
    import numpy as np

    import polypy
    from polypy.emulator import emulate
    from polypy.errors import UserError

    src = tmp_path / "api.cu"
    src.write_text("__device__ float* d_p;\n__global__ void k(float* out) { out[threadIdx.x] = d_p[threadIdx.x]; }\n")
    module = polypy.load(str(src))
    with pytest.raises(UserError) as emulated:
        emulate(module.kernel("k"), (1, 1, 1), (4, 1, 1), {"out": np.zeros(4, np.float32)})
    assert f"{src}:2:52: error: kernel 'k' reads pointers from __constant__ or __device__ memory ('d_p')" \
        in emulated.value.render()

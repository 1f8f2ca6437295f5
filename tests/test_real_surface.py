"""The surface real CUDA programs need (issue 14): headers, host code, runtime API, CLI.

Each program under ``tests/programs/surface/`` (or written here into ``tmp_path``) goes through
``polypy run`` (the translated C++, compiled and run) and ``polypy run --emulate`` (the oracle:
host code native, every launch emulated); both must print what NumPy computes. Programs that a
test must build as a user would (``polypy translate`` then the C/C++ compiler by hand) are built
in ``tmp_path``.
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

from c_support import need_compiler
from codegen.c import find_compiler
from test_programs import outputs_match

SURFACE = pathlib.Path(__file__).resolve().parent / "programs" / "surface"


def _polypy(*args: str, cwd: pathlib.Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=600, cwd=cwd)


def _run_both(*args: str, program_args: tuple[str, ...] = ()) -> tuple[str, str]:
    """stdout of the translated program and of the emulated one (both must exit with 0)."""
    tail = ("--", *program_args) if program_args else ()
    native = _polypy("run", *args, *tail)
    assert native.returncode == 0, native.stderr[-3000:]
    emulated = _polypy("run", *args, "--emulate", *tail)
    assert emulated.returncode == 0, emulated.stderr[-3000:]
    return native.stdout, emulated.stdout


def _check(got: str, want: str, rtol: float = 1e-5) -> None:
    problem = outputs_match(got, want, rtol)
    assert problem is None, f"{problem}\n--- got:\n{got}\n--- expected:\n{want}"


# --------------------------------------------------------------------------- headers, host math, runtime API


def _api_expected() -> str:
    f32 = np.float32
    n = 1000
    i = np.arange(n)
    x, y = (i % 7).astype(f32), f32(0.5) * (i % 3).astype(f32)
    z, w = f32(0.25) * (i % 5).astype(f32), (i % 2).astype(f32)
    pi_f = f32(3.141592654)
    out = (x * y + z - w) * f32(2.0) + pi_f * f32(0.125)
    rows, cols = 6, 10
    m = np.arange(rows * cols, dtype=np.float64).reshape(rows, cols) * 2 + np.arange(rows)[:, None]
    return "\n".join([
        "devices 1 warp 32 maxthreads 1024 sm>=1 1 cc>=3 1",
        "meminfo 1",
        "host math %d %.4f %.4f %.4f %d %d %.4f %.4f" % (-(-n // 128), 2 ** 0.5, 1.5 ** 3, 2.25, 7, 3, np.e, 0.5),
        "mixed 5 4 vectors 3 9 -4 16 guards 1 1",
        "timing 1 1",
        "symbol %.4f %.4f polar sum %.3f first %.5f last %.5f threads>=1 1"
        % (2.0, 0.125, out.astype(np.float64).sum(), out[0], out[-1]),
        "pitch>=row 1 m[0][0] %.1f m[5][9] %.1f m[3][4] %.1f" % (m[0, 0], m[5, 9], m[3, 4]),
        "error 1 invalid device pointer | peek 1 | last 1 | cleared 1 | cudaErrorInvalidValue",
    ]) + "\n"


def test_toolkit_headers_helpers_host_math_and_runtime_api() -> None:
    """cuda.h, vector_types.h, helper_cuda.h, cutil.h, math_constants.h, omp.h ...; ceil/sqrt/pow/max on
    the host without <math.h>; device properties, events, streams, pinned and pitched memory, symbols,
    cudaFuncSetCacheConfig, error codes."""
    need_compiler(cpp=True)
    native, emulated = _run_both(str(SURFACE / "api.cu"))
    _check(emulated, _api_expected())
    _check(native, emulated)


def test_translated_program_keeps_the_helper_headers_it_includes(tmp_path) -> None:
    """polypy's runtime stands in for cuda.h & co. (a note); helper headers with content are inlined
    once; the user's system includes stay."""
    out = tmp_path / "api.cpp"
    result = _polypy("translate", str(SURFACE / "api.cu"), "-o", str(out))
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert "/* #include <cuda.h>: polypy's runtime, above */" in text
    assert "/* #include <vector_types.h>: polypy's runtime, above */" in text
    assert text.count("/* ---- #include <helper_cuda.h> ---- */") == 1
    assert "/* #include <helper_cuda.h>: already included above */" in text  # again, from helper_functions.h
    assert "#define checkCudaErrors(val)" in text and "#define CUDA_SAFE_CALL(call)" in text
    assert "\n#include <omp.h>" in text and "\n#include <stdio.h>" in text


def test_a_users_own_header_named_like_a_toolkit_header_is_the_users(tmp_path) -> None:
    """Rodinia ships its own ``cuda.h``-named and ``helper_cuda.h`` headers: they are the program's, not
    polypy's runtime."""
    need_compiler(cpp=True)
    (tmp_path / "helper_cuda.h").write_text("#define LABEL \"own helper\"\nstatic int twice(int v) { return 2 * v; }\n")
    src = tmp_path / "own.cu"
    src.write_text('#include <stdio.h>\n#include "helper_cuda.h"\n'
                   "__global__ void k(int* x) { x[threadIdx.x] = threadIdx.x; }\n"
                   "int main() {\n  int* d; int h[4];\n  cudaMalloc((void**)&d, sizeof h);\n  k<<<1, 4>>>(d);\n"
                   "  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);\n"
                   '  printf("%s %d\\n", LABEL, twice(h[3]));\n  return 0;\n}\n')
    native = _polypy("run", str(src))
    assert native.returncode == 0, native.stderr[-3000:]
    assert native.stdout == "own helper 6\n"


# --------------------------------------------------------------------------- -D / -I and program arguments


def test_freed_device_blocks_are_reused_and_double_frees_still_fail() -> None:
    lines = []
    for it in range(6):
        n = 1000 if it % 2 else 40000
        if it == 4:
            lines.append(f"stale {sum(2 + i % 3 for i in range(n))}")
        lines.append(f"it {it} sum {sum(it + i % 3 for i in range(n))}")
    want = "\n".join(lines + ["reused 2", "big on a 2 MiB boundary 1", "double free 1"]) + "\n"
    native, emulated = _run_both(str(SURFACE / "alloc_reuse.cu"))
    assert native == want
    assert emulated == want


def _defines_expected(tile: int, tiles: int, label: str | None) -> str:
    n = tile * tiles
    h = np.arange(n, dtype=np.int64) * 7 % 101
    out = h.reshape(tiles, tile)[:, ::-1].reshape(-1) + 3
    lines = [f"label {label}"] if label is not None else []
    lines.append(f"TILE {tile} n {n} sum {out.sum()} weighted {(np.arange(n) * out).sum()}")
    return "\n".join(lines) + "\n"


def test_defines_and_include_dirs_reach_the_host_code_of_a_translated_program(tmp_path) -> None:
    """``polypy translate x.cu -DTILE=8 -I dir`` then ``c++ x.cpp`` (no -D): the host launches TILE=8
    blocks, as the kernel was translated for (it used to launch with the header's default 32)."""
    need_compiler(cpp=True)
    out = tmp_path / "defines.cpp"
    result = _polypy("translate", str(SURFACE / "defines.cu"), "-I", str(SURFACE / "include"), "-DTILE=8",
                     "-DOUTPUT", "-o", str(out))
    assert result.returncode == 0, result.stderr
    exe = tmp_path / "defines"
    build = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", str(out), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    run = subprocess.run([str(exe), "5", "hello"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    _check(run.stdout, _defines_expected(8, 5, "hello"))


def test_run_passes_defines_include_dirs_and_arguments_to_the_program() -> None:
    """``polypy run prog.cu -D.. -I.. -- ARGS``: natively and emulated; options after ``--`` are the
    program's, not polypy's."""
    need_compiler(cpp=True)
    native, emulated = _run_both(str(SURFACE / "defines.cu"), "-I", str(SURFACE / "include"), "-DTILE=16",
                                 "-DOUTPUT", program_args=("3", "--emulate"))
    want = _defines_expected(16, 3, "--emulate")
    _check(emulated, want)
    _check(native, want)


def test_defines_without_value_and_with_empty_value_are_as_the_compiler_reads_them(tmp_path) -> None:
    src = tmp_path / "flags.cu"
    src.write_text("#include <stdio.h>\n__global__ void k(int* x) { x[0] = ONE + EMPTY 2; }\n"
                   "int main() { printf(\"%d\\n\", ONE + EMPTY 2); return 0; }\n")
    out = tmp_path / "flags.cpp"
    result = _polypy("translate", str(src), "-DONE", "-DEMPTY=", "-o", str(out))
    assert result.returncode == 0, result.stderr
    head = out.read_text().split("/* Generated by polypy", 1)[0]
    assert "#define ONE 1\n" in head and "#define EMPTY\n" in head


def test_program_arguments_are_refused_for_a_kernel_sample() -> None:
    result = _polypy("run", "samples/saxpy.cu", "--", "12")
    assert result.returncode == 1 and "takes no arguments" in result.stderr and "Traceback" not in result.stderr


# --------------------------------------------------------------------------- sources that are not UTF-8

LATIN1_HEADER = (b"/* \xe9t\xe9: a Latin-1 comment before device code, whose spans must not shift */\n"
                 b"__device__ float twice(float v) { return 2.0f * v; }\n"
                 b"__global__ void scale(float* x) { x[threadIdx.x] = twice(x[threadIdx.x]) + 1.0f; }\n"
                 b"static void run_scale(float* d) { /* caf\xe9 */ scale<<<1, 8>>>(d); }\n")
LATIN1_MAIN = (b"#include <stdio.h>\n/* Fran\xe7ois, na\xefve, \xb5s */\n#include \"latin1.cuh\"\n"
               b"__global__ void add(float* x, float v) { x[threadIdx.x] += v; }\n"
               b"int main() {\n  float h[8]; for (int i = 0; i < 8; i++) h[i] = i;\n  float* d;\n"
               b"  cudaMalloc((void**)&d, sizeof h);\n  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);\n"
               b"  run_scale(d); /* \xe0 */ add<<<1, 8>>>(d, 0.5f);\n"
               b"  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);\n"
               b"  printf(\"%g %g %g\\n\", h[0], h[3], h[7]);\n  return 0;\n}\n")


def test_sources_that_are_not_utf8_translate_with_their_offsets_right(tmp_path) -> None:
    """A Latin-1 comment in the main file was a traceback (libclang's token spellings are UTF-8);
    in an included header it shifted the spans rewritten after it."""
    need_compiler(cpp=True)
    (tmp_path / "latin1.cuh").write_bytes(LATIN1_HEADER)
    src = tmp_path / "latin1.cu"
    src.write_bytes(LATIN1_MAIN)
    native = _polypy("run", str(src))
    assert native.returncode == 0, native.stderr[-3000:]
    assert native.stdout == "1.5 7.5 15.5\n"  # (2 i + 1) + 0.5


def test_errors_in_a_latin1_source_are_located(tmp_path) -> None:
    src = tmp_path / "bad.cu"
    src.write_bytes(b"/* \xe9 */\n__global__ void k(float* x) { x[0] = missing_name; }\n")
    result = _polypy("translate", str(src))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{src}:2:38: error: use of undeclared identifier 'missing_name'" in result.stderr


# --------------------------------------------------------------------------- multi-file programs


def test_a_translated_file_links_with_the_programs_other_objects(tmp_path) -> None:
    """multifile_kernels.cu translated alone (no main), compiled to an object; multifile_main.c
    compiled by the C compiler; linked: main calls the extern "C" launcher of the .cu file."""
    need_compiler(cpp=True)
    need_compiler(cpp=False)
    cpp = tmp_path / "kernels.cpp"
    result = _polypy("translate", str(SURFACE / "multifile_kernels.cu"), "-o", str(cpp))
    assert result.returncode == 0, result.stderr
    cxx, cc = find_compiler(cpp=True), find_compiler(cpp=False)
    steps = [[cxx, "-O2", "-fopenmp", "-c", str(cpp), "-o", str(tmp_path / "kernels.o")],
             [cc, "-O2", "-c", str(SURFACE / "multifile_main.c"), "-o", str(tmp_path / "main.o")],
             [cxx, "-fopenmp", str(tmp_path / "kernels.o"), str(tmp_path / "main.o"), "-o", str(tmp_path / "prog"),
              "-lm"]]
    for step in steps:
        built = subprocess.run(step, capture_output=True, text=True)
        assert built.returncode == 0, built.stderr[-3000:]
    run = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    x = 0.5 * np.arange(100, dtype=np.float32) + 2.0
    _check(run.stdout, "x[0] %.2f x[99] %.2f sum %.2f\n" % (x[0], x[99], x.astype(np.float64).sum()))


# --------------------------------------------------------------------------- still refused


GL_PROGRAM = """#include <stdio.h>
#include <cuda_gl_interop.h>
__global__ void twice(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 2.0f * x[i] + 1.0f;
}
int main() {
  const int n = 300;
  float h[n], *d;
  for (int i = 0; i < n; i++) h[i] = 0.25f * i;
  cudaMalloc((void**)&d, n * sizeof(float));
  cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
  %s
  twice<<<(n + 127) / 128, 128>>>(d, n);
  cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
  printf("x[0] %%.2f x[299] %%.2f\\n", h[0], h[299]);
  return 0;
}
"""


def test_a_program_that_includes_the_opengl_interop_header_and_uses_none_of_it_runs(tmp_path) -> None:
    """Rodinia hybridsort includes <cuda_gl_interop.h> (and GLEW's headers) and calls none of it."""
    src = tmp_path / "gl.cu"
    src.write_text(GL_PROGRAM % "")
    native, emulated = _run_both(str(src))
    want = "x[0] %.2f x[299] %.2f\n" % (1.0, 2 * 0.25 * 299 + 1)
    _check(native, want)
    _check(emulated, want)


def test_a_call_of_an_opengl_interop_function_is_a_located_error_naming_it(tmp_path) -> None:
    src = tmp_path / "gl.cu"
    src.write_text(GL_PROGRAM % "cudaGLRegisterBufferObject(7u);")
    result = _polypy("translate", str(src), "-o", str(tmp_path / "out.cpp"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{src}:13:3: error:" in result.stderr
    assert "cudaGLRegisterBufferObject is not supported by polypy (OpenGL interoperability)" in result.stderr
    assert "^" in result.stderr and not (tmp_path / "out.cpp").exists()


@pytest.mark.parametrize("header, feature, says", [("curand.h", "the cuRAND host API", "not supported"),
                                                   ("thrust/device_vector.h", "Thrust", "pip install 'polypy[thrust]'"),
                                                   ("cuda/atomic", "libcu++", "pip install 'polypy[thrust]'"),
                                                   ("cub/device/device_scan.cuh", "CUB beyond its block and warp primitives", "not supported")])
def test_headers_of_unsupported_features_are_located_errors_naming_the_feature(tmp_path, monkeypatch, header,
                                                                               feature, says) -> None:
    monkeypatch.setenv("POLYPY_CCCL_INCLUDE", "off")  # Thrust's and libcu++'s headers as without polypy[thrust]
    src = tmp_path / "feature.cu"
    src.write_text(f"#include <stdio.h>\n#include <{header}>\n__global__ void k(float* x) {{ x[0] = 1.0f; }}\n")
    result = _polypy("translate", str(src), "-o", str(tmp_path / "out.cpp"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{src}:2:10: error: {feature}" in result.stderr and says in result.stderr
    assert not (tmp_path / "out.cpp").exists()


def test_common_size_macros_from_the_command_line_do_not_break_polypys_headers(tmp_path) -> None:
    """PolyBench shrinks its sizes with ``-DM=.. -DN=..``: polypy's headers (parsed after the -D
    definitions, and pasted after them in the output) must not use such names (a template parameter
    ``M`` of the texture declarations broke every program given -DM)."""
    need_compiler(cpp=True)
    src = tmp_path / "sizes.cu"
    src.write_text("#include <stdio.h>\n#include <cuda.h>\n#include <helper_cuda.h>\n"
                   "__global__ void fill(float* a) { int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   "  if (i < M * N) a[i] = (i / N) * 10 + i % N; }\n"
                   "int main() { float h[M * N]; float* d; checkCudaErrors(cudaMalloc((void**)&d, sizeof h));\n"
                   "  fill<<<(M * N + 31) / 32, 32>>>(d);\n"
                   "  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);\n"
                   "  printf(\"%d %g %g\\n\", M * N, h[N + 1], h[M * N - 1]); return 0; }\n")
    result = _polypy("run", str(src), *(f"-D{name}=3" for name in ("M", "NI", "NJ", "NK", "A", "S", "P", "E", "D")),
                     "-DN=5", "-DBS=8", "-DDATA_TYPE=float")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == "15 11 24\n"


# --------------------------------------------------------------------------- tracing device-to-host copies

TRACE_PROGRAM = r"""
#include <stdio.h>
struct pair { int a; float b; };
struct opaque;  /* a copy into an incomplete type: bytes */
__global__ void fill(float* f, double* d, int* i, pair* p, unsigned char* c, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) { f[t] = 0.5f * t; d[t] = 1.0 / (t + 1); i[t] = -3 * t; p[t].a = t; p[t].b = 2.0f; c[t] = 250 + t; }
}
int main() {
  const int n = 5;
  float f[n]; double d[n]; int i[n]; pair p[n]; unsigned char c[n];
  float *df; double *dd; int *di; pair *dp; unsigned char *dc;
  cudaMalloc((void**)&df, sizeof f); cudaMalloc((void**)&dd, sizeof d); cudaMalloc((void**)&di, sizeof i);
  cudaMalloc((void**)&dp, sizeof p); cudaMalloc((void**)&dc, sizeof c);
  fill<<<1, 32>>>(df, dd, di, dp, dc, n);
  cudaMemcpy(f, df, sizeof f, cudaMemcpyDeviceToHost);
  cudaMemcpy(d, dd, sizeof d, cudaMemcpyDeviceToHost);
  cudaMemcpy(i, di, sizeof i, cudaMemcpyDeviceToHost);
  cudaMemcpy((void*)c, dc, 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(p, dp, sizeof(pair), cudaMemcpyDeviceToHost);
  cudaMemcpy((opaque*)(void*)(c + 2), dc + 2, 1, cudaMemcpyDeviceToHost);
  cudaMemcpy(df, f, sizeof f, cudaMemcpyHostToDevice);
  printf("done %g\n", f[n - 1]);
  return 0;
}
"""


def test_trace_copies_writes_what_the_device_returns_typed_by_the_destination(tmp_path) -> None:
    """POLYPY_TRACE_COPIES=FILE: every device-to-host cudaMemcpy's values, typed where the
    destination pointer says the type, bytes otherwise; host-to-device copies are not written.
    The translated and the emulated run write the same file (how the real-programs runner checks
    programs that print nothing, Rodinia gaussian)."""
    import os

    src = tmp_path / "trace.cu"
    src.write_text(TRACE_PROGRAM)
    pair = np.array([(0, 2.0)], dtype=[("a", "<i4"), ("b", "<f4")]).tobytes()
    want = "\n".join(["device-to-host copy of 5 float", *("%.9g" % (0.5 * t) for t in range(5)),
                      "device-to-host copy of 5 double", *("%.17g" % (1.0 / (t + 1)) for t in range(5)),
                      "device-to-host copy of 5 int", *(str(-3 * t) for t in range(5)),
                      "device-to-host copy of 2 bytes", "250", "251",
                      "device-to-host copy of 8 bytes", *(str(b) for b in pair),
                      "device-to-host copy of 1 bytes", "252"]) + "\n"
    for mode in ((), ("--emulate",)):
        trace = tmp_path / f"copies{len(mode)}.txt"
        run = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", str(src), *mode], capture_output=True,
                             text=True, timeout=600, env={**os.environ, "POLYPY_TRACE_COPIES": str(trace)})
        assert run.returncode == 0, run.stderr[-3000:]
        assert run.stdout == "done 2\n"
        assert trace.read_text() == want, mode


# --------------------------------------------------------------------------- the driver API's device queries

DRIVER_PROGRAM = r"""
#include <stdio.h>
#include <cuda.h>
__global__ void fill(int* x) { x[threadIdx.x] = (int)threadIdx.x * 3; }
int main() {
  int count = -1, major = -1, minor = -1;
  CUdevice dev = -1;
  printf("before init %d\n", cuDeviceGetCount(&count) == CUDA_ERROR_NOT_INITIALIZED);
  size_t free_bytes = 0, total_bytes = 0;
  int* first;
  cudaMalloc((void**)&first, 4);  /* the runtime's context initializes the driver (mummergpu) */
  printf("after the runtime %d\n", cuMemGetInfo(&free_bytes, &total_bytes) == CUDA_SUCCESS && total_bytes > 0);
  printf("init %d\n", cuInit(0) == CUDA_SUCCESS);
  int ok = cuDeviceGetCount(&count) == CUDA_SUCCESS;
  printf("count %d %d\n", ok, count);
  ok = cuDeviceGet(&dev, 0) == CUDA_SUCCESS;
  printf("get %d %d bad %d\n", ok, dev, cuDeviceGet(&dev, 1) == CUDA_ERROR_INVALID_DEVICE);
  ok = cuDeviceComputeCapability(&major, &minor, 0) == CUDA_SUCCESS;
  printf("cc %d %d\n", ok, major >= 3);
  char name[64];
  ok = cuDeviceGetName(name, sizeof name, 0) == CUDA_SUCCESS;
  printf("name %d %d\n", ok, name[0] != 0);
  size_t total = 0, free0 = 0, free1 = 0, total1 = 0;
  cuDeviceTotalMem(&total, 0);
  cuMemGetInfo(&free0, &total1);
  int* d;
  cudaMalloc((void**)&d, 1 << 20);
  cuMemGetInfo(&free1, &total1);
  printf("mem %d %d %d\n", total > 0, total1 == total, free0 - free1 >= (1 << 20));
  fill<<<1, 32>>>(d);
  int h[32];
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  printf("x[31] %d sync %d\n", h[31], cuCtxSynchronize() == CUDA_SUCCESS);
  return 0;
}
"""


def test_the_driver_apis_device_queries_describe_the_one_device(tmp_path) -> None:
    """Rodinia mummergpu's CUT_DEVICE_INIT_DRV and cuMemGetInfo: cuInit, the device count, the
    device, its compute capability, name and memory, with the driver's errors (not initialized,
    invalid device)."""
    src = tmp_path / "driver.cu"
    src.write_text(DRIVER_PROGRAM)
    want = ("before init 1\nafter the runtime 1\ninit 1\ncount 1 1\nget 1 0 bad 1\ncc 1 1\nname 1 1\nmem 1 1 1\nx[31] 93 sync 1\n")
    native, emulated = _run_both(str(src))
    assert native == want
    assert emulated == want


@pytest.mark.parametrize("call, feature", [
    ("CUmodule m; cuModuleLoad(&m, \"k.cubin\");", "cuModuleLoad is not supported by polypy (CUDA driver API)"),
    ("cudaMipmappedArray_t m; cudaFreeMipmappedArray(m);",
     "mipmapped arrays (cudaFreeMipmappedArray) is not supported by polypy"),
])
def test_driver_modules_and_cuda_arrays_are_located_errors_naming_them(tmp_path, call, feature) -> None:
    src = tmp_path / "refused.cu"
    src.write_text("#include <cuda.h>\n__global__ void k(float* x) { x[0] = 1.0f; }\nint main() {\n  "
                   + call + "\n  return 0;\n}\n")
    result = _polypy("translate", str(src), "-o", str(tmp_path / "out.cpp"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{src}:4:" in result.stderr and feature in result.stderr
    assert not (tmp_path / "out.cpp").exists()


def test_a_byte_buffer_read_as_floats_translates_and_a_narrow_write_is_a_located_error(tmp_path) -> None:
    """Rodinia dwt2d copies bytes four at a time through ``(float *)d_src``: the bytes' bits
    (docs/typed_views.md, tests/test_typed_views.py); writing one byte of a float is refused."""
    src = tmp_path / "cast.cu"
    src.write_text("__global__ void copy4(unsigned char* d_src, float* out) {\n"
                   "  int x = threadIdx.x;\n"
                   "  float *s = (float *)d_src;\n"
                   "  out[x] = s[x];\n"
                   "  ((unsigned char *)out)[4 * x + 1] = 0;\n"
                   "}\n")
    result = _polypy("translate", str(src), "-o", str(tmp_path / "out.cpp"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{src}:5:" in result.stderr
    assert "writing a unsigned char into part of a float element" in result.stderr
    assert not (tmp_path / "out.cpp").exists()
    src.write_text(src.read_text().replace("  ((unsigned char *)out)[4 * x + 1] = 0;\n", ""))
    result = _polypy("translate", str(src), "-o", str(tmp_path / "out.cpp"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out.cpp").exists()


# --------------------------------------------------------------------------- floating-point contraction

CONTRACT_PROGRAM = r"""
#include <stdio.h>
__global__ void madd(const float* a, const float* b, const float* c, float* out) {
  int i = threadIdx.x;
  out[i] = a[i] * b[i] + c[i];
}
int main() {
  volatile double x = 1.0 + 0x1p-30, y = 1.0 - 0x1p-30, z = -1.0;
  double host = x * y + z;
  float h[3 * 32], r[32];
  for (int i = 0; i < 32; i++) { h[i] = 1.0f + 0x1p-13f; h[32 + i] = 1.0f - 0x1p-13f; h[64 + i] = -1.0f; }
  float* d;
  cudaMalloc((void**)&d, sizeof h + sizeof r);
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  madd<<<1, 32>>>(d, d + 32, d + 64, d + 96);
  cudaMemcpy(r, d + 96, sizeof r, cudaMemcpyDeviceToHost);
  printf("host %a kernel %a %a\n", host, (double)r[0], (double)r[31]);
  return 0;
}
"""


def test_multiply_adds_are_rounded_twice_in_host_code_and_kernels_as_nvcc_and_the_emulator_do(tmp_path) -> None:
    """The documented build line has -march=native, with which GCC fuses a * b + c into one
    multiply-add (rounded once). nvcc builds host code without fusing, and polypy's IR and emulator
    round every operation: the emitted file turns contraction off itself (old PolyBench FDTD-2D's
    CPU reference differed in 2 of 4M values without it). Fused, both lines here would be
    -0x1p-60 and -0x1p-26."""
    src = tmp_path / "contract.cu"
    src.write_text(CONTRACT_PROGRAM)
    native, emulated = _run_both(str(src))
    assert native == "host 0x0p+0 kernel 0x0p+0 0x0p+0\n"
    assert emulated == native


def test_memory_header_and_noinline_device_functions(tmp_path) -> None:
    """``<memory>`` spells ``__attribute__((__noinline__))``: the frontend leaves ``__noinline__``
    to clang's CUDA mode (a keyword there) instead of a macro, so both parse (Thrust includes it)."""
    need_compiler(cpp=True)
    src = tmp_path / "mem.cu"
    src.write_text("#include <cstdio>\n#include <memory>\n"
                   "__noinline__ __device__ float inc(float x) { return x + 1.0f; }\n"
                   "__global__ void k(float* a) { a[threadIdx.x] = inc(a[threadIdx.x]); }\n"
                   "int main() { std::unique_ptr<float[]> h(new float[64]); float* d;\n"
                   "  for (int i = 0; i < 64; ++i) h[i] = 0.5f * i;\n"
                   "  cudaMalloc((void**)&d, 64 * sizeof(float));\n"
                   "  cudaMemcpy(d, h.get(), 64 * sizeof(float), cudaMemcpyHostToDevice);\n"
                   "  k<<<1, 64>>>(d); cudaMemcpy(h.get(), d, 64 * sizeof(float), cudaMemcpyDeviceToHost);\n"
                   "  printf(\"%g %g\\n\", h[3], h[63]); return 0; }\n")
    native, emulated = _run_both(str(src))
    want = "%g %g\n" % (0.5 * 3 + 1, 0.5 * 63 + 1)
    _check(native, want)
    _check(emulated, want)

"""Lambdas made in host code and passed to kernel templates (nvcc --extended-lambda; issue 36,
C++ in device code): ``[=] __device__``, ``[a, k] __host__ __device__``, stored and launched,
one generic kernel with several lambdas, captured device pointers and structs (of a type
declared after the templates), a stored lambda launched in a host loop, a lambda without
captures, one copied in the kernel and passed on to device function templates (by value and by
reference), a generic lambda, a lambda made inside one, a ``mutable`` one (each thread's copies),
one using shared memory and a barrier. The program
(tests/programs/extended_lambdas.cu) is translated whole, compiled and run, and run on the
emulator; each printed array is checked against NumPy. The Python API launches two of its
kernel instances with the captures as a dict. Lambdas passed to host function templates that
launch ("parallel_for" wrappers: tests/programs/lambda_wrappers.cu) are checked the same way.
What is not CUDA's meaning, or not supported, is refused, located (frontend/closures.py)."""
from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

import polypy
from c_support import assert_load_refused, need_compiler
from codegen.c import find_compiler
from polypy.errors import UserError

PROGRAM = pathlib.Path(__file__).parent / "programs" / "extended_lambdas.cu"
N = 37


def _reference() -> dict[str, np.ndarray]:
    """What CUDA prints, in float32 as the device computes it."""
    f = np.float32
    x = (f(0.5) * (np.arange(N) - 10)).astype(f)
    i = np.arange(N)
    a, k, c, base = f(2.0), 3, f(1.5), 5
    f1 = lambda v: v * c + f(1.0)  # noqa: E731 - the lambda of `twice`
    return {
        "axpk32": a * x + f(k) + x * x * x,
        "axmkn16": a * x - f(k * N),
        "stored": a - x * f(k),        # the copies made where the lambda was made, not a = 100, k = -1
        "host": np.array([a - f(1.0) * f(k)], f),
        "params": f(0.25) * (i + 7).astype(f),
        "pointer": x * f(base),
        "loop": x * f(base) + f(3) * (f(base) * f(0.5)),
        "negate": -x,
        "mutable": np.array([base + sum(range(j % 16, j + 1, 16)) for j in range(N)], f),
        "twice": f1(f1(x)),
        "generic": x * x - c,
        "nested": x * x * c + f(base),
        "blocks": np.array([x[:32].sum(dtype=f) * c, x[32:].sum(dtype=f) * c], f),
    }


def _parse(printed: str) -> dict[str, np.ndarray]:
    out = {}
    for line in printed.splitlines():
        name, *values = line.split()
        out[name] = np.array([float(v) for v in values], np.float32)
    return out


def _check(printed: str) -> None:
    got, want = _parse(printed), _reference()
    assert list(got) == list(want), printed
    for name, values in want.items():
        np.testing.assert_allclose(got[name], values, rtol=1e-6, err_msg=name)


def _polypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=300)


def _built(tmp_path_factory, program: pathlib.Path, name: str) -> tuple[str, str]:
    """(the translated C++, what the compiled program prints) of ``program``: one build per file."""
    need_compiler(cpp=True)
    tmp = tmp_path_factory.mktemp(name)
    cu = tmp / program.name
    shutil.copy(program, cu)
    out = tmp / f"{name}.cpp"
    done = _polypy("translate", str(cu), "-o", str(out))
    assert done.returncode == 0, done.stderr
    exe = tmp / name
    built = subprocess.run([find_compiler(cpp=True), "-O1", "-fopenmp", str(out), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    return out.read_text(), ran.stdout


@pytest.fixture(scope="module")
def translated(tmp_path_factory) -> tuple[str, str]:
    return _built(tmp_path_factory, PROGRAM, "lambdas")


def test_the_compiled_program_prints_what_cuda_prints(translated: tuple[str, str]) -> None:
    _check(translated[1])


def test_the_closures_are_records_made_where_the_lambdas_are_made(translated: tuple[str, str]) -> None:
    text = translated[0]
    assert "(lambda at" not in text.split("int main()")[-1]
    # a __device__ lambda becomes the record of its captures, made from the same variables
    assert "struct polypy_lambda_40_41 { float a; int k; };" in text
    assert "polypy_lambda_40_41{a, k}" in text and "Params p;" in text.split("struct polypy_lambda_54_21")[1][:60]
    # a __host__ __device__ one stays (host code calls it), wrapped with its record
    assert "auto g = polypy_close([a, k] __host__ __device__ (float v)" in text
    assert "polypy_lambda_46_12{a, k});" in text
    # the records and the instances come before main, after the types the captures have
    assert text.index("struct Params {") < text.index("struct polypy_lambda_40_41") \
        < text.index("apply_lambda_40_41_launch(") < text.index("int main()")


def test_the_program_on_the_emulator(tmp_path: pathlib.Path) -> None:
    cu = tmp_path / PROGRAM.name
    shutil.copy(PROGRAM, cu)
    emulated = _polypy("run", str(cu), "--emulate")
    assert emulated.returncode == 0, emulated.stderr
    _check(emulated.stdout)


def test_kernel_instances_taking_lambdas_through_the_python_api() -> None:
    mod = polypy.compile(str(PROGRAM))
    want = _reference()
    x = (np.float32(0.5) * (np.arange(N) - 10)).astype(np.float32)
    for grid, block in ((2, 32), (5, 8)):
        y = np.zeros(N, np.float32)
        mod.apply_lambda_40_41[grid, block](N, y, x, {"a": 2.0, "k": 3})
        np.testing.assert_allclose(y, want["axpk32"], rtol=1e-6)
        z = np.zeros(N, np.float32)
        mod.each_lambda_54_21[grid, block](N, {"z": z, "p": {"scale": 0.25, "shift": 7}})
        np.testing.assert_allclose(z, want["params"], rtol=1e-6)


REFUSED = [
    ("by-reference",
     "  auto f = [&] __device__ (int i) { return a * i; };\n",
     "capturing host variables by reference", (6, 12)),
    ("by-reference-named",
     "  auto f = [&a] __device__ (int i) { return a * i; };\n",
     "device code cannot reach host memory", (6, 12)),
    ("init-capture",
     "  auto f = [b = a * 2] __device__ (int i) { return b * i; };\n",
     "init-captures are not supported", (6, 13)),
    ("mutable-host",  # host code could change the copies the kernel is given
     "  auto f = [=] __host__ __device__ (int i) mutable { a += 1.0f; return a * i; };\n",
     "mutable __host__ __device__ lambdas capturing by value", (6, 12)),
    ("host-lambda",
     "  auto f = [=] (int i) { return a * i; };\n",
     "must be declared __device__ or __host__ __device__", (6, 12)),
    ("array",
     "  float t[2] = {a, a};\n  auto f = [=] __device__ (int i) { return t[1] * i; };\n",
     "capturing an array by value", (7, 12)),
]
REFUSED_PROGRAM = """template <class F> __global__ void k(float* y, F f) { y[threadIdx.x] = f((int)threadIdx.x); }
int main() {
  float* y;
  cudaMalloc(&y, 32 * sizeof(float));
  float a = 2.0f;
{lambda}  k<<<1, 32>>>(y, f);
  return 0;
}
"""


@pytest.mark.parametrize("name,lam,message,where", REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_with_location(name: str, lam: str, message: str, where: tuple[int, int],
                               tmp_path: pathlib.Path) -> None:
    path = tmp_path / f"{name}.cu"
    path.write_text(REFUSED_PROGRAM.replace("{lambda}", lam))
    with pytest.raises(UserError) as info:
        polypy.load(str(path))
    err = info.value
    assert message in err.message, err.render()
    assert err.loc is not None and (err.loc.line, err.loc.col) == where, err.render()


EACH = ("template <class F> __global__ void each(int n, F f) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) f(i); }\n")
REFUSED_SOURCES = [
    ("template-instantiated-twice",  # one lambda written, two closure types (float, double)
     EACH + "template <class T> void fill(int n, T* d, T s) { each<<<1, 32>>>(n, [=] __device__ (int i) "
     "{ d[i] = s * i; }); }\n"
     "int main() { float* d; double* e; cudaMalloc(&d, 128); cudaMalloc(&e, 256);\n"
     "  fill(32, d, 0.5f); fill(32, e, 0.25); return 0; }\n",
     "function template instantiated more than once", (3, 69)),
    ("mutable-copied",  # the copy would have copies of its own
     EACH + "template <class F> __global__ void copied(float* y, F f) { F g = f; y[threadIdx.x] = g(1); }\n"
     "int main() { float* d; cudaMalloc(&d, 128); float s = 0.5f;\n"
     "  copied<<<1, 32>>>(d, [=] __device__ (int i) mutable { s += i; return s; }); return 0; }\n",
     "copies of a mutable lambda in device code are not supported", (3, 66)),
]


@pytest.mark.parametrize("name,source,message,where", REFUSED_SOURCES, ids=[c[0] for c in REFUSED_SOURCES])
def test_refused_programs_with_location(name: str, source: str, message: str, where: tuple[int, int],
                                        tmp_path: pathlib.Path) -> None:
    assert_load_refused(tmp_path, name, source, message, where)


def test_this_capture_is_refused_by_the_cli(tmp_path: pathlib.Path) -> None:
    cu = tmp_path / "this.cu"
    cu.write_text("template <class F> __global__ void k(float* y, F f) { y[threadIdx.x] = f(1.0f); }\n"
                  "struct S {\n  float q; float* y;\n"
                  "  void go() { k<<<1, 32>>>(y, [=] __device__ (float v) { return q * v; }); }\n};\n"
                  "int main() { S s; cudaMalloc(&s.y, 128); s.q = 2.0f; s.go(); return 0; }\n")
    out = tmp_path / "this.cpp"
    done = _polypy("translate", str(cu), "-o", str(out))
    assert done.returncode == 1 and not out.exists() and "Traceback" not in done.stderr, done.stderr
    assert f"{cu}:4:31: error: " in done.stderr and "'this'" in done.stderr, done.stderr
    assert "^" in done.stderr


WRAPPERS = pathlib.Path(__file__).parent / "programs" / "lambda_wrappers.cu"


def _wrappers_reference() -> dict[str, np.ndarray]:
    """What CUDA prints for tests/programs/lambda_wrappers.cu (float32)."""
    f = np.float32
    x = (f(0.5) * (np.arange(N) - 10)).astype(f)
    i = np.arange(N)
    a = f(2.0)
    y = a * x + f(1.0)
    z = y * y
    return {"axpy": y, "square": z, "functor": z * z, "params": f(0.25) * (i + 7).astype(f), "shaped": x - a,
            "byref": x * x * a, "member": i.astype(f) * a, "late": -x,
            "transform": i.astype(f) * a * a - f(1.0)}


@pytest.fixture(scope="module")
def wrappers(tmp_path_factory) -> tuple[str, str]:
    """(the translated C++, what the compiled program prints) of the wrappers' program."""
    return _built(tmp_path_factory, WRAPPERS, "wrappers")


def _check_wrappers(printed: str) -> None:
    got, want = _parse(printed), _wrappers_reference()
    assert list(got) == list(want), printed
    for name, values in want.items():
        np.testing.assert_allclose(got[name], values, rtol=1e-6, err_msg=name)


def test_lambdas_through_host_templates_that_launch(wrappers: tuple[str, str]) -> None:
    """parallel_for-style wrappers (by value, F&&, const F&, passed on to another wrapper, a
    member function template, one defined after main, one with a second template parameter),
    several lambdas and a function object through one wrapper, __device__ and __host__ __device__
    lambdas, on several launch shapes: each instance launches its closure's kernel."""
    _check_wrappers(wrappers[1])


def test_the_wrappers_test_the_closures_record(wrappers: tuple[str, str]) -> None:
    text = wrappers[0]
    wrapper = text.index("template <class F> void parallel_for(int n, F f) {")
    # the record and the launcher are declared before the wrapper, whose launch tests the record
    assert text.index("struct polypy_lambda_53_19;") < wrapper
    assert text.index("for_each_kernel_lambda_53_19_launch(dim3 grid") < wrapper
    body = text[wrapper:text.index("\n}", wrapper)]
    assert "if constexpr ((polypy_is_closure<F, polypy_lambda_53_19>::value)) " \
           "polypy_pick(for_each_kernel_lambda_53_19_launch)" in body
    assert "(__is_same(F, Square))" in body
    assert "polypy_is_closure<F, polypy_lambda_68_12>::value" in text  # Exec::run
    assert "__is_same(T, float) && polypy_is_closure<F, polypy_lambda_72_19>::value" in text  # transform


def test_the_wrappers_on_the_emulator(tmp_path: pathlib.Path) -> None:
    cu = tmp_path / WRAPPERS.name
    shutil.copy(WRAPPERS, cu)
    emulated = _polypy("run", str(cu), "--emulate")
    assert emulated.returncode == 0, emulated.stderr
    _check_wrappers(emulated.stdout)


def test_a_lambda_made_in_main_after_a_namespace(tmp_path: pathlib.Path) -> None:
    """The instance and the record go right before main, whatever stands before it (a namespace
    here): it was refused as a type placed outside the global scope."""
    path = tmp_path / "after_namespace.cu"
    path.write_text(EACH + "namespace util { inline float half(float v) { return 0.5f * v; } }\n"
                    "int main() { float* d; cudaMalloc(&d, 128); float s = util::half(3.0f);\n"
                    "  each<<<1, 32>>>(32, [=] __device__ (int i) { d[i] = s * i; }); return 0; }\n")
    mod = polypy.compile(str(path))
    for grid, block in ((1, 32), (3, 4)):
        d = np.zeros(32, np.float32)
        mod.each_lambda_5_23[grid, block](32, {"d": d, "s": 1.5})
        want = np.float32(1.5) * np.arange(32, dtype=np.float32)
        want[grid * block:] = 0.0
        np.testing.assert_array_equal(d, want)

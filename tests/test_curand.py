"""cuRAND's device API (issues 36, 41): XORWOW ``curandState`` and Philox4_32_10, exact.

The expected values are known answers of cuRAND itself: ``programs/curand_device.expected`` is what
``programs/curand_device.cu`` prints when its kernels run, thread by thread, on NVIDIA's own
``curand_kernel.h`` (compiled for the host, with the multiply-adds contracted as nvcc contracts
them), and ``_EDGES`` are first draws of NVIDIA's ``curand_init`` at extreme seeds, subsequences
and offsets. Raw draws, states and uniforms must agree to the bit in every backend (the C++
program, the emulator, the LLVM JIT of the Python API); normals go through log/sin/cos/exp and
agree within a few ulps (CUDA's own functions differ from a CPU's in the last bits).
"""
from __future__ import annotations

import functools
import hashlib
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import polypy
from c_support import need_compiler
from codegen.c import find_compiler
from polypy.curand import PHILOX_STATE, XORWOW_STATE, jump, jump_tables, matrix_words, xorwow_step

PROGRAMS = pathlib.Path(__file__).resolve().parent / "programs"
PROGRAM = PROGRAMS / "curand_device.cu"
EXPECTED = (PROGRAMS / "curand_device.expected").read_text()


def _polypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=600)


def _agrees(got: str, want: str) -> None:
    """Line by line: every line but the normals' exactly; normals within 8 float ulps / 1e-12."""
    got_lines, want_lines = got.splitlines(), want.splitlines()
    assert len(got_lines) == len(want_lines), got
    for g, w in zip(got_lines, want_lines):
        if not w.startswith("norm "):
            assert g == w
            continue
        gv, wv = g.split(":")[1].split(), w.split(":")[1].split()
        assert g.split(":")[0] == w.split(":")[0] and len(gv) == len(wv) == 6, g
        np.testing.assert_allclose([float(x) for x in gv[:4]], [float(x) for x in wv[:4]], rtol=1e-6, atol=1e-7,
                                   err_msg=w)
        np.testing.assert_allclose([float(x) for x in gv[4:]], [float(x) for x in wv[4:]], rtol=1e-12, atol=1e-14,
                                   err_msg=w)


def test_the_expected_output_is_not_trivial() -> None:
    # The known answers test what they claim: draws differ between threads and launches, every
    # skipahead agrees, the cached second normal of a pair is not the first.
    bits = re.findall(r"^bits \d+: (\w+) (\w+)$", EXPECTED, re.M)
    assert len(bits) == 20 and len({b for pair in bits for b in pair}) == 40
    assert EXPECTED.count("skipahead mismatches: 0") == 2


# --------------------------------------------------------------------------- the jump matrices


# SHA-256 of the 51200 little-endian words of the table polypy carried as text before it was
# computed (issue 41), which was compared word by word with the tables NVIDIA ships.
_TABLE_SHA256 = "44d6fca9f7c9da1a248a664d5d4b2d2829f71c70e44da4ba03aac303dc2fa96d"
RUNTIME = pathlib.Path(polypy.__file__).resolve().parent / "runtime"


def test_computed_jump_tables_are_the_known_ones() -> None:
    words = np.array(matrix_words(), dtype="<u4")
    assert words.size == 64 * 800 and hashlib.sha256(words.tobytes()).hexdigest() == _TABLE_SHA256


def test_the_cpp_start_up_computes_the_same_table(tmp_path: pathlib.Path) -> None:
    # What a translated program's C++ runs before main (curand_jump_tables.h, compiled as C++
    # without clang's CUDA mode): its squarings give polypy.curand's words.
    need_compiler(cpp=True)
    source = tmp_path / "dump.cpp"
    source.write_text('#define __device__\n#include <stdio.h>\n#include "curand_jump_tables.h"\n'
                      "int main() { return fwrite(polypy_xorwow_matrices, 4, 64 * 800, stdout) == 64 * 800 ? 0 : 1; }\n")
    exe = tmp_path / "dump"
    built = subprocess.run([find_compiler(cpp=True), "-O1", "-I", str(RUNTIME), str(source), "-o", str(exe)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    dumped = subprocess.run([str(exe)], capture_output=True, timeout=60, cwd=tmp_path)
    assert dumped.returncode == 0
    np.testing.assert_array_equal(np.frombuffer(dumped.stdout, dtype="<u4"), np.array(matrix_words(), dtype=np.uint32))


def test_jump_matrices_are_powers_of_the_step() -> None:
    offsets, sequences = jump_tables()
    rng = np.random.default_rng(3)
    for _ in range(3):
        v = [int(x) for x in rng.integers(0, 2**32, 5)]
        stepped = v
        for count in range(1, 17):
            stepped = xorwow_step(stepped)
            if count in (1, 4, 16):
                assert jump(v, offsets[{1: 0, 4: 1, 16: 2}[count]]) == stepped
        # A^(2^67 * 4) is (A^(2^67))^4, and the subsequence matrix is far from the identity
        four = v
        for _ in range(4):
            four = jump(four, sequences[0])
        assert jump(v, sequences[1]) == four and jump(v, sequences[0]) != v


# (seed, subsequence, offset) -> cuRAND's first two draws of XORWOW, then of Philox4_32_10.
_EDGES = [
    (0x2A, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF, 0xbfe9a5fa, 0xdc5a141e, 0x5f6939a9, 0x45a461b0),
    (0x0, 0x0, 0x0, 0xbd7f03b6, 0x703e556d, 0x6627e8d5, 0xe169c58d),
    (0xFFFFFFFFFFFFFFFF, 0x10000000000, 0x400000003, 0x368f7529, 0x187cbca6, 0x3f8a3766, 0x24b79d0a),
    (0x7, 0x3, 0x3fffffffe, 0xbd732c3b, 0x018afdfd, 0x05693566, 0x5fe1f5ca),
]

_EDGE_KERNELS = r"""
#include <curand_kernel.h>
__global__ void first_draws(const unsigned long long* args, unsigned int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  curandState x;
  curand_init(args[3 * i], args[3 * i + 1], args[3 * i + 2], &x);
  out[4 * i] = curand(&x);
  out[4 * i + 1] = curand(&x);
  curandStatePhilox4_32_10_t p;
  curand_init(args[3 * i], args[3 * i + 1], args[3 * i + 2], &p);
  out[4 * i + 2] = curand(&p);
  out[4 * i + 3] = curand(&p);
}
"""


def _edge_args() -> tuple[np.ndarray, np.ndarray]:
    args = np.array([e[:3] for e in _EDGES], dtype=np.uint64).reshape(-1)
    return args, np.array([e[3:] for e in _EDGES], dtype=np.uint32).reshape(-1)


def test_extreme_seeds_subsequences_and_offsets_through_the_api() -> None:
    # 2^64 - 1 subsequences and offsets: the jumps are O(log n) matrix products, not n steps.
    mod = polypy.compile(None, text=_EDGE_KERNELS)
    args, want = _edge_args()
    out = np.zeros(4 * len(_EDGES), np.uint32)
    mod.first_draws[1, 8](args, out, len(_EDGES))
    np.testing.assert_array_equal(out, want)


def test_extreme_seeds_subsequences_and_offsets_emulated() -> None:
    module = polypy.load(None, text=_EDGE_KERNELS)
    args, want = _edge_args()
    out = {"args": args, "out": np.zeros(4 * len(_EDGES), np.uint32), "n": np.int32(len(_EDGES))}
    polypy.emulate(module.kernel("first_draws"), (1, 1, 1), (4, 1, 1), out)
    np.testing.assert_array_equal(out["out"], want)


# --------------------------------------------------------------------------- whole programs


def test_program_translated_to_cpp_prints_curands_numbers(tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    out = tmp_path / "curand_device.cpp"
    translated = _polypy("translate", str(PROGRAM), "-o", str(out))
    assert translated.returncode == 0, translated.stderr
    # The jump matrices are computed at start-up, not carried as 51200 constants (issue 41).
    text = out.read_text()
    assert "static __device__ unsigned int polypy_xorwow_matrices[64][800];" in text
    assert "polypy_xorwow_fill()" in text and "polypy_xorwow_matrices[64][800] =" not in text
    exe = tmp_path / "curand_device"
    built = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", str(out), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    native = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert native.returncode == 0, native.stderr
    _agrees(native.stdout, EXPECTED)


def test_program_emulated_prints_curands_numbers(tmp_path: pathlib.Path) -> None:
    emulated = _polypy("run", str(PROGRAM), "--emulate")
    assert emulated.returncode == 0, emulated.stderr
    _agrees(emulated.stdout, EXPECTED)


# --------------------------------------------------------------------------- the Python API


def _shown(launch: int, name: str) -> dict[int, tuple[int, int, float, float]]:
    """Thread -> (two draws, float uniform, double uniform) of ``name``'s launch in EXPECTED."""
    block = EXPECTED.split(f"{name} launch {launch}:")[1]
    out = {}
    for t, b0, b1, u, ud in re.findall(r"bits (\d+): (\w+) (\w+)\nunif \d+: (\S+) (\S+)", block)[:5]:
        out[int(t)] = (int(b0, 16), int(b1, 16), float.fromhex(u), float.fromhex(ud))
    return out


@functools.cache
def _program_module() -> polypy.driver.api.CompiledModule:
    """The program's kernels compiled once for both generators' tests (the module's only array is
    polypy's read-only table of XORWOW jump matrices; the states live in the arrays the tests
    pass)."""
    return polypy.compile(PROGRAM, specialize=False)


@pytest.mark.parametrize("name, dtype, seed", [("xorwow", XORWOW_STATE, 20261129),
                                               ("philox", PHILOX_STATE, 0x0123456789abcdef)])
def test_states_in_structured_arrays_persist_between_launches(name, dtype, seed) -> None:
    mod = _program_module()
    assert set(mod.globals) <= {"polypy_xorwow_matrices"}
    n = 70
    states = np.zeros(n, dtype)
    assert dtype.itemsize == {"xorwow": 48, "philox": 64}[name]  # sizeof(curandState...) in CUDA
    getattr(mod, f"setup_{name}")[3, 32](states, seed, n)
    for launch, (grid, block) in enumerate(((5, 16), (1, 128))):
        bits, unif = np.zeros(2 * n, np.uint32), np.zeros(n, np.float32)
        unifd, norm, normd = np.zeros(n), np.zeros(4 * n, np.float32), np.zeros(2 * n)
        getattr(mod, f"draw_{name}")[grid, block](states, bits, unif, unifd, norm, normd, n)
        for t, (b0, b1, u, ud) in _shown(launch, name).items():
            assert (bits[2 * t], bits[2 * t + 1], float(unif[t]), float(unifd[t])) == (b0, b1, u, ud)
    bad = np.ones(n, np.int32)
    getattr(mod, f"skip_{name}")[2, 64](bad, seed, n)
    assert not bad.any()


_STATISTICS = r"""
#include <curand_kernel.h>
__global__ void sample(unsigned long long seed, float* u, float* g, double* gd, int per) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  curandStatePhilox4_32_10_t p;
  curandState x;
  curand_init(seed, tid, 0, &p);
  curand_init(seed, tid, 0, &x);
  for (int i = 0; i < per; i++) {
    u[tid * per + i] = (i & 1) ? curand_uniform(&p) : curand_uniform(&x);
    g[tid * per + i] = (i & 1) ? curand_normal(&p) : curand_normal(&x);
    gd[tid * per + i] = (i & 1) ? curand_normal_double(&p) : curand_log_normal_double(&x, 0.0, 1.0);
  }
}
"""


def test_distributions_have_their_moments() -> None:
    mod = polypy.compile(None, text=_STATISTICS)
    per, threads = 64, 2048
    u, g = np.zeros(per * threads, np.float32), np.zeros(per * threads, np.float32)
    gd = np.zeros(per * threads)
    mod.sample[threads // 128, 128](np.uint64(5), u, g, gd, per)
    m = per * threads  # 131072 values: standard errors about 0.003
    assert 0.0 < u.min() and u.max() <= 1.0 and abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    assert abs(g.mean()) < 0.015 and abs(g.var() - 1.0) < 0.02 and m == g.size
    normal_d, lognormal = gd.reshape(-1, 2)[:, 1], gd.reshape(-1, 2)[:, 0]
    assert abs(normal_d.mean()) < 0.02 and abs(normal_d.var() - 1.0) < 0.03
    assert abs(np.log(lognormal).mean()) < 0.02 and (lognormal > 0).all()
    # each thread's stream differs from its neighbour's (subsequences, not copies)
    assert len(np.unique(u.reshape(threads, per)[:, 0])) > threads - 5


# --------------------------------------------------------------------------- states through references

# NVIDIA's Monte Carlo samples draw through a reference: getPoint(x, y, localState) with
# `curandState& state` and `curand_uniform(&state)`. With offset tid, thread tid's draws are the
# (tid+1)-th and (tid+2)-th of subsequence 0 of seed 1234: cuRAND gives 624778773, 1867875844,
# 3739671282 for the first three.
_THROUGH_REFERENCE = r"""
#include <curand_kernel.h>
__device__ inline void get_point(float& x, float& y, curandState& state) {
  x = curand_uniform(&state);
  y = curand_uniform(&state);
}
__global__ void points(curandState* states, float* xy, unsigned int* after) {
  int tid = threadIdx.x;
  curand_init(1234ull, 0ull, (unsigned long long)tid, &states[tid]);
  curandState local = states[tid];
  get_point(xy[2 * tid], xy[2 * tid + 1], local);
  states[tid] = local;
  after[tid] = curand(&states[tid]);
}
"""


def _reference_expected() -> tuple[np.ndarray, np.ndarray]:
    draws = np.array([624778773, 1867875844, 3739671282], dtype=np.uint32)
    u = (draws.astype(np.float32) * np.float32(2.0 ** -32) + np.float32(2.0 ** -33)).astype(np.float32)
    return np.array([u[0], u[1]], np.float32), draws[2:3]


def test_a_state_drawn_through_a_reference_api_and_emulator() -> None:
    xy_want, third = _reference_expected()
    states, xy, after = np.zeros(4, XORWOW_STATE), np.zeros(8, np.float32), np.zeros(4, np.uint32)
    polypy.compile(None, text=_THROUGH_REFERENCE).points[1, 4](states, xy, after)
    np.testing.assert_array_equal(xy[:2], xy_want)
    assert xy[2] == xy_want[1] and after[0] == third[0]  # thread 1's first draw is thread 0's second
    module = polypy.load(None, text=_THROUGH_REFERENCE)
    args = {"states": np.zeros(4, XORWOW_STATE), "xy": np.zeros(8, np.float32), "after": np.zeros(4, np.uint32)}
    polypy.emulate(module.kernel("points"), (1, 1, 1), (4, 1, 1), args)
    np.testing.assert_array_equal(args["xy"], xy)
    np.testing.assert_array_equal(args["after"], after)
    assert (args["states"].view(np.uint8) == states.view(np.uint8)).all()


def test_a_state_drawn_through_a_reference_in_a_translated_program(tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    src = tmp_path / "reference.cu"
    src.write_text("#include <cstdio>\n" + _THROUGH_REFERENCE + r"""
int main() {
  curandState* s; float* xy; unsigned int* a;
  cudaMalloc(&s, 4 * sizeof(curandState)); cudaMalloc(&xy, 8 * sizeof(float)); cudaMalloc(&a, 4 * sizeof(unsigned));
  points<<<1, 4>>>(s, xy, a);
  float h[8]; unsigned ha[4];
  cudaMemcpy(h, xy, sizeof h, cudaMemcpyDeviceToHost); cudaMemcpy(ha, a, sizeof ha, cudaMemcpyDeviceToHost);
  printf("%a %a %a %u\n", h[0], h[1], h[2], ha[0]);
  return 0;
}
""")
    out = tmp_path / "reference.cpp"
    translated = _polypy("translate", str(src), "-o", str(out))
    assert translated.returncode == 0, translated.stderr
    exe = tmp_path / "reference"
    built = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", str(out), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    native = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    xy_want, third = _reference_expected()
    got = native.stdout.split()
    assert [float.fromhex(g) for g in got[:3]] == [float(xy_want[0]), float(xy_want[1]), float(xy_want[1])]
    assert int(got[3]) == int(third[0])


# --------------------------------------------------------------------------- the other functions

_MORE_KERNEL = r"""
#include <curand_kernel.h>
__global__ void more(double* out, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  {
  curandState x; curand_init(99ull, t, 3, &x);
  curandStatePhilox4_32_10_t p; curand_init(99ull, t, 1 + t, &p);
  double* o = out + 32 * t + 0;
  float4 l4 = curand_log_normal4(&p, 0.1f, 0.3f); o[0] = l4.x; o[1] = l4.w;
  double2 u2 = curand_uniform2_double(&p); o[2] = u2.x; o[3] = u2.y;
  double2 nd = curand_normal2_double(&p); o[4] = nd.x; o[5] = nd.y;
  skipahead(7, &p); o[6] = curand(&p);
  skipahead_sequence(3, &p); o[7] = curand_uniform(&p);
  double2 xd = curand_normal2_double(&x); o[8] = xd.x; o[9] = xd.y;
  o[10] = curand_log_normal_double(&x, 0.2, 0.7); o[11] = curand_log_normal_double(&x, 0.2, 0.7);
  o[12] = curand_log_normal(&p, 0.0f, 1.0f); o[13] = curand_log_normal(&p, 0.0f, 1.0f);
  float2 x2 = curand_normal2(&x); o[14] = x2.y; o[15] = curand_normal(&p);
  }
  {
  curandState x; curand_init(5ull, t, 11, &x);
  curandStatePhilox4_32_10_t p; curand_init(5ull, t, 2 + t, &p);
  double* o = out + 32 * t + 16;
  float2 a = curand_log_normal2(&x, 0.1f, 0.3f); o[0] = a.x; o[1] = a.y;
  double2 b = curand_log_normal2_double(&x, 0.1, 0.3); o[2] = b.x; o[3] = b.y;
  double4 c = curand_uniform4_double(&p); o[4] = c.x; o[5] = c.w;
  double4 d = curand_normal4_double(&p); o[6] = d.y; o[7] = d.z;
  float2 e = curand_log_normal2(&p, 0.2f, 0.5f); o[8] = e.x; o[9] = e.y;
  o[10] = curand_log_normal_double(&p, 0.3, 0.4); o[11] = curand_log_normal_double(&p, 0.3, 0.4);
  double2 f = curand_log_normal2_double(&p, -0.3, 0.2); o[12] = f.x; o[13] = f.y;
  o[14] = curand(&p); o[15] = curand(&x);
  }
}
"""

# cuRAND's values of threads 0 and 4 of ``more`` (32 each, in the order of ``o``).
_MORE_EXPECTED = {
    0: (
        1.2557055950164795, 1.0910279750823975, 0.7642387737241505, 0.44761377462202395,
        -1.6190083507320434, 0.17978565742237304, 3337059558.0, 0.7380857467651367,
        -0.7590513706117442, 0.8157564741454769, 5.149612165570022, 0.6792831857890078,
        0.4618277847766876, 0.46219226717948914, 0.2136145830154419, 0.3325936496257782,
        1.5558645725250244, 0.9792742133140564, 0.9823024551515742, 0.9995507734062075,
        0.9657271892514312, 0.6888153477679826, -0.6272169045821707, 0.23414100480730574,
        0.6074467301368713, 0.9637942314147949, 2.477319005253884, 1.3055478312469884,
        0.6392913551613542, 0.8027808092032762, 2737044486.0, 1073107515.0,
    ),
    4: (
        1.2746003866195679, 0.9555508494377136, 0.5090395024992185, 0.8801719085142052,
        -0.5852422179614215, -1.1766247994195334, 437681288.0, 0.7512987852096558,
        -0.6795413718405253, -1.6118649176472337, 1.3116214166334048, 2.823390562150984,
        1.1029986143112183, 0.061982519924640656, -0.6825067400932312, 0.4600265324115753,
        1.1783859729766846, 1.5254747867584229, 0.8894308692881671, 2.2939660375696787,
        0.030688205498325127, 0.5467544752981033, 0.1820881360831463, 0.34945864468472454,
        0.9799890518188477, 1.6374183893203735, 1.523368186907867, 2.5429850329514943,
        0.9111985299086063, 0.54970359526327, 1733281901.0, 1593003033.0,
    ),
}
# The positions holding raw draws and uniforms: equal to the bit. The rest within float ulps.
_MORE_EXACT = [2, 3, 6, 7, 16 + 4, 16 + 5, 16 + 14, 16 + 15]


def _check_more(out: np.ndarray) -> None:
    for t, want in _MORE_EXPECTED.items():
        got = out[32 * t: 32 * t + 32]
        np.testing.assert_array_equal(got[_MORE_EXACT], np.array(want)[_MORE_EXACT])
        np.testing.assert_allclose(got, want, rtol=5e-7)


def test_the_other_distributions_through_the_api() -> None:
    out = np.zeros(32 * 5)
    polypy.compile(None, text=_MORE_KERNEL, specialize=False).more[1, 8](out, 5)
    _check_more(out)


def test_the_other_distributions_emulated() -> None:
    args = {"out": np.zeros(32 * 5), "n": np.int32(5)}
    polypy.emulate(polypy.load(None, text=_MORE_KERNEL).kernel("more"), (2, 1, 1), (4, 1, 1), args)
    _check_more(args["out"])


def test_poisson_is_a_located_error_naming_it(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "poisson.cu"
    src.write_text("#include <curand_kernel.h>\n"
                   "__global__ void k(curandState* s, unsigned int* x) {\n"
                   "  x[0] = curand_poisson(&s[0], 4.0);\n}\n")
    result = _polypy("translate", str(src), "-o", str(tmp_path / "out.cpp"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{src}:3:10: error: 'curand_poisson' is unavailable: curand_poisson of cuRAND is not supported" \
        in result.stderr
    assert not (tmp_path / "out.cpp").exists()


# --------------------------------------------------------------------------- refusals


def test_other_generators_are_located_errors_naming_them(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "mrg.cu"
    src.write_text("#include <curand_kernel.h>\n"
                   "__global__ void k(curandStateMRG32k3a_t* s, float* x) {\n"
                   "  x[0] = curand_uniform(&s[0]);\n}\n")
    result = _polypy("translate", str(src), "-o", str(tmp_path / "out.cpp"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{src}:2:19: error: 'curandStateMRG32k3a_t' is unavailable: cuRAND's MRG32k3a generator is not " \
           "supported by polypy" in result.stderr
    assert "^" in result.stderr and not (tmp_path / "out.cpp").exists()


def test_the_host_api_is_a_located_error_naming_it(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "host.cu"
    src.write_text("#include <stdio.h>\n#include <curand.h>\nint main() {\n  curandGenerator_t g;\n"
                   "  curandCreateGenerator(&g, CURAND_RNG_PSEUDO_DEFAULT);\n  return 0;\n}\n")
    result = _polypy("translate", str(src), "-o", str(tmp_path / "out.cpp"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{src}:2:10: error: the cuRAND host API (curand.h" in result.stderr and "not supported" in result.stderr
    assert not (tmp_path / "out.cpp").exists()

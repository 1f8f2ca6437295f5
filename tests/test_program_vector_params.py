"""Whole programs whose kernels take vector and struct pointers (issue 10 item 4).

The frontend flattens ``float4*`` / ``const Particle*`` into buffers of scalars; the launcher of a
whole program must still take the source's pointer types, since the host passes them. Each
program in ``tests/programs/`` goes through ``polypy translate`` + ``c++ -O2 -fopenmp`` + run and
through ``polypy run --emulate``; both must print what NumPy computes from the same inputs.
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

PROGRAMS = pathlib.Path(__file__).resolve().parent / "programs"


def _vector_params_expected() -> str:
    f32 = np.float32
    n = 1000
    i = np.arange(n)
    ax, ay = (i % 17).astype(f32), (i % 5).astype(f32) * f32(0.5)
    az, aw = (i % 3).astype(f32), f32(0.25) * (i % 4).astype(f32)
    b = np.stack([f32(2) * ax, ay + ax, az - f32(1), aw * ay]).astype(np.float64)
    px, py = i.astype(np.int64), (i * 7) % 11
    qx, qy = px + py, 3 * px - py
    zx, zy = 0.001 * i, 1.0 - 0.002 * i
    wx, wy = zx * zx - zy * zy, 2.0 * zx * zy
    s = b.sum(axis=1)
    return ("float4: %.3f %.3f %.3f %.3f b[7] = (%.2f, %.2f, %.2f, %.2f)\n" % (*s, *b[:, 7])
            + "int2: %d %d q[999] = (%d, %d)\n" % (qx.sum(), qy.sum(), qx[999], qy[999])
            + "double2: %.6f %.6f z[10] = (%.8f, %.8f)\n" % (wx.sum(), wy.sum(), wx[10], wy[10]))


def _particles_expected() -> str:
    f32 = np.float32
    n = 777
    i = np.arange(n)
    vx, vy = (i % 9).astype(f32) - f32(4), f32(0.5) * (i % 6).astype(f32)
    vz, m = f32(1) - f32(0.25) * (i % 8).astype(f32), f32(1) + (i % 3).astype(f32)
    mom = np.stack([m * vx, m * vy, m * vz, m])
    norms = (mom * mom).sum(axis=0, dtype=f32)
    s = mom.astype(np.float64).sum(axis=1)
    return ("momentum: %.3f %.3f %.3f mass %.3f\n" % tuple(s)
            + "norms: %.3f n[5] = %.4f n[776] = %.4f\n" % (norms.astype(np.float64).sum(), norms[5], norms[776]))


EXPECTED = {"vector_params": _vector_params_expected, "particles": _particles_expected}


def _polypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_translated_and_emulated_programs_print_the_numpy_values(name: str, tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    source = PROGRAMS / f"{name}.cu"
    out = tmp_path / f"{name}.cpp"
    translated = _polypy("translate", str(source), "-o", str(out))
    assert translated.returncode == 0, translated.stderr
    exe = tmp_path / name
    built = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", str(out), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    native = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert native.returncode == 0, native.stderr
    expected = EXPECTED[name]()
    problem = outputs_match(native.stdout, expected, 1e-5)
    assert problem is None, problem
    emulated = _polypy("run", str(source), "--emulate")
    assert emulated.returncode == 0, emulated.stderr
    problem = outputs_match(emulated.stdout, expected, 1e-5)
    assert problem is None, problem


def test_launchers_keep_the_source_pointer_types(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "particles.cpp"
    translated = _polypy("translate", str(PROGRAMS / "particles.cu"), "-o", str(out))
    assert translated.returncode == 0, translated.stderr
    text = out.read_text()
    # The host's types in the signature; the block function gets the flattened scalar buffers.
    assert "momentum_launch(dim3 grid, dim3 block, size_t shmem_bytes, const Particle * ps, float4 * out, int n)" \
        in text
    assert "(const float*)ps, (float*)out, n" in text
    assert "norms_launch(dim3 grid, dim3 block, size_t shmem_bytes, View v)" in text
    assert "(const float*)(v.src), (float*)(v.dst), v.n" in text


def test_plain_pointers_are_passed_without_a_cast(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "plain.cu"
    src.write_text("__global__ void k(const float* __restrict__ a, float* b) { b[threadIdx.x] = a[threadIdx.x]; }\n"
                   "int main() { float* d; cudaMalloc(&d, 64); k<<<1, 8>>>(d, d + 8); return 0; }\n")
    out = tmp_path / "plain.cpp"
    translated = _polypy("translate", str(src), "-o", str(out))
    assert translated.returncode == 0, translated.stderr
    text = out.read_text()
    assert "k_launch(dim3 grid, dim3 block, size_t shmem_bytes, const float* POLYPY_RESTRICT a, float* b)" in text
    assert "shmem_bytes, a, b);" in text


def test_a_pointer_member_of_a_record_in_device_memory_is_a_located_error(tmp_path: pathlib.Path) -> None:
    # Records of mixed member types live in device memory (tests/test_struct_memory.py), but a
    # pointer stored in one cannot be followed (never a C++ program that does not compile).
    src = tmp_path / "mixed.cu"
    src.write_text("struct Mixed { int id; float* w; };\n"
                   "__global__ void k(const Mixed* p, float* out) { out[threadIdx.x] = p[threadIdx.x].w[0]; }\n"
                   "int main() { Mixed* d; float* o; cudaMalloc(&d, 80); cudaMalloc(&o, 40); k<<<1, 10>>>(d, o); "
                   "return 0; }\n")
    out = tmp_path / "mixed.cpp"
    result = _polypy("translate", str(src), "-o", str(out))
    assert result.returncode == 1 and not out.exists()
    assert f"{src}:2:83: error: member 'w' of type 'float *' of a record in device memory cannot be used" \
        in result.stderr
    assert "Traceback" not in result.stderr

"""Where the C launcher puts a worker's scratch memory (shared and per-thread buffers):
``polypy_alloc_apart`` places it 512 bytes (modulo 1 KiB) away from the first array the kernel
reads, so that a block's tile copy does not load from addresses that alias (modulo 4 KiB) the
scratch stores just made. Checked: the launcher asks for it, the placement and zero fill of the
helper itself (compiled from the emitted prelude), and stencil1d's results with its arrays at
several offsets within a page."""
from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from c_support import copy_args, need_compiler
from polypy.driver.library import build_library, emit_kernels
from codegen.c.build import find_compiler
from polypy.driver.pipelines import to_cpu
from polypy.driver.source import load
from polypy.emulator import emulate
from samples.spec import all_samples


def _stencil():
    source = next(s.source for s in all_samples() if s.name == "stencil1d")
    return load(source).kernel("stencil1d")


def test_the_launcher_places_scratch_away_from_the_input():
    text = emit_kernels([to_cpu(_stencil())])
    assert "polypy_alloc_apart(shmem_bytes" in text and ", in);" in text


def test_the_helper_places_zeroed_aligned_memory_512_bytes_apart(tmp_path):
    need_compiler(False)
    text = emit_kernels([to_cpu(_stencil())])
    prelude = text[:text.index("/* ---- kernel")]
    program = prelude + r"""
int check(size_t bytes, unsigned long long avoid) {
    unsigned char* p = (unsigned char*)polypy_alloc_apart(bytes, (const void*)avoid);
    int ok = ((uintptr_t)p % 64 == 0)
        && ((((uintptr_t)p - (uintptr_t)avoid) & 1023) >= 448) && ((((uintptr_t)p - (uintptr_t)avoid) & 1023) <= 512);
    for (size_t i = 0; i < bytes; ++i) ok = ok && p[i] == 0;
    polypy_free(p);
    return ok;
}
"""
    src = tmp_path / "apart.c"
    src.write_text(program)
    lib = tmp_path / "apart.so"
    subprocess.run([find_compiler(False), "-O2", "-fopenmp", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    check = ctypes.CDLL(str(lib)).check
    check.argtypes = [ctypes.c_size_t, ctypes.c_ulonglong]
    for avoid in (0, 16, 64, 1000, 4096 + 12, 123456789):
        for size in (1, 1036, 70000):
            assert check(size, avoid) == 1, (avoid, size)


@pytest.mark.parametrize("offset", [0, 12, 16, 64, 528])
def test_stencil_results_do_not_depend_on_where_the_arrays_are(offset):
    need_compiler(False)
    n, block = 1 << 14, 256
    rng = np.random.default_rng(offset)

    def placed(values: np.ndarray) -> np.ndarray:
        buf = np.zeros(values.nbytes + 8192, np.uint8)
        start = (-buf.ctypes.data) % 4096 + offset
        out = buf[start:start + values.nbytes].view(values.dtype)
        out[...] = values
        return out

    args = {"in": placed(rng.random(n, dtype=np.float32)), "w": rng.random(7, dtype=np.float32),
            "out": placed(np.zeros(n, np.float32)), "n": n}
    grid, shmem = n // block, (block + 6) * 4
    want = copy_args(args)
    emulate(_stencil(), grid, block, want, shmem=shmem)
    got = dict(args)
    got["out"] = placed(np.zeros(n, np.float32))
    build_library([to_cpu(_stencil())]).launch("stencil1d", grid, block, got, shmem=shmem)
    np.testing.assert_array_equal(got["out"], want["out"])

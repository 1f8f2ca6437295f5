"""The precompiled prelude (``frontend.pch``): parses through it mean what plain parses mean."""
from __future__ import annotations

import pathlib

import pytest

import polypy
from polypy.errors import UserError
from polypy.ir.printer import print_kernel

KERNEL = """
#include <cassert>
__global__ void k(float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    assert(n > 0);
    if (i < n)
        x[i] = sqrtf(x[i]) + __expf(1.0f) + (float)CUDART_VERSION;
}
"""


def _printed(path: pathlib.Path, **kw) -> str:
    return "\n".join(print_kernel(k) for k in polypy.load(path, **kw).kernels)


def _pch_files(root: pathlib.Path) -> list[pathlib.Path]:
    return sorted((root / "pch").glob("prelude-*.pch")) if (root / "pch").exists() else []


def test_a_parse_through_the_precompiled_prelude_gives_the_same_module(tmp_path, monkeypatch) -> None:
    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    monkeypatch.setenv("POLYPY_CACHE_DIR", "off")
    plain = _printed(src)
    plain_ndebug = _printed(src, defines={"NDEBUG": "1"})
    assert plain != plain_ndebug  # NDEBUG takes the assert out: the prelude sees the user's -D
    monkeypatch.setenv("POLYPY_CACHE_DIR", str(tmp_path / "cache"))
    assert _printed(src) == plain  # flags seen once: no precompiled header yet
    assert not _pch_files(tmp_path / "cache")
    assert _printed(src) == plain  # seen twice: builds it
    assert len(_pch_files(tmp_path / "cache")) == 1
    assert _printed(src) == plain  # reads it
    for _ in range(2):
        assert _printed(src, defines={"NDEBUG": "1"}) == plain_ndebug  # another -D: another file
    assert len(_pch_files(tmp_path / "cache")) == 2


def test_caching_off_writes_no_precompiled_header(tmp_path, monkeypatch) -> None:
    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    monkeypatch.setenv("POLYPY_CACHE_DIR", "off")
    monkeypatch.chdir(tmp_path)
    polypy.load(src)
    assert not (tmp_path / "off").exists() and not _pch_files(tmp_path)


def test_a_damaged_precompiled_header_is_not_used(tmp_path, monkeypatch) -> None:
    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    monkeypatch.setenv("POLYPY_CACHE_DIR", str(tmp_path / "cache"))
    good = _printed(src)
    assert _printed(src) == good
    (pch,) = _pch_files(tmp_path / "cache")
    pch.write_bytes(b"not a precompiled header" * 100)
    assert _printed(src) == good  # parsed without it, and it is removed
    assert not pch.exists()
    assert _printed(src) == good  # built again
    assert pch.exists() and pch.stat().st_size > 100000


def test_errors_are_reported_as_by_a_plain_parse(tmp_path, monkeypatch) -> None:
    src = tmp_path / "bad.cu"
    src.write_text("__global__ void k(float* x)\n{\n    x[0] = undeclared_name;\n}\n")
    messages = []
    for cache in ("off", str(tmp_path / "cache"), str(tmp_path / "cache")):
        monkeypatch.setenv("POLYPY_CACHE_DIR", cache)
        with pytest.raises(UserError) as info:
            polypy.load(src)
        messages.append((str(info.value), info.value.loc))
    assert messages[0] == messages[1] == messages[2]
    assert "undeclared_name" in messages[0][0] and messages[0][1].line == 3


def _ast_bytes(tu) -> int:
    """The bytes of AST (expressions, declarations and types) clang built for ``tu``: libclang's own
    resource-usage count, deterministic for one input and one set of flags."""
    import ctypes

    import clang.cindex as ci

    class Entry(ctypes.Structure):
        _fields_ = [("kind", ctypes.c_int), ("amount", ctypes.c_ulong)]

    class Usage(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("count", ctypes.c_uint), ("entries", ctypes.POINTER(Entry))]

    lib = ctypes.CDLL(ci.conf.lib._name)
    lib.clang_getCXTUResourceUsage.restype = Usage
    lib.clang_getCXTUResourceUsage.argtypes = [ctypes.c_void_p]
    lib.clang_disposeCXTUResourceUsage.argtypes = [Usage]
    usage = lib.clang_getCXTUResourceUsage(tu.obj)
    try:
        return next(usage.entries[i].amount for i in range(usage.count) if usage.entries[i].kind == 1)  # AST
    finally:
        lib.clang_disposeCXTUResourceUsage(usage)


def test_the_prelude_s_template_instantiations_are_in_the_precompiled_header(tmp_path, monkeypatch) -> None:
    """A parse through the precompiled prelude builds only the user's file: the instantiations the
    prelude's own code needs were done once, when the header was built (they were most of a small
    kernel's parse, redone by every unit that read the header)."""
    from frontend import clang_setup

    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    monkeypatch.setenv("POLYPY_CACHE_DIR", "off")
    plain = _ast_bytes(clang_setup.parse_translation_unit(str(src), "cuda"))
    monkeypatch.setenv("POLYPY_CACHE_DIR", str(tmp_path / "cache"))
    clang_setup.parse_translation_unit(str(src), "cuda")
    clang_setup.parse_translation_unit(str(src), "cuda")  # builds the header
    assert len(_pch_files(tmp_path / "cache")) == 1
    through = _ast_bytes(clang_setup.parse_translation_unit(str(src), "cuda"))
    assert through < plain / 4, (through, plain)  # half of it, with the instantiations left to each unit

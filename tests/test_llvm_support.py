"""Helpers shared by the LLVM backend tests (this module holds no tests).

* ``cpu_form``: the CPU form of a *barrier-free* GPU-form kernel (its body inside a
  ``tz/ty/tx`` thread-loop nest, ``threadIdx`` replaced by the loop counters), so one test kernel
  written in GPU form runs both on the emulator (the reference) and through the LLVM backend.
  It is not the project's lowering (``gpu2cpu``), only enough for kernels with no barrier and no
  per-thread arrays.
* ``compile_cpu``: JIT-compile CPU-form kernels (IR text or nodes).
* ``run_compiled`` / ``run_emulated`` / ``assert_same``: launch on copies and compare.
* ``isolated_cache``: a module-scoped fixture pointing the disk cache at a temporary directory.
"""
from __future__ import annotations

import dataclasses
import textwrap
from typing import Any, Mapping

import numpy as np
import pytest

from codegen.llvm import JitModule, compile_module
from polypy.emulator import emulate
from polypy.ir import nodes as n
from polypy.ir import parse_kernel, parse_module
from polypy.ir.types import U32
from polypy.ir.visitor import substitute

_THREAD_VARS = ("tx", "ty", "tz")


def ir(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


def gpu_kernel(text: str) -> n.Kernel:
    return parse_kernel(ir(text))


def cpu_form(kernel: n.Kernel) -> n.Kernel:
    """``kernel`` (GPU form, no barriers, no local arrays) as one thread-loop nest per block."""
    assert kernel.stage == "gpu"
    mapping = {n.ThreadIdx(d): n.Var(_THREAD_VARS[d], U32) for d in range(3)}
    body = tuple(substitute(s, mapping) for s in kernel.body)
    for d in range(3):  # tx innermost, tz outermost
        body = (n.For(_THREAD_VARS[d], U32, n.Const(0, U32), n.BlockDim(d), n.Const(1, U32), body, kind="threads"),)
    return dataclasses.replace(kernel, body=body, stage="cpu")


def compile_cpu(*kernels: n.Kernel | str, globals: tuple[n.Buffer, ...] = ()) -> JitModule:
    nodes = []
    for k in kernels:
        if isinstance(k, str):
            module = parse_module(ir(k))
            nodes.extend(module.kernels)
            globals = globals + module.globals
        else:
            nodes.append(k)
    return compile_module(n.Module(tuple(nodes), globals=globals))


def _dims(v: int | tuple[int, ...]) -> tuple[int, int, int]:
    t = (v,) if isinstance(v, int) else tuple(v)
    return tuple(t) + (1,) * (3 - len(t))  # type: ignore[return-value]


def run_compiled(jit: JitModule, name: str, grid, block, args: Mapping[str, Any], *, shmem: int = 0,
                 threads: int | None = None) -> None:
    """Launch kernel ``name`` of ``jit`` with arguments by IR parameter name (arrays in place)."""
    kernel = jit.kernels[name]
    arrays = {k: v for k, v in args.items() if isinstance(v, np.ndarray) and v.ndim > 0}
    scalars = {}
    for p in kernel.abi.params:
        if p.name not in arrays:
            scalars[p.name] = p.ptype.dtype.type(args[p.name])
    kernel.run(_dims(grid), _dims(block), shmem, {k: v.reshape(-1) for k, v in arrays.items()}, scalars,
               threads=threads)


def copies(args: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}


def run_both(kernel: n.Kernel, grid, block, args: Mapping[str, Any], *, shmem: int = 0,
             threads: int | None = None, jit: JitModule | None = None) -> tuple[dict, dict]:
    """(emulated, compiled) final arguments of one launch of GPU-form ``kernel``, from the same inputs."""
    emulated = copies(args)
    emulate(kernel, grid, block, emulated, shmem=shmem)
    compiled = copies(args)
    if jit is None:
        jit = compile_cpu(cpu_form(kernel))
    run_compiled(jit, kernel.name, grid, block, compiled, shmem=shmem, threads=threads)
    return emulated, compiled


def assert_same(expected: Mapping[str, Any], got: Mapping[str, Any], names, *, rtol: float = 0.0,
                atol: float = 0.0) -> None:
    for name in names:
        e, g = np.asarray(expected[name]), np.asarray(got[name])
        if rtol == 0.0 and atol == 0.0:
            np.testing.assert_array_equal(g, e, err_msg=name)  # NaNs compare equal here
        else:
            np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol,
                                       err_msg=name, equal_nan=True)


@pytest.fixture(scope="module")
def isolated_cache(tmp_path_factory):
    """Point the disk cache of compiled code at a fresh directory for one test module.

    The frontend's precompiled prelude (``pch/``: keyed on every flag and header it depends on,
    see ``frontend.pch``) stays the session's, shared through a link: rebuilding it per module
    cost a second of CPU each and tested nothing these modules are about."""
    from polypy.cache import cache_root

    mp = pytest.MonkeyPatch()
    path = tmp_path_factory.mktemp("polypy-cache")
    shared = cache_root()
    if shared is not None:
        (shared / "pch").mkdir(parents=True, exist_ok=True)
        (path / "pch").symlink_to(shared / "pch", target_is_directory=True)
    mp.setenv("POLYPY_CACHE_DIR", str(path))
    yield path
    mp.undo()

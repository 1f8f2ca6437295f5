"""The public launch API (``polypy.compile`` / ``polypy.driver.api``): launch syntax, argument checks,
footprint checks, the disk cache, threads, and the emulator path.

Most modules are built from IR (GPU form for footprints and the emulator, CPU form for the JIT)
with ``polypy.driver.api.CompiledModule.from_ir``, so these tests do not depend on the GPU->CPU lowering;
``test_compile_a_cuda_file_end_to_end`` goes through the whole pipeline.
"""
from __future__ import annotations

import dataclasses
import importlib

import numpy as np
import pytest

from test_llvm_support import cpu_form, gpu_kernel, ir, isolated_cache

import polypy
from polypy.driver.api import CompiledModule, UnknownKernelError
from polypy.ir import nodes as n
from polypy.ir import parse_module

pytestmark = pytest.mark.usefixtures("isolated_cache")
assert isolated_cache

SAXPY = """
    kernel saxpy(n: i32, a: f32, x: const f32*, y: f32*) {
      var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
      if (i < n) {
        y[i] = a * x[i] + y[i]
      }
    }
"""

CLAMP = """
    kernel clamp(p_n: i32, p_alpha: f32, p_lo: f32, p_hi: f32, x: const f32*, y: f32* restrict) {
      source p: "ClampParams" (.n = p_n, .alpha = p_alpha, .lo = p_lo, .hi = p_hi)
      var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
      if (i < p_n) {
        y[i] = fmin(fmax(p_alpha * x[i], p_lo), p_hi)
      }
    }
"""


def _with_full_signature(k: n.Kernel) -> n.Kernel:
    """The frontend lists every C parameter in ``source_params``; the IR text shows only structs."""
    listed = {name for sp in k.source_params for _, name in sp.members}
    plain = tuple(n.SourceParam(p.name, str(p.ptype), (("", p.name),)) for p in k.params if p.name not in listed)
    return dataclasses.replace(k, source_params=k.source_params + plain)


def _module(*texts: str, threads: int | None = None) -> CompiledModule:
    gpu = n.Module(tuple(_with_full_signature(gpu_kernel(t)) for t in texts))
    cpu = n.Module(tuple(cpu_form(k) for k in gpu.kernels))
    return CompiledModule.from_ir(gpu, cpu, threads=threads)


@pytest.fixture(scope="module")
def mod() -> CompiledModule:
    return _module(SAXPY, CLAMP)


def _arrays(count: int = 1000):
    rng = np.random.default_rng(0)
    return rng.standard_normal(count).astype(np.float32), rng.standard_normal(count).astype(np.float32)


def test_launch_shapes_and_argument_styles(mod):
    x, y = _arrays()
    expected = np.float32(2.0) * x + y
    for grid, block in ((4, 256), ((4,), (256,)), ((2, 1, 1), (512, 1))):
        y1 = y.copy()
        mod.saxpy[grid, block](1000, 2.0, x, y1)
        np.testing.assert_array_equal(y1, expected)
    y2 = y.copy()
    mod.saxpy[8, 128, 0](n=np.int64(1000), a=np.float64(2.0), x=x, y=y2)  # by name, NumPy scalars converted
    np.testing.assert_array_equal(y2, expected)
    y3 = y.copy().reshape(10, 100)  # a C-contiguous 2-D array is its flat memory
    mod["saxpy"][4, 256](1000, 2.0, x.reshape(20, 50), y3)
    np.testing.assert_array_equal(y3.reshape(-1), expected)


def test_struct_parameter_as_dict_structured_scalar_or_object(mod):
    x, _ = _arrays()
    want = np.clip(np.float32(1.5) * x, -0.5, 0.75)

    class P:
        n, alpha, lo, hi = 1000, 1.5, -0.5, 0.75

    record = np.array([(1000, 1.5, -0.5, 0.75)], dtype=[("n", "i4"), ("alpha", "f4"), ("lo", "f4"), ("hi", "f4")])[0]
    for p in ({"n": 1000, "alpha": 1.5, "lo": -0.5, "hi": 0.75}, record, P()):
        y = np.zeros(1000, np.float32)
        mod.clamp[4, 256](p, x, y)
        np.testing.assert_array_equal(y, want)


def test_emulate_runs_the_same_launch(mod):
    x, y = _arrays()
    compiled, emulated = y.copy(), y.copy()
    mod.saxpy[4, 256](1000, 3.0, x, compiled)
    mod.saxpy.emulate[4, 256](1000, 3.0, x, emulated)
    np.testing.assert_array_equal(compiled, emulated)


def _error(run, *phrases: str) -> polypy.UserError:
    with pytest.raises(polypy.UserError) as info:
        run()
    for phrase in phrases:
        assert phrase in info.value.message, f"{phrase!r} not in {info.value.message!r}"
    return info.value


def test_argument_errors_name_the_parameter(mod):
    x, y = _arrays()
    _error(lambda: mod.saxpy[4, 256](1000, 2.0, x.astype(np.float64), y), "'x'", "float32", "float64")
    _error(lambda: mod.saxpy[4, 256](1000, 2.0, x, np.zeros((1000, 2), np.float32)[:, 0]), "'y'", "C-contiguous")
    _error(lambda: mod.saxpy[4, 256](1000, 2.0, x), "takes 4 arguments, got 3")
    _error(lambda: mod.saxpy[4, 256](1000, 2.0, x, y, y), "takes 4 arguments, got 5")
    _error(lambda: mod.saxpy[4, 256](1000, 2.0, x, [1.0] * 1000), "'y'", "numpy array")
    _error(lambda: mod.saxpy[4, 256](1000, "2", x, y), "'a'", "number")
    _error(lambda: mod.saxpy[4, 256](1000, 2.0, x, y=y), "either all by position or all by name")
    _error(lambda: mod.saxpy[4, 256](n=1000, a=2.0, x=x, z=y), "no parameter 'z'")
    readonly = y.copy()
    readonly.flags.writeable = False
    _error(lambda: mod.saxpy[4, 256](1000, 2.0, x, readonly), "'y'", "read-only")
    _error(lambda: mod.clamp[4, 256]({"n": 1000, "alpha": 1.0, "lo": 0.0}, x, y), "'p'", "no field", "p.hi")
    shared = np.zeros(1000, np.float32)
    _error(lambda: mod.clamp[4, 256]({"n": 1000, "alpha": 1.0, "lo": 0.0, "hi": 1.0}, shared, shared),
           "overlap", "restrict")


def test_too_small_arrays_are_refused_before_running(mod):
    x, y = _arrays()
    y_short = y[:999].copy()
    before = y_short.copy()
    err = _error(lambda: mod.saxpy[4, 256](1000, 2.0, x, y_short), "'y'", "too small", "1000 elements", "999")
    assert "saxpy" in err.message
    np.testing.assert_array_equal(y_short, before)  # nothing ran
    _error(lambda: mod.saxpy[4, 256](1000, 2.0, x[:10].copy(), y), "'x'", "1000", "10")
    # a launch that covers fewer elements needs fewer: n = 500 with 2 blocks of 256 touches 500
    mod.saxpy[2, 256](500, 2.0, x[:500].copy(), y[:500].copy())
    # the guard bounds the footprint: more threads than elements is fine
    mod.saxpy[64, 256](1000, 2.0, x, y.copy())
    _error(lambda: mod.clamp[4, 256]({"n": 1000, "alpha": 1.0, "lo": 0.0, "hi": 1.0}, x, y[:100].copy()),
           "'y'", "too small")


def test_over_approximated_footprints_do_not_refuse_a_launch():
    """isl cannot use the ``?:`` guard: x's footprint is over-approximated as [0, m), but only
    [0, n) is read, so an array of n elements is right."""
    m = _module("""
        kernel pad(n: i32, m: i32, x: const f32*, y: f32*) {
          var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
          if (i < m) {
            y[i] = i < n ? x[i] : 0.0f
          }
        }
    """)
    x = np.arange(100, dtype=np.float32)
    y = np.ones(300, np.float32)
    m.pad[3, 128](100, 300, x, y)
    np.testing.assert_array_equal(y, np.concatenate([x, np.zeros(200, np.float32)]))
    _error(lambda: m.pad[3, 128](100, 300, x, y[:299].copy()), "'y'", "300 elements")


def test_damaged_cache_entries_are_recompiled(monkeypatch, tmp_path):
    monkeypatch.setenv("POLYPY_CACHE_DIR", str(tmp_path))
    text = SAXPY.replace("a * x[i]", "a * x[i] * 0.125f")
    assert not _module(text).jit.from_cache
    (entry,) = tmp_path.glob("*.o")
    data = bytearray(entry.read_bytes())
    data[100] ^= 0xFF
    entry.write_bytes(bytes(data))
    again = _module(text)
    assert not again.jit.from_cache
    x, y = _arrays()
    out = y.copy()
    again.saxpy[4, 256](1000, 2.0, x, out)
    np.testing.assert_array_equal(out, np.float32(2.0) * x * np.float32(0.125) + y)
    assert _module(text).jit.from_cache  # rewritten


def test_footprints_are_cached_per_launch_shape_and_integer_arguments(mod, monkeypatch):
    fp_module = importlib.import_module("polypy.poly.footprint")  # the package re-exports the function's name
    calls = []
    real = fp_module.footprint

    def counting(*args, **kwargs):
        calls.append(args[1:3])
        return real(*args, **kwargs)

    monkeypatch.setattr(fp_module, "footprint", counting)
    x, y = _arrays()
    for a in (1.0, 2.0, 3.0):  # float arguments do not change footprints
        mod.saxpy[5, 200](1000, a, x, y)
    assert len(calls) == 1
    mod.saxpy[5, 200](999, 1.0, x, y)
    mod.saxpy[4, 250](1000, 1.0, x, y)
    assert len(calls) == 3


def test_launch_configuration_errors(mod):
    x, y = _arrays()
    _error(lambda: mod.saxpy[4](1000, 2.0, x, y), "kernel[grid, block]")
    _error(lambda: mod.saxpy[4, 2048](1000, 2.0, x, y), "block.x = 2048")
    _error(lambda: mod.saxpy[4, (32, 32, 2)](1000, 2.0, x, y), "2048 threads")
    _error(lambda: mod.saxpy[-1, 32](1000, 2.0, x, y), "grid.x = -1")  # grid.x = 0: a launch that does nothing
    _error(lambda: mod.saxpy[(1, 2, 3, 4), 32](1000, 2.0, x, y), "grid must be")
    _error(lambda: mod.saxpy[4, 32, -1](1000, 2.0, x, y), "non-negative")


def test_unknown_kernel_is_a_user_error_and_an_attribute_error(mod):
    err = _error(lambda: mod.sapxy, "no kernel named 'sapxy'", "saxpy", "clamp")
    assert isinstance(err, UnknownKernelError) and isinstance(err, AttributeError)
    assert not hasattr(mod, "nope")
    assert set(mod.kernels) == {"saxpy", "clamp"}
    with pytest.raises(polypy.UserError):
        mod["nope"]


def test_second_compile_loads_object_code_from_the_disk_cache(monkeypatch, tmp_path):
    import codegen.llvm.target as target

    monkeypatch.setenv("POLYPY_CACHE_DIR", str(tmp_path))
    text = SAXPY.replace("a * x[i]", "a * x[i] * 0.5f")  # a kernel no other test compiled
    first = _module(text)
    assert not first.jit.from_cache
    assert len(list(tmp_path.glob("*.o"))) == 1
    x, y = _arrays()
    y1, y2 = y.copy(), y.copy()
    first.saxpy[4, 256](1000, 2.0, x, y1)  # compiles the version the launch selects for block (256, 1, 1)
    assert len(list(tmp_path.glob("*.o"))) == 2

    def no_llvm(*args, **kwargs):
        raise AssertionError("LLVM optimization/code generation ran on a cache hit")

    monkeypatch.setattr(target, "compile_to_object", no_llvm)
    second = _module(text)
    assert second.jit.from_cache
    second.saxpy[4, 256](1000, 2.0, x, y2)  # the specialization comes from the cache too
    assert second.saxpy.for_launch((4, 1, 1), (256, 1, 1), {"x": x, "y": y2}).owner.from_cache
    np.testing.assert_array_equal(y1, y2)
    # a different kernel misses the cache
    monkeypatch.undo()
    monkeypatch.setenv("POLYPY_CACHE_DIR", str(tmp_path))
    assert not _module(text.replace("0.5f", "0.25f")).jit.from_cache


def test_cache_can_be_turned_off(monkeypatch, tmp_path):
    monkeypatch.setenv("POLYPY_CACHE_DIR", "off")
    assert not _module(SAXPY).jit.from_cache
    assert not _module(SAXPY).jit.from_cache


def test_threads_one_and_all_cores_give_the_same_results():
    x, y = _arrays(100_000)
    outs = []
    for threads in (1, None, 3):
        m = _module(SAXPY, threads=threads)
        out = y.copy()
        m.saxpy[400, 256](100_000, 1.25, x, out)
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])
    _error(lambda: _module(SAXPY, threads=0), "threads")


def test_cpu_only_module_has_no_footprint_check_and_no_emulator():
    cpu = n.Module((cpu_form(gpu_kernel(SAXPY)),))
    m = CompiledModule.from_ir(None, cpu)
    x, y = _arrays()
    m.saxpy[4, 256](1000, 2.0, x, y)
    _error(lambda: m.saxpy.emulate, "nothing to emulate")


def test_gpu_form_is_refused_by_the_backend():
    from codegen.llvm import compile_module

    gpu = n.Module((gpu_kernel(SAXPY),))
    _error(lambda: compile_module(gpu), "'gpu' form", "to_cpu")
    mislabeled = dataclasses.replace(gpu_kernel(SAXPY), stage="cpu")  # still uses threadIdx
    with pytest.raises(polypy.InternalError, match="threadIdx in CPU form"):
        compile_module(n.Module((mislabeled,)))


def test_compile_a_cuda_file_end_to_end(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text("""
        __global__ void scale(int n, float a, float* x) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) x[i] = a * x[i];
        }
    """)
    m = polypy.compile(source, threads=2)
    x = np.arange(100, dtype=np.float32)
    m.scale[1, 128](100, 3.0, x)
    np.testing.assert_array_equal(x, 3 * np.arange(100, dtype=np.float32))
    _error(lambda: m.scale[1, 128](100, 3.0, x[:50].copy()), "too small")


def test_module_arrays_are_shared_by_compiled_and_emulated_launches():
    gpu = parse_module(ir("""
        constant scale: f32[2] = {2.0f, 3.0f}
        device hits: u32[1]

        kernel apply(n: i32, x: f32*) {
          constant scale: f32[2]
          device hits: u32[1]
          var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
          if (i < n) {
            x[i] = x[i] * scale[i % 2]
            atomic.add hits[0], 1u
          }
        }
    """))
    gpu = dataclasses.replace(gpu, kernels=tuple(_with_full_signature(k) for k in gpu.kernels))
    cpu = dataclasses.replace(gpu, kernels=tuple(cpu_form(k) for k in gpu.kernels))
    m = CompiledModule.from_ir(gpu, cpu)
    x = np.ones(10, np.float32)
    m.apply[1, 32](10, x)
    m.apply.emulate[1, 32](10, x)
    np.testing.assert_array_equal(x, np.tile([4.0, 9.0], 5))
    assert m.globals["hits"][0] == 20
    m.globals["scale"][:] = [1.0, 0.5]
    m.apply[1, 32](10, x)
    np.testing.assert_array_equal(x, np.tile([4.0, 4.5], 5))
    _error(lambda: m.apply[1, 32](2, m.globals["scale"]), "'x'", "module's own", "'scale'")

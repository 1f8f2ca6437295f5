"""Block-shape specialization (``polypy.passes.specialize``) and what uses it: the JIT's per-shape
machine code (``polypy.driver.api``), the C backend's specialized launchers (``codegen.c``), and the
launch path (worker pool, small launches). Structure and results, never timings.

Specialized code must compute exactly what the generic code computes: every sample, on each of
its launch shapes, run on one thread (so that blocks, and float atomics, run in the same order)
gives bit-identical outputs both ways; ``test_samples_llvm`` compares the (specialized) compiled
code with the emulator on the same shapes.
"""
from __future__ import annotations

import functools
import re
import threading

import numpy as np
import pytest

from c_support import need_compiler
from test_llvm_support import cpu_form, gpu_kernel, ir, isolated_cache

import polypy
from polypy.driver.api import MAX_SPECIALIZATIONS, CompiledModule
from polypy.emulator import emulate
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir import parse_kernel, print_kernel
from polypy.ir.verifier import verify_kernel
from polypy.ir.visitor import walk
from polypy.launch import check_block_shape
from polypy.passes.specialize import specialize_block_shape
from samples.spec import all_samples

pytestmark = pytest.mark.usefixtures("isolated_cache")
assert isolated_cache

SAMPLES = {s.name: s for s in all_samples()}


def _cpu(text: str) -> n.Kernel:
    return parse_kernel(ir(text))


def _declared(kernel: n.Kernel) -> list[str]:
    out = []
    for s in kernel.body:
        for x in walk(s):
            if isinstance(x, n.Decl):
                out.append(x.name)
            elif isinstance(x, n.For):
                out.append(x.var)
    return out


# --------------------------------------------------------------------------- the pass

SCALE_CPU = """
    kernel scale(n: i32, x: f32*) stage cpu {
      local v: f32[blockDim.z][blockDim.y][blockDim.x]
      for threads tz: u32 = 0u to blockDim.z step 1u {
        for threads ty: u32 = 0u to blockDim.y step 1u {
          for threads tx: u32 = 0u to blockDim.x step 1u {
            var i: i32 = (i32)(blockIdx.x * blockDim.x + tx)
            v[tz][ty][tx] = i < n ? x[i] : 0.0f
            if (i < n) {
              x[i] = v[tz][ty][tx] * 2.0f
            }
          }
        }
      }
    }
"""


def test_block_dims_become_constants_and_unit_thread_loops_disappear():
    k = specialize_block_shape(_cpu(SCALE_CPU), block=(256, 1, 1))
    verify_kernel(k)
    text = print_kernel(k)
    assert "blockDim" not in text
    assert "local v: f32[1u][1u][256u]" in text
    assert "for threads tx: u32 = 0u to 256u step 1u" in text
    assert "tz" not in text and "ty" not in text  # one-iteration loops: the body, counter 0u
    assert "v[0u][0u][tx]" in text
    assert "blockIdx.x * 256u + tx" in text


def test_two_dimensional_blocks_keep_both_loops():
    k = specialize_block_shape(_cpu(SCALE_CPU), block=(16, 16))
    text = print_kernel(k)
    assert "for threads ty: u32 = 0u to 16u" in text and "for threads tx: u32 = 0u to 16u" in text
    assert "tz" not in text


def test_block_shapes_are_checked_and_padded():
    assert check_block_shape((32,)) == (32, 1, 1)
    assert check_block_shape((np.int64(8), 4)) == (8, 4, 1)
    for bad in ((), (0,), (1, 2, 3, 4), (True,), (2.0,)):
        with pytest.raises(UserError):
            check_block_shape(bad)


REDUCE_CPU = """
    kernel reduce(in: const f32*, out: f32*) stage cpu {
      shared sdata: f32[1024]
      for threads tx: u32 = 0u to blockDim.x step 1u {
        sdata[tx] = in[blockIdx.x * blockDim.x + tx]
      }
      var s: u32 = blockDim.x / 2u
      while (s > 0u) {
        for threads tx_1: u32 = 0u to blockDim.x step 1u {
          var keep: bool = tx_1 < s
          if (keep) {
            sdata[tx_1] = sdata[tx_1] + sdata[tx_1 + s]
          }
        }
      } update {
        s = s >> 1
      }
      for threads tx_2: u32 = 0u to 1u step 1u {
        out[blockIdx.x] = sdata[0]
      }
    }
"""


def test_block_level_loops_with_known_counters_are_unrolled():
    k = specialize_block_shape(_cpu(REDUCE_CPU), block=(8, 1, 1))
    verify_kernel(k)
    text = print_kernel(k)
    assert "while" not in text and " s " not in text
    for stride in (4, 2, 1):
        assert f"+ {stride}u]" in text
    names = _declared(k)
    assert len(names) == len(set(names)), "copies must declare fresh names"
    assert names.count("keep") == 1 and {"keep_1", "keep_2"} <= set(names)


def test_loops_are_not_unrolled_when_the_counter_is_unknown_or_the_loop_too_long():
    long_loop = REDUCE_CPU.replace("blockDim.x / 2u", "blockDim.x - 1u").replace("s >> 1", "s - 1u")
    k = specialize_block_shape(_cpu(long_loop), block=(64, 1, 1))  # 63 iterations: kept
    assert "while (s > 0u)" in print_kernel(k)
    written = REDUCE_CPU.replace("      } update {", "        s = s & 255u\n      } update {")
    assert "while (s > 0u)" in print_kernel(specialize_block_shape(_cpu(written), block=(8, 1, 1)))
    unknown = REDUCE_CPU.replace("in: const f32*, out: f32*", "in: const f32*, out: f32*, m: u32").replace(
        "blockDim.x / 2u", "m")
    assert "while (s > 0u)" in print_kernel(specialize_block_shape(_cpu(unknown), block=(8, 1, 1)))
    jump = REDUCE_CPU.replace("      } update {", "        if (s == 2u) {\n          break\n        }\n      } update {")
    assert "while (s > 0u)" in print_kernel(specialize_block_shape(_cpu(jump), block=(8, 1, 1)))


# A tree over the rows of a 2-D block (backprop's): after unrolling, each step's guard selects
# every 2s-th row, inside the loop over tx.
TREE_CPU = """
    kernel tree(in: const f32*, out: f32*) stage cpu {
      shared w: f32[16][16]
      for threads ty: u32 = 0u to blockDim.y step 1u {
        for threads tx: u32 = 0u to blockDim.x step 1u {
          w[ty][tx] = in[(blockIdx.x * blockDim.y + ty) * blockDim.x + tx]
        }
      }
      var s: i32 = 1
      while (s < (i32)blockDim.y) {
        for threads ty_1: u32 = 0u to blockDim.y step 1u {
          for threads tx_1: u32 = 0u to blockDim.x step 1u {
            if ((i32)ty_1 % (2 * s) == 0 && (i32)ty_1 + s < (i32)blockDim.y) {
              w[ty_1][tx_1] = w[ty_1][tx_1] + w[(i32)ty_1 + s][tx_1]
            }
          }
        }
      } update {
        s = s * 2
      }
      for threads tx_2: u32 = 0u to blockDim.x step 1u {
        out[blockIdx.x * blockDim.x + tx_2] = w[0][tx_2]
      }
    }
"""


def _run_jit(kernel: n.Kernel, grid: int, block: tuple[int, int, int], args: dict) -> dict:
    from codegen.llvm import compile_module

    out = {k: v.copy() for k, v in args.items()}
    compile_module(n.Module((kernel,))).kernels[kernel.name].run((grid, 1, 1), block, 0, out, {}, threads=1)
    return out


def test_guards_on_a_counters_residue_become_the_loops_step():
    k = specialize_block_shape(_cpu(TREE_CPU), block=(4, 8, 1))
    verify_kernel(k)
    text = print_kernel(k)
    assert "%" not in text
    steps = sorted(int(x.step.value) for x in walk(k) if isinstance(x, n.For) and x.var.startswith("ty_1"))
    assert steps == [2, 4, 8]
    # The guard on ty left the loop over tx: the loops over tx run unguarded.
    assert all(not isinstance(x.body[0], n.If) for x in walk(k) if isinstance(x, n.For) and x.var.startswith("tx_1"))
    # Exact: the same sums as the generic code, for shapes where the tree is partial too.
    rng = np.random.default_rng(2)
    for block in ((4, 8, 1), (16, 16, 1), (3, 6, 1), (5, 1, 1)):
        x = rng.standard_normal(3 * block[0] * block[1]).astype(np.float32)
        args = {"in": x, "out": np.zeros(3 * block[0], np.float32)}
        generic = _run_jit(_cpu(TREE_CPU), 3, block, args)
        special = _run_jit(specialize_block_shape(_cpu(TREE_CPU), block=block), 3, block, args)
        np.testing.assert_array_equal(special["out"], generic["out"])


@pytest.mark.parametrize("guard,start,step", [
    ("(i32)ty % 3 == 2", 2, 3),
    ("(ty & 3u) == 1u", 1, 4),
    ("tx < 2u && (i32)ty % 2 == 1", 1, 2),
    ("(i32)ty % 4 == 0 && (i32)blockIdx.x > 0", 0, 4),
    ("(ty & 5u) == 0u", 0, 1),  # not a power of two minus one: kept as a guard
    ("ty % 0u == 0u", 0, 1),  # division by zero is left to the code as written
    # The counter plus a constant (srad_v1's tree: every i-th thread, ``(tx + 1) % i == 0``).
    ("((i32)ty + 1) % 4 == 0", 3, 4),
    ("(ty + 1u) % 3u == 0u", 2, 3),
    ("(i32)(ty + 2u) % 4 == 1", 3, 4),
    ("((ty + 3u) & 3u) == 0u", 1, 4),
    ("(3 + (i32)ty) % 5 == 2", 4, 5),
    ("((i32)ty - 2) % 3 == 1", 0, 1),  # negative for ty < 2: C's % is not the residue there
    ("((i32)ty - 1) % 2 == 0", 0, 1),
    ("tx > 0u && ((i32)ty + 1) % 2 == 0", 1, 2),
])
def test_residue_guards_select_threads_exactly(guard: str, start: int, step: int):
    text = f"""
        kernel sel(out: f32*) stage cpu {{
          for threads ty: u32 = 0u to blockDim.y step 1u {{
            for threads tx: u32 = 0u to blockDim.x step 1u {{
              if ({guard}) {{
                out[(blockIdx.x * blockDim.y + ty) * blockDim.x + tx] = out[(blockIdx.x * blockDim.y + ty) * blockDim.x + tx] + 1.0f
              }}
            }}
          }}
        }}
    """
    if "% 0u" in guard:
        text = text.replace("ty % 0u == 0u", "ty % 0u == 0u && blockIdx.x > 9u")
    k = specialize_block_shape(_cpu(text), block=(3, 10, 1))
    verify_kernel(k)
    rows = [x for x in walk(k) if isinstance(x, n.For) and x.var == "ty"]
    assert [(int(r.start.value), int(r.step.value)) for r in rows] == [(start, step)]
    args = {"out": np.zeros(2 * 30, np.float32)}
    generic = _run_jit(_cpu(text), 2, (3, 10, 1), args)
    np.testing.assert_array_equal(_run_jit(k, 2, (3, 10, 1), args)["out"], generic["out"])


def test_specialized_ir_runs_like_the_generic_ir_on_the_emulated_semantics():
    """The pass itself, without a backend: the CPU form and its specialization agree through the JIT."""
    from codegen.llvm import compile_module

    kernel = _cpu(REDUCE_CPU)
    x = np.arange(64, dtype=np.float32)
    outs = []
    for k in (kernel, specialize_block_shape(kernel, block=(16, 1, 1))):
        out = np.zeros(4, np.float32)
        compile_module(n.Module((k,))).kernels["reduce"].run(
            (4, 1, 1), (16, 1, 1), 0, {"in": x, "out": out}, {}, threads=1)
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], x.reshape(4, 16).sum(axis=1))


# --------------------------------------------------------------------------- the JIT, per sample

def _cases():
    for s in SAMPLES.values():
        for i, case in enumerate(s.cases):
            yield pytest.param(s.name, i, id=f"{s.name}-{case}")


@functools.cache
def _compiled(name: str, specialize: bool) -> CompiledModule:
    s = SAMPLES[name]
    return polypy.compile(s.source, defines=dict(s.defines), threads=1, specialize=specialize)


@pytest.mark.parametrize("name,case_index", list(_cases()))
def test_specialized_machine_code_is_bit_identical_to_the_generic(name: str, case_index: int):
    s = SAMPLES[name]
    case = s.cases[case_index]
    args = s.make_args(np.random.default_rng(7), case, np.float32)
    outs = []
    for specialize in (False, True):
        mine = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        module = _compiled(name, specialize)
        module[s.kernel][case.grid, case.block, case.shmem](**mine)
        outs.append(mine)
    block = check_block_shape(tuple(case.block))
    assert block in _compiled(name, True)[s.kernel].specializations
    assert _compiled(name, False)[s.kernel].specializations == ()
    for out in s.outputs:
        np.testing.assert_array_equal(outs[1][out], outs[0][out], err_msg=f"{name} {case}: {out}")


SAXPY = """
    kernel saxpy(n: i32, a: f32, x: const f32*, y: f32*) {
      var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
      if (i < n) {
        y[i] = a * x[i] + y[i]
      }
    }
"""


def _saxpy_module(**options) -> CompiledModule:
    gpu = gpu_kernel(SAXPY)
    gpu = n.Kernel(gpu.name, gpu.params, gpu.buffers, gpu.body, gpu.stage,
                   tuple(n.SourceParam(p.name, str(p.ptype), (("", p.name),)) for p in gpu.params), loc=gpu.loc)
    return CompiledModule.from_ir(n.Module((gpu,)), n.Module((cpu_form(gpu),)), **options)


def test_one_compilation_per_block_shape_kept_in_memory(monkeypatch):
    import codegen.llvm as backend

    calls = []
    real = backend.compile_module
    monkeypatch.setattr(backend, "compile_module", lambda *a, **k: calls.append(a) or real(*a, **k))
    m = _saxpy_module()
    x = np.arange(1000, dtype=np.float32)
    y = np.ones(1000, np.float32)
    for block in (256, 256, (128, 1), 256, 128):
        m.saxpy[(1000 + 127) // 128, block](1000, 2.0, x, y)
    assert len(calls) == 2  # (256, 1, 1) and (128, 1, 1); the generic code was never needed
    assert m.saxpy.specializations == ((256, 1, 1), (128, 1, 1))
    assert m.saxpy.for_block((256, 1, 1)) is m.saxpy.for_block((256, 1, 1))
    np.testing.assert_array_equal(y, 1 + 5 * np.float32(2.0) * x)


def test_generic_code_after_too_many_shapes_and_without_specialization():
    m = _saxpy_module()
    x = np.arange(300, dtype=np.float32)
    for b in range(1, MAX_SPECIALIZATIONS + 3):
        y = np.zeros(300, np.float32)
        m.saxpy[(300 + b - 1) // b, b](300, 1.0, x, y)
        np.testing.assert_array_equal(y, x)
    assert len(m.saxpy.specializations) == MAX_SPECIALIZATIONS
    assert m.saxpy.for_block((MAX_SPECIALIZATIONS + 2, 1, 1)) is m.saxpy.compiled
    plain = _saxpy_module(specialize=False)
    y = np.zeros(300, np.float32)
    plain.saxpy[3, 128](300, 1.0, x, y)
    assert plain.saxpy.specializations == () and plain.saxpy.for_block((128, 1, 1)) is plain.saxpy.compiled
    np.testing.assert_array_equal(y, x)


def test_specializations_share_the_module_arrays(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text("""
        __constant__ float scale[2] = {2.0f, 3.0f};
        __device__ unsigned int hits[1];
        __global__ void apply(int n, float* x) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) { x[i] *= scale[i % 2]; atomicAdd(&hits[0], 1u); }
        }
    """)
    m = polypy.compile(source)
    x = np.ones(64, np.float32)
    m.apply[2, 32](64, x)
    m.apply[4, 16](64, x)
    m.apply.emulate[1, 64](64, x)
    np.testing.assert_array_equal(x, np.tile([8.0, 27.0], 32))
    assert m.globals["hits"][0] == 192
    m.globals["scale"][:] = [0.5, 1.0]
    m.apply[2, 32](64, x)
    np.testing.assert_array_equal(x, np.tile([4.0, 27.0], 32))
    assert len(m.apply.specializations) == 2


# --------------------------------------------------------------------------- the launch path

def test_small_launches_run_on_the_calling_thread(monkeypatch):
    import codegen.llvm.jit as jit

    seen = []
    real = jit.run_workers
    monkeypatch.setattr(jit, "run_workers", lambda call, workers: seen.append(workers) or real(call, workers))
    # The mechanism, not the machine: a launch measured below the threshold (made large here, so a
    # loaded machine's slow measurement does not change the decision) runs on the calling thread.
    monkeypatch.setattr(jit, "SERIAL_BELOW_SECONDS", 10.0)
    m = _saxpy_module(threads=4)
    x = np.arange(4096, dtype=np.float32)
    y = np.zeros(4096, np.float32)
    for _ in range(4):
        m.saxpy[16, 256](4096, 1.0, x, y)
    np.testing.assert_array_equal(y, 4 * x)
    assert seen[0] == 4 and seen[1:] == [1, 1, 1]  # measured once, then too small to share


def test_concurrent_launches_from_several_python_threads():
    m = _saxpy_module(threads=2)
    n_ = 200_000
    x = np.arange(n_, dtype=np.float32)
    results = []

    def launch(a: float) -> None:
        y = np.zeros(n_, np.float32)
        for _ in range(5):
            m.saxpy[(n_ + 255) // 256, 256](n_, a, x, y)
        results.append((a, y))

    threads = [threading.Thread(target=launch, args=(float(a),)) for a in (1, 2, 3, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    for a, y in results:
        np.testing.assert_array_equal(y, 5 * (np.float32(a) * x))


# --------------------------------------------------------------------------- LLVM IR

def test_thread_loops_are_not_unrolled_before_vectorization_and_signed_indices_are_64_bit():
    from codegen.llvm import emit_llvm_ir

    k = _cpu("""
        kernel st(w: i32, dy: i32, x: f32*) stage cpu {
          for threads tx: u32 = 0u to 32u step 1u {
            x[((i32)blockIdx.y + dy) * w + (i32)tx] = 1.0f
          }
        }
    """)
    text = emit_llvm_ir(n.Module((k,)))
    assert re.search(r'!"llvm.loop.unroll.disable"', text)
    assert re.search(r"br label %\"threads.tx\", !llvm.loop !\d+", text)
    assert re.search(r"mul nsw i64", text) and re.search(r"add nsw i64", text)


# --------------------------------------------------------------------------- the C backend

C_SAMPLES = ("reduce_sum", "backprop_layerforward", "matmul_tiled", "prefix_scan", "softmax_rows", "histogram")


@pytest.mark.parametrize("name", C_SAMPLES)
def test_c_specialized_launchers_are_bit_identical_to_the_generic(name: str):
    need_compiler()
    from polypy.driver.library import build_library
    from polypy.driver.pipelines import to_cpu
    from polypy.driver.source import load

    s = SAMPLES[name]
    module = load(s.source, defines=dict(s.defines))
    kernels = [to_cpu(k) for k in module.kernels]
    generic = build_library(kernels, module.globals, threads=1, specialize=False)
    special = build_library(kernels, module.globals, threads=1)
    for case in s.cases[:2]:
        args = s.make_args(np.random.default_rng(3), case, np.float32)
        outs = []
        for lib in (generic, special):
            mine = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
            lib.launch(s.kernel, case.grid, case.block, mine, shmem=case.shmem)
            outs.append(mine)
        emulated = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        emulate(module.kernel(s.kernel), case.grid, case.block, emulated, shmem=case.shmem)
        for out in s.outputs:
            np.testing.assert_array_equal(outs[1][out], outs[0][out], err_msg=f"{name} {case}: {out}")
            np.testing.assert_allclose(outs[1][out], emulated[out], rtol=s.rtol, atol=s.atol)
    assert check_block_shape(tuple(s.cases[0].block)) in special.specializations[s.kernel]
    assert generic.specializations == {}


def test_c_library_dispatches_on_block_shapes_given_in_advance():
    need_compiler()
    from polypy.driver.library import build_library, emit_kernels
    from polypy.driver.pipelines import to_cpu
    from polypy.driver.source import load

    s = SAMPLES["reduce_sum"]
    cpu = to_cpu(load(s.source).kernel("reduce_sum"))
    text = emit_kernels([cpu], block_shapes={"reduce_sum": [(256,), (128, 1, 1)]})
    assert "static void reduce_sum_launch_b256x1x1(" in text and "static void reduce_sum_launch_generic(" in text
    assert "if (block_x == 256u && block_y == 1u && block_z == 1u)" in text
    assert text.count("POLYPY_EXPORT void reduce_sum_launch(") == 1
    lib = build_library([cpu], block_shapes={"reduce_sum": [(256,)]})
    case = s.cases[0]
    args = s.make_args(np.random.default_rng(5), case, np.float32)
    want = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    emulate(load(s.source).kernel("reduce_sum"), case.grid, case.block, want)
    lib.launch("reduce_sum", case.grid, (256,), args)
    np.testing.assert_allclose(args["out"], want["out"], rtol=s.rtol, atol=s.atol)
    assert "reduce_sum" not in lib.specializations  # compiled in, nothing built on the side


def test_c_kernels_with_module_arrays_keep_the_generic_launcher():
    need_compiler()
    from polypy.driver.library import build_library
    from polypy.driver.pipelines import to_cpu
    from polypy.driver.source import load

    s = SAMPLES["constant_coeffs"]
    module = load(s.source, defines=dict(s.defines))
    lib = build_library([to_cpu(k) for k in module.kernels], module.globals)
    case = s.cases[0]
    args = s.make_args(np.random.default_rng(1), case, np.float32)
    lib.launch(s.kernel, case.grid, case.block, args, shmem=case.shmem)
    assert lib.specializations == {}


def test_whole_programs_specialize_launches_with_literal_block_sizes(tmp_path):
    need_compiler(cpp=True)
    from polypy.driver.cli import main

    source = tmp_path / "p.cu"
    source.write_text("""
        #include <cstdio>
        __global__ void twice(int n, float* x) {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) x[i] = 2.0f * x[i];
        }
        int main() {
            const int n = 1000;
            float* x;
            cudaMallocManaged(&x, n * sizeof(float));
            for (int i = 0; i < n; ++i) x[i] = (float)i;
            twice<<<(n + 127) / 128, 128>>>(n, x);
            dim3 block(64);
            twice<<<(n + 63) / 64, block>>>(n, x);
            dim3 odd(32);
            if (n > 500) odd.x = 96;
            twice<<<(n + 95) / 96, odd>>>(n, x);
            cudaDeviceSynchronize();
            double s = 0;
            for (int i = 0; i < n; ++i) s += x[i];
            printf("%.1f\\n", s);
            return 0;
        }
    """)
    out = tmp_path / "p.cpp"
    assert main(["translate", str(source), "-o", str(out)]) == 0
    text = out.read_text()
    assert "twice_launch_b128x1x1(" in text and "twice_launch_generic(" in text
    # A dim3 variable written only by constant statements before the launch is evaluated too;
    # one changed under a condition is not: that launch runs the generic version.
    assert "twice_launch_b64x1x1(" in text
    assert "twice_launch_b32x1x1(" not in text and "twice_launch_b96x1x1(" not in text
    import subprocess

    exe = tmp_path / "p"
    subprocess.run(["c++", "-O2", "-fopenmp", str(out), "-o", str(exe), "-lm"], check=True, capture_output=True)
    assert subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.strip() == \
        f"{8 * sum(range(1000)):.1f}"

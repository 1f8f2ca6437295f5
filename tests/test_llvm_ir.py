"""The LLVM IR the backend emits: the K_blocks calling convention, attributes, the math table's
coverage, and that the O3 pipeline vectorizes thread loops (structure, not timing)."""
from __future__ import annotations

import re

import pytest

from test_llvm_support import cpu_form, gpu_kernel, ir

from codegen.llvm import emit_llvm_ir, kernel_abi
from codegen.llvm.mathlib import MATH_EMITTERS
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir import parse_kernel
from polypy.ir.mathfns import MATH_FUNCTIONS

SAXPY = """
    kernel saxpy(n: i32, a: f32, x: const f32* restrict, y: f32* restrict) {
      var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
      if (i < n) {
        y[i] = a * x[i] + y[i]
      }
    }
"""

MATMUL_CPU = """
kernel matmul(A: const f32*, B: const f32*, C: f32*, n: i32) stage cpu {
  shared As: f32[16][16]
  shared Bs: f32[16][16]
  local acc: f32[blockDim.z][blockDim.y][blockDim.x]
  for threads ty: u32 = 0u to blockDim.y step 1u {
    for threads tx: u32 = 0u to blockDim.x step 1u {
      acc[0u][ty][tx] = 0.0f
    }
  }
  for t: i32 = 0 to n / 16 step 1 {
    for threads ty_1: u32 = 0u to blockDim.y step 1u {
      for threads tx_1: u32 = 0u to blockDim.x step 1u {
        As[ty_1][tx_1] = A[(i32)(blockIdx.y * 16u + ty_1) * n + t * 16 + (i32)tx_1]
        Bs[ty_1][tx_1] = B[(t * 16 + (i32)ty_1) * n + (i32)(blockIdx.x * 16u + tx_1)]
      }
    }
    for threads ty_2: u32 = 0u to blockDim.y step 1u {
      for threads tx_2: u32 = 0u to blockDim.x step 1u {
        for k: i32 = 0 to 16 step 1 {
          acc[0u][ty_2][tx_2] = acc[0u][ty_2][tx_2] + As[ty_2][k] * Bs[k][tx_2]
        }
      }
    }
  }
  for threads ty_3: u32 = 0u to blockDim.y step 1u {
    for threads tx_3: u32 = 0u to blockDim.x step 1u {
      C[(i32)(blockIdx.y * 16u + ty_3) * n + (i32)(blockIdx.x * 16u + tx_3)] = acc[0u][ty_3][tx_3]
    }
  }
}
"""


def test_every_math_function_has_an_llvm_lowering():
    assert set(MATH_EMITTERS) == set(MATH_FUNCTIONS)


def test_blocks_function_signature_and_restrict():
    k = cpu_form(gpu_kernel(SAXPY))
    text = emit_llvm_ir(n.Module((k,)))
    header = next(line for line in text.splitlines() if line.startswith("define"))
    assert '@"saxpy_blocks"(i64 %"first", i64 %"last", i32 %"grid_x"' in header
    assert 'i64 %"shmem", i32 %"n", float %"a", ptr noalias %"x", ptr noalias %"y")' in header
    abi = kernel_abi(k)
    assert abi.symbol == "saxpy_blocks" and [p.name for p in abi.params] == ["n", "a", "x", "y"]


def test_optimized_thread_loops_are_vectorized():
    saxpy = emit_llvm_ir(n.Module((cpu_form(gpu_kernel(SAXPY)),)), optimize=True)
    assert re.search(r"fmul <\d+ x float>", saxpy), "saxpy's thread loop was not vectorized"
    assert "fmuladd" not in saxpy and " fast " not in saxpy and "contract" not in saxpy  # no fast-math
    matmul = emit_llvm_ir(n.Module((parse_kernel(ir(MATMUL_CPU)),)), optimize=True)
    assert re.search(r"fmul <\d+ x float>", matmul), "matmul's thread loop was not vectorized"


def test_gpu_form_is_refused():
    with pytest.raises(UserError, match="'gpu' form"):
        emit_llvm_ir(n.Module((gpu_kernel(SAXPY),)))


def test_thread_loops_proved_lane_independent_are_parallel_loops_with_their_own_access_group():
    """What gives `#pragma omp simd` in C (codegen.lanes.independent_lanes) gives
    llvm.loop.parallel_accesses here: each such loop its own distinct access group, every load
    and store inside tagged with it; a loop the proof refuses (a uniform store) gets none."""
    k = cpu_form(gpu_kernel(SAXPY))
    text = emit_llvm_ir(n.Module((k,)))
    groups = set(re.findall(r'!"llvm.loop.parallel_accesses", (![0-9]+)', text))
    assert len(groups) == 1
    group = groups.pop()
    assert re.search(rf"^{group} = distinct !\{{\s*\}}", text, re.M)
    memory = [line for line in text.splitlines() if re.search(r"= load float|store float", line)]
    assert memory and all(f"!llvm.access.group {group}" in line for line in memory)
    two = cpu_form(gpu_kernel("""
    kernel two(x: f32*, y: f32*) {
      x[threadIdx.x] = 1.0f
      y[0] = 2.0f
    }
"""))
    # x[tx] alone is parallel; the loop also storing y[0] (every lane, one element) is not
    text2 = emit_llvm_ir(n.Module((two,)))
    assert "llvm.loop.parallel_accesses" not in text2 and "llvm.access.group" not in text2

"""raise-counted-loops: ``for (j = a; j < b; j += s)`` with the counter declared earlier (Rodinia's
cfd: ``int j, nb; ... for (j = 0; j < NNB; j++)``) becomes a ``For`` like ``for (int j = ...)``.

Golden IR for what is raised and what is not; the counter's value after the loop; the same
results as the original loop in the emulator (every case, including loops that do not run), and
a CUDA kernel through the emulator, LLVM and C against NumPy. The point of the pass, checked on
the CPU form: cfd's short neighbour loop stays inside the thread loop instead of being
interchanged with it through a per-thread buffer for every local.
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from polypy.driver.pipelines import to_cpu
from polypy.emulator import emulate
from polypy.ir import parse_kernel, print_kernel
from polypy.ir import nodes as n
from polypy.ir.visitor import walk
from polypy.passes.raise_counted_loops import raise_counted_loops
from tests.c_support import cuda_source, run_c


def _golden(before: str, after: str) -> None:
    result = raise_counted_loops(parse_kernel(textwrap.dedent(before)))
    assert print_kernel(result) == textwrap.dedent(after).lstrip("\n")


def test_counter_declared_before_the_loop_becomes_a_for() -> None:
    _golden("""
    kernel k(n: i32, x: f32*) {
      var j: i32
      var acc: f32 = 0.0f
      j = 0
      while (j < 4) {
        acc = acc + x[j * n]
      } update {
        j = j + 1
      }
      x[0] = acc
    }
    """, """
    kernel k(n: i32, x: f32*) {
      var j: i32
      var acc: f32 = 0.0f
      for j_1: i32 = 0 to 4 step 1 {
        acc = acc + x[j_1 * n]
      }
      x[0] = acc
    }
    """)


def test_bound_on_the_left_and_inclusive_bound_and_declared_start() -> None:
    _golden("""
    kernel k(n: i32, x: f32*) {
      var j: i32 = 1
      while (n >= j) {
        x[j] = 0.0f
      } update {
        j = 2 + j
      }
    }
    """, """
    kernel k(n: i32, x: f32*) {
      var j: i32
      for j_1: i32 = 1 to n + 1 step 2 {
        x[j_1] = 0.0f
      }
    }
    """)


def test_counter_read_after_the_loop_gets_its_final_value() -> None:
    _golden("""
    kernel k(n: i32, x: i32*) {
      var j: i32
      j = n
      while (j < 10) {
        x[j] = 1
      } update {
        j = j + 3
      }
      x[0] = j
    }
    """, """
    kernel k(n: i32, x: i32*) {
      var j: i32
      for j_1: i32 = n to 10 step 3 {
        x[j_1] = 1
      }
      j = n < 10 ? n + ((10 - n - 1) / 3 + 1) * 3 : n
      x[0] = j
    }
    """)


def test_counter_set_earlier_and_incremented_at_the_end_of_the_body() -> None:
    # Rodinia lavaMD: ``int wtx = tx; ... while (wtx < N) { ...; wtx = wtx + NUMBER_THREADS; }``:
    # the loop starts from the counter's value on entry.
    _golden("""
    kernel k(n: i32, x: f32*) {
      var w: i32 = (i32)threadIdx.x
      x[0] = 0.0f
      while (w < n) {
        x[w] = 1.0f
        w = w + 128
      }
    }
    """, """
    kernel k(n: i32, x: f32*) {
      var w: i32 = (i32)threadIdx.x
      x[0] = 0.0f
      for w_1: i32 = w to n step 128 {
        x[w_1] = 1.0f
      }
    }
    """)


NOT_COUNTED = {
    "counter written in the body": ("j = j + 1", "x[j] = 1.0f\n    j = j + 1"),
    "break in the body": ("x[j] = 1.0f", "x[j] = 1.0f\n    if (x[0] > 2.0f) {\n      break\n    }"),
    "bound read from memory": ("while (j < n)", "while (j < (i32)x[0])"),
    "bound written in the body": ("x[j] = 1.0f", "x[j] = 1.0f\n    n = n - 1"),
    "update not an addition": ("j = j + 1\n  }", "j = j * 2\n  }"),
    "continue skips the increment": ("x[j] = 1.0f\n  } update {\n    j = j + 1\n  }",
                                     "if (x[j] > 2.0f) {\n      continue\n    }\n    j = j + 1\n  }"),
}


@pytest.mark.parametrize("case", sorted(NOT_COUNTED))
def test_loops_that_do_not_count_stay_while_loops(case: str) -> None:
    text = textwrap.dedent("""
    kernel k(n: i32, x: f32*) {
      var j: i32
      j = 0
      while (j < n) {
        x[j] = 1.0f
      } update {
        j = j + 1
      }
    }
    """)
    assert "for j_1" in print_kernel(raise_counted_loops(parse_kernel(text)))  # as written, it counts
    old, new = NOT_COUNTED[case]
    assert old in text, case
    kernel = parse_kernel(text.replace(old, new, 1))
    assert raise_counted_loops(kernel) is kernel


def test_unsigned_inclusive_bound_stays_a_while_loop() -> None:
    # ``j <= n`` would become ``j < n + 1``, which wraps to 0 for n = UINT_MAX.
    kernel = parse_kernel(textwrap.dedent("""
    kernel k(n: u32, x: f32*) {
      var j: u32
      j = 0u
      while (j <= n) {
        x[j] = 1.0f
      } update {
        j = j + 1u
      }
    }
    """))
    assert raise_counted_loops(kernel) is kernel


SEMANTICS = """
kernel k(n: i32, m: i32, x: i32*) {
  var j: i32
  var s: i32 = 0
  j = n
  while (j < m) {
    s = s + j
    if (j == 5) {
      continue
    }
    s = s + 100
  } update {
    j = j + 3
  }
  x[0] = s
  x[1] = j
}
"""


@pytest.mark.parametrize("start,stop", [(0, 10), (2, 3), (4, 4), (9, 1), (-7, 8), (5, 6)])
def test_same_results_as_the_while_loop(start: int, stop: int) -> None:
    before = parse_kernel(SEMANTICS)
    after = raise_counted_loops(before)
    assert any(isinstance(s, n.For) for s in after.body) and not any(isinstance(s, n.While) for s in after.body)
    want = [sum(j + (0 if j == 5 else 100) for j in range(start, stop, 3)),
            start if start >= stop else start + -(-(stop - start) // 3) * 3]
    for kernel in (before, after):
        x = np.zeros(2, np.int32)
        emulate(kernel, 1, 1, [start, stop, x], check_races=False)
        assert x.tolist() == want


SOURCE = r"""
#define NNB 4
__global__ void gather(int n, const int* nbr, const float* v, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  int j, nb;
  float acc = 0.0f, far = 0.0f;
  for (j = 0; j < NNB; j++) {
    nb = nbr[i + j * n];
    if (nb >= 0) {
      float d = v[nb] - v[i];
      acc += d * d;
    } else if (nb == -1) {
      far += v[i];
    }
  }
  out[i] = acc + far + j;
}
"""


def _reference(n: int, nbr: np.ndarray, v: np.ndarray) -> np.ndarray:
    out = np.zeros(n, np.float32)
    for i in range(n):
        acc = far = np.float32(0)
        for j in range(4):
            nb = nbr[i + j * n]
            if nb >= 0:
                d = v[nb] - v[i]
                acc += d * d
            elif nb == -1:
                far += v[i]
        out[i] = acc + far + 4
    return out


@pytest.fixture(scope="module")
def gather(tmp_path_factory):
    return cuda_source(tmp_path_factory.mktemp("raise"), "gather.cu", SOURCE, "gather")


def test_short_loop_stays_inside_the_thread_loop(gather) -> None:
    _, kernel = gather
    assert not any(isinstance(x, n.While) for x in walk(kernel))
    cpu = to_cpu(kernel)
    # No per-thread buffer: the neighbour loop runs inside the loop over the threads.
    assert [b.name for b in cpu.buffers if b.space == "local"] == []


@pytest.mark.parametrize("n,block", [(256, 64), (96, 32), (128, 128)])
def test_gather_against_numpy_through_every_backend(gather, n: int, block: int) -> None:
    compiled, kernel = gather
    rng = np.random.default_rng(n + block)
    nbr = rng.integers(-2, n, size=4 * n).astype(np.int32)
    v = rng.standard_normal(n).astype(np.float32)
    want = _reference(n, nbr, v)
    grid = n // block
    out = np.zeros(n, np.float32)
    compiled.gather[grid, block](n, nbr, v, out)
    np.testing.assert_allclose(out, want, rtol=1e-5)
    emulated = np.zeros(n, np.float32)
    emulate(kernel, grid, block, {"n": n, "nbr": nbr, "v": v, "out": emulated})
    np.testing.assert_allclose(emulated, want, rtol=1e-5)
    got = run_c(kernel, grid, block, {"n": n, "nbr": nbr, "v": v, "out": np.zeros(n, np.float32)})
    np.testing.assert_allclose(got["out"], want, rtol=1e-5)


"""The reference emulator: launch API, SIMT control flow, memory spaces and expected errors.

Math functions and integer semantics are in test_emulator_ops.py; atomics, warp operations and
the race detector in test_emulator_parallel.py.
"""
from __future__ import annotations

import numpy as np
import pytest

from test_emulator_support import expect_error, ir, kernel, loc_of

from polypy.emulator import emulate
from polypy.errors import UserError
from polypy.ir import parse_kernel

SAXPY = """
    kernel saxpy(n: i32, a: f32, x: const f32*, y: f32*) {
      var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
      if (i < n) {
        y[i] = a * x[i] + y[i]
      }
    }
"""

REDUCE = """
    kernel reduce(n: i32, x: const f32*, out: f32*) {
      shared s: f32[256]
      var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
      s[threadIdx.x] = i < n ? x[i] : 0.0f
      barrier
      var stride: u32 = blockDim.x / 2u
      while (stride > 0u) {
        if (threadIdx.x < stride) {
          s[threadIdx.x] = s[threadIdx.x] + s[threadIdx.x + stride]
        }
        barrier
      } update {
        stride = stride >> 1u
      }
      if (threadIdx.x == 0u) {
        atomic.add out[0], s[0]
      }
    }
"""


def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


# --------------------------------------------------------------------------- launches


@pytest.mark.parametrize("grid, block, n", [
    (1, 32, 32), (4, 64, 200), ((3,), (100,), 300), (7, 1, 5), ((2, 1, 1), (128, 1, 1), 129), (4096, 256, 1 << 20),
])
def test_saxpy_guard_and_launch_shapes(grid, block, n):
    r = rng()
    x = r.standard_normal(n).astype(np.float32)
    y = r.standard_normal(n).astype(np.float32)
    expected = np.float32(2.5) * x + y
    threads = np.prod(grid) * np.prod(block)
    y_big = np.concatenate([y, np.full(max(0, threads - n) + 3, 7.0, np.float32)])
    emulate(kernel(SAXPY), grid, block, {"n": n, "a": 2.5, "x": x, "y": y_big})
    covered = min(n, threads)
    np.testing.assert_array_equal(y_big[:covered], expected[:covered])  # f32 arithmetic, bit-exact
    np.testing.assert_array_equal(y_big[covered:n], y[covered:n])
    assert np.all(y_big[n:] == 7.0)  # the guard kept threads beyond n out


def test_arguments_by_position_and_numpy_scalars():
    x = np.arange(10, dtype=np.float32)
    y = np.ones(10, dtype=np.float32)
    emulate(kernel(SAXPY), (1,), (16,), [np.int64(10), np.float32(3.0), x, y])
    np.testing.assert_array_equal(y, 3 * np.arange(10, dtype=np.float32) + 1)


def test_multidimensional_arrays_are_passed_as_their_flat_memory():
    y = np.ones((2, 4), np.float32)
    emulate(kernel(SAXPY), 1, 8, {"n": 8, "a": 2.0, "x": np.arange(8, dtype=np.float32).reshape(2, 2, 2), "y": y})
    np.testing.assert_array_equal(y, 2 * np.arange(8, dtype=np.float32).reshape(2, 4) + 1)


def test_struct_parameters_passed_whole():
    text = """
        kernel clamp(p_n: i32, p_lim_lo: f32, p_lim_hi: f32, x: f32*) {
          source p: "struct Params" (.n = p_n, .lim.lo = p_lim_lo, .lim.hi = p_lim_hi)
          var i: i32 = (i32)threadIdx.x
          if (i < p_n) {
            x[i] = fmin(fmax(x[i], p_lim_lo), p_lim_hi)
          }
        }
    """
    k = kernel(text)
    x = np.linspace(-2, 2, 9).astype(np.float32)
    emulate(k, 1, 16, {"p": {"n": 8, "lim": {"lo": -1.0, "hi": 0.5}}, "x": x})
    np.testing.assert_array_equal(x[:8], np.clip(np.linspace(-2, 2, 9)[:8], -1, 0.5).astype(np.float32))
    assert x[8] == 2.0
    record = np.zeros((), dtype=[("n", "i4"), ("lim", [("lo", "f4"), ("hi", "f4")])])[()]
    record["n"], record["lim"]["lo"], record["lim"]["hi"] = 9, 0.0, 0.25
    emulate(k, 1, 16, {"p": record, "x": x})
    assert x.min() == 0.0 and x.max() == 0.25
    emulate(k, 1, 16, {"p_n": 9, "p_lim_lo": -5.0, "p_lim_hi": 0.0, "x": x})  # or member by member
    assert x.max() == 0.0
    with pytest.raises(UserError, match=r"argument 'p' of kernel 'clamp' \(struct Params\) has no field 'p.lim.hi'"):
        emulate(k, 1, 16, {"p": {"n": 8, "lim": {"lo": -1.0}}, "x": x})
    with pytest.raises(UserError, match=r"argument 'p.n' of kernel 'clamp' \(parameter type i32\) must be an integer"):
        emulate(k, 1, 16, {"p": {"n": 8.5, "lim": {"lo": -1.0, "hi": 1.0}}, "x": x})


def test_two_and_three_dimensional_indexing():
    k = kernel("""
        kernel fill(w: i32, h: i32, d: i32, out: i32*) {
          var x: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
          var y: i32 = (i32)(blockIdx.y * blockDim.y + threadIdx.y)
          var z: i32 = (i32)(blockIdx.z * blockDim.z + threadIdx.z)
          if (x < w && y < h && z < d) {
            out[(z * h + y) * w + x] = x + 100 * y + 10000 * z + 1000000 * (i32)(gridDim.x + gridDim.y * 10u)
          }
        }
    """)
    w, h, d = 13, 9, 3
    out = np.zeros(w * h * d, dtype=np.int32)
    emulate(k, (4, 3, 2), (4, 4, 2), {"w": w, "h": h, "d": d, "out": out})
    z, y, x = np.meshgrid(np.arange(d), np.arange(h), np.arange(w), indexing="ij")
    np.testing.assert_array_equal(out.reshape(d, h, w), x + 100 * y + 10000 * z + 1000000 * (4 + 30))


def test_matrix_2d_blocks_row_major():
    k = kernel("""
        kernel add2d(rows: i32, cols: i32, a: const f64*, b: f64*) {
          var c: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
          var r: i32 = (i32)(blockIdx.y * blockDim.y + threadIdx.y)
          if (r < rows && c < cols) {
            b[r * cols + c] = a[r * cols + c] * 2.0 + (f64)r
          }
        }
    """)
    rows, cols = 37, 21
    a = rng().standard_normal(rows * cols)
    b = np.zeros_like(a)
    emulate(k, ((cols + 7) // 8, (rows + 7) // 8), (8, 8), {"rows": rows, "cols": cols, "a": a, "b": b})
    np.testing.assert_array_equal(b.reshape(rows, cols), a.reshape(rows, cols) * 2.0 + np.arange(rows)[:, None])


# --------------------------------------------------------------------------- shared memory and barriers


@pytest.mark.parametrize("blocks, n", [(64, 64 * 256), (5, 1000), (1, 3)])
def test_shared_tree_reduction_with_atomic_block_sums(blocks, n):
    x = rng().random(n).astype(np.float32)
    out = np.zeros(1, dtype=np.float32)
    emulate(kernel(REDUCE), blocks, 256, {"n": n, "x": x, "out": out})
    assert out[0] == pytest.approx(float(x.astype(np.float64)[: blocks * 256].sum()), rel=1e-5)


def test_tiled_transpose_through_shared_memory():
    k = kernel("""
        kernel transpose(w: i32, h: i32, a: const f32*, b: f32*) {
          shared tile: f32[16][17]
          var x: i32 = (i32)(blockIdx.x * 16u + threadIdx.x)
          var y: i32 = (i32)(blockIdx.y * 16u + threadIdx.y)
          if (x < w && y < h) {
            tile[threadIdx.y][threadIdx.x] = a[y * w + x]
          }
          barrier
          var tx: i32 = (i32)(blockIdx.y * 16u + threadIdx.x)
          var ty: i32 = (i32)(blockIdx.x * 16u + threadIdx.y)
          if (tx < h && ty < w) {
            b[ty * h + tx] = tile[threadIdx.x][threadIdx.y]
          }
        }
    """)
    h, w = 40, 50
    a = rng().standard_normal(h * w).astype(np.float32)
    b = np.zeros(h * w, dtype=np.float32)
    emulate(k, ((w + 15) // 16, (h + 15) // 16), (16, 16), {"w": w, "h": h, "a": a, "b": b})
    np.testing.assert_array_equal(b.reshape(w, h), a.reshape(h, w).T)


def test_tiled_matmul():
    k = kernel("""
        kernel matmul(n: i32, a: const f32*, b: const f32*, c: f32*) {
          shared as: f32[16][16]
          shared bs: f32[16][16]
          var row: i32 = (i32)(blockIdx.y * 16u + threadIdx.y)
          var col: i32 = (i32)(blockIdx.x * 16u + threadIdx.x)
          var acc: f32 = 0.0f
          for t: i32 = 0 to n / 16 step 1 {
            as[threadIdx.y][threadIdx.x] = a[row * n + t * 16 + (i32)threadIdx.x]
            bs[threadIdx.y][threadIdx.x] = b[(t * 16 + (i32)threadIdx.y) * n + col]
            barrier
            for k: i32 = 0 to 16 step 1 {
              acc = acc + as[threadIdx.y][k] * bs[k][threadIdx.x]
            }
            barrier
          }
          c[row * n + col] = acc
        }
    """)
    n = 128
    a = rng().random(n * n).astype(np.float32)
    b = rng().random(n * n).astype(np.float32)
    c = np.zeros(n * n, dtype=np.float32)
    emulate(k, (8, 8), (16, 16), {"n": n, "a": a, "b": b, "c": c})
    np.testing.assert_allclose(c.reshape(n, n), a.reshape(n, n) @ b.reshape(n, n), rtol=1e-5)


def test_dynamic_shared_memory_reverses_each_block():
    k = kernel("""
        kernel rev(x: f32*) {
          extern shared s: f32[]
          extern shared alias: f32[]
          var i: u32 = blockIdx.x * blockDim.x + threadIdx.x
          s[threadIdx.x] = x[i]
          barrier
          x[i] = alias[blockDim.x - 1u - threadIdx.x]
        }
    """)
    x = np.arange(3 * 48, dtype=np.float32)
    emulate(k, 3, 48, {"x": x}, shmem=48 * 4)
    np.testing.assert_array_equal(x, np.arange(3 * 48, dtype=np.float32).reshape(3, 48)[:, ::-1].reshape(-1))


def test_dynamic_shared_memory_is_sized_by_shmem():
    text = """
        kernel k(x: f32*) {
          extern shared s: f32[]
          s[threadIdx.x] = 1.0f
        }
    """
    k = kernel(text)
    emulate(k, 1, 8, {"x": np.zeros(1, np.float32)}, shmem=32)
    expect_error(lambda: emulate(k, 1, 8, {"x": np.zeros(1, np.float32)}, shmem=28), text, "s[threadIdx.x]",
                 "out-of-bounds store to s[7]", "[0, 7)", "thread (7, 0, 0) of block (0, 0, 0)")


def test_extern_shared_buffers_of_different_types_share_bytes():
    k = kernel("""
        kernel k(out: u32*) {
          extern shared f: f32[]
          extern shared bits: u32[]
          f[threadIdx.x] = (f32)threadIdx.x + 1.0f
          barrier
          out[threadIdx.x] = bits[threadIdx.x]
        }
    """)
    out = np.zeros(8, np.uint32)
    emulate(k, 1, 8, {"out": out}, shmem=8 * 4)
    np.testing.assert_array_equal(out, (np.arange(8, dtype=np.float32) + 1).view(np.uint32))


def test_uninitialized_local_memory_reads_as_garbage():
    # A read of never-written shared memory is an error (tests/test_emulator_oracle.py).
    k = kernel("""
        kernel k(i: i32*) {
          local l: i32[4]
          i[threadIdx.x] = l[threadIdx.x % 4u]
        }
    """)
    i = np.zeros(32, np.int32)
    emulate(k, 1, 32, {"i": i})
    assert (i == np.iinfo(np.int32).max).all()


def test_local_arrays_are_private_per_thread():
    k = kernel("""
        kernel k(out: i32*) {
          local buf: i32[8]
          for j: i32 = 0 to 8 step 1 {
            buf[j] = j * (i32)threadIdx.x
          }
          var s: i32 = 0
          for j2: i32 = 0 to 8 step 1 {
            s = s + buf[7 - j2]
          }
          out[blockIdx.x * blockDim.x + threadIdx.x] = s
        }
    """)
    out = np.zeros(2 * 40, np.int32)
    emulate(k, 2, 40, {"out": out})
    np.testing.assert_array_equal(out, 28 * np.tile(np.arange(40), 2))


def test_constant_buffer_from_init_and_from_globals():
    text = """
        kernel poly(n: i32, x: const f32*, y: f32*) {
          constant coef: f32[4] = {1.0f, 2.0f, 0.5f}
          var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
          if (i < n) {
            y[i] = coef[0] + x[i] * (coef[1] + x[i] * (coef[2] + x[i] * coef[3]))
          }
        }
    """
    k = kernel(text)
    x = np.linspace(-1, 1, 50).astype(np.float32)
    y = np.zeros_like(x)
    emulate(k, 1, 64, {"n": 50, "x": x, "y": y})
    np.testing.assert_allclose(y, 1 + x * (2 + x * 0.5), rtol=1e-6)  # coef[3] zero-filled
    coef = np.array([0, 0, 0, 1], dtype=np.float32)
    emulate(k, 1, 64, {"n": 50, "x": x, "y": y}, globals={"coef": coef})
    np.testing.assert_allclose(y, x ** 3, rtol=1e-6)


def test_device_buffer_writes_are_visible_through_globals():
    k = kernel("""
        kernel count(n: i32, x: const i32*) {
          device hist: u32[4][2]
          var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
          if (i < n) {
            atomic.add hist[x[i] % 4][x[i] % 2], 1u
          }
        }
    """)
    x = rng().integers(0, 100, 500).astype(np.int32)
    hist = np.zeros(8, dtype=np.uint32)
    emulate(k, 4, 128, {"n": 500, "x": x}, globals={"hist": hist})
    emulate(k, 4, 128, {"n": 500, "x": x}, globals={"hist": hist})
    expected = np.zeros((4, 2), np.uint32)
    np.add.at(expected, (x % 4, x % 2), 2)
    np.testing.assert_array_equal(hist.reshape(4, 2), expected)


# --------------------------------------------------------------------------- control flow


def test_divergent_if_else_chain():
    k = kernel("""
        kernel k(x: const i32*, out: i32*) {
          var i: u32 = threadIdx.x
          var v: i32 = x[i]
          if (v < 0) {
            out[i] = -v
          } else if (v % 2 == 0) {
            out[i] = v / 2
            if (v > 10) {
              out[i] = out[i] + 1000
            }
          } else {
            out[i] = 3 * v + 1
          }
        }
    """)
    x = rng().integers(-50, 50, 64).astype(np.int32)
    out = np.zeros(64, np.int32)
    emulate(k, 1, 64, {"x": x, "out": out})
    expected = np.where(x < 0, -x, np.where(x % 2 == 0, x // 2 + np.where(x > 10, 1000, 0), 3 * x + 1))
    np.testing.assert_array_equal(out, expected)


def test_break_continue_return():
    k = kernel("""
        kernel k(n: i32, out: i32*) {
          var t: i32 = (i32)threadIdx.x
          if (t >= n) {
            return
          }
          var acc: i32 = 0
          var j: i32 = 0
          while (j < 100) {
            if (j % 3 == 0) {
              continue
            }
            if (j > t) {
              break
            }
            acc = acc + j
          } update {
            j = j + 1
          }
          out[t] = acc * 1000 + j
        }
    """)
    out = np.full(64, -1, np.int32)
    emulate(k, 1, 64, {"n": 50, "out": out})
    expected = []
    for t in range(50):
        acc, j = 0, 0
        while j < 100:
            if j % 3 != 0:
                if j > t:
                    break
                acc += j
            j += 1
        expected.append(acc * 1000 + j)
    np.testing.assert_array_equal(out[:50], expected)
    assert (out[50:] == -1).all()


def test_return_inside_loop_and_barrier_after_it():
    # Threads that return do not take part in later barriers.
    k = kernel("""
        kernel k(out: i32*) {
          shared s: i32[64]
          var t: i32 = (i32)threadIdx.x
          for j: i32 = 0 to 10 step 1 {
            if (j == 3 && t >= 40) {
              return
            }
          }
          s[t] = t * t
          barrier
          out[t] = s[39 - t]
        }
    """)
    out = np.full(64, -1, np.int32)
    emulate(k, 1, 64, {"out": out})
    np.testing.assert_array_equal(out[:40], (39 - np.arange(40)) ** 2)
    assert (out[40:] == -1).all()


def test_thread_dependent_trip_counts_and_nested_break():
    k = kernel("""
        kernel k(out: i32*) {
          var t: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
          var acc: i32 = 0
          for j: i32 = t % 7 to t step 2 {
            for q: i32 = 0 to 100 step 1 {
              if (q > j % 5) {
                break
              }
              acc = acc + q
            }
            acc = acc + j
          }
          out[t] = acc
        }
    """)
    out = np.zeros(3 * 33, np.int32)
    emulate(k, 3, 33, {"out": out})
    expected = [sum(j + sum(range(j % 5 + 1)) for j in range(t % 7, t, 2)) for t in range(99)]
    np.testing.assert_array_equal(out, expected)


def test_short_circuit_and_select_never_load_out_of_bounds():
    k = kernel("""
        kernel k(n: i32, x: const f32*, out: i32*) {
          var i: i32 = (i32)threadIdx.x
          var pos: bool = i < n && x[i] > 0.0f
          var neg: bool = i >= n || x[i] < 0.0f
          var v: f32 = i < n ? x[i] : -1.0f
          out[i] = (pos ? 1 : 0) + (neg ? 10 : 0) + (i32)(v * 100.0f) * 100
        }
    """)
    x = np.array([0.5, -0.25, 0.0], np.float32)
    out = np.zeros(8, np.int32)
    emulate(k, 1, 8, {"n": 3, "x": x, "out": out})
    np.testing.assert_array_equal(out, [5001, -2490, 0] + [-10000 + 10] * 5)


def test_loop_variable_uniform_and_divergent_assignment():
    # A variable held as a scalar for the whole chunk must split when one branch assigns it.
    k = kernel("""
        kernel k(n: i32, out: i32*) {
          var v: i32 = n
          if (threadIdx.x % 2u == 0u) {
            v = v + 1
          }
          n = n * 2
          out[threadIdx.x] = v + n
        }
    """)
    out = np.zeros(6, np.int32)
    emulate(k, 1, 6, {"n": 5, "out": out})
    np.testing.assert_array_equal(out, [16, 15, 16, 15, 16, 15])


# --------------------------------------------------------------------------- expected errors


def test_error_partial_barrier():
    text = """
        kernel k(x: f32*) {
          if (threadIdx.x < 16u) {
            barrier
          }
        }
    """
    err = expect_error(lambda: emulate(kernel(text), 2, 32, {"x": np.zeros(1, np.float32)}), text, "barrier",
                       "barrier reached by only some threads of block (0, 0, 0)", "16 of its 32",
                       "thread (16, 0, 0)")
    assert "<ir>:3:5: error:" in str(err)


def test_barrier_under_block_uniform_condition_is_fine():
    k = kernel("""
        kernel k(x: i32*) {
          if (blockIdx.x % 2u == 0u) {
            barrier
            x[blockIdx.x * blockDim.x + threadIdx.x] = 1
          }
        }
    """)
    x = np.zeros(4 * 8, np.int32)
    emulate(k, 4, 8, {"x": x})
    np.testing.assert_array_equal(x.reshape(4, 8).sum(axis=1), [8, 0, 8, 0])


def test_error_barrier_in_loop_with_thread_dependent_trip_count():
    text = """
        kernel k(x: f32*) {
          for j: u32 = 0u to threadIdx.x step 1u {
            barrier
          }
        }
    """
    expect_error(lambda: emulate(kernel(text), 1, 4, {"x": np.zeros(1, np.float32)}), text, "barrier",
                 "barrier reached by only some threads of block (0, 0, 0)", "thread (0, 0, 0)")


def test_error_out_of_bounds_load_from_pointer():
    text = """
        kernel k(n: i32, x: const f32*, y: f32*) {
          var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
          y[i] = x[i + 1]
        }
    """
    x = np.zeros(64, np.float32)
    y = np.zeros(65, np.float32)
    expect_error(lambda: emulate(kernel(text), 2, 32, {"n": 64, "x": x, "y": y}), text, "x[i + 1]",
                 "out-of-bounds load from x[64]", "x has 64 elements", "thread (31, 0, 0) of block (1, 0, 0)")


def test_error_out_of_bounds_store_negative_index():
    text = """
        kernel k(y: f32*) {
          y[(i32)threadIdx.x - 1] = 1.0f
        }
    """
    expect_error(lambda: emulate(kernel(text), 1, 4, {"y": np.zeros(4, np.float32)}), text, "y[",
                 "out-of-bounds store to y[-1]", "thread (0, 0, 0)")


def test_error_out_of_bounds_per_dimension_of_shared_array():
    text = """
        kernel k(y: f32*) {
          shared t: f32[4][8]
          t[threadIdx.y][threadIdx.x] = 0.0f
        }
    """
    # 4 x 8 elements in total, but x runs to 9: the check is per dimension, not on the flat index.
    expect_error(lambda: emulate(kernel(text), 1, (10, 2), {"y": np.zeros(1, np.float32)}), text, "t[threadIdx.y]",
                 "out-of-bounds store to t[0][8]", "index 8 in dimension 2 is outside [0, 8)",
                 "shared buffer t[4][8]", "thread (8, 0, 0)")


def test_error_wrong_argument_dtype_layout_and_missing():
    k = kernel(SAXPY)
    x = np.zeros(8, np.float32)
    with pytest.raises(UserError, match=r"argument 'x' of kernel 'saxpy' .* must have dtype float32, got float64"):
        emulate(k, 1, 8, {"n": 8, "a": 1.0, "x": np.zeros(8), "y": x})
    with pytest.raises(UserError, match=r"argument 'y' .* must be C-contiguous"):
        emulate(k, 1, 8, {"n": 8, "a": 1.0, "x": x, "y": np.zeros(16, np.float32)[::2]})
    with pytest.raises(UserError, match=r"missing argument for parameter 'a' of kernel 'saxpy'"):
        emulate(k, 1, 8, {"n": 8, "x": x, "y": x})
    with pytest.raises(UserError, match=r"has no parameter 'z'"):
        emulate(k, 1, 8, {"n": 8, "a": 1.0, "x": x, "y": x, "z": 1})
    with pytest.raises(UserError, match=r"argument 'n' .* must be an integer, got 2.5"):
        emulate(k, 1, 8, {"n": 2.5, "a": 1.0, "x": x, "y": x})
    with pytest.raises(UserError, match=r"argument 'x' .* must be a numpy array"):
        emulate(k, 1, 8, {"n": 8, "a": 1.0, "x": [0.0] * 8, "y": x})
    with pytest.raises(UserError, match=r"takes 4 arguments, got 3"):
        emulate(k, 1, 8, [8, 1.0, x])
    err = expect_error(lambda: emulate(k, 1, 8, {"n": 8, "a": 1.0, "x": np.zeros(8, np.int32), "y": x}),
                       SAXPY, "x: const", "argument 'x'")
    assert err.loc is not None


def test_error_bad_launch_configuration_and_stage():
    k = kernel(SAXPY)
    args = {"n": 1, "a": 1.0, "x": np.zeros(1, np.float32), "y": np.zeros(1, np.float32)}
    with pytest.raises(UserError, match="grid must be an int or a tuple of 1 to 3 ints"):
        emulate(k, (1, 1, 1, 1), 1, args)
    with pytest.raises(UserError, match=r"block.x = 0 is outside"):
        emulate(k, 1, 0, args)
    with pytest.raises(UserError, match="at most 1024"):
        emulate(k, 1, (64, 32), args)
    with pytest.raises(UserError, match="shmem"):
        emulate(k, 1, 1, args, shmem=-4)
    cpu = parse_kernel("kernel k(x: f32*) stage cpu {\n  x[0] = 1.0f\n}\n")
    with pytest.raises(UserError, match="GPU-form"):
        emulate(cpu, 1, 1, {"x": np.zeros(1, np.float32)})


def test_error_globals_mismatch():
    k = kernel("""
        kernel k(y: f32*) {
          constant c: f32[4]
          y[0] = c[0]
        }
    """)
    y = np.zeros(1, np.float32)
    with pytest.raises(UserError, match=r"globals\['c'\] has dtype float64"):
        emulate(k, 1, 1, {"y": y}, globals={"c": np.zeros(4)})
    with pytest.raises(UserError, match=r"globals\['c'\] has 3 elements, the buffer has 4"):
        emulate(k, 1, 1, {"y": y}, globals={"c": np.zeros(3, np.float32)})


def test_error_integer_division_by_zero_in_an_active_lane_only():
    text = """
        kernel k(d: const i32*, out: i32*) {
          var t: u32 = threadIdx.x
          if (d[t] != 0) {
            out[t] = 100 / d[t]
          }
          out[t] = out[t] + 7 % d[t]
        }
    """
    d = np.array([3, 0, -7, 5], np.int32)
    expect_error(lambda: emulate(kernel(text), 1, 4, {"d": d, "out": np.zeros(4, np.int32)}), text, "7 % d[t]",
                 "integer remainder by zero", "thread (1, 0, 0) of block (0, 0, 0)")


def test_error_runaway_loop():
    import polypy.emulator.execute as execute

    text = """
        kernel k(x: i32*) {
          while (x[0] == 0) {
          }
        }
    """
    old = execute.MAX_LOOP_ITERATIONS
    execute.MAX_LOOP_ITERATIONS = 1000
    try:
        expect_error(lambda: emulate(kernel(text), 1, 1, {"x": np.zeros(1, np.int32)}), text, "while",
                     "loop still running after 1000 iterations")
    finally:
        execute.MAX_LOOP_ITERATIONS = old


def test_error_message_renders_source_line(tmp_path):
    path = tmp_path / "k.ir"
    text = ir("""
        kernel k(y: f32*) {
          y[threadIdx.x] = 1.0f
        }
    """)
    path.write_text(text)
    k = parse_kernel(text, filename=str(path))
    with pytest.raises(UserError) as info:
        emulate(k, 1, 4, {"y": np.zeros(2, np.float32)})
    rendered = info.value.render()
    assert rendered.splitlines()[0] == f"{path}:2:3: error: " + info.value.message
    assert rendered.splitlines()[1:] == ["  y[threadIdx.x] = 1.0f", "  ^"]
    assert loc_of(text, "y[threadIdx") == (2, 3)


def test_nested_loops_with_continue_and_break_at_both_levels():
    k = kernel("""
        kernel k(out: i32*) {
          var t: i32 = (i32)threadIdx.x
          var acc: i32 = 0
          var i: i32 = 0
          while (true) {
            if (i == t % 5 + 2) {
              break
            }
            if (i == 1) {
              continue
            }
            for j: i32 = 0 to 10 step 1 {
              if (j % 2 == 1) {
                continue
              }
              if (j > t % 7) {
                break
              }
              acc = acc + 100 * i + j
            }
          } update {
            i = i + 1
          }
          out[t] = acc
        }
    """)
    out = np.zeros(40, np.int32)
    emulate(k, 1, 40, {"out": out})
    expected = []
    for t in range(40):
        acc = 0
        for i in range(t % 5 + 2):
            if i == 1:
                continue
            for j in range(10):
                if j % 2 == 1:
                    continue
                if j > t % 7:
                    break
                acc += 100 * i + j
        expected.append(acc)
    assert out.tolist() == expected


def test_masked_off_lanes_raise_no_warnings():
    import warnings

    k = kernel("""
        kernel k(d: const i32*, f: const f32*, out: f32*) {
          var t: u32 = threadIdx.x
          var q: i32 = 0
          if (d[t] != 0) {
            q = 1000 / d[t]
          }
          var r: f32 = d[t] != 0 ? 1.0f / (f32)d[t] : log(f[t])
          out[t] = (f32)q + r + sqrt(f[t]) + 1.0f / f[t]
        }
    """)
    d = np.array([0, 2, 0, -4], np.int32)
    f = np.array([0.0, -1.0, 1e-45, np.inf], np.float32)
    out = np.zeros(4, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        emulate(k, 1, 4, {"d": d, "f": f, "out": out})
    assert np.isnan(out[0]) and np.isnan(out[1])  # log(0) + 1/0 = -inf + inf; sqrt(-1)
    assert out[2] == np.inf and out[3] == np.inf


def test_wide_and_unsigned_index_types():
    text = """
        kernel k(x: f32*, big: u64) {
          x[(u64)threadIdx.x + 2ul] = 1.0f
          x[(i64)threadIdx.x] = x[(u16)threadIdx.x + 2:u16]
          x[big] = 0.0f
        }
    """
    x = np.zeros(4, np.float32)
    expect_error(lambda: emulate(kernel(text), 1, 2, {"x": x, "big": 2**64 - 1}), text, "x[big]",
                 "out-of-bounds store to x[18446744073709551615]", "x has 4 elements")
    assert x.tolist() == [1.0, 1.0, 1.0, 1.0]


def test_declarations_inside_divergent_loops_and_local_atomics():
    k = kernel("""
        kernel k(out: i32*) {
          local cnt: i32[2]
          cnt[0] = 0
          cnt[1] = 0
          for j: i32 = 0 to (i32)threadIdx.x step 1 {
            var odd: bool = j % 2 == 1
            if (odd) {
              var inc: i32 = j
              atomic.add cnt[1], inc
            } else {
              atomic.add cnt[0], 1
            }
          }
          var old: i32 = 0
          old = atomic.exch cnt[0], 0
          out[threadIdx.x] = old * 1000 + cnt[1] + cnt[0]
        }
    """)
    out = np.zeros(16, np.int32)
    emulate(k, 1, 16, {"out": out})
    assert out.tolist() == [((t + 1) // 2) * 1000 + sum(j for j in range(t) if j % 2) for t in range(16)]


def test_error_for_loop_with_zero_step():
    text = """
        kernel k(x: i32*) {
          for j: i32 = 0 to 10 step (i32)threadIdx.x {
            x[threadIdx.x] = j
          }
        }
    """
    expect_error(lambda: emulate(kernel(text), 1, 4, {"x": np.zeros(4, np.int32)}), text, "for j",
                 "for loop with step 0 never ends", "thread (0, 0, 0)")

"""The polyhedral model: domains, exactness, integer semantics, aliasing, the dump."""
from __future__ import annotations

import pytest

from polypy.errors import InternalError
from polypy.ir import parse_kernel
from polypy.passes import SIMPLIFY, run_pipeline
from polypy.poly import Launch, build_model, dump_model, footprint, format_path
from polypy.poly.alias import alias_kind

GID = "(i32)(blockIdx.x * blockDim.x + threadIdx.x)"


def prepare(text: str):
    return run_pipeline(parse_kernel(text), SIMPLIFY)


def accesses(text: str, launch: Launch | None = None) -> dict[str, object]:
    model = build_model(prepare(text), launch=launch)
    return {str(a.id): a for a in model.accesses}


KERNEL = f"""kernel k(n: i32, idx: const i32*, x: const f32*, y: f32*) {{
  shared s: f32[64]
  y[{GID}] = x[{GID}]
  if ({GID} < n) {{
    s[threadIdx.x] = x[idx[{GID}]]
  }}
  if (x[0] > 0.0f) {{
    y[0] = 1.0f
  }}
  for i: i32 = 0 to n step 2 {{
    y[i] = s[threadIdx.x]
  }}
  var m: i32 = n
  while (m > 0) {{
    y[m] = 0.0f
    barrier
  }} update {{
    m = m / 2
  }}
}}
"""


def test_exactness_of_each_access() -> None:
    a = accesses(KERNEL)
    assert a["body[0]#0"].exact and a["body[0]#1"].exact  # x[i], y[i]
    assert not a["body[1].then[0]#0"].index_exact and a["body[1].then[0]#1"].exact  # x[idx[i]], idx[i]
    assert a["body[1].then[0]#2"].exact  # s[threadIdx.x] under an affine condition
    assert a["body[2].then[0]#0"].index_exact and not a["body[2].then[0]#0"].domain_exact
    assert a["body[3].body[0]#1"].exact  # y[i] in an exact loop with step 2
    assert not a["body[5].body[0]#0"].index_exact  # y[m], m is assigned
    assert a["body[5].body[0]#0"].domain_exact  # a top-level loop: exact given its trip count


def test_loops_and_barriers() -> None:
    model = build_model(prepare(KERNEL))
    loops = {lp.dim: lp for lp in model.loops}
    assert loops["i"].exact and loops["i"].trips is None
    (w,) = [lp for lp in model.loops if not lp.exact]
    assert w.dim.startswith("iter(while") and w.trips == f"trips({w.dim})"
    (b,) = model.barriers
    assert format_path(b.path) == "body[5].body[1]" and b.exact
    assert w.dim in b.time and f"trips({w.dim})" in str(b.domain)


def test_nested_unknown_loop_is_not_exact() -> None:
    model = build_model(prepare("""kernel k(n: i32, y: f32*) {
  for i: i32 = 0 to 4 step 1 {
    var m: i32 = n
    while (m > 0) {
      barrier
    } update {
      m = m - 1
    }
  }
}
"""))
    assert not model.barriers[0].exact


def test_block_values_and_assumptions() -> None:
    model = build_model(prepare(KERNEL))
    assert [bv.name for bv in model.block_values] == ["(blockIdx.x * blockDim.x)"]
    assert model.block_values[0].stride == (0, 0, 1)
    text = " ".join(model.assumptions)
    assert "blockDim.y, blockDim.z, gridDim.y, gridDim.z == 1" in text
    assert "2**31" in text
    assert model.thread_dims == (0,)
    concrete = build_model(prepare(KERNEL), launch=Launch.of(4, (32, 2), {"n": 7, "scale": 1.5}))
    assert concrete.block_values == () and concrete.assumptions == ()
    assert concrete.thread_dims == (0, 1)


def test_grid_uniform_product_is_a_parameter() -> None:
    model = build_model(prepare(f"""kernel k(n: i32, m: i32, y: f32*) {{
  y[n * m + {GID}] = 1.0f
}}
"""))
    (a,) = model.accesses
    assert a.exact
    assert "(n * m)" in model.uniform_params


def test_unsigned_wrap_is_exact() -> None:
    text = """kernel k(y: f32*, z: f32*) {
  y[threadIdx.x - 1u] = 1.0f
  z[(i32)(threadIdx.x - 1u)] = 1.0f
}
"""
    fp = footprint(prepare(text), 1, 4, {})
    assert (fp["y"].write.lo, fp["y"].write.hi) == (0, 2**32 - 1)  # thread 0 wraps around
    assert (fp["z"].write.lo, fp["z"].write.hi) == (-1, 2)
    guarded = """kernel k(y: f32*) {
  if (threadIdx.x > 0u) {
    y[threadIdx.x - 1u] = 1.0f
  }
}
"""
    fp = footprint(prepare(guarded), 1, 4, {})
    assert (fp["y"].write.lo, fp["y"].write.hi, fp["y"].write.exact) == (0, 2, True)


@pytest.mark.parametrize("expr,lo,hi", [
    ("((i32)threadIdx.x - 3) / 2", -1, 0),  # C division truncates toward zero
    ("((i32)threadIdx.x - 3) % 2", -1, 0),  # remainder takes the dividend's sign
    ("((i32)threadIdx.x - 3) >> 1", -2, 0),  # arithmetic shift is a floor division
    ("((i32)threadIdx.x + 2) & 3", 0, 3),
    ("min((i32)threadIdx.x, 2) * 3 + 1", 1, 7),
    ("(i32)threadIdx.x < 2 ? 10 : 20", 10, 20),
])
def test_integer_semantics(expr: str, lo: int, hi: int) -> None:
    fp = footprint(prepare(f"kernel k(y: f32*) {{\n  y[{expr}] = 1.0f\n}}\n"), 1, 4, {})
    assert (fp["y"].write.lo, fp["y"].write.hi, fp["y"].write.exact) == (lo, hi, True)


def test_fixed_size_arrays_are_accessed_in_bounds() -> None:
    a = accesses("""kernel k(idx: const i32*) {
  shared s: f32[8][4]
  s[idx[0]][threadIdx.x] = 1.0f
}
""")
    store = a["body[0]#1"]
    assert not store.index_exact and store.elems[1] is not None
    assert "threadIdx.x <= 3" in str(store.domain)  # out-of-bounds instances are undefined


def test_delinearized_row_major_index() -> None:
    text = """kernel k(w: i32, h: i32, b: f32*) {
  var x: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  var y: i32 = (i32)(blockIdx.y * blockDim.y + threadIdx.y)
  if (GUARD) {
    b[y * w + x] = 1.0f
  }
}
"""
    (a,) = accesses(text.replace("GUARD", "x < w && y < h")).values()
    assert a.elems[0] is None and a.delin[0] is not None and a.delin[0].factor == "(w)"
    assert a.index_exact
    (a,) = accesses(text.replace("GUARD", "y < h")).values()  # x may exceed the row
    assert not a.index_exact


def test_model_rejects_cpu_form() -> None:
    with pytest.raises(InternalError):
        build_model(parse_kernel("kernel k() stage cpu {\n}\n"))


def test_alias_rules() -> None:
    k = parse_kernel("""kernel k(a: f32*, b: const f32*, r: f32* restrict) {
  shared s: f32[4]
  shared t: f32[4]
  extern shared e: f32[]
  extern shared f: f64[]
  device g: f32[4]
  local l: f32[4]
}
""")
    assert alias_kind(k, "a", "a") == "same"
    assert alias_kind(k, "a", "b") == "any"  # const does not prevent aliasing
    assert alias_kind(k, "a", "r") is None  # restrict does
    assert alias_kind(k, "a", "g") == "any"  # a pointer may point to a __device__ array
    assert alias_kind(k, "s", "t") is None
    assert alias_kind(k, "e", "f") == "bytes"
    assert alias_kind(k, "s", "e") is None
    assert alias_kind(k, "a", "s") is None and alias_kind(k, "l", "s") is None


def test_dump_lists_every_access_with_its_relation() -> None:
    text = dump_model(prepare(KERNEL))
    assert text.startswith("// polyhedral model of kernel k (symbolic launch)")
    assert "// assumes: launch dimensions the kernel never reads are 1" in text
    assert "loop i body[3] (line 10): exact (dimension = loop variable)" in text
    assert "access body[0]#0 read x[(i32)(blockIdx.x * blockDim.x + threadIdx.x)] (line 3): exact" in text
    assert "access body[1].then[0]#0 read x[idx[" in text and "index unknown" in text
    assert "domain over-approximated" in text
    assert "-> s[threadIdx.x]" in text
    assert "barrier body[5].body[1] (line 16): exact" in text


def test_launch_of_normalizes_shapes_and_scalars() -> None:
    launch = Launch.of((4, 2), 32, {"n": 10, "alpha": 0.5, "flag": True})
    assert launch.grid == (4, 2, 1) and launch.block == (32, 1, 1)
    assert launch.scalar("n") == 10 and launch.scalar("flag") == 1 and launch.scalar("alpha") is None
    with pytest.raises(ValueError):
        Launch.of(0, 32)

"""Records and vector types in device memory (issue 14, structs).

``__constant__``/``__device__`` arrays of ``float3`` and of records keep the host's declaration in
a whole program; kernels address their scalar slots through it. Pointer parameters to records of
mixed member types are buffers of records: each member access is a load or store of the member's
type at its byte offset (clang's layout), identical in the emulator, the LLVM and the C backends.
Each program in ``tests/programs/`` goes through ``polypy translate`` + ``c++ -O2 -fopenmp`` and
through ``polypy run --emulate``; both must print what NumPy computes.
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


def _polypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=300)


def _translated_and_emulated(name: str, tmp_path: pathlib.Path) -> tuple[str, str]:
    """What the translated C++ program and the emulated program print."""
    need_compiler(cpp=True)
    source = PROGRAMS / f"{name}.cu"
    out = tmp_path / f"{name}.cpp"
    translated = _polypy("translate", str(source), "-o", str(out))
    assert translated.returncode == 0, translated.stderr
    exe = tmp_path / name
    built = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", str(out), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    native = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert native.returncode == 0, native.stderr
    emulated = _polypy("run", str(source), "--emulate")
    assert emulated.returncode == 0, emulated.stderr
    return native.stdout, emulated.stdout


# --------------------------------------------------------------------------- module arrays


def _struct_symbols_expected() -> str:
    f32 = np.float32
    n = 1000
    i = np.arange(n)
    x = (i % 13).astype(f32) - f32(6)
    scale = np.array([2.0, -1.0, 0.5], f32)[i % 3]
    shift = np.array([0.5, 0.25, -3.0], f32)[i % 3]
    r, c = i % 2, i % 3
    tx, ty = 7 * (r + 1) + c, r - c
    # flux[0].x + 10 flux[0].z + 100 flux[1].y, in the kernel's float order
    out = scale * x + shift + f32(1) + f32(30) + f32(500) + (tx - 2 * ty).astype(f32)
    return ("sum %.3f out[0] %.3f out[1] %.3f out[5] %.3f\n" % (out.astype(np.float64).sum(), out[0], out[1], out[5])
            + "table[1][2] = (%d, %d)\n" % (7 * 2 + 2, 1 - 2))


def test_members_of_constant_and_device_record_arrays(tmp_path: pathlib.Path) -> None:
    # Used to read flux[1].y as the C++ element flux[4] of the host's `float3 flux[2]`.
    native, emulated = _translated_and_emulated("struct_symbols", tmp_path)
    expected = _struct_symbols_expected()
    assert outputs_match(native, expected, 1e-6) is None, native
    assert outputs_match(emulated, expected, 1e-6) is None, emulated


def _int_records_expected() -> str:
    n = 10
    i = np.arange(n)
    pairs = np.array([10 - 1, 20 - 2, 30 - 3])[i % 3]
    first = 3 * i + 7 + pairs + np.where(i % 2 == 0, 1 * 2, 3 * 4) + 5 + np.where(i % 2 == 0, 7, 8)
    # the second launch (i < 5) reads what `store` wrote: nests[0].c[1] = 6, nests[1].p.b = 13
    out = np.where(i < 5, first + np.where(i % 2 == 0, 6 + 13, 0), first)
    return ("zero 0 0 0 0\n" + "out " + " ".join(map(str, out)) + "\n"
            + "counter 11 15\n" + "nests 0 0 0 6 0 13 0 0\n")


def test_integer_records_in_module_memory_without_initializer_are_zero(tmp_path: pathlib.Path) -> None:
    # `__constant__ struct Common { int a; int b; } common;` (integer members only, no initializer)
    # was refused: "initializers of __constant__/__device__ arrays must be constants" (clang's
    # implicit default construction was read as the initializer).
    native, emulated = _translated_and_emulated("int_records", tmp_path)
    expected = _int_records_expected()
    assert native == expected
    assert emulated == expected


def test_integer_records_in_module_memory_through_the_api(tmp_path: pathlib.Path) -> None:
    # The same variables through polypy.compile: zero without initializer, the brace lists in place.
    import polypy

    src = tmp_path / "int_records.cu"
    src.write_text((PROGRAMS / "int_records.cu").read_text().split("int main")[0])
    mod = polypy.compile(str(src))
    assert {k: v.tolist() for k, v in mod.globals.items()} == {
        "common": [0, 0], "pairs": [0] * 6, "fixed": [1, 2, 3, 4], "counter": [0, 0], "nests": [0] * 8,
        "nest": [5, 6, 7, 8]}
    mod.globals["common"][:] = [3, 7]
    mod.globals["pairs"][:] = [10, 1, 20, 2, 30, 3]
    i = np.arange(10)
    want = 3 * i + 7 + np.array([9, 18, 27])[i % 3] + np.where(i % 2 == 0, 2, 12) + 5 + np.where(i % 2 == 0, 7, 8)
    for launch in (mod.mix, mod.mix.emulate):
        out = np.zeros(10, np.int32)
        launch[2, 8](out, np.int32(10))
        np.testing.assert_array_equal(out, want)


# --------------------------------------------------------------------------- records of mixed types


def _struct_records_expected() -> str:
    n, order_len, threshold = 37, 8, 20
    i = np.arange(n)
    num_keys = 1 + i % order_len
    keys = (i[:, None] * 7 + np.arange(order_len)[None, :] * 13) % 50
    weight = (i % 5).astype(np.float32)
    order = (i * 11) % n
    counts = np.zeros(n, np.int64)
    total = np.zeros(n, np.int64)
    leaf = np.ones(n, bool)
    for bx in range(n):
        b = order[bx]
        c = int(((np.arange(order_len) < num_keys[b]) & (keys[b] < threshold)).sum())
        counts[bx] = c
        leaf[b] = c == 0
        weight[b] = weight[b] * np.float32(0.5) + np.float32(c)
        total[b] = sum((1000 * k + b) * (b - k) for k in range(3))
    # copy_nodes: dst[n-1-i] takes location + nei[0].x, num_keys, weight and nei[0] from src[i]
    loc = (101 * i).sum()
    nei = (2 * i).sum()
    keys3 = num_keys[n - 4]
    csum = (counts * (i + 1)).sum()
    return (f"counts {csum} c[0] {counts[0]} c[5] {counts[5]}\n"
            + "copy: weight %.2f location %d nei %d keys[3] %d\n" % (weight.astype(np.float64).sum(), loc, nei, keys3)
            + f"nodes: total {total.sum()} leaves {leaf.sum()}\n")


def test_pointers_to_records_of_mixed_member_types_in_a_whole_program(tmp_path: pathlib.Path) -> None:
    # int/bool/long/float members, an int array member indexed by the thread, a nested array of
    # records, a pointer member never read, records copied member-wise and whole (a nested one).
    native, emulated = _translated_and_emulated("struct_records", tmp_path)
    expected = _struct_records_expected()
    assert outputs_match(native, expected, 1e-6) is None, native
    assert outputs_match(emulated, expected, 1e-6) is None, emulated


MIXED = """
struct Item { int id; float w; bool on; long long big; int arr[3]; };
__global__ void k(const Item* p, Item* q, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = p[i].w * (float)p[i].id;
  if (p[i].on) s += (float)p[i].big;
  for (int j = 0; j < 3; j++) s += (float)p[i].arr[j];
  out[i] = s;
  q[i] = p[i];
  q[i].w = s;
  q[i].arr[1] = p->arr[2] + i;
}
"""

ITEM = np.dtype({"names": ["id", "w", "on", "big", "arr"],
                 "formats": [np.int32, np.float32, np.bool_, np.int64, (np.int32, 3)],
                 "offsets": [0, 4, 8, 16, 24], "itemsize": 40})  # the C layout of `Item`


def _items(n: int) -> np.ndarray:
    p = np.zeros(n, ITEM)
    i = np.arange(n)
    p["id"], p["w"], p["on"], p["big"] = i, np.float32(0.5) + (i % 3), i % 2 == 0, (1 << 40) + 7 * i
    p["arr"] = (np.arange(3 * n) % 11).reshape(n, 3)
    return p


def _check_mixed(p: np.ndarray, q: np.ndarray, out: np.ndarray) -> None:
    n = len(p)
    want = (p["w"] * p["id"].astype(np.float32)) + np.where(p["on"], p["big"].astype(np.float32), np.float32(0))
    want = want + p["arr"].sum(axis=1).astype(np.float32)
    np.testing.assert_allclose(out, want, rtol=1e-6)
    for field in ("id", "on", "big"):
        np.testing.assert_array_equal(q[field], p[field])
    np.testing.assert_array_equal(q["w"], out)
    np.testing.assert_array_equal(q["arr"][:, [0, 2]], p["arr"][:, [0, 2]])
    np.testing.assert_array_equal(q["arr"][:, 1], p["arr"][0, 2] + np.arange(n))


def _mixed_kernel(tmp_path: pathlib.Path):
    from frontend.parse import parse_file
    from polypy.driver.pipelines import GPU_PIPELINE
    from polypy.passes import run_pipeline

    src = tmp_path / "mixed.cu"
    src.write_text(MIXED)
    return src, run_pipeline(parse_file(str(src)).kernel("k"), GPU_PIPELINE)


def test_mixed_records_are_one_view_per_member_type(tmp_path: pathlib.Path) -> None:
    from polypy.ir.types import PointerType

    _, k = _mixed_kernel(tmp_path)
    views = [(p.name, str(p.ptype)) for p in k.params if isinstance(p.ptype, PointerType)]
    assert views[:4] == [("p_i32", "i32* const"), ("p_f32", "f32* const"), ("p_bool", "bool* const"),
                         ("p_i64", "i64* const")]
    assert [(sp.name, sp.ctype, sp.members) for sp in k.source_params][0] == \
        ("p", "const Item *", (("", "p_i32"), ("", "p_f32"), ("", "p_bool"), ("", "p_i64")))


@pytest.mark.parametrize("backend", ["llvm", "emulator", "c"])
def test_mixed_records_through_every_backend(backend: str, tmp_path: pathlib.Path) -> None:
    n = 100
    p, q, out = _items(n), np.zeros(n, ITEM), np.zeros(n, np.float32)
    if backend == "llvm":
        import polypy

        src, _ = _mixed_kernel(tmp_path)
        polypy.compile(str(src)).k[(n + 31) // 32, 32](p, q, out, n)
    elif backend == "emulator":
        from polypy.emulator import emulate

        _, k = _mixed_kernel(tmp_path)
        emulate(k, (n + 31) // 32, 32, {"p": p, "q": q, "out": out, "n": n})
    else:
        from c_support import run_c

        _, k = _mixed_kernel(tmp_path)
        got = run_c(k, (n + 31) // 32, 32, {"p": p, "q": q, "out": out, "n": n})
        p, q, out = got["p"], got["q"], got["out"]
    _check_mixed(p, q, out)


def test_a_too_small_array_of_records_is_refused_before_the_launch(tmp_path: pathlib.Path) -> None:
    import polypy
    from polypy.errors import UserError

    src, _ = _mixed_kernel(tmp_path)
    n = 64
    q = np.zeros(n - 1, ITEM)
    with pytest.raises(UserError, match="q"):
        polypy.compile(str(src)).k[2, 32](_items(n), q, np.zeros(n, np.float32), n)
    assert not q["w"].any()  # nothing was written


@pytest.mark.parametrize("body, message, column", [
    ("struct R { int id; float* w; };\n"
     "__global__ void k(const R* p, float* out) { out[0] = p[1].w[0]; }\n",
     "member 'w' of type 'float *' of a record in device memory cannot be used in device code", 59),
    ("struct R { int id; float* w; };\n"
     "__global__ void k(const R* p, R* q) { q[0] = p[1]; }\n",
     "'const R' has a member 'w' of type 'float *': records with such members in device memory can only be "
     "used member by member", 46),
    ("struct __attribute__((packed)) R { char c; int id; };\n"
     "__global__ void k(R* p) { p[0].id = 1; }\n",
     "'R' is packed (member 'id' is not aligned to its type)", 22),
    ("struct R { int id; double w; };\n"
     "__global__ void k(R* p, float* x) { float* f = (float*)p; x[0] = f[0]; }\n",
     "pointer casts to or from records of mixed member types are not supported", 48),
    # clang accepts constexpr construction of a module variable; its values are not read: refused
    ("struct S { int a; int b; __host__ __device__ constexpr S() : a(5), b(1) {} };\n__constant__ S s;\n"
     "__global__ void k(int* x) { x[0] = s.a; }\n",
     "'s' is initialized by a constructor or default member initializers", 16),
    ("struct S { int a; float b; __host__ __device__ constexpr S() : a(5), b(1) {} };\n__device__ S s[2];\n"
     "__global__ void k(int* x) { x[0] = s[1].a; }\n",
     "'s' is initialized by a constructor or default member initializers", 14),
    ("struct S { int a = 5; int b = 0; };\n__constant__ S s;\n__global__ void k(int* x) { x[0] = s.a; }\n",
     "'s' is initialized by a constructor or default member initializers", 16),
])
def test_what_records_in_device_memory_cannot_do_is_a_located_error(body: str, message: str, column: int,
                                                                    tmp_path: pathlib.Path) -> None:
    src = tmp_path / "bad.cu"
    src.write_text(body)
    result = _polypy("translate", str(src), "-o", str(tmp_path / "bad.cpp"))
    assert result.returncode == 1 and not (tmp_path / "bad.cpp").exists()
    assert f"{src}:2:{column}: error: {message}" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


# --------------------------------------------------------------------------- pointers assigned later

LATER = """
struct Box { int offset; long long n; double scale; };
__global__ void k(const Box* boxes, const double* v, double* out, int nboxes) {
  const Box* b;
  const double* src;
  double* dst;
  b = &boxes[blockIdx.x];
  src = &v[b->offset];
  dst = out + b->offset;
  for (int j = threadIdx.x; j < (int)b->n; j += blockDim.x) {
    if (j % 2 == 0) {
      src = &v[b->offset + 1];
    } else {
      src = v + b->offset;
    }
    dst[j] = b->scale * src[j - (j % 2 == 0 ? 1 : 0)];
  }
}
"""


@pytest.mark.parametrize("backend", ["llvm", "emulator"])
def test_pointers_declared_without_initializer_take_their_buffer_from_the_first_assignment(
        backend: str, tmp_path: pathlib.Path) -> None:
    # Rodinia lavaMD: `FOUR_VECTOR* rA; ... rA = &d_rv_gpu[first_i];`
    box = np.dtype({"names": ["offset", "n", "scale"], "formats": [np.int32, np.int64, np.float64],
                    "offsets": [0, 8, 16], "itemsize": 24})
    boxes = np.zeros(5, box)
    boxes["n"] = [3, 7, 1, 10, 4]
    boxes["offset"] = np.concatenate([[0], np.cumsum(boxes["n"])[:-1]])
    boxes["scale"] = [0.5, 2.0, -1.0, 3.0, 1.5]
    total = int(boxes["n"].sum())
    v = np.linspace(-1.0, 2.0, total)
    out = np.zeros(total)
    src = tmp_path / "later.cu"
    src.write_text(LATER)
    if backend == "llvm":
        import polypy

        polypy.compile(str(src)).k[5, 4](boxes, v, out, 5)
    else:
        from frontend.parse import parse_file
        from polypy.driver.pipelines import GPU_PIPELINE
        from polypy.emulator import emulate
        from polypy.passes import run_pipeline

        emulate(run_pipeline(parse_file(str(src)).kernel("k"), GPU_PIPELINE), 5, 4,
                {"boxes": boxes, "v": v, "out": out, "nboxes": 5})
    want = np.concatenate([b["scale"] * v[b["offset"]:b["offset"] + b["n"]] for b in boxes])
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("body, message, column", [
    ("__global__ void k(float* a, float* b) {\n"
     "  float* p; a[0] = p[0]; p = b; }\n", "pointer 'p' is used before it is assigned", 20),
    # (re-pointed into another buffer: tests/test_pointer_choice.py)
])
def test_pointers_assigned_later_are_not_read_before(body: str, message: str, column: int,
                                                    tmp_path: pathlib.Path) -> None:
    src = tmp_path / "bad.cu"
    src.write_text(body)
    result = _polypy("translate", str(src), "-o", str(tmp_path / "bad.cpp"))
    assert result.returncode == 1, result.stdout
    assert f"{src}:2:{column}: error: {message}" in result.stderr, result.stderr


def test_a_constant_record_holding_pointers_needs_a_whole_program(tmp_path: pathlib.Path) -> None:
    # Rodinia heartwall: `__constant__ params_common_change d_common_change;` holds device pointers,
    # which only a whole program's runtime can resolve (tests/test_constant_pointers.py).
    src = tmp_path / "held.cu"
    src.write_text("struct Change { float* d_frame; int frame_no; };\n"
                   "__constant__ Change d_change;\n"
                   "__global__ void k(float* out) { out[0] = d_change.d_frame[d_change.frame_no]; }\n")
    result = _polypy("translate", str(src), "-o", str(tmp_path / "held.cpp"))
    assert result.returncode == 1
    assert (f"{src}:3:51: error: kernel 'k' reads pointers from __constant__ or __device__ memory ('d_change'): "
            "supported in whole programs only") in result.stderr, result.stderr


# --------------------------------------------------------------------------- module and block arrays of records

PARAMS = np.dtype({"names": ["n", "alpha", "flip", "beta", "tags"],
                   "formats": [np.int32, np.float32, np.bool_, np.float64, (np.int16, 3)],
                   "offsets": [0, 4, 8, 16, 24], "itemsize": 32})  # the C layout of `Params`


def _record_symbols_reference(params: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What kernel `mix` of tests/programs/record_symbols.cu computes: (out, results)."""
    f32 = np.float32
    table = np.array([(1, 2.0, True, 3.0, (4, 5, 6)), (7, 8.0, False, 9.0, (10, 11, 12))], PARAMS)
    p = params[0]
    sh = np.zeros(4, PARAMS)
    for i in range(4):
        sh[i] = (p["n"] + i, 0.0, i % 2 == 1, p["beta"] * i, (i, table[i % 2]["tags"][i % 3], 2 * i))
    loc0 = lambda i: table[1]["alpha"] if i % 2 == 0 else f32(0.5)  # noqa: E731 - loc[0].alpha of thread i
    out = np.array([p["alpha"] * f32(sh[3 - i]["n"]) + f32(1.0 if p["flip"] else 0.0) + f32(sh[3 - i]["beta"])
                    + f32(sh[3 - i]["tags"][1]) + loc0(i) for i in range(4)], f32)
    results = sh.copy()
    results["alpha"] = out
    return out, results


def test_records_of_mixed_types_in_constant_device_shared_and_local_arrays(tmp_path: pathlib.Path) -> None:
    native, emulated = _translated_and_emulated("record_symbols", tmp_path)
    params = np.array([(10, 0.25, True, 1.5, (0, 0, 0))], PARAMS)
    out, r = _record_symbols_reference(params)
    expected = "".join(f"{out[i]:.3f} n {r[i]['n']} beta {r[i]['beta']:.2f} tags {r[i]['tags'][0]} {r[i]['tags'][1]} "
                       f"{r[i]['tags'][2]} flip {int(r[i]['flip'])} alpha {r[i]['alpha']:.3f}\n" for i in range(4))
    assert outputs_match(native, expected, 1e-6) is None, native
    assert outputs_match(emulated, expected, 1e-6) is None, emulated


@pytest.mark.parametrize("backend", ["llvm", "emulator"])
def test_module_records_through_the_api_share_one_storage(backend: str, tmp_path: pathlib.Path) -> None:
    # The views of `params` (params_i32, params_f32, ...) are one storage: writing the record
    # through any of them sets every member; the brace initializer of `table` lands in place.
    import polypy

    src = tmp_path / "records.cu"
    src.write_text((PROGRAMS / "record_symbols.cu").read_text().split("int main")[0])
    mod = polypy.compile(str(src))
    assert {"params_i32", "params_f32", "params_bool", "params_f64", "params_i16"} <= set(mod.globals)
    table = mod.globals["table_f64"].view(np.uint8).view(PARAMS)
    np.testing.assert_array_equal(table["tags"], [[4, 5, 6], [10, 11, 12]])
    assert table["flip"].tolist() == [True, False] and table["beta"].tolist() == [3.0, 9.0]
    params = np.array([(-3, 1.75, False, -0.5, (1, 2, 3))], PARAMS)
    mod.globals["params_i32"].view(np.uint8).view(PARAMS)[:] = params
    out = np.zeros(4, np.float32)
    if backend == "llvm":
        mod.mix[1, 4](out)
    else:
        mod.mix.emulate[1, 4](out)
    want_out, want = _record_symbols_reference(params)
    np.testing.assert_allclose(out, want_out, rtol=1e-6)
    got = mod.globals["results_f32"].view(np.uint8).view(PARAMS)
    for field in PARAMS.names:
        np.testing.assert_allclose(got[field], want[field], rtol=1e-6)


def test_views_of_a_module_record_print_and_parse_back(tmp_path: pathlib.Path) -> None:
    from frontend.parse import parse_file
    from polypy.ir import parse_module, print_module

    src = tmp_path / "records.cu"
    src.write_text((PROGRAMS / "record_symbols.cu").read_text().split("int main")[0])
    module = parse_file(str(src))
    text = print_module(module)
    assert "constant params_f32: f32[8] in params" in text
    assert "device results_i16: i16[64] in results" in text
    assert parse_module(text).globals == module.globals


DEVICE_FUNCTIONS = """
struct Cell { int count; float mass; long long id; float pos[3]; };
__device__ float weigh(const Cell& c) { return c.mass * (float)c.count; }
__device__ float first(const float* p) { return p[0] + p[2]; }
__device__ void bump(Cell* c, float m) { c->mass += m; c->count++; }
__device__ Cell copy(Cell c) { c.count += 100; return c; }
__global__ void k(const Cell* cells, Cell* out, int* hist, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const Cell& c = cells[i];
  float w = weigh(c) + first(c.pos) + first(cells[i].pos);
  bump(&out[i], w);
  out[i].pos[1] = (float)c.id;
  Cell t = copy(cells[i]);
  out[i].id = t.count;
  atomicAdd(&hist[c.count % 4], 1);
  atomicAdd(&out[n].count, 1);
  atomicAdd(&out[n].mass, 0.5f);
}
"""

CELL = np.dtype({"names": ["count", "mass", "id", "pos"],
                 "formats": [np.int32, np.float32, np.int64, (np.float32, 3)],
                 "offsets": [0, 4, 8, 16], "itemsize": 32})


@pytest.mark.parametrize("backend", ["llvm", "emulator"])
def test_records_in_memory_through_device_functions_references_and_atomics(backend: str,
                                                                            tmp_path: pathlib.Path) -> None:
    import polypy

    src = tmp_path / "cells.cu"
    src.write_text(DEVICE_FUNCTIONS)
    n = 90
    i = np.arange(n)
    cells = np.zeros(n, CELL)
    cells["count"], cells["mass"], cells["id"] = i % 7, np.float32(0.25) * (i % 5), 1000 + i
    cells["pos"] = (np.arange(3 * n) % 9).reshape(n, 3)
    out, hist = np.zeros(n + 1, CELL), np.zeros(4, np.int32)
    out["mass"][:n], out["count"][:n] = 1.0, 2
    want = out.copy()
    launch = polypy.compile(str(src)).k
    (launch if backend == "llvm" else launch.emulate)[(n + 31) // 32, 32](cells, out, hist, n)
    f32 = np.float32
    w = cells["mass"] * cells["count"].astype(f32) + 2 * (cells["pos"][:, 0] + cells["pos"][:, 2])
    want["mass"][:n] += w
    want["count"][:n] += 1
    want["pos"][:n, 1] = cells["id"].astype(f32)
    want["id"][:n] = cells["count"] + 100
    want["count"][n], want["mass"][n] = n, 0.5 * n
    for field in CELL.names:
        np.testing.assert_allclose(out[field], want[field], rtol=1e-6)
    np.testing.assert_array_equal(hist, np.bincount(cells["count"] % 4, minlength=4))


# --------------------------------------------------------------------------- T** parameters

LENS = np.array([10, 30, 5, 40, 15], np.int32)


def _pointer_table_reference() -> tuple[np.ndarray, np.ndarray]:
    values = (np.arange(100) % 7).astype(np.float32)
    offsets = np.concatenate([[0], np.cumsum(LENS)[:-1]])
    return np.array([values[o:o + m].sum() for o, m in zip(offsets, LENS)], np.float32), 2 * values


def test_a_pointer_to_pointers_parameter_in_a_whole_program(tmp_path: pathlib.Path) -> None:
    native, emulated = _translated_and_emulated("pointer_table", tmp_path)
    sums, doubled = _pointer_table_reference()
    expected = "sums " + " ".join(f"{s:.1f}" for s in sums) + f" doubled {doubled.astype(np.float64).sum():.1f}\n"
    assert outputs_match(native, expected, 1e-6) is None, native
    assert outputs_match(emulated, expected, 1e-6) is None, emulated


@pytest.mark.parametrize("backend", ["llvm", "emulator"])
def test_a_pointer_to_pointers_argument_is_a_list_of_views_of_one_array(backend: str, tmp_path: pathlib.Path) -> None:
    import polypy
    from polypy.errors import UserError

    src = tmp_path / "table.cu"
    src.write_text((PROGRAMS / "pointer_table.cu").read_text().split("int main")[0])
    kernel = polypy.compile(str(src)).rows_sum
    launch = kernel if backend == "llvm" else kernel.emulate
    values = (np.arange(100) % 7).astype(np.float32)
    offsets = np.concatenate([[0], np.cumsum(LENS)[:-1]])
    rows = [values[o:o + m] for o, m in zip(offsets, LENS)]
    out = np.zeros(5, np.float32)
    launch[5, 8](rows, LENS, out)
    sums, doubled = _pointer_table_reference()
    np.testing.assert_array_equal(out, sums)
    np.testing.assert_array_equal(values, doubled)
    with pytest.raises(UserError, match="views of one C-contiguous array"):
        launch[5, 8]([np.zeros(10, np.float32), np.zeros(10, np.float32)], LENS, out)


@pytest.mark.parametrize("body, message, column", [
    ("struct R { int a; float b; };\n__global__ void k(R** p) { p[0][0].a = 1; }\n",
     "pointer-to-pointer parameter 'p' is supported for pointers to scalars only (not 'R')", 23),
    ("__global__ void k(float** p, float* q) {\n  p = &q; p[0][0] = 1.0f; }\n",
     "pointer-to-pointer parameter 'p' cannot be reassigned", 27),
])
def test_what_pointer_to_pointers_parameters_cannot_do_is_a_located_error(body: str, message: str, column: int,
                                                                         tmp_path: pathlib.Path) -> None:
    src = tmp_path / "bad.cu"
    src.write_text(body)
    result = _polypy("translate", str(src), "-o", str(tmp_path / "bad.cpp"))
    assert result.returncode == 1
    assert f"{src}:{1 if column == 27 else 2}:{column}: error: {message}" in result.stderr, result.stderr


def test_dereferencing_a_pointer_to_pointers(tmp_path: pathlib.Path) -> None:
    import polypy

    src = tmp_path / "deref.cu"
    src.write_text("__global__ void k(const float* const* rows, float* out) {\n"
                   "  const float* second = rows[1];\n"
                   "  out[threadIdx.x] = (*rows)[threadIdx.x] + 10.0f * second[threadIdx.x];\n}\n")
    pool = np.arange(12, dtype=np.float32)
    for launch in (polypy.compile(str(src)).k, polypy.compile(str(src)).k.emulate):
        out = np.zeros(4, np.float32)
        launch[1, 4]([pool[6:10], pool[1:5]], out)
        np.testing.assert_array_equal(out, pool[6:10] + 10 * pool[1:5])


def _enum_symbols_expected() -> str:
    f32 = np.float32
    i = np.arange(40)
    table = np.array([2, 1, 0, 1, 2])[i % 5]  # Full, Half, Off, Half, Full
    rule_m, rule_w, rule_c = np.array([1, 0, 2])[i % 3], np.array([1.5, -2.0, 4.0], f32)[i % 3], np.array([3, 5, 9])[i % 3]
    v = np.where(table == 1, i.astype(f32) * f32(0.5), np.where(table == 0, f32(0), i.astype(f32))) + f32(1)
    v = v + f32(5 + 9) + rule_w * np.where(rule_m == 1, f32(2), f32(1)) + rule_c.astype(f32)
    seen = np.where(table == 2, 0, 2)
    return "dev_mode 1\n" + "".join("%d %.2f %d\n" % (k, v[k], seen[k]) for k in range(40))


def test_enumerations_in_module_memory_and_kernel_parameters(tmp_path: pathlib.Path) -> None:
    # The C++ used to read `__constant__ Mode table[5]` into an int (no conversion from an
    # `enum class`) and to take a `Mode` argument as `unsigned char`: g++ rejected both.
    native, emulated = _translated_and_emulated("enum_symbols", tmp_path)
    expected = _enum_symbols_expected()
    assert native == expected
    assert emulated == expected

"""Deep and long input (machine-generated CUDA): long sums and deep nesting go through the
frontend, the pipelines, both code generators and the gradient on ``polypy.stack``'s big stack,
and input deeper than ``polypy.ir.depth`` allows is a located error, never a crash.

Sizes: the full pipeline costs about 2 ms per term of a long sum (linear, but many walks), so
the end-to-end cases use a few thousand terms; the 100,000-term case goes through libclang and
polypy's cursor walk only (it crashed libclang at 15,000 terms before). Nesting is 1,000 levels
through translate, grad and compile for brackets (which clang limits); nested ``if``s, whose
thread-loop lowering is slower per level, are 250 deep here (1,000 take 3.5 s of CPU in translate
and 11 s in grad). Work that grew faster than the input is counted at two sizes (never timed).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import polypy
from deepgen import cli_step, counted_calls
from polypy.driver.cli import main
from polypy.errors import UserError
from polypy.ir.depth import MAX_BRACKETS
from polypy.stack import call_on_big_stack, on_big_stack_now

KERNEL = "__global__ void k(int n, const float* x, float* out) {{\n" \
         "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n" \
         "  if (i < n) {{\n{body}\n  }}\n}}\n"


def long_sum(terms: int) -> str:
    """``out[i] = c0*x[i+0] + c1*x[i+1] + ...``: a left-deep tree ``terms`` levels deep."""
    sum_ = " + ".join(f"{_coef(j)}f*x[i+{j % 7}]" for j in range(terms))
    return KERNEL.format(body=f"    out[i] = {sum_};")


def _coef(j: int) -> str:
    return f"{(j % 13) * 0.125 - 0.75:.3f}"


def long_sum_reference(x: np.ndarray, n: int, terms: int) -> np.ndarray:
    """The sum in float32, added in the order written (as C does: left to right)."""
    i = np.arange(n)
    acc = np.float32(float(_coef(0))) * x[i]
    for j in range(1, terms):
        acc = acc + np.float32(float(_coef(j))) * x[i + j % 7]
    return acc


def nested_parens(levels: int) -> str:
    e = "x[i]"
    for j in range(levels):
        e = f"({e} * 0.5f + {j % 5}.0f)"
    return KERNEL.format(body=f"    out[i] = {e};")


def nested_parens_reference(x: np.ndarray, n: int, levels: int) -> np.ndarray:
    e = x[:n].copy()
    for j in range(levels):
        e = e * np.float32(0.5) + np.float32(j % 5)
    return e


def nested_ifs(levels: int) -> str:
    """``if (acc < 2) { acc = acc*0.5 + 0.75; if (acc < 3) { ... } }``, ``levels`` deep."""
    opens = "".join(f"    if (acc < {j + 2}.0f) {{ acc = acc * 0.5f + 0.75f;\n" for j in range(levels))
    return KERNEL.format(body=f"    float acc = x[i];\n{opens}    {'}' * levels}\n    out[i] = acc;")


def nested_ifs_reference(x: np.ndarray, n: int, levels: int) -> np.ndarray:
    out = x[:n].copy()
    for t in range(n):
        acc = np.float32(x[t])
        for j in range(levels):
            if not acc < np.float32(j + 2):
                break
            acc = acc * np.float32(0.5) + np.float32(0.75)
        out[t] = acc
    return out


def cli(*args: str) -> subprocess.CompletedProcess:
    """The installed command line, in a process of its own (a crash is a signal, not a pytest failure)."""
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=600)


# --------------------------------------------------------------------------- the big stack


def test_the_big_stack_hands_back_results_and_errors_unchanged() -> None:
    assert call_on_big_stack(lambda a, *, b: (a, b, on_big_stack_now()), 1, b=2) == (1, 2, True)
    assert not on_big_stack_now()
    error = UserError("bad input", polypy.Loc("f.cu", 3, 4))
    with pytest.raises(UserError) as caught:
        call_on_big_stack(lambda: (_ for _ in ()).throw(error))
    assert caught.value is error and caught.value.loc == polypy.Loc("f.cu", 3, 4)
    limit = sys.getrecursionlimit()

    def deep(k: int) -> int:
        return 0 if k == 0 else 1 + deep(k - 1)

    assert call_on_big_stack(deep, 200_000) == 200_000  # far past the default limit and stack
    assert sys.getrecursionlimit() == limit and threading.stack_size() == 0


# --------------------------------------------------------------------------- long expressions


def test_a_100000_term_sum_parses(tmp_path) -> None:
    from frontend.clang_setup import deepest_cursor, parse_translation_unit

    path = tmp_path / "sum100k.cu"
    path.write_text(long_sum(100_000))
    tu = call_on_big_stack(parse_translation_unit, str(path), "cuda")
    kernel = next(c for c in tu.cursor.get_children() if c.spelling == "k")
    _, depth = call_on_big_stack(deepest_cursor, kernel)
    assert depth > 100_000


def test_a_long_sum_compiles_launches_and_adds_in_order(tmp_path) -> None:
    terms, n = 1_500, 300
    path = tmp_path / "sum.cu"
    path.write_text(long_sum(terms))
    x = np.random.default_rng(0).standard_normal(n + 8).astype(np.float32)
    out = np.zeros(n, np.float32)
    mod = polypy.compile(path)
    mod.k[(n + 127) // 128, 128](n, x, out)
    np.testing.assert_allclose(out, long_sum_reference(x, n, terms), rtol=1e-5, atol=1e-4)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs the system C++ compiler")
def test_a_long_sum_translates_to_cpp_that_gpp_compiles(tmp_path) -> None:
    path, cpp = tmp_path / "sum.cu", tmp_path / "sum.cpp"
    path.write_text(long_sum(1_500))
    result = cli("translate", str(path), "-o", str(cpp))
    assert result.returncode == 0, result.stderr
    obj = tmp_path / "sum.o"
    compiled = subprocess.run(["g++", "-O1", "-fopenmp", "-c", str(cpp), "-o", str(obj)], capture_output=True,
                              text=True, timeout=600)
    assert compiled.returncode == 0, compiled.stderr[-2000:]


# --------------------------------------------------------------------------- deep nesting


def test_1000_nested_brackets_through_translate_grad_and_compile(tmp_path) -> None:
    path, out = tmp_path / "parens.cu", tmp_path / "parens.cpp"
    path.write_text(nested_parens(1_000))
    result = cli("translate", str(path), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert out.stat().st_size > 0
    grad = tmp_path / "parens_grad.cu"
    result = cli("grad", str(path), "--kernel", "k", "-o", str(grad))
    assert result.returncode == 0, result.stderr
    assert "k_grad" in grad.read_text()
    n = 100
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    polypy.compile(path).k[1, 128](n, x, out)  # the LLVM code generator
    np.testing.assert_allclose(out, nested_parens_reference(x, n, 1_000), rtol=1e-5, atol=1e-5)


def test_nested_ifs_compile_and_launch(tmp_path) -> None:
    levels, n = 250, 64
    path = tmp_path / "ifs.cu"
    path.write_text(nested_ifs(levels))
    x = np.linspace(-3, 300, n).astype(np.float32)
    out = np.zeros(n, np.float32)
    polypy.compile(path).k[1, 64](n, x, out)
    np.testing.assert_allclose(out, nested_ifs_reference(x, n, levels), rtol=1e-6)


# --------------------------------------------------------------------------- past the limits


def test_brackets_past_the_limit_are_a_located_error_and_no_output(tmp_path) -> None:
    path, out = tmp_path / "deep.cu", tmp_path / "deep.cpp"
    path.write_text(nested_parens(MAX_BRACKETS + 5))
    result = cli("translate", str(path), "-o", str(out))
    assert result.returncode == 1
    assert f"deep.cu:4:" in result.stderr
    assert f"error: expression nested too deeply (over {MAX_BRACKETS:,} levels of brackets; the limit is " \
           f"{MAX_BRACKETS:,})" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()


def test_ir_deeper_than_the_limit_is_a_located_error(tmp_path, capsys, monkeypatch) -> None:
    import polypy.ir.depth as depth

    monkeypatch.setattr(depth, "MAX_DEPTH", 500)  # the real limit (200,000 levels) takes minutes to reach
    path, out = tmp_path / "sum.cu", tmp_path / "sum.cpp"
    path.write_text(long_sum(600))
    assert main(["translate", str(path), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:4:" in err
    assert "error: expression nested too deeply (" in err and "levels; the limit is 500)" in err
    assert not out.exists()


# --------------------------------------------------------------------------- linear work


def long_or_and_sum(terms: int) -> str:
    """An integer the polyhedral model cannot convert at any level (``n | n | ...``: each level
    is named as a uniform value) and a float sum of ``terms`` loads to differentiate."""
    ors = " | ".join(["n"] * terms)
    sum_ = " + ".join(f"{_coef(j)}f*x[i+{j % 7}]" for j in range(terms))
    return "__global__ void k(const float* x, float* y, int n) {\n  int i = threadIdx.x;\n" \
           f"  int g = i * ({ors});\n  y[g] = {sum_};\n}}\n"


def test_long_expressions_cost_linear_work(tmp_path, monkeypatch) -> None:
    """Work per node, counted rather than timed: each of these was once done again for every
    level of a long expression (quadratic: 2,000 terms took minutes in grad). The polyhedral
    builder walked each unconvertible subtree to find its uniformity and printed it to name it;
    activity analysis re-walked each operand. (Sharing also listed all 2,000,000 pairs of the
    sum's loads up front; that list is not counted here, only timed in the commit message.)"""
    import autodiff.activity
    import polypy.poly.builder
    from polypy.ir.cexpr import CExprPrinter

    terms = 2_000
    counts = {"walked": 0, "rendered": 0, "activity": 0}

    def walk(node):
        for x in original_walk(node):
            counts["walked"] += 1
            yield x

    def render(self, e):
        counts["rendered"] += 1
        return original_render(self, e)

    def expr(self, e):
        counts["activity"] += 1
        return original_expr(self, e)

    original_walk, original_render = polypy.poly.builder.walk, CExprPrinter.render
    original_expr = autodiff.activity.Activity.expr
    monkeypatch.setattr(polypy.poly.builder, "walk", walk)
    monkeypatch.setattr(CExprPrinter, "render", render)
    monkeypatch.setattr(autodiff.activity.Activity, "expr", expr)
    path, out = tmp_path / "long.cu", tmp_path / "long_grad.cu"
    path.write_text(long_or_and_sum(terms))
    assert main(["grad", str(path), "--kernel", "k", "-o", str(out)]) == 0
    # Linear: 10 to 40 visits per term (2,000 terms: 16,000 to 80,000); quadratic: terms**2 / 2 = 2,000,000.
    assert counts["walked"] < 100 * terms, counts
    assert counts["rendered"] < 100 * terms, counts
    assert counts["activity"] < 100 * terms, counts


def long_index_kernels(terms: int) -> str:
    """Integer index arithmetic ``terms`` long, of the kinds the thread-loop and polyhedral
    analyses take apart: a sum of the thread index (affine at every level), an unsigned sum
    (a conversion above each use of the counter), an unsigned product (affine only at the
    bottom) and a ``&&`` chain used as a number (a condition at every level); shared memory and
    a barrier, so that the polyhedral model is built."""
    tid_sum = " + ".join(["t"] * terms)
    unsigned_sum = " + ".join(["threadIdx.x"] * terms)
    product = " * ".join(["u"] * terms)
    chain = " && ".join(["t"] * terms)
    return ("__global__ void k(float* y, int n) {\n  __shared__ float s[64];\n"
            "  int t = threadIdx.x;\n  unsigned u = threadIdx.x;\n  s[t] = 0.0f;\n"
            f"  if (({tid_sum}) < n) s[t] += 1.0f;\n"
            f"  if ((int)({unsigned_sum}) < n) s[t] += 2.0f;\n"
            f"  if (({product}) < (unsigned)n) s[t] += 4.0f;\n"
            "  __syncthreads();\n  y[t] = s[t];\n"
            f"  y[64 + t + ({chain})] += 8.0f;\n}}\n")


def long_index_reference(terms: int, n: int, threads: int) -> np.ndarray:
    """What ``long_index_kernels`` computes (``t * terms`` does not overflow for these sizes)."""
    y = np.zeros(160, np.float32)
    for t in range(threads):
        y[t] += (1.0 if t * terms < n else 0.0) + (2.0 if t * terms < n else 0.0)
        y[t] += 4.0 if pow(t, terms, 2**32) < n else 0.0
        y[64 + t + (t != 0)] += 8.0
    return y


def _index_analysis_work(tmp_path, monkeypatch, terms: int) -> dict[str, int]:
    """Nodes the thread-loop analyses walk and expressions isl is asked to convert, translating
    ``long_index_kernels(terms)``."""
    import gpu2cpu.thread_affine
    import gpu2cpu.tighten_thread_bounds
    from polypy.poly.affine import Converter

    counts = {"walked": 0, "converted": 0}
    original_walk, original_int_expr = gpu2cpu.thread_affine.walk, Converter._int_expr

    def walk(node):
        for x in original_walk(node):
            counts["walked"] += 1
            yield x

    def int_expr(self, e, ctx):
        counts["converted"] += 1
        return original_int_expr(self, e, ctx)

    with monkeypatch.context() as m:
        for module in (gpu2cpu.thread_affine, gpu2cpu.tighten_thread_bounds):
            m.setattr(module, "walk", walk, raising=False)  # (walks that look for some classes only are not counted)
        m.setattr(Converter, "_int_expr", int_expr)
        path, out = tmp_path / f"long{terms}.cu", tmp_path / f"long{terms}.cpp"
        path.write_text(long_index_kernels(terms))
        assert main(["translate", str(path), "-o", str(out)]) == 0
    return counts


def test_long_index_arithmetic_costs_linear_work(tmp_path, monkeypatch) -> None:
    """The analyses of index arithmetic asked an O(size) question at every level of it (does
    this subtree read the counter? does it wrap?) and turned every level of a long condition
    into isl sets: 20,000 terms took 10 minutes in translate. Counted, not timed: twice the
    terms walk twice the nodes (quadratic work gave about 3 times at these sizes), and the
    expressions isl converts stay within ``MAX_ANALYZED_NODES`` (larger ones are unknown
    values), whatever the length."""
    from polypy.ir.depth import MAX_ANALYZED_NODES

    small = _index_analysis_work(tmp_path, monkeypatch, 400)
    large = _index_analysis_work(tmp_path, monkeypatch, 800)
    assert large["walked"] <= 2.3 * small["walked"], (small, large)
    assert large["converted"] < 20 * MAX_ANALYZED_NODES, (small, large)


def test_long_index_arithmetic_computes_the_same(tmp_path) -> None:
    """What the analyses give up on is still translated exactly: compiled and emulated, the
    long index kernel agrees with a model of it, on two block sizes."""
    terms, n = 300, 2_000
    path = tmp_path / "long.cu"
    path.write_text(long_index_kernels(terms))
    mod, kernel = polypy.compile(path), polypy.load(path).kernel("k")
    for threads in (7, 64):
        want = long_index_reference(terms, n, threads)
        y = np.zeros(160, np.float32)
        mod.k[1, threads](y, n)
        np.testing.assert_array_equal(y, want)
        y = np.zeros(160, np.float32)
        polypy.emulate(kernel, 1, threads, {"y": y, "n": n})
        np.testing.assert_array_equal(y, want)


def long_product_kernel(factors: int) -> str:
    """``y[i] = w[i] * v * v * ... * v`` (``factors`` copies of ``v = x[i]``), in double."""
    product = " * ".join(["v"] * factors)
    return ("__global__ void k(double* y, const double* x, const double* w, int n) {\n"
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"  if (i < n) {{ double v = x[i]; y[i] = w[i] * {product}; }}\n}}\n")


def test_a_long_product_differentiates_in_linear_work(tmp_path, monkeypatch) -> None:
    """Reverse mode multiplies each factor's cotangent by the product of the others: left inline,
    the k-th factor's partial was an expression of k nodes and the gradient's size (and time:
    20,000 factors ran for hours) grew as the square (autodiff.split_long)."""
    from polypy.ir.cexpr import CExprPrinter

    factors = 2_000
    counts = {"rendered": 0}
    original_render = CExprPrinter.render

    def render(self, e):
        counts["rendered"] += 1
        return original_render(self, e)

    monkeypatch.setattr(CExprPrinter, "render", render)
    path, out = tmp_path / "product.cu", tmp_path / "product_grad.cu"
    path.write_text(long_product_kernel(factors))
    assert main(["grad", str(path), "--kernel", "k", "-o", str(out)]) == 0
    assert counts["rendered"] < 100 * factors, counts  # quadratic: factors**2 / 2 = 2,000,000


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_a_long_product_s_gradient_is_exact(tmp_path, mode: str) -> None:
    """d(w x^m)/dx = m w x^(m-1) and d/dw = x^m, computed through the cut product (the locals
    hold partial products: same operations, same order)."""
    import polypy

    factors = 300
    path = tmp_path / "product.cu"
    path.write_text(long_product_kernel(factors))
    kernel = polypy.compile(str(path)).k
    rng = np.random.default_rng(3)
    n = 37
    x = 1.0 + rng.uniform(-1e-3, 1e-3, n)
    w = rng.uniform(0.5, 2.0, n)
    if mode == "reverse":
        grad = polypy.grad(kernel, wrt=["x", "w"])
        seed = rng.uniform(0.5, 1.5, n)
        y, dx, dw = np.zeros(n), np.zeros(n), np.zeros(n)
        grad[2, 32](y, seed.copy(), x, dx, w, dw, n)
        np.testing.assert_allclose(dx, seed * factors * w * x ** (factors - 1), rtol=1e-12)
        np.testing.assert_allclose(dw, seed * x ** factors, rtol=1e-12)
    else:
        fwd = polypy.grad(kernel, wrt=["x"], mode="forward")
        tx = rng.uniform(-1.0, 1.0, n)
        y, ty = np.zeros(n), np.zeros(n)
        fwd[2, 32](y, ty, x, tx, w, n)
        np.testing.assert_allclose(ty, tx * factors * w * x ** (factors - 1), rtol=1e-12)
    np.testing.assert_allclose(y, w * x ** factors, rtol=1e-12)


def long_condition_after_a_loop(terms: int) -> str:
    """``r = s + (s && s && ...)`` (``terms`` long) after a loop of the whole block (the loop
    splits the thread loops): ``r`` is a thread value whose definition the thread loops either
    store or recompute, decided from its cost (vecnorm's ``mag`` with a long condition)."""
    chain = " && ".join(["s"] * terms)
    return ("__global__ void k(float* y, const float* x, int n) {\n"
            "  int t = blockIdx.x * blockDim.x + threadIdx.x;\n  float r;\n  float s = 0.0f;\n"
            "  for (int j = 0; j < n; ++j) s += x[j];\n"
            f"  r = s + ({chain});\n  y[t] = r + t;\n}}\n")


def _serialize_work(tmp_path, monkeypatch, terms: int) -> int:
    """Nodes ``gpu2cpu.serialize_threads`` walks translating ``long_condition_after_a_loop``."""
    import gpu2cpu.serialize_threads

    count = [0]
    original_walk = gpu2cpu.serialize_threads.walk

    def walk(node):
        for x in original_walk(node):
            count[0] += 1
            yield x

    with monkeypatch.context() as m:
        m.setattr(gpu2cpu.serialize_threads, "walk", walk)
        path, out = tmp_path / f"cond{terms}.cu", tmp_path / f"cond{terms}.cpp"
        path.write_text(long_condition_after_a_loop(terms))
        assert main(["translate", str(path), "-o", str(out)]) == 0
    return count[0]


def test_a_long_condition_between_thread_loops_costs_linear_work(tmp_path, monkeypatch) -> None:
    """Whether to recompute a value in a later thread loop depends on its cost, which asked every
    level of the value whether its subtree varies with the thread: a walk per level (a
    6,000-term ``&&`` chain in vecnorm took minutes; 400 terms walked 91,000 nodes, 800 terms
    342,000; now 9,800 and 19,400).
    Counted, not timed: twice the terms walk about twice the nodes."""
    small = _serialize_work(tmp_path, monkeypatch, 400)
    large = _serialize_work(tmp_path, monkeypatch, 800)
    assert large <= 2.3 * small, (small, large)  # (both 0 when no walk is left)


def test_a_long_condition_between_thread_loops_computes_the_same(tmp_path) -> None:
    terms, n = 500, 40
    path = tmp_path / "cond.cu"
    path.write_text(long_condition_after_a_loop(terms))
    mod = polypy.compile(path)
    for x in (np.arange(n, dtype=np.float32) * 0.5, np.zeros(n, np.float32)):  # s != 0, s == 0
        y = np.zeros(64, np.float32)
        mod.k[2, 32](y, x, n)
        s_ = np.float32(x.sum())
        np.testing.assert_array_equal(y, s_ + np.float32(s_ != 0) + np.arange(64, dtype=np.float32))


def load_product_kernel(factors: int) -> str:
    """``y[i] = w[i] * x[i] * x[i] * ... * x[i]`` (``factors`` loads of ``x[i]``), in double."""
    product = " * ".join(["x[i]"] * factors)
    return ("__global__ void k(double* y, const double* x, const double* w, int n) {\n"
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"  if (i < n) y[i] = w[i] * {product};\n}}\n")


def test_repeated_loads_are_one_sharing_question(tmp_path, monkeypatch) -> None:
    """Whether the adjoint of ``x`` may be accumulated with a plain ``+=`` is asked of isl for
    every pair of accesses of ``x``: a product of 2,000 loads of ``x[i]`` asked 2,000,000 times
    (hours). Repeats of one access (same statement, instances and element) are asked once."""
    import importlib

    sharing_module = importlib.import_module("polypy.poly.sharing")  # polypy.poly.sharing is also a function
    factors = 300
    calls = [0]
    original = sharing_module._shared_pairs

    def shared_pairs(*args):
        calls[0] += 1
        return original(*args)

    monkeypatch.setattr(sharing_module, "_shared_pairs", shared_pairs)
    path, out = tmp_path / "loads.cu", tmp_path / "loads_grad.cu"
    path.write_text(load_product_kernel(factors))
    assert main(["grad", str(path), "--kernel", "k", "-o", str(out)]) == 0
    assert 0 < calls[0] <= 10, calls  # was factors * (factors + 1) / 2 = 45,150 for x alone
    assert "atomic" not in out.read_text()  # still proved private: plain +=


def test_a_long_product_of_loads_has_the_exact_gradient(tmp_path) -> None:
    factors, n = 300, 37
    path = tmp_path / "loads.cu"
    path.write_text(load_product_kernel(factors))
    rng = np.random.default_rng(4)
    x = 1.0 + rng.uniform(-1e-3, 1e-3, n)
    w = rng.uniform(0.5, 2.0, n)
    seed = rng.uniform(0.5, 1.5, n)
    grad = polypy.grad(polypy.compile(str(path)).k, wrt=["x", "w"])
    y, dx, dw = np.zeros(n), np.zeros(n), np.zeros(n)
    grad[2, 32](y, seed.copy(), x, dx, w, dw, n)
    np.testing.assert_allclose(y, w * x ** factors, rtol=1e-12)
    np.testing.assert_allclose(dx, seed * factors * w * x ** (factors - 1), rtol=1e-12)
    np.testing.assert_allclose(dw, seed * x ** factors, rtol=1e-12)


def test_nested_ifs_translate_in_linear_work(tmp_path, monkeypatch) -> None:
    """Dead-code elimination looked at every statement of every block for assignments overwritten
    later, walking each nested ``if`` whole: every level walked all the levels inside it (1,000
    nested ``if``s took 18 s of CPU in translate). It now asks what a statement reads of
    ``statement_names`` and whether it jumps of ``has_kind``, both remembered in the statement.
    Counted, not timed: the questions asked and the nodes the names' walk visits, twice the levels,
    about twice the work (quadratic work gave 3.6 times)."""
    import importlib

    import polypy.ir.names as names

    dce = importlib.import_module("polypy.passes.eliminate_dead_code")  # also a function's name

    def work(levels: int) -> int:
        path, out = tmp_path / f"ifs{levels}.cu", tmp_path / f"ifs{levels}.cpp"
        path.write_text(nested_ifs(levels))
        count = [0]

        def run() -> None:
            assert main(["translate", str(path), "-o", str(out)]) == 0

        def translate() -> None:
            count[0] += counted_calls(monkeypatch, dce, "statement_names", run)

        count[0] += counted_calls(monkeypatch, names, "walk_only", translate)
        return count[0]

    small, large = work(100), work(200)
    assert 0 < large <= 2.3 * small, (small, large)


# --------------------------------------------------------------------------- nested loops, ?: chains
# Kernels from tests/deepgen.py (the script there measures the command line on them).


def test_nested_for_loops_lower_in_linear_work(tmp_path, monkeypatch) -> None:
    """Whether a loop's body assigns its counter or bound was a walk of the body's source for
    every loop of a nest (1,000 nested loops: quadratic); now one indexed walk of the outermost.
    Counted: the assignment operators looked at (50 levels: 2,530 before, 172 now; 100 levels:
    7,505 before, 322 now)."""
    import frontend.lower.loops as loops
    from deepgen import nested_fors

    small, large = (counted_calls(monkeypatch, loops, "binary_operator",
                             cli_step(tmp_path, nested_fors(d), f"fors{d}", "translate", "--emit", "ir"))
                    for d in (50, 100))
    assert large <= 2.3 * small, (small, large)  # (both 0 when no walk is left)


def test_nested_for_loops_ask_what_they_write_in_linear_work(tmp_path, monkeypatch) -> None:
    """Passes ask at every loop of a nest which locals its body writes and declares
    (``written_names``, ``declared_names``): each question walked the loop's whole body
    (quadratic); now each compound statement remembers its answers. Counted: nodes the
    queries walk translating 50 and 100 nested loops."""
    import polypy.ir.queries as queries
    from deepgen import nested_fors

    small, large = (counted_calls(monkeypatch, queries, "walk", cli_step(tmp_path, nested_fors(d), f"fors{d}", "translate"))
                    for d in (50, 100))
    assert large <= 2.3 * small, (small, large)  # (both 0 when no walk is left)


def test_nested_for_loops_compute_the_same(tmp_path) -> None:
    """60 nested loops (the innermost ten run twice on odd threads): compiled and emulated."""
    from deepgen import nested_fors

    levels, n = 60, 50
    path = tmp_path / "fors.cu"
    path.write_text(nested_fors(levels))
    x = np.linspace(-1.0, 1.0, n + 8).astype(np.float32)
    want = np.zeros(n, np.float32)
    for i in range(n):
        acc = np.float32(0.0)
        for _ in range(2 ** 10 if i & 1 else 1):
            acc = acc * np.float32(0.5) + x[i]
        want[i] = acc
    out = np.zeros(n, np.float32)
    polypy.compile(path).k[1, 64](n, x, out)
    np.testing.assert_array_equal(out, want)
    out = np.zeros(n, np.float32)
    polypy.emulate(polypy.load(path).kernel("k"), 1, 64, {"n": n, "x": x, "out": out})
    np.testing.assert_array_equal(out, want)


def test_overwritten_after_looks_at_each_writer_once(tmp_path, monkeypatch) -> None:
    """The reverse sweep asks, at every point of the kernel, whether a variable is assigned
    again later: asked of every writer of the variable, 1,000 nested ``if``s each assigning
    ``acc`` took cubic time (grad over 15 minutes). Now the writers are indexed once per
    variable; the answers are those of the writer-by-writer question, at every point."""
    from autodiff.program import Program
    from polypy.poly.paths import child_blocks

    path = tmp_path / "ifs.cu"
    path.write_text(nested_ifs(12).replace("acc = acc * 0.5f + 0.75f;", "acc = acc * 0.5f + 0.75f; "
                                           "for (int r = 0; r < 2; ++r) acc += 1.0f;", 5))
    kernel = polypy.load(path).kernel("k")
    prog = Program(kernel)
    points = set(prog.stmts)
    for p, s in prog.stmts.items():
        for field, block in child_blocks(s):
            points.add(p + ((field, len(block)),))
    points.add((("body", len(kernel.body)),))
    asked = 0
    for v, writers in prog.writers.items():
        for p in sorted(points):
            assert prog.overwritten_after(v, p) == any(prog.may_execute_after(w, p) for w in writers), (v, p)
            asked += 1
    assert asked > 100

    def grad_ifs(levels: int):
        return cli_step(tmp_path, nested_ifs(levels), f"ifs{levels}", "grad", "--kernel", "k")

    assert counted_calls(monkeypatch, Program, "may_execute_after", grad_ifs(100)) == 0  # was 15,450 (100 levels)


def test_nested_ifs_have_the_exact_gradient(tmp_path) -> None:
    """d out / d x = 0.5 ** (levels taken), through 200 nested ``if``s."""
    levels, n = 200, 64
    path = tmp_path / "ifs.cu"
    path.write_text(nested_ifs(levels))
    x = np.linspace(-3, 300, n).astype(np.float32)
    grad = polypy.grad(polypy.compile(path).k, wrt=["x"])
    out, seed, dx = np.zeros(n, np.float32), np.ones(n, np.float32), np.zeros(n, np.float32)
    grad[1, 64](n, x, dx, out, seed.copy())  # the seed of out is consumed
    np.testing.assert_allclose(out, nested_ifs_reference(x, n, levels), rtol=1e-6)
    taken = np.zeros(n)
    for t in range(n):
        acc = np.float32(x[t])
        for j in range(levels):
            if not acc < np.float32(j + 2):
                break
            acc = acc * np.float32(0.5) + np.float32(0.75)
            taken[t] += 1
    np.testing.assert_allclose(dx, 0.5 ** taken, rtol=1e-6, atol=1e-38)  # 0.5 ** 200 is 0 in float


def test_a_long_select_chain_differentiates_in_linear_work(tmp_path, monkeypatch) -> None:
    """Each load of a ``?:`` chain runs under the conditions of the arms before it; the polyhedral
    model intersected all of them into the load's domain (10,000 arms: 50,000,000 conditions, grad
    104 s and 4.5 GB). Now at most ``MAX_GUARDS`` per load (the domain beyond is a superset,
    marked inexact). Counted: conditions converted (300 arms: 90,302 before, 34,370 now;
    600 arms: 360,602 before, 72,770 now)."""
    from deepgen import select_chain
    from polypy.poly.affine import Converter

    small, large = (counted_calls(monkeypatch, Converter, "cond",
                             cli_step(tmp_path, select_chain(k), f"select{k}", "grad", "--kernel", "k"))
                    for k in (300, 600))
    assert large < 2.5 * small, (small, large)


def test_a_long_select_chain_has_the_exact_gradient(tmp_path) -> None:
    from deepgen import coef, select_chain

    arms, n = 150, 64
    path = tmp_path / "select.cu"
    path.write_text(select_chain(arms))
    x = np.linspace(-2.0, 160.0, n + 8).astype(np.float32)
    grad = polypy.grad(polypy.compile(path).k, wrt=["x"])
    out, seed, dx = np.zeros(n, np.float32), np.linspace(0.5, 1.5, n).astype(np.float32), np.zeros(n + 8, np.float32)
    grad[1, 64](n, x, dx, out, seed.copy())  # the seed of out is consumed
    want_out, want_dx = np.zeros(n, np.float32), np.zeros(n + 8, np.float32)
    for i in range(n):
        j = next((j for j in range(arms) if x[i] < np.float32(j + 0.5)), None)
        c = np.float32(float(coef(j)[:-1])) if j is not None else np.float32(1.0)
        at = i + j % 7 if j is not None else i
        want_out[i] = c * x[at]
        want_dx[at] += c * seed[i]
    np.testing.assert_array_equal(out, want_out)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-6)


# --------------------------------------------------------------------------- 100,000 terms, 1,000 loops
# (issue 35 item 7: what still grew faster than the input, each counted at two sizes)


def test_binary_operators_are_located_once_per_chain(tmp_path, monkeypatch) -> None:
    """libclang locates a binary operator by going down the chain of its left operands each
    time it is asked (a left-deep sum: quadratic, 8 s of a 30,000-term sum). The frontend asks
    libclang for the location of no binary operator of a long sum or ``&&`` chain (it goes
    down the chain once, to the first operand), and the locations are those libclang gives."""
    import clang.cindex as ci
    from deepgen import and_chain

    asked = [0]
    original = ci.Cursor.location

    def location(self):
        if self.kind in (ci.CursorKind.BINARY_OPERATOR, ci.CursorKind.COMPOUND_ASSIGNMENT_OPERATOR):
            asked[0] += 1
        return original.fget(self)

    monkeypatch.setattr(ci.Cursor, "location", property(location))
    for name, source in (("sum", long_sum(2_000)), ("and", and_chain(2_000))):
        path = tmp_path / f"{name}.cu"
        path.write_text(source)
        polypy.load(path)
    assert asked[0] <= 10, asked  # was one per operator: over 4,000

    from frontend.lower.builder import KernelBuilder

    class Builder:  # what KernelBuilder.location needs of its builder
        locations: dict = {}

    path = tmp_path / "mixed.cu"
    path.write_text("#define ADD(a, b) a + b\n#define ID(a) (a)\n" + KERNEL.format(
        body="    float s = 0.0f;\n    s += (x[i] + 2.0f) * x[i + 1] - x[i + 2] / 3.0f;\n"
             "    s = ADD(x[i], x[i + 1]) * 2.0f + ID(x[i + 3]) - ADD(1.0f, ID(x[i])) + blockDim.x * s;\n"
             "    out[i] = s + (x[i] > 0.0f && x[i + 1] < 1.0f);"))
    from frontend.clang_setup import parse_translation_unit, preorder

    tu = call_on_big_stack(parse_translation_unit, str(path), "cuda")
    kernel = next(c for c in tu.cursor.get_children() if c.spelling == "k")
    binaries = [c for c in preorder(kernel) if c.kind in (ci.CursorKind.BINARY_OPERATOR,
                                                          ci.CursorKind.COMPOUND_ASSIGNMENT_OPERATOR)]
    assert len(binaries) >= 8
    builder = Builder()
    for c in binaries:
        ours, theirs = KernelBuilder.location(builder, c), original.fget(c)
        assert (ours.line, ours.column, ours.offset) == (theirs.line, theirs.column, theirs.offset), c.spelling


def test_explicit_instantiations_list_no_tokens_without_the_word(tmp_path) -> None:
    """Explicit instantiations are found in libclang's tokens of the whole file (about 30 us a
    token: 3 s of a 10,000-term sum); a file that nowhere spells ``template`` lists none."""
    from frontend.clang_setup import parse_translation_unit
    from frontend.launch_tokens import explicit_instantiations

    class NoTokens:
        def __init__(self, tu):
            self.cursor = tu.cursor

        def get_tokens(self, **_):
            raise AssertionError("tokens listed")

    path = tmp_path / "sum.cu"
    path.write_text(long_sum(50))
    tu = call_on_big_stack(parse_translation_unit, str(path), "cuda")
    assert explicit_instantiations(NoTokens(tu), str(path)) == []
    assert explicit_instantiations(NoTokens(tu), str(path), path.read_text()) == []
    template = ("template <typename T> __global__ void k(int n, const T* x, T* out) {\n"
                "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) out[i] = x[i];\n}\n"
                "template __global__ void k<float>(int, const float*, float*);\n")
    path.write_text(template)
    tu = call_on_big_stack(parse_translation_unit, str(path), "cuda")
    assert explicit_instantiations(tu, str(path)) == ["k<float>"]


def test_a_huge_thread_loop_is_left_as_it_is(tmp_path) -> None:
    """tighten_thread_bounds copies a thread loop's body (its versions and the original under
    a run-time check) and walks it per condition: a 10,000-term sum took 7 s there and came
    out twice. A body over ``MAX_TIGHTENED_NODES`` stays as it is: one copy, and the report
    says why; a small one is still tightened."""
    from gpu2cpu.tighten_thread_bounds import MAX_TIGHTENED_NODES
    from polypy.driver.pipelines import lower_and_emit
    from polypy.ir.queries import expanded_size, let_values, tree_size

    def lowered(terms: int):
        path = tmp_path / f"sum{terms}.cu"
        path.write_text(long_sum(terms))
        module = polypy.load(path)
        report: list = []
        cpu = call_on_big_stack(lower_and_emit, module, "cpu", report=report)
        gpu = module.kernels[0]
        seen = expanded_size((gpu,), let_values(gpu))  # as the analyses see it: `x[i + 3]`, `i` written out
        return tree_size(gpu), seen, tree_size(cpu.kernels[0]), [str(d) for d in report]

    gpu, seen, cpu, report = lowered(5_000)
    assert seen > MAX_TIGHTENED_NODES
    assert cpu < 1.2 * gpu, (gpu, cpu)  # was 2.1 times: the exact-index version and the original
    assert any("left as it is" in r for r in report), report
    gpu, _, cpu, report = lowered(20)
    assert cpu > 1.5 * gpu and not any("left as it is" in r for r in report)


def test_llvm_s_loop_passes_are_spared_huge_and_deep_loops(tmp_path) -> None:
    """LLVM's loop vectorizer takes time quadratic in a loop's instructions (a 12,000-factor
    product: 17 s) and its loop passes (LICM) grow with the square of the nesting depth (300
    nested loops: 4 s): a loop body over ``MAX_VECTORIZED_NODES`` is marked not to vectorize,
    and a kernel with loops nested deeper than ``MAX_OPTIMIZED_LOOP_DEPTH`` is ``optnone``."""
    from codegen.llvm import emit_llvm_ir
    from codegen.llvm.function import MAX_OPTIMIZED_LOOP_DEPTH
    from deepgen import nested_fors
    from polypy.driver.pipelines import lower_and_emit

    def ir(source: str, name: str) -> str:
        path = tmp_path / f"{name}.cu"
        path.write_text(source)
        return call_on_big_stack(lambda: emit_llvm_ir(lower_and_emit(polypy.load(path), "cpu")))

    def worker_attributes(text: str) -> str:
        line = next(x for x in text.splitlines() if x.startswith("define") and "k_worker" in x)
        return line[line.rindex(")"):]

    big, small = ir(long_sum(2_000), "big"), ir(long_sum(20), "small")
    assert "llvm.loop.vectorize.enable\", i1 0" in big and "llvm.loop.vectorize.enable\", i1 0" not in small
    deep, shallow = (ir(nested_fors(d), f"fors{d}") for d in (MAX_OPTIMIZED_LOOP_DEPTH + 5, 30))
    assert "optnone" in worker_attributes(deep) and "noinline" in worker_attributes(deep)
    assert "optnone" not in worker_attributes(shallow)
    assert '"no-builtin-memcpy"' in worker_attributes(deep)


def test_deeply_nested_loops_compile_and_run_unoptimized_exactly(tmp_path) -> None:
    """110 nested loops (past ``MAX_OPTIMIZED_LOOP_DEPTH``): the optnone function computes the
    same as the emulator."""
    from deepgen import nested_fors

    levels, n = 110, 20
    path = tmp_path / "fors.cu"
    path.write_text(nested_fors(levels))
    x = np.linspace(-1.0, 1.0, n + 8).astype(np.float32)
    out, want = np.zeros(n, np.float32), np.zeros(n, np.float32)
    polypy.compile(path).k[1, 32](n, x, out)
    polypy.emulate(polypy.load(path).kernel("k"), 1, 32, {"n": n, "x": x, "out": want})
    np.testing.assert_array_equal(out, want)
    assert out[1] != 0 and out[0] == x[0]


def test_deep_loop_nests_skip_the_web_split_and_divergent_return_walks(tmp_path, monkeypatch) -> None:
    """The frontend's reaching definitions (``split_variable_webs``) ran each loop's body again
    for every loop around it (1,000 nested loops: 500,500 loop visits, 30 s), and the
    uniformity check walked every loop's whole body for its first ``return``. Past
    ``webs.MAX_LOOP_DEPTH`` the variables stay whole (exact); the first returns of all loops
    are found in one walk. Counted at 100 and 200 levels."""
    import frontend.lower.webs as webs
    import polypy.analysis.uniformity as uniformity
    from deepgen import nested_fors

    def load(levels: int):
        def run() -> None:
            path = tmp_path / f"fors{levels}.cu"
            path.write_text(nested_fors(levels))
            polypy.load(path)
        return run

    assert counted_calls(monkeypatch, webs._Flow, "loop", load(30)) > 30  # shallow nests: still split
    for levels in (100, 200):
        assert counted_calls(monkeypatch, webs._Flow, "loop", load(levels)) == 0  # was levels * (levels + 1) / 2
    # The first return of each loop, found in one walk, is the one the walk of each loop finds.
    from polypy.ir import nodes as irn
    from polypy.ir.jumps import first_escaping_jump
    from polypy.ir.visitor import walk

    path = tmp_path / "returns.cu"
    path.write_text(KERNEL.format(body="""    float acc = 0.0f;
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < 3; ++b) { if (x[b] > 1.0f) { acc += 1.0f; } else { for (int c = 0; c < b; ++c) return; } }
      while (acc < 2.0f) { acc += x[a]; if (acc > 5.0f) return; }
      if (x[a] < 0.0f) return;
    }
    for (int d = 0; d < n; ++d) acc += x[d];
    out[i] = acc;"""))
    from polypy.driver.source import parse

    kernel = parse(path).kernel("k")  # the frontend's IR: returns still inside the loops
    loops = [x for x in walk(kernel) if isinstance(x, (irn.For, irn.While))]
    assert len(loops) >= 5
    first = uniformity._first_returns(kernel.body)
    for loop in loops:
        assert first.get(id(loop)) is first_escaping_jump(loop.body, irn.Return), loop
    assert sum(1 for loop in loops if id(loop) in first) >= 3


def test_nested_for_loops_promote_accumulators_in_linear_work(tmp_path, monkeypatch) -> None:
    """promote_accumulators walked every loop's whole body (header and all) before looking for
    a store at its top level, which most loops of a nest have none of. Counted: nodes walked
    translating 100 and 200 nested loops (100 levels: 10,000 before; now none)."""
    import gpu2cpu.promote_accumulators as promote
    from deepgen import nested_fors

    small, large = (counted_calls(monkeypatch, promote, "walk_block", cli_step(tmp_path, nested_fors(d), f"fors{d}", "translate"))
                    for d in (100, 200))
    assert large <= 2.3 * small + 100, (small, large)


def long_host_program(factors: int) -> str:
    """A whole program whose host code spells a ``factors``-long product (a macro, used four
    times) of a local variable: deep expressions around references to locals, in the function
    that launches and copies (the fuzz driver's long_expression mutant of texture_rotate)."""
    one = "(" + " * ".join(["one"] * factors) + ")"
    return ("#include <cstdio>\n#include <cuda_runtime.h>\n"
            f"#define ONE {one}\n"
            "__global__ void k(float* a, int n) {\n"
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) a[i] = 2.0f * a[i];\n}\n"
            "int main() {\n  int one = 1;\n  dim3 block(8);\n  float h[32];\n"
            "  for (int i = 0; i < 32; ++i) h[i] = i * ONE;\n"
            "  float* d;\n  cudaMalloc(&d, sizeof h);\n"
            "  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);\n"
            "  k<<<4, block>>>(d, 32 * ONE);\n"
            "  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);\n"
            "  printf(\"%.1f %d\\n\", h[31], ONE + ONE);\n  return 0;\n}\n")


def test_long_host_expressions_are_walked_in_linear_work(tmp_path, monkeypatch) -> None:
    """The host function's facts (launch shapes, copies) kept every node's path from the
    function (a tuple as long as the node is deep) and every reference's ancestors, and the
    runtime slice walked cursors with libclang's nested generators: quadratic in the depth of
    host expressions (a 20,000-factor macro used 25 times: over 60 s, and 9 GB at 8,000).
    Counted: no nested-generator walk, and the memory the facts hold grows linearly (600 and
    1,200 factors: 3.4 times before, 2.0 now)."""
    import tracemalloc

    import clang.cindex as ci
    from frontend.clang_setup import parse_translation_unit
    from frontend.launch_shapes import HostFunction

    def walk_preorder(self):
        raise AssertionError("Cursor.walk_preorder: quadratic on deep expressions")

    monkeypatch.setattr(ci.Cursor, "walk_preorder", walk_preorder)
    path, out = tmp_path / "host.cu", tmp_path / "host.cpp"
    path.write_text(long_host_program(300))
    assert main(["translate", str(path), "-o", str(out)]) == 0
    assert "ONE" in out.read_text() or "one * one" in out.read_text()

    def held(factors: int) -> tuple[int, HostFunction]:
        path = tmp_path / f"host{factors}.cu"
        path.write_text(long_host_program(factors))
        tu = call_on_big_stack(parse_translation_unit, str(path), "cuda")
        fn = next(c for c in tu.cursor.get_children() if c.spelling == "main" and c.is_definition())
        tracemalloc.start()
        try:
            facts = HostFunction(fn)
            size = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        return size, facts

    (small, _), (large, facts) = held(600), held(1_200)
    assert large < 2.4 * small, (small, large)  # quadratic: about 4 times
    # The facts still answer: the launch's block is the local dim3(8), the copies are decided.
    from frontend.parse import parse_file

    module = call_on_big_stack(parse_file, str(tmp_path / "host1200.cu"))
    assert [s.block_shape for s in module.host.launches] == [(8, 1, 1)], module.host.launches
    assert len(facts.launches) == 1 and "one" in [v.decl.spelling for v in facts.vars.values()]


def test_deep_loop_nests_are_not_interchanged(tmp_path, monkeypatch) -> None:
    """sink_thread_loops asked each loop of a nest about its whole body (worth, short, guards,
    strides): quadratic in the depth (200 to 400 nested loops: 3.5 times the time). A loop over
    tx around loops nested deeper than ``MAX_SUNK_DEPTH`` is left as it is, and the report says
    why; a shallow nest is still looked at. Counted: the cost model's questions (100 and 200
    levels: 90 and 190 loops asked before, none now)."""
    import gpu2cpu.sink_thread_loops as sink
    from deepgen import nested_fors
    from polypy.driver.pipelines import lower_and_emit

    def lowered(levels: int) -> list[str]:
        path = tmp_path / f"fors{levels}.cu"
        path.write_text(nested_fors(levels))
        report: list = []
        call_on_big_stack(lower_and_emit, polypy.load(path), "cpu", report=report)
        return [str(d) for d in report]

    for levels in (100, 200):
        asked = [0]
        with monkeypatch.context() as m:
            original = sink._Plan.worth
            m.setattr(sink._Plan, "worth",
                      lambda self, loop: asked.__setitem__(0, asked[0] + 1) or original(self, loop))
            report = lowered(levels)
        assert asked[0] == 0, (levels, asked)
        assert any(f"loops nested {levels} deep inside it; polypy interchanges up to {sink.MAX_SUNK_DEPTH}" in r
                   for r in report), report
    asked = [0]
    with monkeypatch.context() as m:
        original = sink._Plan.worth
        m.setattr(sink._Plan, "worth", lambda self, loop: asked.__setitem__(0, asked[0] + 1) or original(self, loop))
        report = lowered(sink.MAX_SUNK_DEPTH - 2)
    assert asked[0] > 0 and not any("polypy interchanges up to" in r for r in report)


def test_deep_loop_nests_get_exact_gradients_without_the_polyhedral_model(tmp_path) -> None:
    """Every loop is a dimension of the polyhedral model's instance space and every domain fixes
    those of the loops around it: 1,000 nested loops took 16 GB (and 53 s) in grad. Past
    ``MAX_MODELED_LOOP_DEPTH`` the model is not built (a located ``TooDeepForModel``): the
    gradient's proofs say "no proof" (atomic adjoints, exact), grad's race check warns that it
    did not run, and the gradient is exact: d out / d x[i] = sum of 0.5^k over the T updates
    (T = 1, or 2^10 on odd threads)."""
    from deepgen import nested_fors
    from polypy.poly import build_model
    from polypy.poly.model import MAX_MODELED_LOOP_DEPTH, TooDeepForModel

    levels, n = MAX_MODELED_LOOP_DEPTH + 20, 20
    path = tmp_path / "fors.cu"
    path.write_text(nested_fors(levels))
    kernel = polypy.load(path).kernel("k")
    with pytest.raises(TooDeepForModel) as refused:
        call_on_big_stack(build_model, kernel)
    assert refused.value.loc is not None and refused.value.loc.line == 4 + MAX_MODELED_LOOP_DEPTH + 1
    assert f"({levels:,} levels; it models up to {MAX_MODELED_LOOP_DEPTH:,})" in refused.value.message
    shallow = tmp_path / "shallow.cu"
    shallow.write_text(nested_fors(20))
    assert call_on_big_stack(build_model, polypy.load(shallow).kernel("k")).loops

    out_cu = tmp_path / "fors_grad.cu"
    result = cli("grad", str(path), "--kernel", "k", "-o", str(out_cu), "--report")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "warning: races not checked: loops nested too deeply for the polyhedral model" in result.stderr
    assert "atomic (no proof (" in result.stderr
    x = np.linspace(-1.0, 1.0, n + 8).astype(np.float32)
    with pytest.warns(RuntimeWarning, match="races not checked: loops nested too deeply"):
        grad = polypy.grad(polypy.compile(path).k, wrt=["x"])
    out, seed, dx = np.zeros(n, np.float32), np.ones(n, np.float32), np.zeros(n + 8, np.float32)
    grad[1, 32](n, x, dx, out, seed.copy())
    want = np.zeros(n + 8)
    for i in range(n):
        want[i] = sum(0.5 ** k for k in range(2 ** 10 if i & 1 else 1))
    np.testing.assert_allclose(dx, want, rtol=1e-6)


# --------------------------------------------------------------------------- the per-term constant


def test_a_traversal_skips_subtrees_without_what_it_looks_for() -> None:
    """Each node remembers which node classes its tree holds (``kinds_of``): a ``Visitor`` or
    ``Mutator`` with methods for loads only, ``walk_only`` and ``has_kind`` go past a 20,000-term
    sum of locals in a few steps, and a Mutator still finds (and rebuilds around) the one load."""
    from polypy.ir import nodes as nd
    from polypy.ir.types import F32, I32
    from polypy.ir.visitor import Mutator, Visitor, _Traversal, has_kind, walk, walk_only

    v = nd.Var("v", F32)
    total: nd.Expr = v
    for _ in range(20_000):
        total = nd.Binary("add", total, v)
    load = nd.Load("x", (nd.Var("i", I32),), F32)
    stmts = (nd.Assign("a", total), nd.Assign("b", nd.Binary("add", total, load)))
    visits = [0]
    original = _Traversal.visit

    def counting(self, node):
        visits[0] += 1
        return original(self, node)

    class Loads(Visitor):
        def __init__(self) -> None:
            self.seen: list[nd.Load] = []

        def visit_Load(self, e: nd.Load) -> None:
            self.seen.append(e)

    class Doubled(Mutator):
        def visit_Load(self, e: nd.Load) -> nd.Expr:
            return nd.Binary("mul", e, nd.Const(2.0, F32))

    _Traversal.visit = counting
    try:
        loads = Loads()
        loads.visit_block(stmts)
        doubled = Doubled().visit_block(stmts)
    finally:
        _Traversal.visit = original
    assert loads.seen == [load]
    assert doubled[0] is stmts[0] and doubled[1].value.a is total  # the sum is shared, not rebuilt
    assert doubled[1].value.b == nd.Binary("mul", load, nd.Const(2.0, F32))
    assert visits[0] < 20, visits  # without the masks: every node of both sums, 80,000 visits
    assert list(walk_only(stmts, nd.Load)) == [load] == [x for x in walk(stmts[1]) if isinstance(x, nd.Load)]
    assert has_kind(stmts, nd.Load) and not has_kind(stmts[0], nd.Load, nd.ThreadIdx)


def _walked_per_term(tmp_path, monkeypatch, case: str, terms: int, *args: str) -> dict[str, float]:
    """Nodes that ``polypy.ir.visitor.walk`` yields and visits of the traversals (``Visitor``,
    ``Mutator``), per term, running the command line in process on ``deepgen``'s ``case``."""
    import polypy.ir.visitor as visitor
    from deepgen import CASES

    counts = {"walked": 0, "visited": 0}
    original_walk, original_visit = visitor.walk, visitor._Traversal.visit

    def walk(node):
        for x in original_walk(node):
            counts["walked"] += 1
            yield x

    def visit(self, node):
        counts["visited"] += 1
        return original_visit(self, node)

    with monkeypatch.context() as m:
        for module in list(sys.modules.values()):  # every module that imported the walk
            if getattr(module, "walk", None) is original_walk:
                m.setattr(module, "walk", walk)
        m.setattr(visitor._Traversal, "visit", visit)
        path = tmp_path / f"{case}{terms}.cu"
        path.write_text(CASES[case](terms))
        assert main([args[0], str(path), *args[1:], "-o", str(tmp_path / f"{case}{terms}.out")]) == 0
    return {k: v / terms for k, v in counts.items()}


@pytest.mark.parametrize("case", ["sum", "select"])
def test_long_expressions_are_walked_a_few_times_per_pass_in_all(tmp_path, monkeypatch, case: str) -> None:
    """The per-term constant of ``translate``: each of some 90 whole-kernel walks (a pass, or a
    question such as ``kernel_names`` asked again by a dozen passes) went through every node of a
    long expression (a 10,000-term sum: 1,040 nodes walked and 177 visits per term). Now a walk
    or traversal goes past subtrees without what it looks for (``kinds_of``), and the names a
    statement uses are remembered in it (``polypy.ir.names.statement_names``)."""
    import gpu2cpu.tighten_thread_bounds as tighten

    # The path a 100,000-term sum takes (a thread loop too large to version); the smaller sum keeps the test short.
    monkeypatch.setattr(tighten, "MAX_TIGHTENED_NODES", 1_000)
    work = _walked_per_term(tmp_path, monkeypatch, case, 2_000, "translate")
    assert work["walked"] < 150, work  # now under 1 (the sum and the chain)
    assert work["visited"] < 170, work  # the Mutator passes that rewrite expressions still visit every node


def test_a_kernel_s_cursors_are_walked_once_for_the_frontend_s_questions(tmp_path, monkeypatch) -> None:
    """``frontend.bases`` (conversions, callees), ``frontend.lower.cccl`` (names of CCCL) and
    ``assigned_decls`` (variables assigned) each walked every cursor of the kernel: three
    preorders of a long sum (a tenth of ``translate``). Now one walk answers all three
    (``frontend.function_scan``). Counted: the cursors ``preorder`` yields while a 2,000-term sum
    is loaded, against the kernel's own cursors (3 times as many before, once now)."""
    import frontend.clang_setup as cs

    path = tmp_path / "sum.cu"
    path.write_text(long_sum(2_000))
    original = cs.preorder
    walked = [0]

    def preorder(cursor):
        for c in original(cursor):
            walked[0] += 1
            yield c

    with monkeypatch.context() as m:
        for module in list(sys.modules.values()):  # every module that imported the walk
            if getattr(module, "preorder", None) is original:
                m.setattr(module, "preorder", preorder)
        kernel = call_on_big_stack(polypy.load, path).kernel("k")
    assert kernel.name == "k"

    def cursors() -> int:
        from frontend.clang_setup import parse_translation_unit
        tu = parse_translation_unit(str(path), "cuda")
        k = next(c for c in tu.cursor.get_children() if c.spelling == "k")
        return sum(1 for _ in original(k))

    own = call_on_big_stack(cursors)
    assert own > 20_000 and walked[0] < 1.3 * own, (walked[0], own)


def test_a_host_function_s_cursors_are_walked_once_for_its_calls(tmp_path, monkeypatch) -> None:
    """The host code's questions (launched kernels, kernels named as values, launches, copies in
    both directions, symbol arguments) each walked every cursor of each host function: seven
    preorders of a long host expression. Now they read the calls and function references that
    one walk lists (``frontend.function_scan``). Counted: the cursors ``preorder`` yields per
    cursor added to ``main`` (``long_host_program`` at 300 and 600 factors: 7.25 before, 1.25 now)."""
    import frontend.clang_setup as cs
    from frontend.clang_setup import parse_translation_unit

    original = cs.preorder

    def work(factors: int) -> tuple[int, int]:
        path = tmp_path / f"host{factors}.cu"
        path.write_text(long_host_program(factors))
        walked = [0]

        def preorder(cursor):
            # (walks of the input's unit only: the runtime slice reads the translated program,
            # another unit, once; runtime_slice is imported on the first translation)
            mine = cursor.translation_unit.spelling == str(path)
            for c in original(cursor):
                walked[0] += mine
                yield c

        with monkeypatch.context() as m:
            for module in list(sys.modules.values()):  # every module that imported the walk
                if getattr(module, "preorder", None) is original:
                    m.setattr(module, "preorder", preorder)
            assert main(["translate", str(path), "-o", str(tmp_path / f"host{factors}.cpp")]) == 0
        tu = call_on_big_stack(parse_translation_unit, str(path), "cuda")
        fn = next(c for c in tu.cursor.get_children() if c.spelling == "main" and c.is_definition())
        return walked[0], sum(1 for _ in original(fn))

    work(100)  # (the first translation in a process also walks what is parsed once: the prelude's)
    (small, small_own), (large, large_own) = work(300), work(600)
    per_cursor = (large - small) / (large_own - small_own)
    assert large_own - small_own > 2_000 and per_cursor < 2, (per_cursor, small, large, small_own, large_own)


def nested_record_selects(levels: int) -> str:
    """``(1 ? (1 ? ... blockDim : 0) ... : 0).x``, ``levels`` deep: a ``?:`` whose values are
    records (``0`` converts to ``dim3``), each level a temporary record and an ``if``."""
    chosen = "(1 ? " * levels + "blockDim" + " : 0)" * levels
    return KERNEL.format(body=f"    unsigned half = {chosen}.x / 2;\n    out[i] = x[i] * (float)half;")


def test_a_record_select_nested_1000_deep_translates_differentiates_and_runs(tmp_path) -> None:
    """The fuzz driver's mutant 144 of seed 1 (a ``?:`` of ``dim3`` values 3,000 deep in layernorm)
    ran past ten minutes in translate and in grad: names were handed out by trying every suffix
    from ``_1`` (``NameSupply.fresh``), dead-code elimination removed one temporary of the chain per
    sweep of the kernel, and splitting variable webs scanned every web's name per use. 1,000 levels
    through translate, grad and the LLVM code generator, with the right result."""
    levels, n = 1_000, 100
    path, out, grad = tmp_path / "selects.cu", tmp_path / "selects.cpp", tmp_path / "selects_grad.cu"
    path.write_text(nested_record_selects(levels))
    result = cli("translate", str(path), "-o", str(out))
    assert result.returncode == 0, result.stderr
    result = cli("grad", str(path), "--kernel", "k", "-o", str(grad))
    assert result.returncode == 0, result.stderr
    assert "k_grad" in grad.read_text()
    x = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    got = np.zeros(n, np.float32)
    polypy.compile(path).k[1, 128](n, x, got)
    np.testing.assert_allclose(got, x * np.float32(64), rtol=1e-6)


def test_deep_if_nests_keep_variables_whole(tmp_path, monkeypatch) -> None:
    """Each ``if`` joins the reaching definitions of its two branches, a map of every candidate
    variable: input with an ``if`` and a variable per level (a ``?:`` of records 3,000 deep) cost
    levels times candidates. Past ``webs.MAX_BLOCK_DEPTH`` nested statements the variables stay
    whole (exact, as past ``MAX_LOOP_DEPTH``); shallower nests are still split."""
    import frontend.lower.webs as webs

    def load(levels: int):
        def run() -> None:
            path = tmp_path / f"ifs{levels}.cu"
            path.write_text(nested_ifs(levels))
            polypy.load(path)
        return run

    assert counted_calls(monkeypatch, webs._Flow, "block", load(50)) > 50
    assert counted_calls(monkeypatch, webs._Flow, "block", load(webs.MAX_BLOCK_DEPTH + 20)) == 0


def test_a_long_product_in_a_time_loop_differentiates_in_linear_work(tmp_path, monkeypatch) -> None:
    """The fuzz driver's mutant 6395 of seed 1 (heat_steps with ``-kk * a`` made a product of
    20,000 ``a``s) ran past ten minutes in grad. The reverse sweep's merge of barrier runs
    overrode ``visit_tuple``, so its Mutator walked every node of every expression, and the
    adjoint's expressions share subtrees (each level's partial is the product below it), walked
    once per reference. It now overrides ``visit_block`` and sees statement lists only. Counted:
    the merge's ``generic_visit`` calls at 300 and 600 factors."""
    import pathlib

    import autodiff.sweeps as sweeps

    source = (pathlib.Path(__file__).parent.parent / "samples" / "heat_steps.cu").read_text()
    assert "-kk * a" in source

    def grad(factors: int):
        def run() -> None:
            path = tmp_path / f"heat{factors}.cu"
            path.write_text(source.replace("-kk * a", "-kk * (" + " * ".join(["a"] * factors) + ")", 1))
            assert main(["grad", str(path), "--kernel", "heat_steps", "-o", str(tmp_path / f"g{factors}.cu")]) == 0
        return run

    from polypy.ir.visitor import Mutator

    # Counted on the base class, for the merge's instances only (a method of its own would make the
    # Mutator see every node: ``_wanted_mask``).
    count = [0]
    original = Mutator.generic_visit

    def counting(self, node):
        count[0] += type(self) is sweeps._BarrierRuns
        return original(self, node)

    monkeypatch.setattr(Mutator, "generic_visit", counting)
    counts = []
    for factors in (300, 600):
        monkeypatch.setattr(sweeps._BarrierRuns, "_dispatch_cache", {})  # (methods are cached per class)
        count[0] = 0
        grad(factors)()
        counts.append(count[0])
    assert 0 < counts[0] and counts[1] <= 2.3 * counts[0], counts

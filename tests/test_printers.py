"""The three expression printers (IR text, CUDA, C) and the one grammar they share (``polypy.ir.cexpr``).

Random expressions mixing ``?:``, casts, unary and binary operators of every precedence level
are printed by each printer; the C and CUDA texts are compiled (one compile for all of them)
and run on many inputs, and must give the values Python computes with the IR's C semantics
(``polypy.ir.semantics``); the IR text must read back to the same IR. Statement positions that
splice an expression (``for`` bounds, array indices) are checked the same way. Finally the
bug that made the single printer necessary: the tiled-matmul gradient (T=8, sizes that are not
multiples of T) through ``polypy translate`` used to print ``t < 0 < q ? q : 0`` as its loop
bound and never terminate.
"""
from __future__ import annotations

import math
import random
import subprocess

import numpy as np
import pytest

from codegen.c import find_compiler
from codegen.c.render import Layout, Renderer
from codegen.c.templates import prelude
from codegen.cuda.printer import CudaExprPrinter
from codegen.cuda.printer import _Printer as CudaStmtPrinter
from polypy.driver.cli import main
from polypy.ir import cexpr
from polypy.ir import nodes as n
from polypy.ir import parse_kernel
from polypy.ir.printer import format_expr, print_stmts
from polypy.ir.semantics import eval_binary, eval_cast, eval_unary
from polypy.ir.types import BOOL, F32, F64, I8, I16, I32, I64, U8, U16, U32, U64, ScalarType
from samples.spec import sample

VARS = {"a": I32, "b": I32, "c": U32, "d": I64, "w": U64, "s": U8, "u": U16, "g": I8, "h": I16, "x": F64, "y": F64,
        "f": F32, "p": BOOL}
TAB = (3, -7, 11, 0, -2, 5, 8, -13)          # tab: i32*, indexed by `e & 7`
GRID = tuple(range(-7, 8))                    # m: i32[3][5] (flat in C), indexed by `[e & 1][e & 3]`
TYPES = (I32, U32, I64, U64, U8, U16, I8, I16, F64, F32, BOOL)


class Undefined(Exception):
    """The expression does something C leaves undefined on this input (it is not used)."""


# ---------------------------------------------------------------------------- random expressions
class Gen:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def leaf(self, ty: ScalarType) -> n.Expr:
        names = [v for v, t in VARS.items() if t == ty]
        if names and self.rng.random() < 0.6:
            return n.Var(self.rng.choice(names), ty)
        if ty.is_bool:
            return n.Const(self.rng.random() < 0.5, BOOL)
        if ty.is_float:
            return n.Const(self.rng.choice((0.5, -2.25, 3.0, -0.0, 1e-3, 7.0)), ty)
        return n.Const(self.rng.choice((0, 1, 2, 3, -1, -5, 7, 12, 99)), ty)

    def index(self, depth: int, mask: int) -> n.Expr:
        return n.Binary("band", self.gen(I32, depth), n.Const(mask, I32))

    def gen(self, ty: ScalarType, depth: int) -> n.Expr:
        r = self.rng
        if depth <= 0 or r.random() < 0.15:
            return self.leaf(ty)
        d = depth - 1
        kinds = ["select", "cast", "cast"]
        if ty.is_bool:
            kinds += ["cmp", "cmp", "logic", "logic", "not", "bits"]
        elif ty.is_float:
            kinds += ["arith", "arith", "arith", "neg"] + (["call"] if ty == F64 else [])
        else:
            kinds += ["arith", "arith", "arith", "bits", "neg", "bnot"]
            if not ty.is_signed:
                kinds += ["shift"]
            if ty == I32:
                kinds += ["load", "load2"]
        kind = r.choice(kinds)
        if kind == "select":
            return n.Select(self.gen(BOOL, d), self.gen(ty, d), self.gen(ty, d))
        if kind == "cast":
            src = r.choice(TYPES)
            return n.Cast(ty, self.gen(src, d))
        if kind == "cmp":
            src = r.choice([t for t in TYPES if not t.is_bool])
            return n.Binary(r.choice(n.COMPARE_OPS), self.gen(src, d), self.gen(src, d))
        if kind == "logic":
            return n.Binary(r.choice(n.LOGIC_OPS), self.gen(BOOL, d), self.gen(BOOL, d))
        if kind == "not":
            return n.Unary("not", self.gen(BOOL, d))
        if kind == "arith":
            return n.Binary(r.choice(n.ARITH_OPS), self.gen(ty, d), self.gen(ty, d))
        if kind == "bits":
            return n.Binary(r.choice(("band", "bor", "bxor")), self.gen(ty, d), self.gen(ty, d))
        if kind == "shift":
            amount = n.Binary("band", self.gen(ty, d), n.Const(ty.bits - 1, ty)) if r.random() < 0.5 else \
                n.Const(r.randrange(ty.bits), ty)
            return n.Binary(r.choice(("shl", "shr")), self.gen(ty, d), amount)
        if kind in ("neg", "bnot"):
            return n.Unary(kind, self.gen(ty, d))
        if kind == "call":
            if r.random() < 0.5:
                return n.Call("floor", (self.gen(F64, d),), F64)
            return n.Call("fdim", (self.gen(F64, d), self.gen(F64, d)), F64)
        if kind == "load":
            return n.Load("tab", (self.index(d, 7),), I32)
        return n.Load("m", (self.index(d, 1), self.index(d, 3)), I32)


# ---------------------------------------------------------------------------- Python semantics
def evaluate(e: n.Expr, env: dict) -> object:
    """``e``'s value with C semantics (lazy like C: ``?:``, ``&&``, ``||``), or ``Undefined``."""
    if isinstance(e, n.Const):
        return e.value
    if isinstance(e, n.Var):
        return env[e.name]
    if isinstance(e, n.Load):
        idx = [int(evaluate(i, env)) for i in e.index]
        return TAB[idx[0]] if e.buffer == "tab" else GRID[idx[0] * 5 + idx[1]]
    if isinstance(e, n.Select):
        return evaluate(e.a if evaluate(e.cond, env) else e.b, env)
    if isinstance(e, n.Cast):
        return _defined(eval_cast(evaluate(e.x, env), e.x.type, e.to))
    if isinstance(e, n.Unary):
        x = evaluate(e.x, env)
        if e.op == "neg" and e.type in (I32, I64) and x == -(1 << (e.type.bits - 1)):
            raise Undefined
        return _defined(eval_unary(e.op, x, e.type))
    if isinstance(e, n.Call):
        args = [evaluate(a, env) for a in e.args]
        if e.fn == "floor":
            return float(np.floor(args[0]))
        x, y = args  # fdim
        return x - y if x > y else (x + y if math.isnan(x) or math.isnan(y) else 0.0)
    assert isinstance(e, n.Binary)
    a = evaluate(e.a, env)
    if e.op in n.LOGIC_OPS:
        if bool(a) == (e.op == "lor"):
            return e.op == "lor"
        return bool(evaluate(e.b, env))
    b = evaluate(e.b, env)
    ty = e.a.type
    if ty in (I32, I64):  # signed overflow is undefined; narrow types are computed in int
        lo, hi = -(1 << (ty.bits - 1)), (1 << (ty.bits - 1)) - 1
        exact = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b}.get(e.op)
        if exact is not None and not lo <= exact() <= hi:
            raise Undefined
        if e.op in ("div", "rem") and a == lo and b == -1:
            raise Undefined
    return _defined(eval_binary(e.op, a, b, ty))


def _defined(value: object) -> object:
    if value is None:
        raise Undefined
    return value


def _inputs(count: int) -> list[dict]:
    rng = random.Random(7)
    sets = []
    for i in range(count):
        big = i % 5 == 4
        sets.append({
            "a": rng.choice((2147483647, -2147483648)) if big else rng.randint(-20, 20),
            "b": rng.randint(-9, 9),
            "c": rng.choice((4294967295, 0)) if big else rng.randint(0, 40),
            "d": rng.randint(-(1 << 40), 1 << 40) if big else rng.randint(-50, 50),
            "w": (1 << 64) - 1 if big else rng.randint(0, 1 << 40),
            "s": rng.randint(0, 255),
            "u": 65535 if big else rng.randint(0, 65535),
            "g": rng.randint(-128, 127),
            "h": rng.randint(-300, 300),
            "x": rng.choice((-1.5, 0.25, 2.0, -0.0, 10.75)),
            "y": rng.uniform(-4.0, 4.0),
            "f": float(np.float32(rng.uniform(-8.0, 8.0))),
            "p": rng.random() < 0.5,
        })
    return sets


INPUTS = _inputs(12)


def _well_defined(count: int, seed: int) -> list[n.Expr]:
    gen, out = Gen(seed), []
    while len(out) < count:
        e = gen.gen(gen.rng.choice(TYPES), 4)
        try:
            for env in INPUTS:
                evaluate(e, env)
        except Undefined:
            continue
        out.append(e)
    return out


EXPRS = _well_defined(220, seed=1)


def _same(want: object, got: str, ty: ScalarType) -> bool:
    if ty.is_float:
        g = float(got)
        w = float(want)
        return (math.isnan(g) and math.isnan(w)) or g == w  # compilers may fold `0.0f - (float)u` to `-(float)u`
    return int(got) == int(want)


# ---------------------------------------------------------------------------- compile and run
PRELUDE = """
static int tab[8] = {%s};
static int m[15] = {%s};
static long long polypy_lo_tab = 0, polypy_hi_tab = 8;
static long long polypy_check_index(long long i, long long lo, long long hi, const char* b, const char* w)
{
    if (i < lo || i >= hi) { fprintf(stderr, "%%s[%%lld] out of bounds at %%s\\n", b, i, w); abort(); }
    return i;
}
""" % (", ".join(map(str, TAB)), ", ".join(map(str, GRID)))
# The emitted prelude's float -> integer conversions (saturating as the GPU's), which the C
# printer calls for every such cast.
_PRELUDE_TEXT = prelude()
PRELUDE += _PRELUDE_TEXT[_PRELUDE_TEXT.index("/* Float -> integer conversions"):_PRELUDE_TEXT.index("/* C's fmin/fmax")]


def _print_stmt(text: str, ty: ScalarType) -> str:
    if ty.is_float:
        return f'printf("%.17g\\n", (double)({text}));'
    if ty.is_bool:
        return f'printf("%d\\n", (int)({text}));'
    if ty.is_signed:
        return f'printf("%lld\\n", (long long)({text}));'
    return f'printf("%llu\\n", (unsigned long long)({text}));'


def _signature(c_name) -> str:
    return ", ".join(f"{c_name(t)} {v}" for v, t in VARS.items())


def _call_args(env: dict) -> str:
    def lit(v: object, t: ScalarType) -> str:
        if t.is_bool:
            return "true" if v else "false"
        if t.is_float:
            return repr(float(v)) + ("f" if t == F32 else "")
        return {I64: f"{v}LL", U32: f"{v}u", U64: f"{v}ULL"}.get(t, str(v)) if v != -2147483648 else "(-2147483647 - 1)"
    return ", ".join(lit(env[v], t) for v, t in VARS.items())


def _run(tmp_path, name: str, source: str, cpp: bool) -> list[str]:
    compiler = find_compiler(cpp)
    if compiler is None:
        pytest.skip(f"no {'C++' if cpp else 'C'} compiler on this machine")
    src = tmp_path / (name + (".cpp" if cpp else ".c"))
    src.write_text(source)
    exe = tmp_path / name
    flags = ["-O0", "-ffp-contract=off", "-w"] + ([] if cpp else ["-std=c11"])
    built = subprocess.run([compiler, *flags, str(src), "-o", str(exe), "-lm"], capture_output=True, text=True,
                           timeout=300)
    assert built.returncode == 0, built.stderr[:4000]
    ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr[:2000]
    return ran.stdout.split()


def _c_renderer(check_bounds: bool) -> Renderer:
    kernel = n.Kernel("k", (), (), (), stage="cpu")
    layouts = {"tab": Layout("tab", "pointer", I32), "m": Layout("m", "flat", I32, ("3", "5"))}
    return Renderer(kernel, layouts, check_bounds=check_bounds, names={})


def _check_outputs(lines: list[str], exprs: list[n.Expr], texts: list[str], copies: int = 1) -> None:
    expected = [(e, t, evaluate(e, env)) for env in INPUTS for _ in range(copies) for e, t in zip(exprs, texts)]
    assert len(lines) == len(expected)
    for got, (e, text, want) in zip(lines, expected):
        assert _same(want, got, e.type), f"{text}\n  IR: {format_expr(e)}\n  want {want}, got {got}"


def test_c_printer_agrees_with_c_semantics(tmp_path) -> None:
    plain, checked = _c_renderer(False), _c_renderer(True)
    texts = [plain.expr(e) for e in EXPRS]
    checked_texts = [checked.expr(e) for e in EXPRS]
    body = "\n".join(f"    {_print_stmt(t, e.type)}\n    {_print_stmt(c, e.type)}"
                     for e, t, c in zip(EXPRS, texts, checked_texts))
    source = ("#include <stdio.h>\n#include <stdlib.h>\n#include <stdbool.h>\n#include <stddef.h>\n#include <math.h>\n"
              + PRELUDE + f"static void run({_signature(lambda t: t.c_name)})\n{{\n{body}\n}}\n"
              + "int main(void)\n{\n" + "".join(f"    run({_call_args(env)});\n" for env in INPUTS) + "    return 0;\n}\n")
    lines = _run(tmp_path, "exprs_c", source, cpp=False)
    doubled = [t for pair in zip(texts, checked_texts) for t in pair]
    _check_outputs(lines, [e for e in EXPRS for _ in range(2)], doubled)


def test_cuda_printer_agrees_with_c_semantics(tmp_path) -> None:
    printer = CudaExprPrinter()
    texts = [printer.expr(e) for e in EXPRS]
    body = "\n".join(f"    {_print_stmt(t, e.type)}" for e, t in zip(EXPRS, texts))
    grid = "static int m[3][5] = {" + ", ".join("{" + ", ".join(map(str, GRID[r * 5:r * 5 + 5])) + "}"
                                                for r in range(3)) + "};\n"
    source = ("#include <cstdio>\n#include <cmath>\n"
              + f"static int tab[8] = {{{', '.join(map(str, TAB))}}};\n" + grid
              + f"static void run({_signature(lambda t: t.c_name)})\n{{\n    using namespace std;\n{body}\n}}\n"
              + "int main()\n{\n" + "".join(f"    run({_call_args(env)});\n" for env in INPUTS) + "    return 0;\n}\n")
    _check_outputs(_run(tmp_path, "exprs_cuda", source, cpp=True), EXPRS, texts)


IR_HEADER = "kernel k(" + ", ".join(f"{v}: {t.name}" for v, t in VARS.items()) + ", tab: i32*) {\n  local m: i32[3][5]\n"


def test_ir_text_reads_back_to_the_same_expressions() -> None:
    texts = [format_expr(e) for e in EXPRS]
    body = "".join(f"  var r{i}: {e.type.name} = {t}\n" for i, (e, t) in enumerate(zip(EXPRS, texts)))
    kernel = parse_kernel(IR_HEADER + body + "}\n")
    for e, t, decl in zip(EXPRS, texts, kernel.body):
        assert decl.init == e, t


# ---------------------------------------------------------------------------- hand-picked cases
a, b, c, x, p = n.Var("a", I32), n.Var("b", I32), n.Var("c", U32), n.Var("x", F64), n.Var("p", BOOL)
u, g = n.Var("u", U16), n.Var("g", I8)
q = n.Binary("div", n.Binary("add", b, n.Const(3, I32)), n.Const(4, I32))
CLAMP = n.Select(n.Binary("lt", n.Const(0, I32), q), q, n.Const(0, I32))  # the gradient's loop bound


@pytest.mark.parametrize("e, ir, cuda, c_text", [
    (n.Binary("lt", a, CLAMP), "a < (0 < (b + 3) / 4 ? (b + 3) / 4 : 0)",
     "a < (0 < (b + 3) / 4 ? (b + 3) / 4 : 0)", "a < (0 < (b + 3) / 4 ? (b + 3) / 4 : 0)"),
    (n.Select(p, n.Select(p, a, b), n.Select(p, b, a)), "p ? (p ? a : b) : (p ? b : a)",
     "p ? (p ? a : b) : (p ? b : a)", "p ? (p ? a : b) : p ? b : a"),
    (n.Unary("neg", n.Unary("neg", a)), "-(-a)", "-(-a)", "-(-a)"),
    (n.Unary("neg", n.Cast(I32, n.Unary("neg", a))), "-((i32)(-a))", "-((int)(-a))", "-(-a)"),
    (n.Unary("neg", n.Const(5, I32)), "-(5)", "-5", "-5"),
    (n.Binary("sub", a, n.Const(-5, I32)), "a - -5", "a - -5", "a - -5"),
    (n.Cast(F64, n.Binary("add", a, b)), "(f64)(a + b)", "(double)(a + b)", "(double)(a + b)"),
    (n.Binary("mul", n.Cast(F64, a), x), "(f64)a * x", "(double)a * x", "(double)a * x"),
    (n.Binary("sub", a, n.Binary("sub", b, a)), "a - (b - a)", "a - (b - a)", "a - (b - a)"),
    (n.Binary("shl", n.Binary("add", c, c), n.Const(2, U32)), "c + c << 2u", "c + c << 2u", "(c + c) << 2u"),
    (n.Binary("lor", n.Binary("land", p, p), p), "p && p || p", "p && p || p", "(p && p) || p"),
    (n.Unary("not", n.Binary("eq", a, b)), "!(a == b)", "!(a == b)", "!(a == b)"),
    # C promotes narrow operands to int: results are cast back, u16 products computed unsigned
    (n.Binary("mul", u, u), "u * u", "(unsigned short)((unsigned int)u * u)", "(unsigned short)((unsigned int)u * u)"),
    (n.Binary("mul", n.Unary("neg", g), g), "-g * g", "(signed char)((signed char)(-g) * g)",
     "(signed char)((signed char)(-g) * g)"),
    (n.Binary("add", CLAMP, a), "(0 < (b + 3) / 4 ? (b + 3) / 4 : 0) + a",
     "(0 < (b + 3) / 4 ? (b + 3) / 4 : 0) + a", "(0 < (b + 3) / 4 ? (b + 3) / 4 : 0) + a"),
])
def test_parenthesization(e: n.Expr, ir: str, cuda: str, c_text: str) -> None:
    assert format_expr(e) == ir
    assert CudaExprPrinter().expr(e) == cuda
    assert _c_renderer(False).expr(e) == c_text


def test_levels_follow_c() -> None:
    order = ["lor", "land", "bor", "bxor", "band", "eq", "lt", "shl", "add", "mul"]
    levels = [cexpr.BINARY_PREC[op] for op in order]
    assert levels == sorted(levels) and len(set(levels)) == len(levels)
    assert cexpr.SELECT < levels[0] and cexpr.UNARY > levels[-1] and cexpr.TOP < cexpr.SELECT
    assert cexpr.right_operand("sub") == cexpr.left_operand("sub") + 1


# ---------------------------------------------------------------------------- statement splices
def _loop_bounds() -> list[n.Expr]:
    """i32 expressions between -3 and 40 on every input, as `for` bounds; the gradient's first."""
    gen, out = Gen(5), [CLAMP]
    while len(out) < 40:
        e = gen.gen(I32, 3)
        try:
            if all(-3 <= evaluate(e, env) <= 40 for env in INPUTS):
                out.append(e)
        except Undefined:
            continue
    return out


BOUNDS = _loop_bounds()


def _loop(stop: n.Expr, i: int) -> n.For:
    count = n.Assign("cnt", n.Binary("add", n.Var("cnt", I32), n.Const(1, I32)))
    step = n.Const(1, I32) if i % 2 == 0 else n.Select(p, n.Const(1, I32), n.Const(2, I32))
    return n.For(f"t{i}", I32, n.Const(0, I32), stop, step, (count,))


def _trips(stop: n.Expr, i: int, env: dict) -> int:
    step = 1 if i % 2 == 0 or env["p"] else 2
    return len(range(0, evaluate(stop, env), step))


@pytest.mark.parametrize("language", ["c", "cuda"])
def test_for_bounds_and_steps(tmp_path, language: str) -> None:
    loops = [_loop(stop, i) for i, stop in enumerate(BOUNDS)]
    blocks = []
    for s in loops:
        if language == "c":
            out: list[str] = []
            _c_renderer(False).for_loop(s, 1, out)
        else:
            printer = CudaStmtPrinter()
            printer.stmt(s, 1)
            out = printer.lines
        blocks.append("    {\n    int cnt = 0;\n" + "\n".join(out) + '\n    printf("%d\\n", cnt);\n    }')
    assert "t0 < (0 < (b + 3) / 4 ? (b + 3) / 4 : 0)" in blocks[0]
    head = ("#include <stdio.h>\n#include <stdlib.h>\n#include <stdbool.h>\n#include <stddef.h>\n#include <math.h>\n"
            + PRELUDE)
    if language == "cuda":
        head = head.replace("static int m[15]", "static int m_flat[15]") + \
            "static int (*m)[5] = (int (*)[5])m_flat;\n"
    source = (head + f"static void run({_signature(lambda t: t.c_name)})\n{{\n" + "\n".join(blocks) + "\n}\n"
              + "int main(void)\n{\n" + "".join(f"    run({_call_args(env)});\n" for env in INPUTS)
              + "    return 0;\n}\n")
    lines = _run(tmp_path, f"loops_{language}", source, cpp=language == "cuda")
    want = [_trips(stop, i, env) for env in INPUTS for i, stop in enumerate(BOUNDS)]
    assert [int(v) for v in lines] == want


def test_ir_for_statements_read_back() -> None:
    loops = tuple(_loop(stop, i) for i, stop in enumerate(BOUNDS))
    text = print_stmts(loops)
    kernel = parse_kernel(IR_HEADER + "  var cnt: i32 = 0\n" + "\n".join("  " + line for line in text.splitlines())
                          + "\n}\n")
    assert kernel.body[1:] == loops


# ---------------------------------------------------------------------------- the gradient that looped
GRAD_MAIN = r"""
#include "matmul_grad.cpp"
#include <cstdio>
int main()
{
    const int M = 13, N = 11, K = 19, T = 8;
    static double A[M * K], B[K * N], C[M * N], dA[M * K], dB[K * N], dC[M * N];
    for (int i = 0; i < M * K; ++i) A[i] = 0.01 * (i % 17) - 0.05;
    for (int i = 0; i < K * N; ++i) B[i] = 0.02 * (i % 13) - 0.1;
    for (int i = 0; i < M * N; ++i) dC[i] = 0.03 * (i % 7) - 0.09;
    matmul_tiled_grad_launch(dim3((N + T - 1) / T, (M + T - 1) / T), dim3(T, T), 0, A, dA, B, dB, C, dC, M, N, K);
    for (int i = 0; i < M * K; ++i) printf("%.17g\n", dA[i]);
    for (int i = 0; i < K * N; ++i) printf("%.17g\n", dB[i]);
    return 0;
}
"""


def test_tiled_matmul_gradient_translates_and_terminates(tmp_path) -> None:
    compiler = find_compiler(True)
    if compiler is None:
        pytest.skip("no C++ compiler on this machine")
    source = sample("matmul_tiled").source.read_text()
    assert "#define TILE 16\n" in source
    (tmp_path / "matmul8.cu").write_text(source.replace("#define TILE 16\n", "#define TILE 8\n"))
    grad = tmp_path / "matmul_grad.cu"
    assert main(["grad", str(tmp_path / "matmul8.cu"), "--kernel", "matmul_tiled", "-D", "REAL=double",
                 "-o", str(grad)]) == 0
    assert main(["translate", str(grad), "-o", str(tmp_path / "matmul_grad.cpp")]) == 0
    (tmp_path / "main.cpp").write_text(GRAD_MAIN)
    exe = tmp_path / "main"
    built = subprocess.run([compiler, "-O1", "-fopenmp", str(tmp_path / "main.cpp"), "-o", str(exe), "-lm"],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[:4000]
    try:
        ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60,
                             env={"OMP_NUM_THREADS": "2"})
    except subprocess.TimeoutExpired:
        pytest.fail("the translated tiled-matmul gradient did not terminate (loop bound misprinted?)")
    assert ran.returncode == 0, ran.stderr[:2000]
    m, nn, k = 13, 11, 19
    a_ = np.array([0.01 * (i % 17) - 0.05 for i in range(m * k)]).reshape(m, k)
    b_ = np.array([0.02 * (i % 13) - 0.1 for i in range(k * nn)]).reshape(k, nn)
    dc = np.array([0.03 * (i % 7) - 0.09 for i in range(m * nn)]).reshape(m, nn)
    got = np.array([float(v) for v in ran.stdout.split()])
    np.testing.assert_allclose(got[:m * k], (dc @ b_.T).ravel(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got[m * k:], (a_.T @ dc).ravel(), rtol=1e-12, atol=1e-14)

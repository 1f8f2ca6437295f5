"""Mutants of the samples for tests/fuzz_driver.py: seeded, reproducible, one mutation each.

``make_mutant(seed, index, sources)`` is a pure function of its arguments: the same bytes on every
run and machine. Text is handled as Latin-1 so that every byte string round-trips; tokens come from
a simple splitter (good enough to pick something to edit, not a C parser).
"""
from __future__ import annotations

import dataclasses
import pathlib
import random
import re
from typing import Callable, Iterable

ROOT = pathlib.Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"


# --------------------------------------------------------------------------- sources

@dataclasses.dataclass(frozen=True)
class Source:
    name: str            # e.g. "saxpy" or "programs/jacobi_solver"
    data: bytes
    kernel: str | None   # the kernel grad differentiates; None for whole programs


def kernel_names() -> dict[str, str]:
    """Kernel sample name -> its kernel, read from ``samples/<name>.py`` without importing it
    (``kernel="..."`` in the ``Sample(...)`` call)."""
    out = {}
    for py in sorted(SAMPLES.glob("*.py")):
        m = re.search(r"""\bkernel\s*=\s*["'](\w+)["']""", py.read_text(encoding="utf-8"))
        if m and py.with_suffix(".cu").exists():
            out[py.stem] = m.group(1)
    return out


def load_sources() -> list[Source]:
    """Every sample's source: kernel samples (with their kernel) and whole programs."""
    kernels = kernel_names()
    out = [Source(cu.stem, cu.read_bytes(), kernels.get(cu.stem)) for cu in sorted(SAMPLES.glob("*.cu"))]
    out += [Source(f"programs/{cu.stem}", cu.read_bytes(), None)
            for cu in sorted((SAMPLES / "programs").glob("*.cu"))]
    return out


# --------------------------------------------------------------------------- mutations

_TOKEN = re.compile(
    r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'"
    r"|(?P<ident>[A-Za-z_]\w*)"
    r"|(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFuUlL]*|0[xX][0-9a-fA-F]+[uUlL]*)"
    r"|(?P<op><<=|>>=|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|::|[^\sA-Za-z_0-9])",
    re.S)

_ODD_NUMBERS = ("0", "-1", "1", "2147483647", "2147483648", "4294967296", "-2147483648", "1e309",
                "0x7fffffffffffffff", "18446744073709551616", "1e-320f", "0.0f", "3.5", "1u", "07", "08")
_OPERATORS = ("+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", "&&", "||", "<", ">", "==", "!=",
              "=", "+=", "?", ":", ",", ";", "(", ")", "{", "}", "[", "]", "!", "~", "->", ".", "::")
_KEYWORDS = ("if", "else", "for", "while", "do", "return", "break", "continue", "goto", "switch", "case",
             "default", "int", "float", "double", "unsigned", "char", "void", "struct", "const",
             "static", "__shared__", "__global__", "__device__", "__syncthreads", "threadIdx", "blockIdx",
             "blockDim", "gridDim", "atomicAdd", "sizeof", "extern", "volatile", "auto", "template",
             "typename", "new", "delete", "this", "nullptr")

# Pieces of C++ (and of CUDA polypy may not support), inserted at a line boundary.
CXX_SNIPPETS = (
    "template <typename T> __device__ T twice(T v) { return v + v; }\n",
    "namespace fz { __device__ int one() { return 1; } }\n",
    "class Box { public: int v; virtual int get() { return v; } };\n",
    "struct Op { __device__ float operator()(float a) const { return a * 2.0f; } };\n",
    "auto lam = [](int a) { return a + 1; };\n",
    "int &ref = *(int *)0;\n",
    "static_assert(sizeof(int) == 4, \"int\");\n",
    "constexpr int K = 3;\n",
    "using real_t = float;\n",
    "typedef struct { int a; float b; } pair_t;\n",
    "union U { int i; float f; };\n",
    "enum class Color { Red, Green };\n",
    "__device__ int rec(int n) { return n <= 0 ? 0 : rec(n - 1) + 1; }\n",
    "__device__ int (*fp)(int) = 0;\n",
    "__device__ float va(int n, ...) { return 0.0f; }\n",
    "try { throw 1; } catch (...) { }\n",
    "int *p = new int[4]; delete[] p;\n",
    "for (int k : {1, 2, 3}) { }\n",
    "goto fz_label; fz_label: ;\n",
    "asm volatile(\"nop\");\n",
    "switch (threadIdx.x) { case 0: break; default: break; }\n",
    "do { } while (0);\n",
    "printf(\"%d\\n\", threadIdx.x);\n",
    "__shared__ float fz_sh[1 << 30];\n",
    "float fz_local[0];\n",
    "int fz_vla[blockDim.x];\n",
    "__syncthreads();\n",
    "if (threadIdx.x == 0) __syncthreads();\n",
    "return;\n",
    "while (1) { }\n",
    "for (;;) break;\n",
    "int fz_x = fz_x + 1;\n",
    "float fz_y = 1.0f / 0.0f;\n",
    "int fz_z = 1 / 0;\n",
    "long long fz_w = 1LL << 63;\n",
    "__half h;\n",
    "#include <vector>\n",
    "#include \"does_not_exist.h\"\n",
    "#define FZ(x) ((x) * (x))\n",
    "#pragma omp parallel for\n",
    "#if 0\n",
    "#endif\n",
    "#error fuzz\n",
    "extern \"C\" { }\n",
    "__global__ void fz_kernel(float *a) { a[threadIdx.x] = 0; }\n",
    "__global__ void fz_kernel2(float *a) { fz_kernel<<<1, 1>>>(a); }\n",
    "int main() { return 0; }\n",
    "struct S { S() {} ~S() {} int v; };\n",
    "template <int N> struct Fix { static const int v = N; };\n",
    "__device__ __forceinline__ float fz_inl(float a) { return a; }\n",
    "register int fz_r = 0;\n",
    "__restrict__ float *fz_q;\n",
    "float2 fz_v2 = make_float2(1.0f, 2.0f); fz_v2.x += fz_v2.y;\n",
    "int fz_arr[3] = {1, 2, 3, 4};\n",
    "char fz_s[] = \"\\xff\\0abc\";\n",
    "wchar_t fz_wc = L'x';\n",
    "__builtin_trap();\n",
    "__builtin_unreachable();\n",
)


def _tokens(text: str) -> list[re.Match]:
    return list(_TOKEN.finditer(text))


def _kind(m: re.Match) -> str:
    return "ident" if m.group("ident") else "number" if m.group("number") else "op" if m.group("op") else "other"


def _line_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in re.finditer(r"\n", text)]


def _body_line(rng: random.Random, text: str) -> int:
    """An offset at the start of a line, preferring lines inside a function body."""
    starts = _line_starts(text)
    inside = [s for s in starts if text[max(0, s - 2):s].strip().endswith(("{", ";"))]
    return rng.choice(inside or starts)


def mutate_byte_flip(rng: random.Random, text: str, others: list[Source]) -> str:
    b = bytearray(text.encode("latin-1"))
    for _ in range(rng.randint(1, 6)):
        if not b:
            break
        i = rng.randrange(len(b))
        b[i] = b[i] ^ (1 << rng.randrange(8)) if rng.random() < 0.6 else rng.choice(b"(){}[];,<>*&+-=!~?:#\"'\\0189 \n")
    return b.decode("latin-1")


def mutate_token(rng: random.Random, text: str, others: list[Source]) -> str:
    toks = [m for m in _tokens(text) if _kind(m) != "other"]
    if not toks:
        return text
    out = text
    for _ in range(rng.randint(1, 3)):
        toks = [m for m in _tokens(out) if _kind(m) != "other"]
        if len(toks) < 2:
            break
        op = rng.choice(("delete", "duplicate", "swap", "replace", "replace", "odd"))
        a = rng.choice(toks)
        if op == "delete":
            out = out[:a.start()] + out[a.end():]
        elif op == "duplicate":
            out = out[:a.end()] + " " + a.group() + out[a.end():]
        elif op == "swap":
            b = rng.choice(toks)
            first, second = sorted((a, b), key=lambda m: m.start())
            if first.end() <= second.start():
                out = (out[:first.start()] + second.group() + out[first.end():second.start()]
                       + first.group() + out[second.end():])
        elif op == "replace":
            same = [m.group() for m in toks if _kind(m) == _kind(a)]
            out = out[:a.start()] + rng.choice(same) + out[a.end():]
        else:  # an odd number, operator or keyword where a token of that kind was
            pool = {"number": _ODD_NUMBERS, "op": _OPERATORS}.get(_kind(a), _KEYWORDS)
            out = out[:a.start()] + rng.choice(pool) + out[a.end():]
    return out


def mutate_truncate(rng: random.Random, text: str, others: list[Source]) -> str:
    return text[:rng.randrange(len(text) + 1)]


def mutate_long_line(rng: random.Random, text: str, others: list[Source]) -> str:
    n = rng.choice((1000, 10_000, 100_000, 400_000))
    piece = rng.choice((
        "// " + "x" * n + "\n",
        "/* " + "y" * n + " */\n",
        " " * n + "\n",
        "int " + "a" * min(n, 100_000) + " = 0;\n",
        "const char *fz_str = \"" + "z" * n + "\";\n",
        "#define FZ_LONG " + "1 + " * (n // 4) + "1\n",
        "\t" * n + ";\n",
        ";" * n + "\n",
    ))
    if rng.random() < 0.3:  # make an existing line long instead
        starts = _line_starts(text)
        at = rng.choice(starts)
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        return text[:end] + " " * n + "/*" + "w" * 10 + "*/" + text[end:]
    at = _body_line(rng, text)
    return text[:at] + piece + text[at:]


def _depth(rng: random.Random) -> int:
    return rng.choice((16, 64, 200, 256, 1000, 3000, 10_000))


def mutate_deep_nesting(rng: random.Random, text: str, others: list[Source]) -> str:
    depth = _depth(rng)
    toks = [m for m in _tokens(text) if _kind(m) in ("ident", "number")]
    how = rng.choice(("parens", "ifs", "blocks", "ternary", "brackets"))
    if how == "parens" and toks:
        a = rng.choice(toks)
        return text[:a.start()] + "(" * depth + a.group() + ")" * depth + text[a.end():]
    if how == "ternary" and toks:
        a = rng.choice(toks)
        return text[:a.start()] + "(1 ? " * depth + a.group() + " : 0)" * depth + text[a.end():]
    if how == "brackets" and toks:
        a = rng.choice(toks)
        return text[:a.start()] + "+" * depth + a.group() + text[a.end():]
    at = _body_line(rng, text)
    end = text.find("\n", at)
    end = len(text) if end < 0 else end
    line = text[at:end]
    if how == "ifs":
        return text[:at] + "if (1) {" * depth + line + "}" * depth + text[end:]
    return text[:at] + "{" * depth + line + "}" * depth + text[end:]


def mutate_long_expression(rng: random.Random, text: str, others: list[Source]) -> str:
    toks = [m for m in _tokens(text) if _kind(m) in ("ident", "number")]
    if not toks:
        return text
    a = rng.choice(toks)
    n = rng.choice((10, 100, 1000, 5000, 20_000))
    op = rng.choice((" + ", " * ", " - ", " && ", ", ", " | "))
    expr = "(" + op.join([a.group()] * n) + ")"
    return text[:a.start()] + expr + text[a.end():]


_BAD_BYTES = (b"\xff", b"\xfe\xff", b"\x80", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf",
              b"\x00", b"\xe9", b"\xef\xbb\xbf", b"\r", b"\x0c", b"\x1b[31m", b"\xe2\x80\xae")


def mutate_non_utf8(rng: random.Random, text: str, others: list[Source]) -> str:
    data = text.encode("latin-1")
    how = rng.choice(("insert", "insert", "comment", "string", "identifier", "bom", "utf16", "latin1", "crlf"))
    if how == "utf16":
        return data.decode("latin-1").encode("utf-16").decode("latin-1")
    if how == "bom":
        return ("\xef\xbb\xbf" + text)
    if how == "crlf":
        return text.replace("\n", rng.choice(("\r\n", "\r")))
    if how == "latin1":  # a Latin-1 comment, as old sources have
        at = _body_line(rng, text)
        return text[:at] + "// caf\xe9 \xb5s \xa9\n" + text[at:]
    bad = b"".join(rng.choice(_BAD_BYTES) for _ in range(rng.randint(1, 4))).decode("latin-1")
    toks = _tokens(text)
    if how == "comment":
        at = _body_line(rng, text)
        return text[:at] + "// " + bad + "\n" + text[at:]
    if how == "string":
        at = _body_line(rng, text)
        return text[:at] + "const char *fz_s = \"" + bad + "\";\n" + text[at:]
    if how == "identifier" and toks:
        idents = [m for m in toks if _kind(m) == "ident"] or toks
        a = rng.choice(idents)
        cut = rng.randint(a.start(), a.end())
        return text[:cut] + bad + text[cut:]
    at = rng.randrange(len(text) + 1)
    return text[:at] + bad + text[at:]


def mutate_cxx(rng: random.Random, text: str, others: list[Source]) -> str:
    out = text
    for _ in range(rng.randint(1, 2)):
        at = _body_line(rng, out) if rng.random() < 0.7 else rng.choice(_line_starts(out))
        out = out[:at] + rng.choice(CXX_SNIPPETS) + out[at:]
    return out


def mutate_splice(rng: random.Random, text: str, others: list[Source]) -> str:
    other = rng.choice(others).data.decode("latin-1")
    lines = [ln for ln in other.splitlines(keepends=True) if ln.strip()]
    if not lines:
        return text
    i = rng.randrange(len(lines))
    chunk = "".join(lines[i:i + rng.randint(1, 4)])
    at = _body_line(rng, text)
    return text[:at] + chunk + text[at:]


MUTATIONS: dict[str, Callable[[random.Random, str, list[Source]], str]] = {
    "byte_flip": mutate_byte_flip,
    "token": mutate_token,
    "truncate": mutate_truncate,
    "long_line": mutate_long_line,
    "deep_nesting": mutate_deep_nesting,
    "long_expression": mutate_long_expression,
    "non_utf8": mutate_non_utf8,
    "cxx": mutate_cxx,
    "splice": mutate_splice,
}
# How often each mutation is drawn (token edits and byte flips reach the most code paths).
WEIGHTS = {"byte_flip": 3, "token": 6, "truncate": 2, "long_line": 1, "deep_nesting": 1,
           "long_expression": 1, "non_utf8": 2, "cxx": 3, "splice": 2}


@dataclasses.dataclass(frozen=True)
class Mutant:
    index: int
    source: Source
    kind: str
    data: bytes

    @property
    def label(self) -> str:
        return f"{self.index:05d}-{self.source.name.replace('/', '_')}-{self.kind}"


def make_mutant(seed: int, index: int, sources: list[Source], kinds: Iterable[str] | None = None) -> Mutant:
    """Mutant ``index`` of ``seed``: the same bytes on every run and machine."""
    rng = random.Random(f"polypy-fuzz:{seed}:{index}")
    source = rng.choice(sources)
    names = sorted(kinds) if kinds is not None else sorted(MUTATIONS)
    kind = rng.choices(names, weights=[WEIGHTS[k] for k in names])[0]
    text = MUTATIONS[kind](rng, source.data.decode("latin-1"), sources)
    return Mutant(index, source, kind, text.encode("latin-1"))

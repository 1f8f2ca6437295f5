"""Early returns against an oracle that shares no code with polypy.

``remove_returns`` (inlined device functions) and ``eliminate_returns`` (kernels) restructure
``return`` into ifs; the emulator runs the restructured IR, so it cannot catch a wrong
restructuring. Here seeded random nests of ifs and returns are evaluated directly in Python and
compared with the emulator and the LLVM backend, for every input bit pattern.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

import polypy

BITS = 5  # conditions test bits of the input: every path is taken by some input in 0..31


def _block(rng: random.Random, depth: int) -> list:
    out: list = []
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        if depth < 3 and roll < 0.45:
            orelse = _block(rng, depth + 1) if rng.random() < 0.4 else []
            out.append(("if", rng.randrange(BITS), _block(rng, depth + 1), orelse))
        elif roll < 0.7:
            out.append(("ret", rng.randint(1, 50)))
            break  # code after a return is dead
        else:
            out.append(("add", rng.randint(1, 9)))
    return out


def _run(block: list, v: int, r: list[int]) -> int | None:
    """Python semantics: None when control falls off the block, else the returned value."""
    for s in block:
        if s[0] == "add":
            r[0] = r[0] * 3 + s[1]
        elif s[0] == "ret":
            return r[0] * 7 + s[1]
        else:
            taken = s[2] if (v >> s[1]) & 1 else s[3]
            got = _run(taken, v, r)
            if got is not None:
                return got
    return None


def _c(block: list, indent: str, on_return) -> str:
    lines = []
    for s in block:
        if s[0] == "add":
            lines.append(f"{indent}r = r * 3 + {s[1]};")
        elif s[0] == "ret":
            lines.append(f"{indent}{on_return(s[1])}")
        else:
            lines.append(f"{indent}if ((v >> {s[1]}) & 1) {{")
            lines.append(_c(s[2], indent + "  ", on_return))
            if s[3]:
                lines.append(f"{indent}}} else {{")
                lines.append(_c(s[3], indent + "  ", on_return))
            lines.append(f"{indent}}}")
    return "\n".join(lines)


def _program(seeds: list[int]) -> tuple[str, dict[str, list]]:
    parts, bodies = [], {}
    for seed in seeds:
        body = _block(random.Random(seed), 0)
        bodies[f"d{seed}"] = body
        bodies[f"k{seed}"] = body
        parts.append(f"__device__ int f{seed}(int v) {{\n  int r = 1;\n"
                     f"{_c(body, '  ', lambda c: f'return r * 7 + {c};')}\n  return -1;\n}}\n"
                     f"__global__ void d{seed}(int* out) {{\n  int v = threadIdx.x;\n"
                     f"  out[v] = f{seed}(v);\n}}\n"
                     f"__global__ void k{seed}(int* out) {{\n  int v = threadIdx.x;\n  int r = 1;\n"
                     f"{_c(body, '  ', lambda c: f'{{ out[v] = r * 7 + {c}; return; }}')}\n"
                     f"  out[v] = -1;\n}}\n")
    return "\n".join(parts), bodies


SEEDS = list(range(60))


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    source, bodies = _program(SEEDS)
    path = tmp_path_factory.mktemp("returns") / "returns.cu"
    path.write_text(source)
    return polypy.compile(str(path)), polypy.load(str(path)), bodies


def _expected(body: list) -> np.ndarray:
    out = []
    for v in range(1 << BITS):
        got = _run(body, v, [1])
        out.append(-1 if got is None else got)
    return np.array(out, dtype=np.int32)


@pytest.mark.parametrize("name", [f"{p}{s}" for s in SEEDS for p in "dk"])
def test_random_returns_agree_with_python(compiled, name):
    module, loaded, bodies = compiled
    want = _expected(bodies[name])
    out = np.zeros(1 << BITS, np.int32)
    module[name][1, 1 << BITS](out)
    np.testing.assert_array_equal(out, want)
    emulated = np.zeros(1 << BITS, np.int32)
    polypy.emulate(loaded.kernel(name), 1, 1 << BITS, {"out": emulated})
    np.testing.assert_array_equal(emulated, want)


def test_nested_return_in_continuing_branch(tmp_path):
    """The reported case: the inner return sits in a branch that goes on to more code."""
    path = tmp_path / "nested.cu"
    path.write_text("__device__ int f(int v, int c) { if (c) { if (v == 0) return 1; } return 3; }\n"
                    "__global__ void k(int* out, const int* v, int c) { int i = threadIdx.x; out[i] = f(v[i], c); }\n")
    module = polypy.compile(str(path))
    v = np.array([0, 1, 0, 2], np.int32)
    out = np.zeros(4, np.int32)
    module.k[1, 4](out, v, 1)
    np.testing.assert_array_equal(out, [1, 3, 1, 3])
    module.k[1, 4](out, v, 0)
    np.testing.assert_array_equal(out, [3, 3, 3, 3])

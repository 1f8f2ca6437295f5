"""Privacy per barrier interval (``polypy.poly.intervals``) and the gradients that use it: a tree
reduction's reads ``red[tid]``/``red[tid + s]`` in its halving loop touch elements no other
thread of the block touches between the same two barriers, so their adjoints are plain ``+=``
(issue 12, item 4). Checked: the answer on the loops of layernorm, reduce_sum and softmax_rows,
the cases it must refuse (two threads reading one element in one iteration, a loop variable that
depends on the thread, an access before the loop in the first iteration's interval, a read after
the loop), the report and the emitted CUDA, and the gradients against finite differences and the
emulator's race check (a plain update two threads make between the same barriers is a race there).
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from autodiff.normalize import normalize_for_ad
from polypy.driver.gradients import grad_kernel, gradient_source
from polypy.driver.source import load
from polypy.ir import nodes as n
from polypy.poly.intervals import interval_private
from polypy.poly.paths import iter_statements, statement_accesses
from samples.spec import sample


def _shared_reads(kernel: n.Kernel) -> list[tuple[tuple, n.Load, str]]:
    """(path, load, text of the load's index) of every read of a shared array."""
    from polypy.ir.printer import format_expr

    out = []
    for path, stmt in iter_statements(kernel.body):
        for raw in statement_accesses(stmt):
            if raw.kind == "read" and kernel.space(raw.buffer) == "shared":
                out.append((path, raw.node, format_expr(raw.node)))
    return out


def _answers(source: str, name: str, *, normalized: bool = False) -> list[tuple[str, bool, str]]:
    kernel = load(None, text=source).kernel(name)
    if normalized:
        kernel = normalize_for_ad(kernel)
    return [(text, *interval_private(kernel, path, load_)) for path, load_, text in _shared_reads(kernel)]


TREE = r"""
__global__ void tree(const float* x, float* out)
{
    __shared__ float red[256];
    int tid = threadIdx.x;
    red[tid] = x[blockIdx.x * blockDim.x + tid];
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s)
            red[tid] += red[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = red[0];
}
"""


@pytest.mark.parametrize("normalized", [False, True])
def test_the_halving_loops_reads_are_private_per_interval_and_the_final_read_is_not(normalized):
    answers = _answers(TREE, "tree", normalized=normalized)
    inside = [a for a in answers if "+ s" in a[0] or a[0] == "red[tid]" or a[0] == "red[(i32)threadIdx.x]"]
    assert len(answers) == 3, answers
    loop_reads = [a for a in answers if a[0] != "red[0]"]
    assert len(loop_reads) == 2 and all(ok for _, ok, _ in loop_reads), answers
    assert all("between the same two barriers" in why for _, _, why in loop_reads)
    final = [a for a in answers if a[0] == "red[0]"]
    assert final and not final[0][1]
    assert inside  # the texts are as expected


def test_two_threads_reading_one_element_in_one_iteration_are_not_private():
    source = TREE.replace("red[tid] += red[tid + s];", "red[tid] += red[tid + s] + red[s];")
    answers = [a for a in _answers(source, "tree") if a[0] != "red[0]"]
    by_text = {text: (ok, why) for text, ok, why in answers}
    shared = [key for key in by_text if key.endswith("[s]")]
    assert shared and not by_text[shared[0]][0]
    assert "threads may access the same element" in by_text[shared[0]][1]


def test_a_loop_variable_that_depends_on_the_thread_is_not_trusted():
    # o halves like s but starts from the thread index: its value differs between threads.
    source = TREE.replace("    for (int s", "    int o = tid;\n    for (int s")
    source = source.replace("red[tid] += red[tid + s];", "red[tid] += red[tid + o];")
    source = source.replace("        __syncthreads();\n    }", "        __syncthreads();\n        o >>= 1;\n    }")
    assert "o >>= 1" in source and "red[tid + o]" in source
    answers = [a for a in _answers(source, "tree") if a[0] != "red[0]"]
    assert answers and not any(ok for _, ok, _ in answers)
    assert all("not block-uniform" in why for _, _, why in answers)


def test_an_access_before_the_loop_in_its_first_interval_is_refused():
    # The first iteration's interval starts at the barrier before the loop; a read of red by
    # another thread in between could meet the loop's first reads.
    source = TREE.replace("    __syncthreads();\n    for", "    __syncthreads();\n    float peek = red[0];\n"
                          "    if (tid == 0) out[gridDim.x + blockIdx.x] = peek;\n    for")
    answers = [a for a in _answers(source, "tree") if "s]" in a[0] or "+ s" in a[0]]
    assert answers and not any(ok for _, ok, _ in answers)
    assert any("first iteration" in why for _, _, why in answers)


def test_a_loop_with_a_second_barrier_is_refused():
    source = TREE.replace("red[tid] += red[tid + s];", "{ float t = red[tid + s]; __syncthreads(); red[tid] += t; }")
    source = source.replace("if (tid < s)\n", "")
    answers = [a for a in _answers(source, "tree") if a[0] != "red[0]"]
    assert answers and not any(ok for _, ok, _ in answers)


@pytest.mark.parametrize("name", ["layernorm", "reduce_sum", "softmax_rows"])
def test_the_gradient_updates_the_reduction_adjoint_without_atomics(name):
    s = sample(name)
    module = load(s.source, defines={**s.defines, "REAL": "double"})
    report: list = []
    gradient = grad_kernel(module, s.kernel, wrt=list(s.wrt), report=report)
    accumulations = [d for d in report if type(d).__name__ == "Accumulation" and d.buffer in
                     {b.name for b in module.kernel(s.kernel).buffers if b.space == "shared"}]
    assert accumulations, report
    plain = [d for d in accumulations if d.strategy == "plain"]
    assert plain, [d.format() for d in accumulations]
    assert all("between the same two barriers" in d.reason or "at most one thread" in d.reason for d in plain)
    shared_shadows = {b.name for b in gradient.buffers if b.space == "shared" and b.name.startswith("d_")}
    # In the emitted CUDA, atomics on shared shadows remain only for the reads every thread makes.
    atomics = [x for x in polypy.ir.visitor.walk(gradient) if isinstance(x, n.AtomicRMW)
               and x.buffer in shared_shadows]
    assert len(atomics) < len(accumulations)
    text = gradient_source(module, gradient)
    assert "__global__" in text


@pytest.mark.parametrize("name", ["layernorm", "reduce_sum", "softmax_rows"])
def test_the_gradient_matches_finite_differences_and_the_emulator_finds_no_race(name):
    s = sample(name)
    mod = polypy.compile(s.source, defines={**s.defines, "REAL": "double"})
    kernel = getattr(mod, s.kernel)
    grad = polypy.grad(kernel, wrt=list(s.wrt))
    case = s.cases[0]
    rng = np.random.default_rng(11)
    args = s.make_args(rng, case, np.float64)
    config = (case.grid, case.block, case.shmem)
    seeds = {o: rng.standard_normal(np.asarray(args[o]).shape) for o in s.outputs}
    full = dict(args)
    for p in grad.gpu.params:
        if p.name.startswith("d_") and p.name[2:] in args and isinstance(args[p.name[2:]], np.ndarray):
            full[p.name] = seeds[p.name[2:]].copy() if p.name[2:] in seeds else np.zeros_like(args[p.name[2:]])
    emulated = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in full.items()}
    grad.emulate[config](**emulated)  # raises on a race
    compiled = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in full.items()}
    grad[config](**compiled)
    for w in s.wrt:
        np.testing.assert_allclose(compiled["d_" + w], emulated["d_" + w], rtol=1e-9, atol=1e-9)
    # Finite differences of <seed, outputs> along one random direction of the first active input.
    w = s.wrt[0]
    direction = rng.standard_normal(np.asarray(args[w]).shape)
    eps = 1e-6

    def objective(shift: float) -> float:
        moved = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        moved[w] = args[w] + shift * direction
        kernel[config](**moved)
        return sum(float(np.sum(seeds[o] * moved[o])) for o in s.outputs)

    fd = (objective(eps) - objective(-eps)) / (2 * eps)
    assert np.isclose(float(np.sum(emulated["d_" + w] * direction)), fd, rtol=1e-5, atol=1e-7)

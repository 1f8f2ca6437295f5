"""Gradients of loops whose trip count is a kernel argument (issue 12, item 1): tapes sized at
launch, recomputation, and binomial checkpointing (revolve), checked against float64 central
finite differences through the compiled API (``polypy.grad``) and the emulator."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from autodiff import Caching
from autodiff.check import check_gradients
from autodiff.checkpoint import simulate
from polypy.driver.gradients import grad_kernel
from polypy.ir.visitor import walk
from samples.spec import sample

HEAT = sample("heat_steps")

# Our own kernel in the style of Rodinia hotspot's calculate_temp: a pyramid of time steps in
# shared memory, the number of steps an argument, a `computed` flag and a `break` on the last step.
HOTSPOT_LIKE = """#define BS 8
__global__ void pyramid(int iteration, const double* power, const double* temp_src, double* temp_dst,
                        int n, double step_div_cap, double rx, double ry)
{
    __shared__ double temp_on[BS][BS];
    __shared__ double power_on[BS][BS];
    __shared__ double temp_t[BS][BS];
    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int idx = (blockIdx.y * BS + ty) * n + blockIdx.x * BS + tx;
    temp_on[ty][tx] = temp_src[idx];
    power_on[ty][tx] = power[idx];
    __syncthreads();
    bool computed = false;
    for (int i = 0; i < iteration; i++) {
        computed = false;
        if (tx >= i + 1 && tx <= BS - i - 2 && ty >= i + 1 && ty <= BS - i - 2) {
            computed = true;
            temp_t[ty][tx] = temp_on[ty][tx] + step_div_cap * (power_on[ty][tx]
                + (temp_on[ty + 1][tx] + temp_on[ty - 1][tx] - 2.0 * temp_on[ty][tx]) * ry
                + (temp_on[ty][tx + 1] + temp_on[ty][tx - 1] - 2.0 * temp_on[ty][tx]) * rx);
        }
        __syncthreads();
        if (i == iteration - 1)
            break;
        if (computed)
            temp_on[ty][tx] = temp_t[ty][tx];
        __syncthreads();
    }
    if (computed)
        temp_dst[idx] = temp_t[ty][tx];
}
"""


def _heat_args(n: int, steps: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"u0": rng.uniform(-1, 1, n), "k": rng.uniform(0.5, 1.5, n), "u": np.zeros(n), "n": np.int32(n),
            "steps": np.int32(steps), "dt": 0.05}


def _reverse(g, config, args: dict, seeds: dict[str, np.ndarray]) -> dict:
    full = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    for p in g.gpu.params:
        if p.name not in full:
            primal = args[p.name[2:]]
            full[p.name] = seeds[p.name] if p.name in seeds else np.zeros(np.shape(primal) if isinstance(
                primal, np.ndarray) else 1)
    g[config](**full)
    return full


@pytest.fixture(scope="module")
def heat():
    return polypy.compile(HEAT.source, defines={"REAL": "double"})


def _fd(launch, args: dict, inputs: dict[str, np.ndarray], output: str, w: np.ndarray, h: float = 1e-6) -> float:
    def run(sign: float) -> np.ndarray:
        a = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        for name, v in inputs.items():
            a[name] = a[name] + sign * h * v
        launch(**a)
        return a[output]
    return float(w @ (run(1.0) - run(-1.0)) / (2 * h))


# "default": a tape sized at launch, chosen over the quadratic replay ("replay") by cost
HEAT_VARIANTS = (("taped", {"runtime_tapes": True}), ("default", {}), ("replay", {"runtime_tapes": False}),
                 ("revolve-1", {"checkpoint_budget": 1}),
                 ("revolve-2", {"checkpoint_budget": 2}), ("revolve-3", {"checkpoint_budget": 3}),
                 ("revolve-64", {"checkpoint_budget": 64}))


@pytest.fixture(scope="module")
def heat_grads(heat):
    return {label: polypy.grad(heat.heat_steps, wrt=["u0", "k"], **options) for label, options in HEAT_VARIANTS}


@pytest.mark.parametrize("steps", [0, 1, 2, 9, 30])
def test_time_stepping_taped_and_checkpointed_match_finite_differences(heat, heat_grads, steps: int) -> None:
    n, config = 40, (2, 32)
    args = _heat_args(n, steps)
    rng = np.random.default_rng(steps)
    v = {"u0": rng.standard_normal(n), "k": rng.standard_normal(n)}
    w = rng.standard_normal(n)
    fd = _fd(heat.heat_steps[config], args, v, "u", w)
    results = {}
    for label, g in heat_grads.items():
        out = _reverse(g, config, args, {"d_u": w.copy()})
        results[label] = (out["d_u0"], out["d_k"])
        got = float(out["d_u0"] @ v["u0"] + out["d_k"] @ v["k"])
        assert abs(got - fd) <= 1e-6 * max(1.0, abs(fd)), (label, got, fd)
        np.testing.assert_allclose(out["u"], HEAT.reference(args, None)["u"], rtol=1e-12, atol=1e-12)
    # checkpointing re-runs the same forward statements on the same values: identical gradients
    for label, (du0, dk) in results.items():
        np.testing.assert_array_equal(du0, results["taped"][0], err_msg=label)
        np.testing.assert_array_equal(dk, results["taped"][1], err_msg=label)


def test_tape_grows_with_steps_and_checkpoints_stay_bounded(heat_grads) -> None:
    taped, revolve = heat_grads["taped"], heat_grads["revolve-3"]
    config = (1, 32)
    tapes, snaps = [], []
    for steps in (1, 10, 100, 1000):
        args = {**_heat_args(32, steps), "d_u0": np.zeros(32), "d_k": np.zeros(32), "d_u": np.zeros(32)}
        tapes.append(taped.memory(config, **args)["tape"])
        snaps.append(revolve.memory(config, **args))
    assert tapes == sorted(tapes) and tapes[-1] >= 1000 > tapes[0]
    assert all(s == snaps[0] for s in snaps) and snaps[0]["tape"] == 0
    assert snaps[0]["checkpoint"] == 3 * 3  # 3 snapshots of a, b and the iteration number


def test_checkpoint_report_names_the_budget() -> None:
    module = polypy.load(HEAT.source, defines={"REAL": "double"})
    report: list = []
    grad_kernel(module, "heat_steps", wrt=["u0", "k"], checkpoint_budget=4, report=report)
    [d] = [d for d in report if isinstance(d, Caching) and d.strategy == "checkpoint"]
    assert "4 snapshots of 2 values" in d.detail and d.loc is not None and d.loc.line == 19


@pytest.mark.parametrize("budget", [1, 2, 3, 100])
def test_revolve_in_the_emulator_with_forward_mode(budget: int) -> None:
    module = polypy.load(HEAT.source, defines={"REAL": "double"})
    k = module.kernel("heat_steps")
    g = grad_kernel(module, "heat_steps", wrt=["u0", "k"], checkpoint_budget=budget)
    f = grad_kernel(module, "heat_steps", wrt=["u0", "k"], mode="forward")
    for steps in (0, 1, 7):
        result = check_gradients(k, g, 2, 32, _heat_args(40, steps, seed=budget), k_fwd=f, seed=5)
        assert result.error() < 1e-6, result
        assert result.forward is not None and abs(result.forward - result.reverse) <= 1e-9 * max(1, abs(result.reverse))


EARLY_EXIT = """__global__ void brk(const double* u0, double* u, int n, int steps, double dt)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double a = u0[i];
    int hits = 0;
    for (int s = 0; s < steps; ++s) {
        a = a + dt * sin(a) * (1.0 + hits);
        if (a > 1.2) { hits++; }
        if (a > 1.5) break;
    }
    u[i] = a * (1 + hits);
}
"""


def test_revolve_of_a_loop_with_break_and_an_integer_in_its_state(tmp_path) -> None:
    src = tmp_path / "brk.cu"
    src.write_text(EARLY_EXIT)
    module = polypy.load(src)
    k = module.kernel("brk")
    g = grad_kernel(module, "brk", checkpoint_budget=2)
    assert {b.elem.name for b in g.buffers if "_snap" in b.name} >= {"f64", "i32"}
    for steps in (0, 30):
        args = {"u0": np.random.default_rng(2).uniform(0.5, 1.4, 40), "u": np.zeros(40), "n": 37, "steps": steps,
                "dt": 0.1}
        result = check_gradients(k, g, 2, 32, args, seed=3)
        assert result.error() < 1e-6, result


def test_binomial_schedule_replays_few_steps() -> None:
    # steps re-run by the schedule, and the snapshots it holds at most
    assert simulate(1, 100) == (100 * 99 // 2, 1)  # the entry only: the plain replay
    replayed, peak = simulate(8, 1000)
    assert peak <= 8 and replayed < 5 * 1000
    assert simulate(3, 1000)[0] < simulate(2, 1000)[0] < simulate(1, 1000)[0]
    assert simulate(5, 0) == (0, 1) and simulate(5, 1) == (0, 1)


def test_hotspot_like_pyramid_with_runtime_iterations(tmp_path) -> None:
    src = tmp_path / "pyramid.cu"
    src.write_text(HOTSPOT_LIKE)
    module = polypy.load(src)
    report: list = []
    g = grad_kernel(module, "pyramid", wrt=["temp_src", "power"], report=report)
    # the `computed` flag is a function of i, tx, ty: recomputed in the reverse sweep, not taped
    flag = [d for d in report if isinstance(d, Caching) and d.value == "computed"]
    assert flag and all(d.strategy == "recompute" for d in flag)
    assert not [b for b in g.buffers if b.space == "local" and "_tape" in b.name]
    n = 16
    rng = np.random.default_rng(3)
    for iteration in (1, 2, 3):
        args = {"iteration": np.int32(iteration), "power": rng.uniform(0, 1, n * n),
                "temp_src": rng.uniform(0, 1, n * n), "temp_dst": np.zeros(n * n), "n": np.int32(n),
                "step_div_cap": 0.3, "rx": 0.4, "ry": 0.35}
        result = check_gradients(module.kernel("pyramid"), g, (2, 2), (8, 8), args, seed=iteration)
        assert abs(result.finite_difference) > 1e-8 and result.error() < 1e-6, result
        assert result.forward_effect_error < 1e-12, result


# Values overwritten in memory each iteration of a loop run `m` times: nothing can recompute
# them, so they are taped, with a tape sized at each launch from `m`.
SQUARE_STEPS = """__global__ void square_steps(double* y, int n, int m)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        for (int k = 0; k < m; k++)
            y[i * 4 + k % 4] = y[i * 4 + k % 4] * y[i * 4 + k % 4];
}
"""


def test_memory_overwritten_in_a_runtime_loop_is_taped_at_launch_size(tmp_path) -> None:
    src = tmp_path / "square.cu"
    src.write_text(SQUARE_STEPS)
    mod = polypy.compile(src)
    report: list = []
    g = polypy.grad(mod.square_steps, report=report)
    assert any(isinstance(d, Caching) and d.strategy == "tape" and "sized at launch" in d.detail for d in report)
    n, config = 20, (1, 32)
    rng = np.random.default_rng(8)
    y0, w, v = rng.uniform(0.9, 1.1, 4 * n), rng.standard_normal(4 * n), rng.standard_normal(4 * n)
    sizes = []
    for m in (0, 1, 5, 9):
        args = {"y": y0, "n": np.int32(n), "m": np.int32(m)}
        fd = _fd(mod.square_steps[config], args, {"y": v}, "y", w)
        for launch in (g, g.emulate):  # compiled (LLVM) and the emulator, each sized for this launch
            full = {"y": y0.copy(), "d_y": w.copy(), "n": np.int32(n), "m": np.int32(m)}
            launch[config](**full)
            assert abs(float(full["d_y"] @ v) - fd) <= 1e-6 * max(1.0, abs(fd)), (m, launch)
        sizes.append(g.memory(config, **full)["tape"])
    assert sizes == [1, 1, 5, 9]  # elements per thread: one per iteration (at least one)


# HeCBench-style Adam, run for `steps` steps per thread: p, m and v are overwritten in place each
# step; a nested loop with two run-time trip counts (a two-dimensional tape).
ADAM_STEPS = """__global__ void adam_steps(double* p, double* m, double* v, const double* g, int n, int steps,
                           double b1, double b2, double lr, double eps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    for (int t = 0; t < steps; t++) {
        double gi = g[i] + 0.1 * p[i];
        m[i] = b1 * m[i] + (1.0 - b1) * gi;
        v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
        p[i] = p[i] - lr * m[i] / (sqrt(v[i]) + eps);
    }
}
__global__ void nested(double* y, int n, int steps, int m)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        for (int s = 0; s < steps; s++)
            for (int j = 1; j <= m; j += 2)
                y[i * 4 + (s + j) % 4] = y[i * 4 + (s + j) % 4] * y[i * 4 + j % 4] * 0.9;
}
"""


def _check_all(kernel, g, config, args: dict, outs: list[str], ins: list[str], seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    v = {k: rng.standard_normal(args[k].shape) for k in ins}
    w = {k: rng.standard_normal(args[k].shape) for k in outs}
    fd = sum(_fd(kernel[config], args, v, k, w[k]) for k in outs)  # linear in w: one output at a time
    out = _reverse(g, config, args, {"d_" + k: w[k].copy() for k in outs})
    got = sum(float(out["d_" + k] @ v[k]) for k in ins)
    assert abs(got - fd) <= 1e-6 * max(1.0, abs(fd)), (got, fd)
    return g.memory(config, **out)


def test_adam_steps_and_nested_runtime_loops(tmp_path) -> None:
    src = tmp_path / "adam.cu"
    src.write_text(ADAM_STEPS)
    mod = polypy.compile(src)
    rng = np.random.default_rng(1)
    n = 40
    g = polypy.grad(mod.adam_steps, wrt=["p", "m", "v", "g"])
    tapes = []
    for steps in (0, 3, 8):
        args = {"p": rng.uniform(-1, 1, n), "m": rng.uniform(0, 0.1, n), "v": rng.uniform(0.1, 0.2, n),
                "g": rng.uniform(-1, 1, n), "n": np.int32(n), "steps": np.int32(steps), "b1": 0.9, "b2": 0.99,
                "lr": 0.01, "eps": 1e-8}
        tapes.append(_check_all(mod.adam_steps, g, (2, 32), args, ["p", "m", "v"], ["p", "m", "v", "g"])["tape"])
    assert tapes == [3, 9, 24]  # p, m, v before each step
    g = polypy.grad(mod.nested)
    for steps, m in ((0, 3), (3, 5)):
        args = {"y": rng.uniform(0.9, 1.1, 4 * n), "n": np.int32(n), "steps": np.int32(steps), "m": np.int32(m)}
        assert _check_all(mod.nested, g, (2, 32), args, ["y"], ["y"])["tape"] == 2 * max(steps, 1) * max(
            (m + 1) // 2, 1)


# Trip counts that depend on the thread: the tape is as long as the longest run in the launch
# (isl maximizes the count over the threads, the arguments known).
PER_THREAD_TRIPS = """__global__ void strided(double* y, const double* x, int n, int m)
{
    int t = threadIdx.x;
    int row = blockIdx.x;
    double acc = x[row * 64 + t];
    for (int j = t; j < m; j += 8)
        acc = acc * 0.5 + sin(acc) * x[row * 64 + j % 64];
    for (int k = 0; k < n - t; k++)
        y[row * 16 + t] = y[row * 16 + t] * y[row * 16 + t] + acc * 0.01;
}
"""


def test_thread_dependent_trip_counts_size_the_tape_by_the_longest_run(tmp_path) -> None:
    src = tmp_path / "strided.cu"
    src.write_text(PER_THREAD_TRIPS)
    mod = polypy.compile(src)
    g = polypy.grad(mod.strided)
    rng = np.random.default_rng(4)
    # max(n - t) + 2 ceil(m / 8): y, and acc and sin(acc) per iteration of the j loop (a dear call in
    # a loop with tapes sized at launch is taped, not evaluated again: autodiff.availability)
    for n, m, tape in ((3, 20, 3 + 2 * 3), (6, 40, 6 + 2 * 5)):
        args = {"y": rng.uniform(0.5, 0.9, 32), "x": rng.uniform(-1, 1, 128), "n": np.int32(n), "m": np.int32(m)}
        assert _check_all(mod.strided, g, (2, 16), args, ["y"], ["y", "x"])["tape"] == tape


def test_a_checkpoint_budget_refuses_loops_that_carry_memory(tmp_path) -> None:
    src = tmp_path / "square.cu"
    src.write_text(SQUARE_STEPS)
    mod = polypy.compile(src)
    with pytest.raises(polypy.UserError, match="checkpointing snapshots only the registers") as info:
        polypy.grad(mod.square_steps, checkpoint_budget=4)
    assert info.value.loc is not None and info.value.loc.line == 6  # the load of y the loop overwrites


def test_a_loop_bounded_by_memory_is_still_refused_with_its_location(tmp_path) -> None:
    src = tmp_path / "bad.cu"
    src.write_text(SQUARE_STEPS.replace("k < m", "k < (int)y[i * 4 + 3]"))
    mod = polypy.compile(src)
    with pytest.raises(polypy.UserError, match="trip count") as info:
        polypy.grad(mod.square_steps)
    assert info.value.loc is not None and info.value.loc.line == 6


def test_gradient_cuda_compiles_with_nvcc(tmp_path) -> None:
    import shutil
    import subprocess

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed: the emitted CUDA cannot be compiled here")
    out = tmp_path / "heat_grad.cu"
    from polypy.driver.cli import main

    assert main(["grad", str(HEAT.source), "--kernel", "heat_steps", "-D", "REAL=double", "--checkpoint-budget", "3",
                 "-o", str(out)]) == 0
    text = out.read_text()
    assert "__global__ void heat_steps_grad(" in text and "s_snap_it[3]" in text
    subprocess.run([nvcc, "-c", str(out), "-o", str(tmp_path / "heat_grad.o")], check=True, cwd=tmp_path)
    # tapes sized at launch elsewhere: a capacity macro per trip count in CUDA
    src = tmp_path / "adam.cu"
    src.write_text(ADAM_STEPS)
    out = tmp_path / "nested_grad.cu"
    assert main(["grad", str(src), "--kernel", "nested", "-o", str(out)]) == 0
    text = out.read_text()
    assert "#define NESTED_GRAD_TRIPS_0 1024" in text and "NESTED_GRAD_TRIPS_1" in text
    subprocess.run([nvcc, "-c", str(out), "-o", str(tmp_path / "nested_grad.o")], check=True, cwd=tmp_path)


def test_thread_dependent_tapes_in_cpp_are_bounded_for_every_thread(tmp_path) -> None:
    import shutil
    import subprocess

    from autodiff.tapes import runtime_tapes, uniform_extents
    from polypy.ir import nodes as n

    src = tmp_path / "strided.cu"
    src.write_text(PER_THREAD_TRIPS)
    module = polypy.load(src)
    g = grad_kernel(module, "strided")
    bounded = uniform_extents(g)
    assert len(runtime_tapes(bounded)) == 3  # y, acc and sin(acc)
    assert not any(isinstance(x, (n.ThreadIdx, n.BlockIdx)) for buf in runtime_tapes(bounded)
                   for d in buf.shape for x in walk(d))
    # the bound holds for every thread: evaluated, it is the largest per-thread count
    from autodiff.tapes import tape_extents
    assert tape_extents(bounded, (2,), (16,), {"n": 6, "m": 40}) == tape_extents(g, (2,), (16,), {"n": 6, "m": 40})
    cxx = shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler: the emitted C++ cannot be compiled here")
    from polypy.driver.cli import main

    out = tmp_path / "strided_grad.cpp"
    assert main(["grad", str(src), "--kernel", "strided", "--emit", "cpp", "-o", str(out)]) == 0
    subprocess.run([cxx, "-O1", "-fopenmp", "-c", str(out), "-o", str(tmp_path / "strided_grad.o")], check=True,
                   cwd=tmp_path)


def test_budget_must_be_positive() -> None:
    module = polypy.load(HEAT.source, defines={"REAL": "double"})
    with pytest.raises(polypy.UserError, match="checkpoint budget"):
        grad_kernel(module, "heat_steps", checkpoint_budget=0)

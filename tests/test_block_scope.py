"""Questions about one block asked in the part of the model that can run in it (issue 36, dwt2d).

A kernel that picks one version of its work per block (Rodinia's dwt2d: three versions of its
transform, 37 dimensions where one version needs 17) asks each shared-memory dataflow question
in that version's own space (``polypy.poly.block_scope``), exactly: what is left out never runs
in the block. The kernels are our own.
"""
from __future__ import annotations

import islpy as isl
import pytest

import polypy
from polypy.poly import BarrierAnalysis, dataflow, dead_shared_stores, forwardable_loads, space
from polypy.poly.block_races import block_races
from polypy.poly.block_scope import BlockScopes
from polypy.poly.model import build_model
from polypy.poly.relations import Copies
from polypy.poly.write_conflicts import RaceQuestion

# Two versions picked per block; in each, the load of the thread's own element reads the store
# (forwardable), the mirrored load reads another thread's; the first store of version 0 is
# overwritten by the same thread before anyone reads it (dead). A prologue store before the
# versions, and a branch on threadIdx inside version 1 whose two sides run in one block.
VERSIONS = r"""
__global__ void versions(const int *in, int *out, int n)
{
    __shared__ int buf[64];
    __shared__ int pro[64];
    pro[threadIdx.x] = n;
    __syncthreads();
    if (blockIdx.x == 0) {
        for (int k = 0; k < 2; k++) {
            buf[threadIdx.x] = 7;
            buf[threadIdx.x] = in[k * 64 + threadIdx.x];
            __syncthreads();
            out[k * 64 + threadIdx.x] = buf[threadIdx.x] + buf[63 - threadIdx.x] + pro[63 - threadIdx.x];
            __syncthreads();
        }
    } else {
        for (int k = 0; k < 3; k++) {
            if (threadIdx.x < 32)
                buf[threadIdx.x] = 2 * in[k * 64 + threadIdx.x];
            else
                buf[threadIdx.x] = 3 * in[k * 64 + threadIdx.x];
            __syncthreads();
            out[blockIdx.x * 192 + k * 64 + threadIdx.x] = buf[threadIdx.x] * buf[63 - threadIdx.x];
            __syncthreads();
        }
    }
}

// Every thread stores its element, then thread 0 stores it again: the first store is the last
// one before the load only for the other threads, so it does not feed every load.
__global__ void partial(int *out)
{
    __shared__ int buf[1024];
    buf[blockDim.x - 1 - threadIdx.x] = 1;
    __syncthreads();
    buf[threadIdx.x] = 2;
    if (threadIdx.x == 0)
        buf[threadIdx.x] = 3;
    __syncthreads();
    out[threadIdx.x] = buf[threadIdx.x];
}
"""


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("scope") / "versions.cu"
    path.write_text(VERSIONS)
    return polypy.load(str(path))


@pytest.fixture(scope="module")
def kernel(module):
    return module.kernel("versions")


@pytest.fixture
def copies_built(monkeypatch):
    """The loop dimensions of every ``Copies`` space built."""
    spaces: list[tuple[str, ...]] = []
    real = Copies.__init__

    def recording(self, model, copies):
        spaces.append(model.loop_dims)
        real(self, model, copies)

    monkeypatch.setattr(Copies, "__init__", recording)
    return spaces


def _lines(kernel, paths) -> list[int]:
    model = build_model(kernel)
    return sorted({a.loc.line for a in model.accesses if a.id.path in set(paths)})


def test_a_scope_holds_what_runs_in_the_block(kernel) -> None:
    model = build_model(kernel)
    scopes = BlockScopes(model)
    by_line: dict[int, list] = {}
    for a in model.accesses:
        by_line.setdefault(a.loc.line, []).append(a)
    assert len(model.loop_dims) == 2
    for line, loop_lines in ((10, range(8, 16)), (19, range(16, 26))):
        scope = scopes.scope(by_line[line][0])
        # the version's accesses, and the prologue's (line 6), which runs in every block
        assert sorted({a.loc.line for a in scope.accesses}) == sorted({6, *(ln for ln in by_line if ln in loop_lines)})
        assert len(scope.loop_dims) == 1 and len(scope.barriers) == 3
        assert len(scope.dims) == len(model.dims) - 1
    # both sides of a branch on threadIdx run in one block: each is in the other's scope
    assert scopes.scope(by_line[19][0]) is scopes.scope(by_line[21][0])
    # the prologue's store meets every block: its scope is the whole model
    assert scopes.scope(by_line[6][0]) is model


def test_the_dataflow_asks_within_each_version(kernel, copies_built) -> None:
    forwarded = forwardable_loads(kernel)
    dead = dead_shared_stores(kernel)
    # the same answers as over the whole space (before the scopes: the same lists)
    # version 0's load of the thread's own element reads its store; version 1's reads one of
    # two stores, picked by the thread: not forwarded
    assert sorted((_lines(kernel, [f.load.path])[0], _lines(kernel, [f.store])[0]) for f in forwarded) == [(13, 11)]
    assert [_lines(kernel, [p])[0] for p in dead] == [10]
    # Before: every question in the whole space (both loops' dimensions); now the prologue's
    # store in the whole space, every other access in its version's.
    assert sum(len(dims) == 2 for dims in copies_built) == 1 and len(copies_built) == 5


def test_a_pair_whose_launch_probe_runs_out_is_not_asked_again(kernel, monkeypatch) -> None:
    # Where isl's budget runs out at a fixed launch, the question over symbolic extents (and at
    # the second launch) would run out too: dwt2d spent three budgets on each of nine such pairs.
    probes: dict[tuple, int] = {}
    ran_out: set[tuple] = set()
    symbolic: set[tuple] = set()
    for name in ("_forwards", "_dead"):
        real = getattr(dataflow, name)

        def recording(model, c, *accesses, real=real, name=name):
            key = (name, *(str(a.id) for a in accesses if not isinstance(a, isl.Set)))
            if isinstance(accesses[-1], isl.Set):
                probes[key] = probes.get(key, 0) + 1
            else:
                symbolic.add(key)
            try:
                return real(model, c, *accesses)
            except isl.Error:
                ran_out.add(key)
                raise

        monkeypatch.setattr(dataflow, name, recording)
    monkeypatch.setattr(space, "ISL_BUDGET", 1)
    assert forwardable_loads(kernel) == [] and dead_shared_stores(kernel) == []
    # before: each such pair asked again at the second launch and over symbolic extents
    assert {name for name, *_ in ran_out} == {"_forwards", "_dead"}
    assert not ran_out & symbolic and all(probes[key] == 1 for key in ran_out)


def test_a_forwarding_question_stops_when_the_threads_own_stores_leave_a_load_uncovered(module, monkeypatch) -> None:
    # The other threads' writes (``Copies.unseparated``: each barrier asked about in the three
    # copies' space) can only remove store instances: once the same thread's stores leave a load
    # instance without one, they are not asked about. Before: 1 call here (dwt2d: 32 per pair).
    calls: list[tuple] = []
    real = Copies.unseparated

    def counting(self, *args):
        calls.append(args)
        return real(self, *args)

    monkeypatch.setattr(Copies, "unseparated", counting)
    assert forwardable_loads(module.kernel("partial")) == []
    assert calls == []


def test_the_barrier_questions_build_no_whole_space_relation_of_another_barrier(kernel, monkeypatch) -> None:
    # ``BarrierAnalysis``: "ordered by no other barrier" was the pair's set minus each other
    # barrier's "between" relation over the whole copy space; now it is
    # built inside the pair's set, in the pair's scope (its version).
    musts: list[bool] = []
    real = Copies.between

    def counting(self, *args, must):
        musts.append(must)
        return real(self, *args, must=must)

    monkeypatch.setattr(Copies, "between", counting)
    analysis = BarrierAnalysis(kernel)
    remaining = [b.path for b in analysis.barriers]
    conflicts = [analysis.conflict(b.path, remaining) for b in analysis.barriers]
    # (the same answers as over the whole space) the prologue's barrier is not needed: version 0's
    # first barrier orders its store and the mirrored read too; each version's barriers order its
    # store and mirrored read, and that read and the next iteration's store
    assert conflicts[0] is None
    assert analysis.removal_reason(analysis.barriers[0].path, remaining) \
        == "no conflicting accesses between the kernel entry and the barrier at line 12"
    assert [(c.hazard, c.first.line, c.second.line) for c in conflicts[1:]] == [
        ("RAW", 11, 13), ("WAR", 13, 11), ("RAW", 21, 23), ("WAR", 23, 21)]
    assert True not in musts


def test_the_race_check_asks_each_pair_within_its_version(kernel, monkeypatch) -> None:
    # ``block_races`` (lockstep-warps): every pair was asked in the whole space; now only the
    # prologue's store with itself is (it runs in every block), each other pair in its version's
    # space, and pairs of two versions are not asked (before: 68 pair questions in the whole space).
    spaces: list[int] = []
    real = RaceQuestion.same_block_race

    def recording(self, a, b, **kwargs):
        spaces.append(len(self.model.loop_dims))
        return real(self, a, b, **kwargs)

    monkeypatch.setattr(RaceQuestion, "same_block_race", recording)
    assert block_races(kernel) == []
    assert spaces.count(2) <= 2 and spaces.count(1) >= 4

"""The part of a model that can run in the same block as some given instances.

A question about the instances of one block (a load and the stores of the same thread, two
threads of a block, the barriers both execute) needs only the accesses and barriers that can
run in such a block. A kernel that picks one of several versions of its work per block
(Rodinia's dwt2d: ``if (atBottomBoundary) ... else if (atRightBoundary) ... else ...``, each
version a loop of barriers and shared accesses) has, for an access of one version, the other
versions' accesses, barriers and loops in its instance space too: 37 dimensions where one
version needs 17, and every isl operation of a question in three copies of that space pays
for them.

``BlockScopes.scope(a, ...)`` is the model cut to what can run in a block where all of the
given accesses run: the accesses and barriers whose blocks (their domain with the thread and
loop dimensions projected out: the blockIdx dimensions and the block values) meet those of
every given access, and the loops around them. The instance space loses the other loops'
dimensions: every kept statement's domain fixes them to 0 (they do not enclose it), so each
kept set and function is its preimage under the embedding that sets them to 0, and nothing
changes for the kept instances. Nothing is approximated: an access or barrier left out never
runs in such a block, so it cannot be between, race with or overwrite anything there. Scopes
are memoized by what they keep (the versions of a kernel give a few scopes, shared by their
questions), and the whole model is returned where nothing can be left out.
"""
from __future__ import annotations

import dataclasses

import islpy as isl

from polypy.poly.model import BLOCK_IDX, CTX, Access, Barrier, Model
from polypy.poly.space import bounded


# isl steps one equality test of two block sets may take: a set with divisions (``k / 18``,
# ``k % 18`` of a thread's halo index) projected to its blocks can make the test take seconds;
# past this, the set is a class of its own (classes only share work).
CLASS_BUDGET = 20_000


class BlockScopes:
    """Memoized scopes of one model (see the module docstring)."""

    def __init__(self, model: Model):
        self.model = model
        block_level = set(BLOCK_IDX) | {bv.name for bv in model.block_values}
        # runs (first, count) of the dimensions projected out of the blocks' sets, last first: the
        # thread dimensions and the loops, two calls instead of one per dimension
        self._drop: list[tuple[int, int]] = []
        for i in reversed(range(len(model.dims))):
            if model.dims[i] in block_level:
                continue
            if self._drop and self._drop[-1][0] == i + 1:
                self._drop[-1] = (i, self._drop[-1][1] + 1)
            else:
                self._drop.append((i, 1))
        # the distinct block sets, and each access's: the versions of a kernel give a few
        self._classes: list[isl.Set] = []
        self._class_of = {a.id: self._class(self._blocks(a.domain)) for a in model.accesses}
        self._access_blocks = [self._classes[self._class_of[a.id]] for a in model.accesses]
        self._barrier_blocks = [self._blocks(b.domain) for b in model.barriers]
        self._by_classes: dict[tuple[int, ...], Model | None] = {}
        self._scopes: dict[tuple[tuple[int, ...], tuple[int, ...]], Model] = {}

    def _class(self, blocks: isl.Set) -> int:
        """The class of ``blocks``: an equal set's, else a new one. Classes only share work, so
        where isl cannot tell equality within its budget the set is a class of its own."""
        for k, other in enumerate(self._classes):
            if other.plain_is_equal(blocks) or bounded(lambda: other.is_equal(blocks), False, CLASS_BUDGET):
                return k
        self._classes.append(blocks)
        return len(self._classes) - 1

    def _blocks(self, domain: isl.Set) -> isl.Set:
        """The blocks (blockIdx and block values) where an instance of ``domain`` runs."""
        out = domain
        for first, count in self._drop:
            out = out.project_out(isl.dim_type.set, first, count)
        return out

    def scope(self, *accesses: Access) -> Model | None:
        """The model cut to what can run in a block where every one of ``accesses`` runs; None
        where no block runs them all."""
        classes = tuple(sorted({self._class_of[a.id] for a in accesses}))
        if classes in self._by_classes:
            return self._by_classes[classes]
        region = self._classes[self._class_of[accesses[0].id]]
        for a in accesses[1:]:
            region = region & self._classes[self._class_of[a.id]]
        if region.is_empty():
            self._by_classes[classes] = None
            return None
        kept_accesses = tuple(i for i, b in enumerate(self._access_blocks) if not (b & region).is_empty())
        kept_barriers = tuple(i for i, b in enumerate(self._barrier_blocks) if not (b & region).is_empty())
        key = (kept_accesses, kept_barriers)
        scope = self._scopes.get(key)
        if scope is None:
            scope = _cut(self.model, kept_accesses, kept_barriers)
            self._scopes[key] = scope
        self._by_classes[classes] = scope
        return scope


def _cut(model: Model, kept_accesses: tuple[int, ...], kept_barriers: tuple[int, ...]) -> Model:
    """``model`` with only the given accesses and barriers, and the loops around them."""
    accesses = [model.accesses[i] for i in kept_accesses]
    barriers = [model.barriers[i] for i in kept_barriers]
    used = {t for item in (*accesses, *barriers) for t in item.time if isinstance(t, str)}
    loops = tuple(lp for lp in model.loops if lp.dim in used)
    if len(loops) == len(model.loops) and len(accesses) == len(model.accesses) \
            and len(barriers) == len(model.barriers):
        return model
    loop_dims = set(model.loop_dims)
    kept_dims = {lp.dim for lp in loops}
    dims = tuple(d for d in model.dims if d not in loop_dims or d in kept_dims)
    space = isl.Space.create_from_names(CTX, set=list(dims), params=[]).align_params(model.space.params())
    # the embedding of the cut space into the model's: the dropped loop dimensions are 0
    ls = isl.LocalSpace.from_space(space)
    embed = isl.MultiAff.zero(space.map_from_domain_and_range(model.space))
    for i, d in enumerate(model.dims):
        if d in dims:
            embed = embed.set_aff(i, isl.Aff.var_on_domain(ls, isl.dim_type.set, dims.index(d)))

    def pull_set(s: isl.Set) -> isl.Set:
        return s.preimage_multi_aff(embed)

    def pull(pa: isl.PwAff) -> isl.PwAff:
        return pa.pullback_multi_aff(embed)

    def access(a: Access) -> Access:
        delin = tuple(None if d is None else dataclasses.replace(
            d, outer=pull(d.outer), inner=pull(d.inner), valid=None if d.valid is None else pull_set(d.valid),
            size=None if d.size is None else pull(d.size))
            for d in a.delin)
        return dataclasses.replace(a, domain=pull_set(a.domain), delin=delin,
                                   elems=tuple(None if e is None else pull(e) for e in a.elems))

    def barrier(b: Barrier) -> Barrier:
        return dataclasses.replace(b, domain=pull_set(b.domain))

    strides = tuple(dataclasses.replace(s, start=pull(s.start), step=pull(s.step))
                    for s in model.strides if s.dim in dims)
    factors = {name: (d, pull(f), None if w is None else pull_set(w)) for name, (d, f, w) in model.block_factors.items()}
    return dataclasses.replace(model, space=space, dims=dims, loops=loops, accesses=tuple(access(a) for a in accesses),
                               barriers=tuple(barrier(b) for b in barriers), strides=strides, block_factors=factors)

"""Exact polyhedral reasoning about GPU-form kernels, with islpy.

Only this package builds isl objects; everything it hands out is plain Python (paths,
booleans, integers, strings, small dataclasses). Modules:

* ``paths``     statement paths and access ids; edits of kernels by path (no isl)
* ``affine``    IR expressions -> quasi-affine functions and conditions
* ``model``     iteration domains, schedule, access relations, barriers (``build_model``), in
  ``space`` (names of the instance space, CUDA's limits, ``Launch``), ``instances`` (what a
  model holds) and ``builder`` (how it is built)
* ``alias``     which buffers may share storage
* ``relations`` sets over several instance copies: threads, blocks, order, separation
* ``block_scope`` the part of a model that can run in one block (a kernel's version of its work)
* ``hazards``   which accesses a barrier orders (``BarrierAnalysis``)
* ``dataflow``  store->load forwarding and dead shared stores, proved per instance
* ``footprint`` index ranges of pointer parameters for a launch
* ``sharing``   whether a buffer's elements are private to a thread / uniform in a block
* ``dump``      the human-readable model for ``--report`` / ``--emit ir``
"""
import islpy as _isl

from polypy.errors import InternalError as _InternalError
from polypy.poly.dataflow import Forwarding, dead_shared_stores, forwardable_loads
from polypy.poly.dump import dump_model
from polypy.poly.footprint import Footprint, IndexRange, footprint, symbolic_footprint
from polypy.poly.hazards import AccessRef, BarrierAnalysis, Conflict
from polypy.poly.model import Launch, Model, build_model
from polypy.poly.paths import (
    AccessId, RawAccess, StmtPath, edit_statements, format_path, iter_statements, replace_loads,
    statement_accesses, statement_at,
)
from polypy.poly.sharing import Sharing, sharing

# What building or querying a model raises when it cannot answer: its construction did not
# converge (``builder``), or isl gave up on a set. A caller that has an exact fallback (keep the
# code as it is) catches these and nothing else.
MODEL_ERRORS: tuple[type[Exception], ...] = (_InternalError, _isl.Error)

__all__ = [
    "MODEL_ERRORS", "AccessId", "AccessRef", "BarrierAnalysis", "Conflict", "Footprint", "Forwarding", "IndexRange", "Launch",
    "Model", "RawAccess", "Sharing", "StmtPath", "build_model", "dead_shared_stores", "dump_model",
    "edit_statements", "footprint", "format_path", "forwardable_loads", "iter_statements", "replace_loads",
    "sharing", "statement_accesses", "statement_at", "symbolic_footprint",
]

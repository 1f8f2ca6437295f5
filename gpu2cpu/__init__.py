"""GPU form -> CPU form (``docs/ir.md``): the work of one thread block as explicit thread loops.

Passes, in the order ``polypy.driver.cpu_pipeline`` runs them:

* ``barriers.eliminate_barriers``, ``forward_shared.forward_shared_stores`` /
  ``eliminate_dead_shared_stores`` (GPU form -> GPU form): fewer barriers, exactly (isl);
* ``serialize_threads.serialize_threads`` (GPU form -> CPU form): fission at barriers and warp
  operations, control flow with barriers interchanged outside the thread loops, block-uniform
  values computed once per block, values live across thread loops stored per thread or
  recomputed (``regions``, ``liveness``, ``store_or_recompute``, ``warps``);
* ``lower_block_atomics.lower_block_atomics`` (CPU form): atomics on block-private memory
  become plain updates.

The stages never import each other: the driver in ``polypy`` wires them.
"""

"""GPU form -> CPU form (``docs/ir.md``): the work of one thread block as explicit thread loops.

Passes, in the order ``polypy.driver.pipelines.cpu_pipeline`` runs them:

* ``barriers.eliminate_barriers``, ``forward_shared.forward_shared_stores`` /
  ``eliminate_dead_shared_stores`` (GPU form -> GPU form): fewer barriers, exactly (isl);
* ``serialize_threads.serialize_threads`` (GPU form -> CPU form): fission at barriers and warp
  operations, control flow with barriers interchanged outside the thread loops, block-uniform
  values computed once per block, values live across thread loops stored per thread or
  recomputed (``regions``, ``liveness``, ``store_or_recompute``, ``warps``);
* the CPU schedule (CPU form -> CPU form, ``optimize=True`` only; helpers in ``thread_affine``
  and ``thread_loops``):
  ``split_dynamic_shared.split_dynamic_shared`` (an extern shared array addressed ``e * q + c``
  becomes one array per ``c``: unit-stride thread loops),
  ``fuse_thread_loops.fuse_thread_loops`` (adjacent independent thread loops become one, isl;
  also loops whose threads depend only on earlier, or only on later, threads: one ``ordered``
  loop in that order),
  ``tighten_thread_bounds.tighten_thread_bounds`` (guards on the counter become loop bounds,
  index arithmetic without wrap-around, under run-time checks where needed),
  ``sink_thread_loops.sink_thread_loops`` (the loop over ``tx`` goes inside uniform serial loops
  and grid-stride loops, per-thread values expanded), then ``tighten_thread_bounds`` again,
  ``promote_accumulators``, ``sum_uniform_atomics``, ``split_scatter_adds`` (a histogram's adds
  at loaded indices into a shared array spread over copies of it, four threads at a time, added
  up after the statement), ``split_quotient_runs.split_quotient_runs`` (a loop dividing its
  linear index by an argument, ``(B + tx) / d``, runs per quotient: one value per run, the
  remainder affine; then ``tighten_thread_bounds`` again), and ``divide_in_double.divide_in_double``
  (32-bit ``/`` and ``%`` by an argument in a thread loop computed exactly in f64, which
  vectorizes: x86 has no vector integer division), ``prefetch_grid_stride.prefetch_grid_stride``
  (a grid-stride loop prefetches the stretch it reads two iterations ahead: one CPU worker runs a
  block alone, and the hardware prefetchers do not follow a grid's stride).
  Steps of these are passes of their own too (registered; in the CPU pipeline they run inside
  the pass they belong to, which decides where they pay): ``distribute_thread_loops`` (fission into
  independent parts) and ``version_thread_loops`` (one copy per value of block-constant
  conditions), steps of ``tighten_thread_bounds``; ``normalize_grid_stride`` (strided loops over
  blocks of consecutive elements), a step of ``sink_thread_loops``;
* ``lower_block_atomics.lower_block_atomics`` (CPU form): atomics on block-private memory
  become plain updates.

The stages never import each other: the driver in ``polypy`` wires them.
"""

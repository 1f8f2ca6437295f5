"""The driver: the one layer that wires the stages together (frontend -> GPU-form passes ->
gpu2cpu -> codegen, or autodiff). Nothing below it (the stages, ``polypy.ir``, ``polypy.poly``,
``polypy.passes``, ``polypy.emulator``, ``polypy.launch``, ...) imports it; ``polypy.torch`` and
``polypy.distributed`` sit beside it (tests/test_layering.py checks both).

* ``source``: parse and load (frontend + ``pipelines.GPU_PIPELINE``);
* ``pipelines``: the registry of named passes, the pipelines as lists of names, ``to_cpu`` and
  ``lower_and_emit`` (the one "lower, then emit" path);
* ``coarsen``: block coarsening for the backends;
* ``api`` (``polypy.compile``), ``gradients`` (``polypy.grad``; ``gathered``: its tap launches
  for read-only stencil inputs), ``programs`` (whole programs);
* ``cli`` (argument parsing) -> ``commands`` (what each sub-command does) -> ``output``.

Stage packages are imported inside the functions that use them, so importing the driver stays
cheap.
"""

"""The driver: the one layer that wires the stages together (frontend -> GPU-form passes ->
gpu2cpu -> codegen, or autodiff). Nothing below it (the stages, ``polypy.ir``, ``polypy.poly``,
``polypy.passes``, ``polypy.emulator``, ``polypy.launch``, ...) imports it.

``source``: parse and load; ``pipelines``: the registry of named passes, the pipelines and
``lower_and_emit``; ``coarsen``: block coarsening for the backends.
Stage packages are imported inside the functions that use them, so importing the driver stays
cheap.
"""

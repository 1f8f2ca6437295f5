"""Side-by-side benchmarks: polypy's generated code against hand-written OpenMP, NumPy and others.

Not a test suite: nothing here asserts a timing. ``python -m bench`` runs everything; see
``bench/README.md`` for the pieces and for how a new variant plugs in.
"""

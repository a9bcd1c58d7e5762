"""Fuzzing every decoder of lmckv: the reference's codec, protocol and key readers, and the
C testee through its stdio protocol (differential).

Targets are in :mod:`conformance.fuzz.decoders`, the per-input properties in
:mod:`conformance.fuzz.checks`, the two engines in :mod:`conformance.fuzz.worker` (atheris)
and :mod:`conformance.fuzz.mutate` (Hypothesis-driven mutation of the golden vectors), the
comparison with the C testee in :mod:`conformance.fuzz.differential`. Run
``python -m conformance.fuzz --seconds S``.
"""

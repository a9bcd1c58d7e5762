"""Fuzzing every decoder of lmckv: the reference's codec, protocol and key readers, and the
C testee through its stdio protocol (differential).

Targets are in :mod:`lmckv.conformance.fuzz.decoders`, the per-input properties in
:mod:`lmckv.conformance.fuzz.checks`, the two engines in
:mod:`lmckv.conformance.fuzz.worker` (atheris) and :mod:`lmckv.conformance.fuzz.mutate`
(Hypothesis-driven mutation of the golden vectors), the comparison with the C testee in
:mod:`lmckv.conformance.fuzz.differential`. Run
``python -m lmckv.conformance.fuzz --seconds S``.
"""

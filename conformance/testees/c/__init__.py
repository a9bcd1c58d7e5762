"""The independent C implementation of lmckv's formats (a conformance testee).

Written from reference_impl/SPEC.md alone, in C99, and driven by the suite through the
JSON-lines protocol of conformance/TESTEE.md. ``conformance.testees.c.build.build_testee``
compiles it with the system ``cc``; ``python -m lmckv.conformance.testees.c [--sanitize]`` prints
the path of the binary.
"""

"""The golden-vector generator: ``python -m lmckv.conformance.golden [--check]``.

It regenerates every file under golden_blobs/ from the reference implementation,
deterministically; ``--check`` compares instead of writing and fails on any difference.
"""

"""``lmckv conformance [--impl SPEC]... [PYTEST ARGS]``: the conformance suite under pytest.

Runs the tests of the installed ``conformance`` package (its conftest registers the
plugin and its options) with every argument passed through to pytest. Nothing is written
inside the package: no pytest cache and no bytecode.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

EXIT_USAGE = 2


def run(argv: Sequence[str]) -> int:
    """pytest's exit status: 0 every outcome as expected, 1 an unexpected outcome, and 2 for
    any usage, collection or internal error (pytest's 2 to 5)."""
    import pytest

    import conformance

    suite = Path(conformance.__file__).parent
    wrote_bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # also stops pytest caching rewritten test modules
    try:
        code = int(pytest.main([str(suite), "-p", "no:cacheprovider", *argv]))
    finally:
        sys.dont_write_bytecode = wrote_bytecode
    return code if code in (0, 1) else EXIT_USAGE

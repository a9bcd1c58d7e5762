"""``python -m lmckv.conformance.golden``: see :mod:`lmckv.conformance.golden.cli`."""

import sys

from lmckv.conformance.golden.cli import main

sys.exit(main())

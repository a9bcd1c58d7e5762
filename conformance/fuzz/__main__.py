"""``python -m lmckv.conformance.fuzz``: see :mod:`lmckv.conformance.fuzz.cli`."""

import sys

from lmckv.conformance.fuzz.cli import main

sys.exit(main())

"""``python -m lmckv.conformance.golden``: see :mod:`lmckv.conformance.golden.golden_command`."""

import sys

from .golden_command import main

sys.exit(main())

"""``python -m lmckv.conformance.fuzz``: see :mod:`lmckv.conformance.fuzz.fuzz_command`."""

import sys

from .fuzz_command import main

sys.exit(main())

"""``python -m lmckv.conformance.testees.c [--sanitize]``: build the testee, print its path."""

import sys

from .build import main

sys.exit(main())

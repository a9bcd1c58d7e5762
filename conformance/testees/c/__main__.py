"""``python -m conformance.testees.c [--sanitize]``: build the testee, print its path."""

import sys

from conformance.testees.c.build import main

sys.exit(main())

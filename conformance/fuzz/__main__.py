"""``python -m conformance.fuzz``: see :mod:`conformance.fuzz.cli`."""

import sys

from conformance.fuzz.cli import main

sys.exit(main())

"""``python -m conformance.golden``: see :mod:`conformance.golden.cli`."""

import sys

from conformance.golden.cli import main

sys.exit(main())

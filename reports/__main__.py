"""``python -m reports``: see :func:`reports.cli.main`."""

import sys

from reports.cli import main

sys.exit(main(sys.argv[1:]))

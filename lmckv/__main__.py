"""``python -m lmckv``: the ``lmckv`` console script without installing it."""

import sys

from lmckv.cli import main

sys.exit(main())

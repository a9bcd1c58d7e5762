import sys

from .cross import main

sys.exit(main())

import sys

from lmckv.conformance.releases.cross import main

sys.exit(main())

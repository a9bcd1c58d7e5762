import sys

from conformance.releases.cross import main

sys.exit(main())

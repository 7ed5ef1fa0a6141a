"""`python -m node.cli`: the `vxla` command line."""

import sys

from node.cli import main

sys.exit(main())

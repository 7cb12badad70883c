"""`python -m kcompat` is the `kcompat` command."""

import sys

from kcompat.cli import main

sys.exit(main())

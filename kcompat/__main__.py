"""`python -m kcompat` is the `kcompat` command."""

import gc
import sys

if sys.argv[1:2] == ["serve"]:
    # The start-up's imports make ~40,000 long-lived objects and next to no garbage: the cyclic
    # collector, run over and over while they pile up, is ~7% of a cold start. Serve freezes them
    # and turns it back on once the broker's modules are in (kcompat.server.serve).
    gc.disable()

from kcompat.cli import main

sys.exit(main())

"""``python -m leak_harness``: the same as the ``leak-harness`` command."""

import sys

from leak_harness.cli import main

sys.exit(main())

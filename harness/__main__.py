"""``python -m harness``: the same as the ``leak-harness`` command."""

import sys

from harness.cli import main

sys.exit(main())

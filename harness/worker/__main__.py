"""``python -m harness.worker <rundir>/config.json``: the worker process's entry point."""

import sys

from harness.worker.main import main

sys.exit(main())

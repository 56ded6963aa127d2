"""What ``leak-harness record`` and the recorder it starts agree on, and nothing else.

The parent (:mod:`harness.parent.recording`) sets the environment variable and puts
the ``site`` folder first on the program's PYTHONPATH; the recorded process
(:mod:`harness.record.bootstrap`) reads them. Standard library only, so the parent
reads these names without loading the recorder and the samplers behind it.
"""

from __future__ import annotations

from pathlib import Path

ENV = "LEAK_HARNESS_RECORD"  # JSON: {"out": folder, "follow": bool, "config": RunConfig dict}
SITE_DIR = Path(__file__).resolve().parent / "site"  # its sitecustomize starts a recorder

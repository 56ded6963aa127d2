"""Transitional: load_summary decodes every version now; removed with its last caller."""

from __future__ import annotations

from harness.runfiles.rundata import RunData
from harness.runfiles.summary import Summary


def upgrade(summary: Summary, run: RunData | None) -> Summary:
    return summary

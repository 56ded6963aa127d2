"""The parent's live reader keeps every sample only when an early-stop predicate needs them."""

from __future__ import annotations

import json
from pathlib import Path

from harness.parent.tail import SampleTail
from harness.runfiles.samples import SCHEMA, VERSION


def write_samples(path: Path, n: int) -> None:
    header = {"type": "header", "schema": SCHEMA, "version": VERSION, "config": {}, "env": {}}
    lines = [json.dumps(header)]
    lines += [json.dumps({"type": "rss", "t": i / 10, "rss": 1000 + i, "ops": i}) for i in range(n)]
    path.write_text("\n".join(lines) + "\n")


def test_progress_only_tail_keeps_just_the_newest_record(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    write_samples(path, 5000)
    tail = SampleTail(path, keep_all=False)
    assert tail.poll() == 5001
    assert tail.latest["rss"]["rss"] == 1000 + 4999
    data = tail.rundata()
    assert data is not None and len(data.rss) == 0  # nothing accumulated


def test_predicate_tail_keeps_every_sample(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    write_samples(path, 500)
    tail = SampleTail(path)
    tail.poll()
    data = tail.rundata()
    assert data is not None and len(data.rss) == 500

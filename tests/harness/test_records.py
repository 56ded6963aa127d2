"""The samples lines match their TypedDicts: what the worker writes is what the analysis reads."""

from __future__ import annotations

import json
from pathlib import Path

from harness.runfiles.records import LINE_TYPES
from tests.harness.records_check import file_problems, line_problems

GOLDEN = Path(__file__).parent / "golden" / "run-v1" / "samples.jsonl"


def test_the_golden_run_matches_the_records() -> None:
    kinds = {json.loads(line)["type"] for line in GOLDEN.read_text(encoding="utf-8").splitlines()}
    assert {"header", "rss", "gc", "garbage", "objects", "gauges", "event"} <= kinds
    assert file_problems(GOLDEN) == []


def test_a_missing_or_unknown_key_is_found_nested_too() -> None:
    rss = {"type": "rss", "t": 1.0, "rss": 1, "uss": None, "ops": 3, "extra": 1}
    assert line_problems(rss) == ["rss: unknown 'extra'"]
    owners = {
        "type": "owners", "t": 1.0, "ops": 1, "untracked_counted": True, "gave_up": False,
        "seconds": 0.1, "search_seconds": 0.1, "tensors": None,
        "paths": [{"type": "list", "qualname": "list", "grew": 60, "count": 90, "tracked": True,
                   "path": None, "root": None, "why": "no sample found"}],
    }
    assert line_problems(owners) == ["owners.paths[0]: no 'depth'"]
    assert line_problems({"type": "mystery", "t": 0.0}) == ["unknown line type 'mystery'"]


def test_every_line_kind_has_its_type_and_a_time() -> None:
    for kind, record in LINE_TYPES.items():
        assert "type" in record.__required_keys__, kind
        assert kind == "header" or "t" in record.__required_keys__, kind

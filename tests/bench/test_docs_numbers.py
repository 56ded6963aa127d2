"""bench/docs_numbers.py: the marked numbers in the docs are what the records say."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench.docs_numbers import PAGES, ROOT, MarkerError, Records, rewrite, spans, stale, value_of

RECORD = {
    "date": "2026-12-03 15:33 UTC",
    "params": {"seeds": 3},
    "figures": {"cells": {
        "a-lru[inject:x]": [{"detect_s": 2.0}, {"detect_s": 3.04}, {"detect_s": 9.0}],
        "b-lru[inject:y]": [{"detect_s": 1.0}, {"detect_s": None}, {"detect_s": 4.0}],
        "c-pp[inject:z]": [{"detect_s": 50.0}],
    }},
}


@pytest.fixture
def records(tmp_path: Path) -> Records:
    # The name has the characters real record names have (bench/record.py keys).
    (tmp_path / "ttd,-3-seeds.json").write_text(json.dumps(RECORD))
    return Records(tmp_path)


A_LRU = "ttd,-3-seeds/figures/cells/a-lru[inject:x]/*/detect_s"


def marked(spec: str, text: str) -> str:
    return f"<!-- n:{spec} -->{text}<!-- /n -->"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_marker_in_the_docs_names_a_value_of_a_record(page: Path) -> None:
    failures = []
    for span in spans(page.read_text()):
        try:
            value_of(span["spec"], Records())
        except MarkerError as error:
            failures.append(str(error))
    assert failures == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_marked_numbers_in_the_docs_are_what_their_records_say(page: Path) -> None:
    differing = stale(page.read_text(), Records())
    assert differing == [], "run `make docs-numbers` (bench/docs_numbers.py) and commit the pages"


def test_every_caught_at_line_of_the_incidents_is_generated() -> None:
    lines = (ROOT / "docs" / "incidents.md").read_text().splitlines()
    caught_at = [line for line in lines if line.startswith("- **Caught at.**")]
    incidents = [line for line in lines if re.match(r"## \d+\. ", line)]
    assert len(caught_at) == len(incidents), "each numbered incident has one Caught-at line"
    # The full run's record, or a subset's own (bench/time_to_detect.py -k NAME).
    marker = re.compile(r"<!-- n:time_to_detect(-[\w-]+)?/")
    assert all(len(marker.findall(line)) >= 2 for line in caught_at)


def test_rewrite_fixes_the_stale_numbers_and_nothing_else(records: Records) -> None:
    doc = (f"Median {marked(f'{A_LRU} median .1f', '9.9')} s"
           f" over {marked('ttd,-3-seeds/params/seeds d', '3')} seeds, measured "
           f"{marked('ttd,-3-seeds/date .10', '2020-01-01')}; 3.7 GB/h in production.\n")
    differing = [(written, expected) for _, written, expected in stale(doc, records)]
    assert differing == [("9.9", "3.0"), ("2020-01-01", "2026-12-03")]
    fixed = rewrite(doc, records)
    assert fixed == doc.replace("-->9.9<", "-->3.0<").replace("-->2020-01-01<", "-->2026-12-03<")
    assert stale(fixed, records) == []
    assert rewrite(fixed, records) == fixed


def test_a_marker_in_a_table_cell_keeps_the_row(records: Records) -> None:
    row = f"| a-lru | {marked(f'{A_LRU} max .1f', '?')} |\n"
    fixed = rewrite(row, records)
    assert fixed.count("|") == row.count("|")
    assert "-->9.0<!-- /n --> |" in fixed


def test_wildcards_reach_several_values_and_missing_values_are_left_out(records: Records) -> None:
    every_lru = "ttd,-3-seeds/figures/cells/*-lru[inject:*/*/detect_s"
    assert value_of(f"{every_lru} max .1f", records) == "9.0"
    assert value_of(f"{every_lru} count d", records) == "5"  # b-lru's undetected seed is out
    assert value_of(f"{every_lru} min .2f", records) == "1.00"


def test_a_marker_into_nothing_is_an_error_naming_where_it_stopped(records: Records) -> None:
    with pytest.raises(MarkerError, match="nothing at ttd,-3-seeds/figures/cells/d-lru"):
        value_of("ttd,-3-seeds/figures/cells/d-lru/*/detect_s median .1f", records)
    with pytest.raises(MarkerError, match="no record"):
        value_of("time_to_detect_old/params/seeds d", records)


def test_a_bad_marker_is_an_error_not_a_skipped_number(records: Records) -> None:
    cells = "ttd,-3-seeds/figures/cells/*/*/detect_s"
    with pytest.raises(MarkerError, match="name a reducer"):
        value_of(f"{cells} .1f", records)
    with pytest.raises(MarkerError, match="reduce with one of"):
        value_of(f"{cells} p99 .1f", records)
    with pytest.raises(MarkerError, match="line 2"):
        rewrite("fine\n<!-- n:ttd,-3-seeds/params/seeds d -->3 seeds, never closed\n", records)

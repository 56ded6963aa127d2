"""The allocation windows and runs the "Where it grows" tests share."""

from __future__ import annotations

from typing import Any

from harness.analysis.calibration import Calibration
from harness.analysis.summary import Analysis
from harness.runfiles.rundata import Series
from tests.analysis.synth import MB, linear, run_data, times

NONE = Calibration({})


def window(index: int, t: float, sites: dict[str, int], size: int = 100) -> dict[str, Any]:
    return {"type": "alloc", "window": index, "t": t, "from_t": t - 1.0, "ops": 500,
            "sites": [{"site": s, "stack": [s, "caller.py:3"], "bytes": b, "count": b // size}
                      for s, b in sites.items()]}


LEAK_THEN_FILL = [
    window(1, 6.0, {"cache.py:40": 50_000, "memo.py:9": 80_000}),
    window(2, 14.0, {"cache.py:40": 60_000, "traffic.py:67": 2_000}),
]


def heap_run(per_h: float, windows: list[dict[str, Any]]) -> Any:
    t = times(20, 10.0)
    run = run_data((t, linear(t, 0.0, base=300 * MB)), warmup_end_s=2.0, loop_end_s=20.0)
    run.memory["heap"] = Series(t, linear(t, per_h, base=50 * MB), "B")
    run.alloc_windows = windows
    return run


def typed_window(index: int, t: float, types: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    line = window(index, t, {site: 50_000 for site in types})
    line["census_from_t"], line["traced_from_t"] = 4.0, t - 2.0
    for entry in line["sites"]:
        entry["types"] = types[entry["site"]]
    return line


def where_of(analysis: Analysis) -> list[dict[str, object]]:
    """The analysis's "Where it grows" lines as ``summary.json`` stores them."""
    return [finding.to_json() for finding in analysis.details.where or ()]

"""The night's whole path on one machine, at seconds: shards, merge, history, site."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.history import trends
from leak_harness.cli import main

pytestmark = pytest.mark.integration  # runs a scenario in a worker


def test_shards_merge_into_one_site_whose_links_all_resolve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    night, db = tmp_path / "nightly", tmp_path / "history.sqlite"
    for shard in ("1/2", "2/2"):  # one cell over two shards: one shard has nothing to do
        code = main(["check", "--nightly", "--duration", "6s", "-k", "radix-steady[fixed]",
                     "--shard", shard, "--no-history",
                     "--out", str(night / f"shard-{shard.replace('/', '-of-')}")])
        # The path is under test, not the verdict: 6 s of a healthy cache on a loaded
        # runner may be judged wrong (exit 1), and the night still merges.
        assert code in (0, 1), capsys.readouterr()
    assert "shard 2/2: no cells (1 cells over 2 shards)." in capsys.readouterr().out
    assert main(["report", str(night), "--out", str(night), "--history", str(db)]) in (0, 1)
    (trend,) = trends(db)
    assert (trend.scenario, trend.column, len(trend.points)) == ("radix-steady", "fixed", 1)
    # The merged folder is the site: every link of its index resolves inside it.
    index = (night / "index.html").read_text(encoding="utf-8")
    links = re.findall(r'(?:href|src)="([^"#:]+)"', index)
    assert any(link.endswith("report.html") for link in links)
    assert any(link.startswith("trends/") for link in links)
    for link in links:
        target = (night / link).resolve()
        assert target.is_file() and night.resolve() in target.parents, link

"""Input errors name their source: --shard (empty, auto's variables, disagreeing CIs) and
the values of [tool.leak-harness] (the file and the key), one sentence, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.parent.shards import CI_SHARD_VARIABLES, resolve_shard
from leak_harness.cli import main


def test_an_empty_shard_is_refused_not_taken_for_every_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """RELIABILITY-3 case 96: --shard "$SHARD" with the variable unset ran the whole matrix."""
    with pytest.raises(UsageError, match=r"^--shard is empty \(an unset variable"):
        resolve_shard("")
    assert main(["check", "-k", "radix-steady", "--shard", "", "--out", str(tmp_path / "o"),
                 "--no-history"]) == 2
    assert "--shard is empty" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_auto_names_the_variables_it_read_and_the_base_they_count_from() -> None:
    """Case 98: 'shard 3/2 is out of range', a value nobody wrote, for Buildkite's 2/2."""
    with pytest.raises(UsageError, match=r"BUILDKITE_PARALLEL_JOB=2 counted from 0, "
                                         r"BUILDKITE_PARALLEL_JOB_COUNT=2 is out of range: "
                                         r"BUILDKITE_PARALLEL_JOB counts from 0, so it must "
                                         r"be 0 to 1"):
        resolve_shard("auto", {"BUILDKITE_PARALLEL_JOB": "2",
                               "BUILDKITE_PARALLEL_JOB_COUNT": "2"})
    with pytest.raises(UsageError, match="none of these variable pairs is set: "
                                         "LEAK_HARNESS_SHARD_INDEX and LEAK_HARNESS_SHARD_COUNT"):
        resolve_shard("auto", {})
    assert len(CI_SHARD_VARIABLES) == 4


def test_ci_variables_that_disagree_are_refused_naming_each_pair() -> None:
    """Case 98: with every pair set and disagreeing, the first pair silently won."""
    env = {"LEAK_HARNESS_SHARD_INDEX": "1", "LEAK_HARNESS_SHARD_COUNT": "2",
           "CI_NODE_INDEX": "2", "CI_NODE_TOTAL": "2", "JOB_COMPLETION_INDEX": "1"}
    with pytest.raises(UsageError) as refused:
        resolve_shard("auto", env)
    said = str(refused.value)
    assert said.startswith("--shard auto: the CI variables disagree (")
    assert "LEAK_HARNESS_SHARD_INDEX=1 counted from 1, LEAK_HARNESS_SHARD_COUNT=2 says 1/2" in said
    assert "CI_NODE_INDEX=2 counted from 1, CI_NODE_TOTAL=2 says 2/2" in said
    assert "JOB_COMPLETION_INDEX=1 counted from 0, LEAK_HARNESS_SHARD_COUNT=2 says 2/2" in said
    assert said.endswith("unset all but one pair, or give --shard I/N.")
    # Pairs that agree name one shard, from the first of them.
    agree = {"LEAK_HARNESS_SHARD_INDEX": "2", "LEAK_HARNESS_SHARD_COUNT": "2",
             "JOB_COMPLETION_INDEX": "1"}
    shard = resolve_shard("auto", agree)
    assert (shard.index, shard.count) == (2, 2)
    assert shard.source.startswith("LEAK_HARNESS_SHARD_INDEX=2")


@pytest.mark.parametrize(("line", "said"), [
    ("jobs = 0", "pyproject.toml: [tool.leak-harness] jobs must be at least 1, not 0."),
    ('duration = "5 parsecs"', "pyproject.toml: [tool.leak-harness] duration: cannot read "
                               "duration '5 parsecs'"),
    ('duration = "-5s"', "pyproject.toml: [tool.leak-harness] duration: a duration must be "
                         "positive, got '-5s'."),
    ('budgets = ["rss: fifty"]', "pyproject.toml: [tool.leak-harness] budgets: budget "
                                 "'rss: fifty': a rate needs a denominator"),
    ('target = "mycache.cache"', "pyproject.toml: [tool.leak-harness] target 'mycache.cache' "
                                 "is not 'module:callable'"),
])
def test_a_bad_value_in_the_projects_table_names_the_file_and_key(
    line: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Case 105: '-j must be at least 1.', '--duration: ...', '--budget: ...': flags the
    user never typed."""
    (tmp_path / "pyproject.toml").write_text(f"[tool.leak-harness]\n{line}\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["check", "-k", "radix-steady", "--plan"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"leak-harness: {said}"), err
    assert not any(flag in err for flag in ("-j must", "--duration:", "--budget:", "--target"))

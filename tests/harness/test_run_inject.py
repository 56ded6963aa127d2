"""``run --inject NAME SCENARIO``: one regression per flag, so the scenario after it stays
the scenario (nargs='+' once swallowed it: "the following arguments are required")."""

from __future__ import annotations

import pytest

from leak_harness.cli import build_parser, main


@pytest.mark.parametrize("argv", [
    ["run", "--inject", "mamba-lru-unlink", "mamba-lru", "--duration", "5s"],
    ["run", "mamba-lru", "--inject", "mamba-lru-unlink", "--duration", "5s"],
])
def test_the_scenario_survives_an_inject_before_it(argv: list[str]) -> None:
    args = build_parser({}).parse_args(argv)
    assert args.scenario == "mamba-lru" and args.inject == ["mamba-lru-unlink"]


def test_more_regressions_take_a_flag_each() -> None:
    args = build_parser({}).parse_args(["run", "x", "--inject", "a", "--inject", "b"])
    assert args.inject == ["a", "b"]


def test_two_names_after_one_flag_are_refused_in_one_sentence(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "--inject", "a", "b", "mamba-lru"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unrecognized arguments: mamba-lru" in err

"""Bad input to every command: one sentence on stderr, exit 2, no traceback, no worker.

Each row is what a user might type; none of them may start a run. (Budgets on
metrics a run never records and targets that cannot be imported are refused
by the worker before its workload starts: see ``test_runs``.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from leak_harness.cli import main

RUN = ["run", "radix-steady"]
BAD: list[tuple[list[str], str]] = [
    ([], "the following arguments are required"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["run"], "the following arguments are required: scenario"),
    (["run", "radix-stedy"], "unknown scenario 'radix-stedy'"),
    ([*RUN, "--nosuchflag"], "unrecognized arguments: --nosuchflag"),
    ([*RUN, "--duration", "5 parsecs"], "--duration"),
    ([*RUN, "--duration", "-5s"], "--duration: a duration must be positive, got '-5s'"),
    ([*RUN, "--duration", "0s"], "duration (--duration) must be positive, got 0 s"),
    ([*RUN, "--duration", "0"], "--duration: a duration must be positive, got '0'"),
    ([*RUN, "--warmup", "10s", "--duration", "3s"],
     "warm-up (10 s) must be shorter than the duration (3 s)"),
    ([*RUN, "--warmup", "-1s"], "--warmup: a duration must be positive"),
    (["check", "-j", "-2"], "-j must be at least 1"),
    ([*RUN, "--ops", "0"], "op count (--ops) must be positive, got 0"),
    ([*RUN, "--ops", "-3"], "op count (--ops) must be positive, got -3"),
    ([*RUN, "--ops", "many"], "invalid int value: 'many'"),
    ([*RUN, "--seed", "abc"], "invalid int value: 'abc'"),
    ([*RUN, "--inject", "no-such-regression"], "no-such-regression"),
    ([*RUN, "--gc-mode", "sometimes"], "invalid choice: 'sometimes'"),
    ([*RUN, "--budget", "rss 50"], "names no metric"),
    ([*RUN, "--budget", "rss: 50 parsecs/h"], "rss: 50 parsecs/h"),
    ([*RUN, "--budget", "rss: <= lots"], "a level is"),
    ([*RUN, "--budget", "9rss: 1 MB/h"], "is not a metric name"),
    ([*RUN, "--target", "notamodule"], "is not 'module:callable'"),
    ([*RUN, "--timeout", "0s"], "timeout (--timeout) must be positive, got 0 s"),
    ([*RUN, "--heartbeat", "0s"], "heartbeat"),
    ([*RUN, "--rss-ceiling", "12 parsecs"], "--rss-ceiling"),
    ([*RUN, "--rss-ceiling", "0"], "RSS ceiling (--rss-ceiling) must be positive"),
    ([*RUN, "--out", "/proc/forbidden/run"], "cannot write to the output folder"),
    (["check", "-j", "0"], "-j must be at least 1"),
    (["check", "-k", "no-cell-has-this"], "no cell matches -k 'no-cell-has-this'"),
    (["check", "--shard", "5/4"], "out of range"),
    (["check", "--shard", "half"], "a shard is 'I/N'"),
    (["check", "--duration", "5 parsecs"], "--duration"),
    (["check", "--target", "notamodule"], "is not 'module:callable'"),
    (["check", "--budget", "rss 50"], "names no metric"),
    (["check", "--budget", "rss: 5 parsecs/h"], "rss: 5 parsecs/h"),
    (["report", "{base}/no/such/path"], "does not exist"),
    (["report", "{base}/empty"], "no run folder"),
    (["report", "{base}/corrupt"], "summary.json"),
    (["compare", "{base}/no/a", "{base}/no/b"], "{base}/no/a"),
    (["compare", "{base}/empty", "{base}/empty"], "{base}/empty"),
    (["history", "--db", "{base}/no/such.sqlite"], "{base}/no/such.sqlite"),
    (["history", "--db", "{base}/notadb.sqlite"], "{base}/notadb.sqlite"),
    (["history", "--nights", "0"], "--nights"),
    (["list", "--verbose"], "unrecognized arguments: --verbose"),
]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folders and files the report, compare and history rows point at."""
    root = tmp_path_factory.mktemp("badin")
    (root / "empty").mkdir()
    (root / "corrupt").mkdir()
    (root / "corrupt" / "summary.json").write_text("{not json")
    (root / "notadb.sqlite").write_text("garbage, not a database")
    return root


@pytest.mark.parametrize(("argv", "words"), BAD, ids=[" ".join(a) or "(none)" for a, _ in BAD])
def test_bad_input_is_one_sentence_and_exit_2(
    argv: list[str], words: str, base: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([arg.format(base=base) for arg in argv])
    words = words.format(base=base)
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert code == 2, (captured.out, err)
    assert err.startswith("leak-harness: ") and "\n" not in err, err
    assert "Traceback" not in err + captured.out
    assert words in err, err

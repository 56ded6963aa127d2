"""The doctor: every problem of a broken cache at once, and a clean bill for a good one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.registry import scenario_names
from leak_harness.cli import main
from leak_harness.cli.doctor import headline
from scenarios.workloads.conformance import Diagnosis, diagnose

DOUBLES = "tests.scenarios.doubles"


def test_missing_methods_are_listed_together_before_anything_runs() -> None:
    found = diagnose("radix-steady", f"{DOUBLES}:missing_methods", seconds=0.5)
    assert found.problems == ["the cache (MissingMethods) lacks evict, extend_request: the "
                              "scheduler calls every one of them."]
    assert "no pool_accounting(): the idle books check" in " ".join(found.facts)


@pytest.mark.integration  # runs the scenario's workload on the cache
def test_every_misbehaviour_of_a_complete_cache_is_listed() -> None:
    found = diagnose("radix-idle", f"{DOUBLES}:misbehaving", seconds=1.5)
    text = "\n".join(found.problems)
    assert "stats() gives values that are not numbers: mode." in text
    assert "tokens stay locked with no request running" in text
    assert "close() raised RuntimeError: the peer is gone at tests/scenarios/doubles.py" in text
    assert len(found.problems) == 3, text


@pytest.mark.integration  # runs the scenario's workload on the cache
def test_the_reference_example_conforms(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["doctor", "--target", "examples.own_cache:make", "--seconds", "0.5",
                 "radix-steady", "--verbose"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "radix-steady  ok, " in out and "budgets that judge: rss: 50 MB/h" in out
    assert "budgets skipped (metric not published): detached_alive_nodes: <= 0." in out


def test_a_broken_cache_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["doctor", "--target", f"{DOUBLES}:missing_methods", "--seconds", "0.2",
                 "radix-steady"])
    out = capsys.readouterr().out
    assert code == 1 and "PROBLEM: the cache (MissingMethods) lacks evict" in out


@pytest.mark.integration  # runs the scenario's workload on the cache
def test_the_second_example_with_its_own_request_type_conforms_in_every_scenario(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["doctor", "--target", "examples.paged_engine:make", "--seconds", "0.3"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "PROBLEM" not in out
    # One line per scenario, a head and a tail: the facts wait for --verbose.
    lines = out.splitlines()
    assert len(lines) == 2 + len(scenario_names()) and "--verbose" in lines[0]
    # The adapter takes no exit path, no overlap, no streaming session, no PD call and no
    # speculation: those scenarios run, but not for what they are for, and the doctor
    # does not call them ok.
    skipped = [n for n in scenario_names() if n.endswith(("-exits", "-sessions", "-spec"))]
    skipped += ["radix-overlap", "pd-decode", "pd-prefill"]
    assert lines[-1] == (f"conforms, but {len(skipped)} of {len(lines) - 2} scenarios are not "
                         f"exercised on this cache: {', '.join(sorted(skipped))} (a pass there "
                         "says nothing of the paths they are for).")
    # The name column is as wide as the longest scenario name.
    assert re.search(r"^radix-exits +NOT EXERCISED: none of its 6 exit paths is taken", out,
                     re.MULTILINE)


def test_the_paged_adapter_inserts_directly_and_finds_what_it_inserted() -> None:
    from examples.paged_engine import PAGE, Sequence, make
    from refcache.keys import RadixKey

    cache = make(kv_size=16 * PAGE)
    seq = Sequence(list(range(2 * PAGE + 3)))
    assert cache.engine.append(seq, [], grow_only=True)  # the caller's own pages
    key, value = RadixKey.of(seq.tokens), cache._slots(seq)
    assert cache.insert(key, value) == 0
    assert cache.match_prefix(key).device_indices.tolist() == value[: 2 * PAGE].tolist()
    assert cache.insert(key, value) == 2 * PAGE  # both full pages are cached now
    cache.engine.release(seq)
    books = cache.pool_accounting()["full"]
    assert books.mismatch == 0 and books.protected == 0


@pytest.mark.integration  # starts a worker
def test_run_refuses_a_target_missing_methods_naming_them_all_before_the_workload(
    tmp_path: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["run", "radix-steady", "--target", f"{DOUBLES}:missing_methods",
                 "--duration", "3s", "--out", f"{tmp_path}/run"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert (f"the target '{DOUBLES}:missing_methods' builds MissingMethods, which lacks evict, "
            "extend_request: the scheduler calls every one of them") in err
    assert "doctor --target" in err


def test_a_scenario_whose_exit_paths_are_all_skipped_is_not_exercised() -> None:
    found = diagnose("radix-exits", "examples.paged_engine:make", seconds=0.2)
    assert found.ok and not found.exercised
    assert found.exit_paths == len(found.skipped_paths) == 6
    assert headline(found).startswith("NOT EXERCISED: none of its 6 exit paths is taken (")
    reference = diagnose("radix-exits", "refcache.factories:radix_cache", seconds=0.2)
    assert reference.exercised and headline(reference).startswith("ok, ")


def test_the_headline_says_what_part_of_a_scenario_is_skipped() -> None:
    part = Diagnosis("radix-exits", exit_paths=6, skipped_paths={
        "abort-waiting": "the cache has no release_aborted_request(req)",
        "timeout": "the cache has no release_aborted_request(req)"}, ops_per_s=12345.6)
    assert part.exercised
    assert headline(part) == ("ok, 12,346 ops/s; 2 of 6 exit paths not taken (abort-waiting, "
                              "timeout: the cache has no release_aborted_request(req))")
    off = Diagnosis("radix-overlap", overlap_off="the cache has no alloc_tokens(n)")
    assert not off.exercised
    assert headline(off) == "NOT EXERCISED: overlap scheduling is off (the cache has no " \
                            "alloc_tokens(n))"
    assert headline(Diagnosis("x", problems=["a", "b"])) == "2 problem(s)"


def test_a_target_that_does_not_import_from_here_gets_the_folder_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["doctor", "--target", "nosuch_own_pkg.cache:make", "radix-steady"])
    out = capsys.readouterr().out
    assert code == 1
    assert ("PROBLEM: cannot load: ModuleNotFoundError: No module named 'nosuch_own_pkg'. "
            f"A target is imported from the folder leak-harness runs in ({tmp_path}), then "
            "PYTHONPATH: run it from the folder that holds 'nosuch_own_pkg'") in out
    assert out.count("PROBLEM") == 1  # said once, not under every scenario


def test_one_scenario_not_exercised_is_said_in_the_singular(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["doctor", "--target", "examples.own_cache:make", "--seconds", "0.2",
                 "radix-steady", "radix-overlap"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[-1] == ("conforms, but 1 of 2 scenarios is not exercised on this "
                                    "cache: radix-overlap (a pass there says nothing of the "
                                    "paths it is for).")

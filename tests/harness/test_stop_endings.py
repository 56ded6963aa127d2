"""How a worker the runner asked to stop ended: the samples' last events decide."""

from __future__ import annotations

import json
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from harness.parent.supervisor import Supervisor
from harness.parent.tail import SampleTail
from harness.runfiles.names import CLOSED_EVENT
from harness.runfiles.samples import SCHEMA, VERSION


def supervisor(tmp_path: Path, events: Sequence[Mapping[str, str]], why: str) -> Supervisor:
    """A supervisor past its watch: the samples hold ``events``, a stop was asked ``why``."""
    path = tmp_path / "samples.jsonl"
    lines = [{"type": "header", "schema": SCHEMA, "version": VERSION, "config": {}, "env": {}},
             *({"type": "event", "t": 1.0 + i, **e} for i, e in enumerate(events))]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    watching = Supervisor.__new__(Supervisor)
    watching.tail = SampleTail(path, keep_all=False)
    watching.stop_reason, watching.stop_since, watching.decided_through_s = why, 9.5, None
    return watching


FINISHED = [{"name": "loop_end", "reason": "duration"}, {"name": "end", "reason": "duration"}]
SIGTERM = -int(signal.SIGTERM)


@pytest.mark.parametrize("code", [0, SIGTERM])
def test_a_run_that_finished_and_closed_before_the_stop_counted_is_finished(
    tmp_path: Path, code: int
) -> None:
    watching = supervisor(tmp_path, [*FINISHED, {"name": CLOSED_EVENT}], "interrupted")
    ending = watching._after_stop_request(code, 10.0)
    assert ending.status == "finished"
    assert ending.reasons == ["a stop request arrived after the run had finished."]


def test_the_stop_signal_killing_a_worker_before_it_closed_is_interrupted_not_crashed(
    tmp_path: Path,
) -> None:
    ending = supervisor(tmp_path, FINISHED, "interrupted")._after_stop_request(SIGTERM, 10.0)
    assert ending.status == "interrupted"
    assert ending.reasons[-1] == ("the worker was ended by the stop request (SIGTERM) before "
                                  "it closed.")


def test_a_run_the_stop_request_ended_is_still_cut_short_even_when_it_closed(
    tmp_path: Path,
) -> None:
    stopped = [{"name": "loop_end", "reason": "stopped: SIGTERM"},
               {"name": "end", "reason": "stopped: SIGTERM"}, {"name": CLOSED_EVENT}]
    ending = supervisor(tmp_path, stopped, "interrupted")._after_stop_request(0, 10.0)
    assert ending.status == "interrupted"
    early = supervisor(tmp_path, stopped, "early stop")._after_stop_request(0, 10.0)
    assert early.status == "stopped"

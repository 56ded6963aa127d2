"""The samples file's writer in someone else's process: its descriptor may be taken."""

from __future__ import annotations

import json
import os
import resource
from pathlib import Path

from harness.runfiles.samples import HIGH_FD, SampleWriter


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_descriptor_the_program_closed_is_reopened_and_its_files_stay_its_own(
    tmp_path: Path,
) -> None:
    writer = SampleWriter(tmp_path / "samples.jsonl")
    writer.sample("rss", 1.0, v=1)
    taken = writer._fd
    os.close(taken)  # a daemon closes every descriptor it did not open...
    writer.sample("rss", 2.0, v=2)  # ...and the recorder samples before it opens its own
    data = tmp_path / "mydata.txt"
    fd = os.open(data, os.O_WRONLY | os.O_CREAT, 0o644)  # ...which gets the lowest free one
    try:
        own = os.fdopen(os.dup(fd), "w")
        own.write("program data\n")
        own.close()
        writer.sample("rss", 3.0, v=3)
        writer.close()
    finally:
        os.close(fd)
    assert data.read_text() == "program data\n"  # no sample line in the program's file
    assert [line["v"] for line in lines(tmp_path / "samples.jsonl")] == [1, 2, 3]
    assert writer.reopened >= 1


def test_a_descriptor_taken_by_a_file_of_the_same_number_is_noticed(tmp_path: Path) -> None:
    writer = SampleWriter(tmp_path / "samples.jsonl")
    writer.event("start", 0.0)
    data = tmp_path / "mydata.txt"
    fd = os.open(data, os.O_WRONLY | os.O_CREAT, 0o644)
    number = writer._fd
    os.dup2(fd, number)  # the program puts its own file on our number (a daemon's dup2)
    try:
        writer.event("tick", 1.0)  # same number, another file: reopened, not written there
        writer.close()
        assert os.fstat(number).st_ino == os.fstat(fd).st_ino  # and left open: it is theirs
    finally:
        os.close(fd)
        os.close(number)
    assert data.read_text() == ""
    assert [line["name"] for line in lines(tmp_path / "samples.jsonl")] == ["start", "tick"]


def test_the_descriptor_sits_above_the_numbers_a_program_opens_next(tmp_path: Path) -> None:
    writer = SampleWriter(tmp_path / "samples.jsonl")
    try:
        assert writer._fd >= min(HIGH_FD, resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 64)
    finally:
        writer.close()

"""Durations and sizes: parsing good and bad input, formatting, round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.units import (
    format_bytes,
    format_duration,
    format_rate,
    parse_duration,
    parse_size,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90.0),
        ("10m", 600.0),
        ("2h", 7200.0),
        ("1h30m", 5400.0),
        ("1h 30m 15s", 5415.0),
        ("250ms", 0.25),
        ("1.5h", 5400.0),
        ("1d", 86400.0),
        ("0.5s", 0.5),
        (" 2H ", 7200.0),
        ("1m30s", 90.0),
        ("2s500ms", 2.5),
    ],
)
def test_parse_duration_reads_each_form(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty duration"),
        ("90", "has no unit"),
        ("10 minutes", "cannot read duration"),
        ("30m1h", "largest first"),
        ("1h1h", "largest first"),
        ("-5s", "cannot read duration"),
        ("h", "cannot read duration"),
        ("5x", "cannot read duration"),
        ("1h and 5m", "cannot read duration"),
    ],
)
def test_parse_duration_refuses_with_a_sentence(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("2GiB", 2 * 2**30),
        ("500MB", 500_000_000),
        ("1.5G", 1_500_000_000),
        ("4096", 4096),
        ("12 KiB", 12 * 1024),
        ("3kb", 3000),
        ("1 TiB", 2**40),
        ("7 B", 7),
        (".5MiB", 2**19),
    ],
)
def test_parse_size_reads_each_form(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "cannot read size"),
        ("MB", "cannot read size"),
        ("5 XB", "unknown unit 'XB'"),
        ("-1GB", "negative"),
        ("1,5GB", "cannot read size"),
        ("2 GiB/h", "cannot read size"),
    ],
)
def test_parse_size_refuses_with_a_sentence(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_size(text)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (1500, "1.5 KB"),
        (3.7e9, "3.7 GB"),
        (-45.6e6, "-45.6 MB"),
        (123_456_789, "123 MB"),
        (2.5e12, "2.5 TB"),
    ],
)
def test_format_bytes_uses_decimal_units(value: float, text: str) -> None:
    assert format_bytes(value) == text


def test_format_rate_prefixes_byte_rates_only() -> None:
    assert format_rate(3.7e9, "B/h") == "3.7 GB/h"
    assert format_rate(0.5, "/kop") == "0.5 /kop"
    assert format_rate(120.0, "/h") == "120 /h"
    assert format_rate(4.0, "") == "4"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.25, "250ms"), (45.0, "45s"), (90.0, "1m30s"), (5400.0, "1h30m"), (7200.0, "2h")],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@given(st.integers(min_value=1, max_value=10 * 86400))
def test_format_duration_reads_back(seconds: int) -> None:
    assert parse_duration(format_duration(float(seconds))) == pytest.approx(seconds)


@given(st.integers(min_value=0, max_value=10**15))
def test_formatted_bytes_read_back_within_rounding(size: int) -> None:
    # Three significant digits: the value read back is within 0.5% (or 1 byte).
    back = parse_size(format_bytes(size).replace(" ", ""))
    assert abs(back - size) <= max(0.005 * size, 1)

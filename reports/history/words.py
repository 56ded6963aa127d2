"""A history flag as the sentence the CLI prints and the index lists."""

from __future__ import annotations

from harness.history.flags import Flag
from reports.render.numbers import format_growth


def flag_sentence(flag: Flag) -> str:
    """``radix (fixed): RSS grows more than usual: +90 MB/h [...] on 2025-01-20, usual ...``."""
    assert flag.latest.growth_per_h is not None
    shown = format_growth(flag.latest.growth_per_h, flag.latest.growth_ci, "B/h")
    usual = format_growth(flag.band.centre, (flag.band.low, flag.band.high), "B/h")
    more = "more" if flag.direction == "up" else "less"
    return (f"{flag.scenario} ({flag.column}): RSS grows {more} than usual: {shown} on "
            f"{flag.latest.recorded_at:%Y-%m-%d}, usual {usual} over {flag.history} runs.")

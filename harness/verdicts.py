"""The verdict vocabulary, defined once: every face, report and rule imports it.

A run ends with exactly one verdict. Some come from the analysis of the
samples (``pass``, ``suspicious``, ``leak``, ``error``), the others from what
happened to the worker process (it crashed, hung or hit the RSS ceiling) or to
the run (``interrupted``: Ctrl-C or SIGTERM cut it short; the partial samples
are analysed and the reasons say what they showed, but such a run never passes;
a failure they already confirm, a leak say, is that failure's verdict instead).
"""

from __future__ import annotations

# From the analysis of the samples.
PASS, SUSPICIOUS, LEAK, ERROR = "pass", "suspicious", "leak", "error"
# From the process: the supervisor decides these, the analysis never overrides them.
CRASHED, HUNG, CEILING = "crashed", "hung", "ceiling"
INTERRUPTED = "interrupted"

VERDICTS = (PASS, LEAK, SUSPICIOUS, CRASHED, HUNG, CEILING, INTERRUPTED, ERROR)
PROCESS_VERDICTS = (CRASHED, HUNG, CEILING)
# Process endings that decide the verdict on their own: a process verdict, or
# ``error`` when the harness itself failed in the worker. The other endings
# (finished, stopped, interrupted) take the analysis's verdict.
ENDING_VERDICTS = (*PROCESS_VERDICTS, ERROR)
# Exit code 0 from `run`: suspicious says "run longer", not "broken".
PASSING = (PASS, SUSPICIOUS)
# What counts as catching an injected regression: a confirmed failure of the code
# under test. ``error`` (the harness failed to judge) and ``interrupted`` never count;
# like every verdict outside PASSING they fail a build.
FAILING = (LEAK, CRASHED, HUNG, CEILING)


def detection_words(verdict: str) -> str:
    """What a run's ``time_to_detect_s`` marks, in words: a leak is detected then and a
    crash happened then; any other verdict only had a budget first fail then (a
    suspicious run never confirmed it)."""
    return {LEAK: "detected", CRASHED: "crashed"}.get(verdict, "a budget first failed")


# Exit codes, as CI tools use them: a regression is not a broken tool.
EXIT_PASS, EXIT_REGRESSION, EXIT_USAGE, EXIT_HARNESS = 0, 1, 2, 3
EXIT_SIGINT, EXIT_SIGTERM = 130, 143


def exit_code(verdict: str, strict: bool = False) -> int:
    """The exit code of ``leak-harness run`` or ``record`` for a verdict: 0 pass (and
    ``suspicious`` unless ``strict``), 1 a failure of the code under test, 3 the harness
    could not judge (``error``), 130 a run cut short (the command's own signal, when it
    saw one, says 130 or 143)."""
    if verdict == SUSPICIOUS:
        return EXIT_REGRESSION if strict else EXIT_PASS
    if verdict in PASSING:
        return EXIT_PASS
    if verdict == ERROR:
        return EXIT_HARNESS
    if verdict == INTERRUPTED:
        return EXIT_SIGINT
    return EXIT_REGRESSION


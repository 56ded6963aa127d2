"""The one error type users see: a sentence and an exit code, never a traceback."""

from __future__ import annotations


class UsageError(Exception):
    """Bad input from the user (names, durations, sizes, paths, files).

    The CLI prints ``message`` on stderr and exits with ``exit_code``; library
    callers (pytest, ``check``) can catch it and show the same sentence.
    """

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message

"""The history database: one row per run, appended by every suite (nightly, CI shards).

Embedded SQLite, so the history is one file a CI cache or artifact can carry.
Several shards may append at once, so: WAL journal (readers never block the
writer), every write in a ``BEGIN IMMEDIATE`` transaction (the write lock is
taken up front, so two writers never deadlock upgrading read locks), and a
busy timeout (a writer waits for the lock instead of failing). A run is
identified by the hash of its ``summary.json``: appending the same suite
twice (a retried CI step) adds nothing. Schema version: ``PRAGMA user_version``.
"""

from __future__ import annotations

import hashlib
import math
import os
import sqlite3
import statistics
import time
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from harness.errors import UsageError
from harness.runfiles.facts import FIXED, column_of, detect_s, garbage_per_kop, judged_growth
from harness.runfiles.names import SUMMARY_FILE
from harness.runfiles.summary import Summary, load_summary
from harness.verdicts import INTERRUPTED

DEFAULT_DB = Path("results") / "history.sqlite"
SCHEMA_VERSION = 2  # 2: a row per judged budget of each run (trends on every signal)
BUSY_TIMEOUT_S = 60.0
SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    run_key TEXT NOT NULL UNIQUE,  -- sha256 of summary.json
    recorded_at TEXT NOT NULL,     -- ISO 8601, UTC: when the suite ran (the "night")
    commit_sha TEXT,
    scenario TEXT NOT NULL,
    injected TEXT NOT NULL,        -- '' for the fixed code, else names joined with '+'
    verdict TEXT NOT NULL,
    growth_per_h REAL,             -- judged RSS growth, bytes per hour
    growth_lo REAL,
    growth_hi REAL,
    garbage_per_kop REAL,
    detect_s REAL,
    duration_s REAL NOT NULL,
    rundir TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_series ON runs (scenario, injected, recorded_at);
"""
# Version 2: each judged budget of a run, so trends show the signal that judged it
# (a leak caught on garbage or the heap shows there, not as flat RSS).
BUDGETS_SCHEMA = """
CREATE TABLE IF NOT EXISTS budgets (
    run_key TEXT NOT NULL,         -- runs.run_key
    budget TEXT NOT NULL,          -- as written: 'heap: 10 MB/h'
    series TEXT NOT NULL,          -- the series it reads: 'heap'
    kind TEXT NOT NULL,            -- 'rate' or 'level'
    value REAL,                    -- the judged rate, or the level held, in the budget's unit
    lo REAL,
    hi REAL,
    limit_value REAL NOT NULL,
    unit TEXT NOT NULL,            -- the budget's canonical unit: 'B/h', '/kop', 'B', ''
    status TEXT NOT NULL,
    PRIMARY KEY (run_key, budget)
);
"""
BUDGET_COLUMNS = ("run_key", "budget", "series", "kind", "value", "lo", "hi", "limit_value",
                  "unit", "status")
COLUMNS = ("run_key", "recorded_at", "commit_sha", "scenario", "injected", "verdict",
           "growth_per_h", "growth_lo", "growth_hi", "garbage_per_kop", "detect_s",
           "duration_s", "rundir")


@dataclass(frozen=True)
class Appended:
    """What :func:`append_suite` did: rows added, runs already present, folders skipped."""

    added: int
    already_present: int
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # folder, why


@contextmanager
def connect(db: Path) -> Iterator[sqlite3.Connection]:
    """An open connection with WAL, a busy timeout and the schema in place."""
    db = Path(db)
    db.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(db, timeout=BUSY_TIMEOUT_S, isolation_level=None)) as conn:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        try:
            _set_wal(conn)
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):
                raise  # still locked after the timeout: a real problem, not our file's
            raise UsageError(f"{db} is not a history database ({exc}).") from None
        with transaction(conn):
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise UsageError(f"{db} is history schema {version}; this leak-harness "
                                 f"knows version {SCHEMA_VERSION} only.")
            if version < SCHEMA_VERSION:
                _create(conn, version)
        yield conn


def _create(conn: sqlite3.Connection, version: int) -> None:
    """Bring a database at ``version`` (0: new) to :data:`SCHEMA_VERSION`; older rows
    keep what they had (a version 1 run has no budget rows)."""
    # executescript would COMMIT the open transaction; run statements one by one.
    scripts = ([SCHEMA] if version < 1 else []) + [BUDGETS_SCHEMA]
    for statement in filter(str.strip, ";".join(scripts).split(";")):
        conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _set_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL, retrying: the switch needs a moment alone with a new file."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on any error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def append_suite(
    db: Path, rundirs: Sequence[Path], commit: str | None = None, when: datetime | None = None
) -> Appended:
    """Append one row per readable run folder, all in one transaction.

    ``when`` is the suite's time (default now; a naive datetime is taken as
    UTC). Folders without a readable ``summary.json``, and runs that were interrupted,
    are skipped and listed.
    """
    runs, unreadable = [], []
    for rundir in map(Path, rundirs):
        try:
            runs.append((rundir, load_summary(rundir)))
        except UsageError as exc:
            unreadable.append((rundir, exc.message))
    appended = append_runs(db, runs, commit, when)
    return Appended(appended.added, appended.already_present, [*unreadable, *appended.skipped])


def append_runs(
    db: Path, runs: Sequence[tuple[Path, Summary]], commit: str | None = None,
    when: datetime | None = None,
) -> Appended:
    """:func:`append_suite` of summaries already read (a judged suite's
    :attr:`harness.suite.Suite.runs`), in the order given; interrupted runs are skipped."""
    stamp = _utc(when or datetime.now(UTC)).isoformat(timespec="seconds")
    rows, budget_rows, skipped = [], [], []
    for rundir, summary in runs:
        if summary.verdict == INTERRUPTED:  # cut short: its rates speak for no night
            skipped.append((rundir, "interrupted before it finished"))
            continue
        rows.append(run_row(rundir, summary, stamp, commit))
        budget_rows += [(rows[-1][0], *budget) for budget in budget_values(summary)]
    marks = ", ".join("?" * len(COLUMNS))
    with connect(db) as conn, transaction(conn):
        before = conn.total_changes
        conn.executemany(f"INSERT OR IGNORE INTO runs ({', '.join(COLUMNS)}) VALUES ({marks})",
                         rows)
        added = conn.total_changes - before
        conn.executemany(f"INSERT OR IGNORE INTO budgets ({', '.join(BUDGET_COLUMNS)}) "
                         f"VALUES ({', '.join('?' * len(BUDGET_COLUMNS))})", budget_rows)
    return Appended(added, len(rows) - added, skipped)


def budget_values(summary: Summary) -> list[tuple[object, ...]]:
    """(budget, series, kind, value, lo, hi, limit, unit, status) per judged budget.

    The budget's parts are the analysis's own parse (summary version 3 on): a
    budget an older summary stores no parse of gets no row; its run row counts."""
    limits = {limit.text: limit for limit in summary.limits()}
    found: list[tuple[object, ...]] = []
    for metric in summary.metrics.values():
        limit = limits.get(metric.budget) if metric.budget else None
        if limit is None or not metric.status:
            continue
        lo, hi = (_finite(metric.ci[0]), _finite(metric.ci[1])) if metric.ci else (None, None)
        found.append((limit.text, limit.metric, limit.kind, _finite(metric.value), lo, hi,
                      limit.limit, limit.unit, metric.status))
    return found


def run_row(rundir: Path, summary: Summary, stamp: str, commit: str | None) -> tuple[object, ...]:
    growth = judged_growth(summary)
    ci = growth.ci if growth and growth.ci else (None, None)
    key = hashlib.sha256((rundir / SUMMARY_FILE).read_bytes()).hexdigest()
    return (key, stamp, commit, summary.scenario, "+".join(summary.injected), summary.verdict,
            growth.per_h if growth else None, ci[0], ci[1], garbage_per_kop(summary),
            detect_s(summary), summary.duration_s, str(rundir))


def _utc(when: datetime) -> datetime:
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


@dataclass(frozen=True)
class BudgetPoint:
    """One judged budget of a run: its value against its limit."""

    budget: str
    series: str
    kind: str
    value: float | None
    ci: tuple[float, float] | None
    limit: float
    unit: str
    status: str

    @property
    def share(self) -> float | None:
        """The value as a share of the limit (1: at the budget); None for a limit of 0."""
        if self.value is None or self.limit <= 0:
            return None
        return self.value / self.limit


@dataclass(frozen=True)
class Point:
    """One run in a trend."""

    recorded_at: datetime
    commit: str | None
    verdict: str
    growth_per_h: float | None  # bytes per hour
    growth_ci: tuple[float, float] | None
    garbage_per_kop: float | None
    detect_s: float | None
    duration_s: float
    rundir: str
    budgets: tuple[BudgetPoint, ...] = ()  # none for runs a version 1 history recorded


@dataclass(frozen=True)
class Trend:
    """The recent runs of one scenario in one column (fixed or an injection), oldest first."""

    scenario: str
    injected: str
    points: list[Point]

    @property
    def column(self) -> str:
        return column_of(self.injected.split("+")) if self.injected else FIXED


def trends(db: Path, scenario: str | None = None, nights: int = 14) -> list[Trend]:
    """The last ``nights`` runs of every (scenario, column) series, or of one scenario."""
    query = """
        SELECT scenario, injected, recorded_at, commit_sha, verdict, growth_per_h, growth_lo,
               growth_hi, garbage_per_kop, detect_s, duration_s, rundir, run_key FROM (
            SELECT *, ROW_NUMBER() OVER (PARTITION BY scenario, injected
                                         ORDER BY recorded_at DESC, id DESC) AS age
            FROM runs WHERE ? IS NULL OR scenario = ?)
        WHERE age <= ? ORDER BY scenario, injected != '', injected, recorded_at, id
    """
    with connect(db) as conn:
        rows = conn.execute(query, (scenario, scenario, nights)).fetchall()
        budgets = _budgets_of(conn, [str(row[-1]) for row in rows])
    found: dict[tuple[str, str], list[Point]] = {}
    for row in rows:
        found.setdefault((row[0], row[1]), []).append(
            _point(row[2:-1], budgets.get(str(row[-1]), ())))
    return [Trend(name, injected, points) for (name, injected), points in found.items()]


def _budgets_of(conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, list[BudgetPoint]]:
    found: dict[str, list[BudgetPoint]] = {}
    for start in range(0, len(keys), 500):  # under SQLite's limit on bound parameters
        chunk = keys[start:start + 500]
        rows = conn.execute(
            f"SELECT {', '.join(BUDGET_COLUMNS)} FROM budgets WHERE run_key IN "
            f"({', '.join('?' * len(chunk))}) ORDER BY rowid", chunk).fetchall()
        for key, budget, series, kind, value, lo, hi, limit, unit, status in rows:
            ci = (float(lo), float(hi)) if isinstance(lo, float) and isinstance(hi, float) \
                else None
            found.setdefault(str(key), []).append(BudgetPoint(
                str(budget), str(series), str(kind), _number(value), ci,
                float(_number(limit) or 0.0), str(unit), str(status)))
    return found


def _point(row: Sequence[object], budgets: Sequence[BudgetPoint] = ()) -> Point:
    at, commit, verdict, growth, lo, hi, kop, detect, duration, rundir = row
    ci = (float(lo), float(hi)) if isinstance(lo, float) and isinstance(hi, float) else None
    return Point(
        recorded_at=datetime.fromisoformat(str(at)), commit=None if commit is None else str(commit),
        verdict=str(verdict), growth_per_h=_number(growth), growth_ci=ci,
        garbage_per_kop=_number(kop), detect_s=_number(detect),
        duration_s=float(_number(duration) or 0.0), rundir=str(rundir), budgets=tuple(budgets),
    )


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def check_writable(db: Path) -> None:
    """Refuse, before any run, a history that could not take the runs' rows: a file that
    is not a history database, a folder that cannot be made or written (the runs would
    otherwise be judged and their rows dropped at the end). A lock is not checked: it is
    held for seconds, and the append waits for it."""
    db = Path(db)
    if db.exists():
        with connect(db):
            return
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot make the history's folder {db.parent}: "
                         f"{exc.strerror or exc}.") from None
    if not os.access(db.parent, os.W_OK):
        raise UsageError(f"cannot write the history {db}: its folder is not writable.")


def typical_seconds(db: Path, nights: int = 7) -> dict[tuple[str, str], float]:
    """Per (scenario, column): the median length of its last ``nights`` runs, in seconds
    (empty when there is no history yet); interrupted runs never entered it."""
    if not Path(db).exists():
        return {}
    found: dict[tuple[str, str], float] = {}
    for trend in trends(db, None, nights):
        if trend.points:
            found[(trend.scenario, trend.column)] = statistics.median(
                p.duration_s for p in trend.points)
    return found

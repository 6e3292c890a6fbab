"""The server's own view of its threads, sampled read-only from performance_schema.

`ThreadSampler.sample()` reads, in two SELECTs on the `--mysql` connection:

- `performance_schema.threads`: for each OS thread (THREAD_OS_ID) its pfs THREAD_ID,
  NAME, TYPE (FOREGROUND / BACKGROUND) and, for a connection, PROCESSLIST_ID, _USER,
  _HOST and _DB;
- `events_statements_current` (each thread's running or last statement) and
  `events_statements_history` (each thread's last few statements) ended since the
  previous sample, so a statement shorter than the sampling period is still seen.

Statement times are the server's timer (picoseconds); they become the caller's clock
through the sample itself: the running statement with the latest TIMER_END is the
sampler's own SELECT, whose TIMER_END is "now" on the server when the caller's clock
read the time just before sending it (a few hundred microseconds apart on a socket).

A running statement has no digest yet (the server computes it at the end), so a query
is known by its own key: a hash of SQL_TEXT with literals replaced by '?' and spaces
collapsed (the same while it runs and after it ended, so a long query is one row from
its start). Its digest is filled in from earlier executions of the same text once one
has ended. The text shown is DIGEST_TEXT where there is one, else that normalised
SQL_TEXT, shortened to `TEXT_CHARS`. MariaDB 10.11 gives no text, digest or statement id
for an execution of a prepared statement (COM_STMT_EXECUTE, what sysbench sends): those
are "(prepared statement)".

What performance_schema cannot give (off, consumers off, no privilege) is found once at
open: `problems()` says it in one line, and `sample()` returns what is available.
`BackgroundSampler` / `PeriodicSampler` (server_status.py) run it in a worker thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pymysql

from .errors import UserError
from .mysql_conn import Connector, error_text, query

TEXT_CHARS = 60
PREPARED = "(prepared statement)"  # executions of prepared statements, which have no text in pfs
_KNOWN_TEXTS = 4096  # normalised texts whose digest is remembered
_PS_PER_S = 1e12
_NO_PRIVILEGE = (1142, 1143, 1044, 1227)

_THREADS_SQL = (
    "SELECT THREAD_OS_ID, THREAD_ID, NAME, TYPE, PROCESSLIST_ID, PROCESSLIST_USER, PROCESSLIST_HOST,"
    " PROCESSLIST_DB, PROCESSLIST_COMMAND FROM performance_schema.threads WHERE THREAD_OS_ID IS NOT NULL"
)
_STMT_COLUMNS = (
    "THREAD_ID, EVENT_ID, END_EVENT_ID, EVENT_NAME, TIMER_START, TIMER_END, DIGEST, LEFT(DIGEST_TEXT, 400) AS DIGEST_TEXT,"
    " LEFT(SQL_TEXT, 400) AS SQL_TEXT"
)
_CURRENT_SQL = f"SELECT {_STMT_COLUMNS} FROM performance_schema.events_statements_current"
_HISTORY_SQL = f"SELECT {_STMT_COLUMNS} FROM performance_schema.events_statements_history WHERE TIMER_END >= %s"

# readable names of background threads (performance_schema NAME's last part)
_NAMES = {
    "page_cleaner_thread": "page cleaner",
    "thread_pool_thread": "InnoDB tpool",
    "checkpoint_background": "Aria checkpoint",
    "binlog_background": "binlog background",
    "one_connection": "connection",
    "main": "main",
    "manager": "manager",
    "signal_handler": "signal handler",
    "statement_timer": "statement timer",
    "slave_deadlock_handler": "replica deadlock handler",
    "slave_io": "replica I/O",
    "slave_sql": "replica SQL",
    "slave_worker": "replica worker",
    "rpl_parallel_thread": "replica worker",
    "event_scheduler": "event scheduler",
    "event_worker": "event",
}


# threads performance_schema calls FOREGROUND (with a processlist id and a user, e.g. a
# parallel replica worker as root@localhost) that run the server's own work, not a client's
_SERVER_WORK = frozenset({"slave_io", "slave_sql", "slave_worker", "rpl_parallel_thread"})


def runs_server_work(thread: ServerThread) -> bool:
    """A background thread, or a replica thread: never a user's or a connection's."""
    return thread.background or thread.name.rsplit("/", 1)[-1] in _SERVER_WORK


def readable_name(name: str) -> str:
    """performance_schema's NAME as people say it: thread/innodb/page_cleaner_thread ->
    'page cleaner'; unknown ones: the last part without 'thread', underscores as spaces."""
    last = name.rsplit("/", 1)[-1]
    if last in _NAMES:
        return _NAMES[last]
    words = [w for w in last.split("_") if w != "thread"]
    return " ".join(words) or last or name


_LITERAL = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.)*\"|\b0x[0-9a-fA-F]+\b|\b\d+(?:\.\d+)?\b")
_SPACE = re.compile(r"\s+")


def normalise_sql(text: str) -> str:
    """SQL_TEXT without its literals (as '?') and with single spaces; no values shown."""
    return _SPACE.sub(" ", _LITERAL.sub("?", text)).strip()


def shorten_text(text: str, chars: int = TEXT_CHARS) -> str:
    text = _SPACE.sub(" ", text).strip()
    return text if len(text) <= chars else text[: chars - 1] + "…"


@dataclass(frozen=True)
class ServerThread:
    """One OS thread as performance_schema names it."""

    tid: int  # THREAD_OS_ID
    thread_id: int  # performance_schema THREAD_ID
    name: str  # NAME, e.g. thread/sql/one_connection
    background: bool  # TYPE = 'BACKGROUND'
    connection_id: int | None = None
    user: str | None = None
    host: str | None = None
    db: str | None = None

    def to_row(self) -> list[Any]:
        return [
            self.tid,
            self.thread_id,
            self.name,
            int(self.background),
            self.connection_id,
            self.user,
            self.host,
            self.db,
        ]

    @classmethod
    def from_row(cls, row: list[Any]) -> ServerThread:
        tid, thread_id, name, background, conn, user, host, db = row
        return cls(int(tid), int(thread_id), str(name), bool(background), _opt_int(conn), user, host, db)


@dataclass(frozen=True)
class Statement:
    """A statement a thread ran: times on the caller's clock; `end` None while running."""

    tid: int  # THREAD_OS_ID
    event_id: int
    start: float
    end: float | None
    digest: str | None
    text: str  # DIGEST_TEXT, else the normalised SQL_TEXT; shortened
    key: str = ""  # query_key() of its SQL_TEXT: the same while it runs and after it ended

    def to_row(self) -> list[Any]:
        end = None if self.end is None else round(self.end, 6)
        return [self.tid, self.event_id, round(self.start, 6), end, self.digest, self.text, self.key]

    @classmethod
    def from_row(cls, row: list[Any]) -> Statement:
        tid, event_id, start, end, digest, text, key = row
        end_t = None if end is None else float(end)
        return cls(int(tid), int(event_id), float(start), end_t, digest, str(text), str(key))


def query_key(normalised: str) -> str:
    """A query's key: 16 hex digits of the SHA-1 of its normalised text (no text kept)."""
    return hashlib.sha1(normalised.encode(), usedforsecurity=False).hexdigest()[:16]


@dataclass
class ThreadSample:
    """One sample: when (the caller's clock), the threads (None: as in the previous
    sample), the statements running or ended since the previous sample."""

    time: float
    threads: list[ServerThread] | None = None
    statements: list[Statement] = field(default_factory=list)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "t": round(self.time, 6),
            "threads": None if self.threads is None else [t.to_row() for t in self.threads],
            "statements": [s.to_row() for s in self.statements],
            "error": self.error,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ThreadSample | None:
        """A stored sample; None when damaged (a trace is never trusted)."""
        try:
            threads = obj.get("threads")
            return cls(
                time=float(obj["t"]),
                threads=None if threads is None else [ServerThread.from_row(r) for r in threads],
                statements=[Statement.from_row(r) for r in obj.get("statements") or ()],
                error=obj.get("error"),
            )
        except (KeyError, TypeError, ValueError):
            return None


def _opt_int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def _upper(row: dict[str, Any]) -> dict[str, Any]:
    return {k.upper(): v for k, v in row.items()}


class ThreadSampler:
    """Samples one server's threads and statements; owns (and re-opens) its connection.
    `clock` is the caller's time base (seconds), e.g. time.monotonic or seconds since a
    trace's start."""

    def __init__(self, connector: Connector, clock: Callable[[], float] = time.monotonic) -> None:
        self._connector = connector
        self.clock = clock  # record sets it to seconds since the trace's start
        self._conn: pymysql.connections.Connection | None = None
        self._problems: list[str] = []
        self._statements = True  # events_statements_current is on
        self._history = True  # events_statements_history is on
        self._last_ps: int | None = None  # the server's timer at the previous sample
        self._last_threads: list[ServerThread] | None = None
        self._digests: dict[str, tuple[str, str]] = {}  # normalised SQL_TEXT -> (digest, DIGEST_TEXT)
        self.usable = True  # threads can be read at all

    @classmethod
    def open(cls, connector: Connector, clock: Callable[[], float] = time.monotonic) -> ThreadSampler:
        """Connect and find what performance_schema can give (problems())."""
        sampler = cls(connector, clock)
        sampler._conn = connector.open()
        sampler._check(sampler._conn)
        return sampler

    @property
    def timeout_s(self) -> float:
        return self._connector.timeout_s

    def problems(self) -> list[str]:
        """What is missing, e.g. ['performance_schema=OFF']; empty: everything is there."""
        return list(self._problems)

    def _check(self, conn: pymysql.connections.Connection) -> None:
        self._problems = []
        on = query(conn, "SELECT @@performance_schema AS on_")
        if not on or not int(on[0]["on_"] or 0):
            self._problems.append("the server has performance_schema=OFF")
            self.usable = self._statements = self._history = False
            return
        try:
            rows = query(conn, "SELECT NAME, ENABLED FROM performance_schema.setup_consumers")
            query(conn, "SELECT THREAD_ID FROM performance_schema.threads LIMIT 1")
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] in _NO_PRIVILEGE:
                self._problems.append(f"no SELECT privilege on performance_schema for {self._connector.user}")
                self.usable = self._statements = self._history = False
                return
            raise
        enabled = {str(_upper(r)["NAME"]): str(_upper(r)["ENABLED"]).upper() == "YES" for r in rows}
        if not (enabled.get("global_instrumentation", True) and enabled.get("thread_instrumentation", True)):
            self._problems.append("performance_schema's thread_instrumentation consumer is off")
            self.usable = self._statements = self._history = False
            return
        self._statements = enabled.get("events_statements_current", False)
        self._history = enabled.get("events_statements_history", False)
        if not self._statements:
            self._problems.append(
                "performance_schema's events_statements_current consumer is off (no queries; "
                "performance-schema-consumer-events-statements-current=ON)"
            )
        elif not self._history:
            self._problems.append(
                "events_statements_history consumer is off: statements shorter than the sampling "
                "period are missed (performance-schema-consumer-events-statements-history=ON)"
            )

    def sample(self) -> ThreadSample:
        try:
            if self._conn is None:
                self._conn = self._connector.open()
                self._check(self._conn)
                self._last_ps = None
                self._last_threads = None
            return self._read(self._conn)
        except (pymysql.MySQLError, OSError, UserError) as exc:
            self.close()
            message = str(exc) if isinstance(exc, UserError) else f"no answer: {error_text(exc)}"
            return ThreadSample(time=self.clock(), error=message)

    def _read(self, conn: pymysql.connections.Connection) -> ThreadSample:
        if not self.usable:
            return ThreadSample(time=self.clock(), error="; ".join(self._problems))
        threads = sorted((self._thread(_upper(r)) for r in query(conn, _THREADS_SQL)), key=lambda t: t.tid)
        by_id = {t.thread_id: t for t in threads}
        before = self.clock()
        rows = [_upper(r) for r in query(conn, _CURRENT_SQL)] if self._statements else []
        running = [r for r in rows if r["END_EVENT_ID"] is None and r["TIMER_END"] is not None]
        now_ps = max((int(r["TIMER_END"]) for r in running), default=None)
        if self._history and now_ps is not None and self._last_ps is not None:
            rows += [_upper(r) for r in query(conn, _HISTORY_SQL, (self._last_ps,))]
        out = ThreadSample(time=before, threads=None if threads == self._last_threads else threads)
        self._last_threads = threads
        if now_ps is not None:
            seen: set[tuple[int, int]] = set()
            for r in rows:
                stmt = self._statement(r, by_id, before, now_ps)
                if stmt is not None and (stmt.tid, stmt.event_id) not in seen:
                    seen.add((stmt.tid, stmt.event_id))
                    out.statements.append(stmt)
            self._last_ps = now_ps
        return out

    @staticmethod
    def _thread(r: dict[str, Any]) -> ServerThread:
        return ServerThread(
            tid=int(r["THREAD_OS_ID"]),
            thread_id=int(r["THREAD_ID"]),
            name=str(r["NAME"]),
            background=str(r["TYPE"]).upper() == "BACKGROUND",
            connection_id=_opt_int(r["PROCESSLIST_ID"]),
            user=r["PROCESSLIST_USER"],
            host=r["PROCESSLIST_HOST"],
            db=r["PROCESSLIST_DB"],
        )

    def _statement(
        self, r: dict[str, Any], by_id: dict[int, ServerThread], now: float, now_ps: int
    ) -> Statement | None:
        thread = by_id.get(int(r["THREAD_ID"]))
        if thread is None or r["TIMER_START"] is None or thread.background:
            return None
        running = r["END_EVENT_ID"] is None
        end_ps = r["TIMER_END"]
        if not running and self._last_ps is not None and end_ps is not None and int(end_ps) < self._last_ps:
            return None  # ended before the previous sample: seen then
        digest, digest_text, sql_text = r["DIGEST"], r["DIGEST_TEXT"], r["SQL_TEXT"]
        normal = normalise_sql(str(sql_text)) if sql_text is not None else None
        if digest and digest_text and normal:
            if len(self._digests) >= _KNOWN_TEXTS:
                self._digests.clear()
            self._digests[normal] = (str(digest), str(digest_text))
        elif normal and normal in self._digests:
            digest, digest_text = self._digests[normal]
        text = digest_text or normal
        if not text:  # an execution of a prepared statement: pfs has no text for it (MariaDB 10.11)
            name = str(r["EVENT_NAME"] or "")
            text = PREPARED if name.endswith("/Execute") else f"({name.rsplit('/', 1)[-1] or 'statement'})"
        key = query_key(normal) if normal else f"digest:{digest}" if digest else query_key(str(text))

        def at(ps: Any) -> float:
            return now + (int(ps) - now_ps) / _PS_PER_S

        end = None if running else at(r["TIMER_END"]) if r["TIMER_END"] is not None else None
        start = at(r["TIMER_START"])
        return Statement(thread.tid, int(r["EVENT_ID"]), start, end, digest, shorten_text(str(text)), key)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(pymysql.MySQLError, OSError):
                conn.close()

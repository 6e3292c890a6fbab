"""`ThreadSampler`: reads performance_schema's threads and statements on the `--mysql`
connection (what it reads and how its times become ours: server_threads.py). Apart from
the data types so that the views and reports that name threads need no MySQL driver.

Told the traced process (`follow(pid)`), it gives each thread the tid the probes see
(host_tids.py: THREAD_OS_ID is the tid in the server's pid namespace, a container's), and
says once, in a sample's `warning`, when most of the threads it lists are no thread of
that process: `--mysql` then reached another server. It also learns each connection's
socket (thread_sockets.py), which names the connection the probes see a thread serve."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from typing import Any

import pymysql

from .errors import UserError
from .host_tids import HostTids
from .mysql_conn import Connector, error_text, query
from .server_threads import (
    PREPARED,
    ServerThread,
    Statement,
    ThreadSample,
    normalise_sql,
    optional_int,
    query_key,
    shorten_text,
)
from .thread_sockets import SocketLearner

_KNOWN_TEXTS = 4096  # normalised texts whose digest is remembered
_PS_PER_S = 1e12
_NO_PRIVILEGE = (1142, 1143, 1044, 1227)
FOREIGN_SHARE = 0.5  # more of the listed threads than this not the traced process's: another server

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
        self._pid: int | None = None  # the traced process (follow()); None: tids as the server gives them
        self._tids: HostTids | None = None
        self._warned = False  # the warning that --mysql reached another server is given once
        self._sockets = SocketLearner()
        self._owner_rows: dict[int, ServerThread] = {}  # THREAD_ID -> the connection's row last given

    def follow(self, pid: int) -> None:
        """The traced process is now `pid` (at start, and after a restart under --follow).
        Called from the caller's thread while the worker samples: one assignment each."""
        # every connection's socket learnt again: a new server's THREAD_IDs start over, and
        # the probes are told only sockets learnt after they attached (connections.py)
        self._sockets = SocketLearner()
        self._owner_rows = {}
        self._pid = pid

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
        listed_at = self.clock()
        listed = [self._thread(_upper(r)) for r in query(conn, _THREADS_SQL)]
        threads, warning = self._on_host(listed)
        threads, sockets, owners = self._learn_sockets(conn, threads)
        learnt_at = self.clock()
        threads.sort(key=lambda t: t.tid)
        by_id = {t.thread_id: t for t in threads}
        before = self.clock()
        rows = [_upper(r) for r in query(conn, _CURRENT_SQL)] if self._statements else []
        running = [r for r in rows if r["END_EVENT_ID"] is None and r["TIMER_END"] is not None]
        now_ps = max((int(r["TIMER_END"]) for r in running), default=None)
        if self._history and now_ps is not None and self._last_ps is not None:
            rows += [_upper(r) for r in query(conn, _HISTORY_SQL, (self._last_ps,))]
        out = ThreadSample(
            time=before,
            threads=None if threads == self._last_threads else threads,
            warning=warning,
            sockets=sockets,
            owners=owners,
            listed_at=listed_at,
            learnt_at=learnt_at,
        )
        self._last_threads = threads
        if now_ps is not None:
            seen: set[tuple[int, int | None, int]] = set()
            for r in rows:
                stmt = self._statement(r, by_id, before, now_ps)
                if stmt is not None and (stmt.tid, stmt.thread_id, stmt.event_id) not in seen:
                    seen.add((stmt.tid, stmt.thread_id, stmt.event_id))
                    out.statements.append(stmt)
            self._last_ps = now_ps
        return out

    def _on_host(self, threads: list[ServerThread]) -> tuple[list[ServerThread], str | None]:
        """The threads with the probes' tids, and the warning when most are not the traced
        process's. In another pid namespace a thread not found is dropped: its tid means
        nothing here (and could be another thread's)."""
        pid = self._pid
        if pid is None:
            return threads, None
        if self._tids is None or self._tids.pid != pid:
            self._tids = HostTids(pid)
        host = self._tids.to_host([t.tid for t in threads])
        warning = self._foreign_warning(pid, len(threads), len(host))
        if self._tids.same_namespace:
            return threads, warning
        return [dataclasses.replace(t, tid=host[t.tid]) for t in threads if t.tid in host], warning

    def _learn_sockets(
        self, conn: pymysql.connections.Connection, threads: list[ServerThread]
    ) -> tuple[list[ServerThread], list[tuple[int, int]], list[ServerThread]]:
        """The threads, those holding a client socket marked so; the connections' sockets
        learnt now (THREAD_ID, inode); the connections' rows (tid 0) new or changed since
        the last sample (a connection is named by its socket, whatever OS thread serves it,
        and whether or not the listing of the tasks knows that thread yet). None without
        the traced process."""
        pid = self._pid
        if pid is None:
            return threads, [], []
        rows, learnt = self._sockets.learn(conn, pid)
        marked = [dataclasses.replace(t, client_socket=True) if t.thread_id in rows else t for t in threads]
        owners = [row for thread_id, row in rows.items() if self._owner_rows.get(thread_id) != row]
        self._owner_rows = rows
        return marked, learnt, owners

    def _foreign_warning(self, pid: int, listed: int, found: int) -> str | None:
        """Once: most listed threads are no thread of `pid`. Judged right after a listing of
        the tasks only (a thread newer than the listing is no sign), never once `pid` is gone."""
        tids = self._tids
        if self._warned or tids is None or not tids.rescanned or tids.gone or listed - found <= FOREIGN_SHARE * listed:
            return None
        self._warned = True
        return (
            f"{listed - found} of the {listed} threads the server's performance_schema lists are no thread "
            f"of pid {pid}: --mysql may have reached another server than the traced one (e.g. a different "
            "socket); their rows show as (unknown thread)"
        )

    @staticmethod
    def _thread(r: dict[str, Any]) -> ServerThread:
        return ServerThread(
            tid=int(r["THREAD_OS_ID"]),
            thread_id=int(r["THREAD_ID"]),
            name=str(r["NAME"]),
            background=str(r["TYPE"]).upper() == "BACKGROUND",
            connection_id=optional_int(r["PROCESSLIST_ID"]),
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
            if name.startswith("statement/abstract/"):
                # a statement whose command is not dispatched yet (new_packet): never a final name
                # (none in 800 history rows under sysbench), yet events_statements_current shows
                # it now and then, even with END_EVENT_ID set (MariaDB 10.11). Not a statement
                # we can name; the history row that ends it is
                return None
            text = PREPARED if name.endswith("/Execute") else f"({name.rsplit('/', 1)[-1] or 'statement'})"
        key = query_key(normal) if normal else f"digest:{digest}" if digest else query_key(str(text))

        def at(ps: Any) -> float:
            return now + (int(ps) - now_ps) / _PS_PER_S

        end = None if running else at(r["TIMER_END"]) if r["TIMER_END"] is not None else None
        start = at(r["TIMER_START"])
        return Statement(
            thread.tid, int(r["EVENT_ID"]), start, end, digest, shorten_text(str(text)), key, thread.thread_id
        )

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(pymysql.MySQLError, OSError):
                conn.close()

"""The server's own view of its threads, as performance_schema gives it: the data
(`ServerThread`, `Statement`, `ThreadSample`) and how they are named; the sampler that
reads them is `thread_sampler.ThreadSampler` (which alone needs PyMySQL).

`ThreadSampler.sample()` reads, in two SELECTs on the `--mysql` connection:

- `performance_schema.threads`: for each OS thread (THREAD_OS_ID) its pfs THREAD_ID,
  NAME, TYPE (FOREGROUND / BACKGROUND) and, for a connection, PROCESSLIST_ID, _USER,
  _HOST and _DB. THREAD_OS_ID is the tid in the server's pid namespace; the sampler
  stores the tid the probes see (host_tids.py), which traces hold since;
- `events_statements_current` (each thread's running or last statement) and
  `events_statements_history` (each thread's last few statements) ended since the
  previous sample, so a statement shorter than the sampling period is still seen;
- `socket_instances`: each connection's socket (its THREAD_ID and fd), whose inode
  (/proc/PID/fd) names the connection the probes see a thread serve (thread_sockets.py).

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

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

TEXT_CHARS = 60
PREPARED = "(prepared statement)"  # executions of prepared statements, which have no text in pfs

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

    tid: int  # the tid the probes see: THREAD_OS_ID mapped out of the server's pid namespace (host_tids.py)
    thread_id: int  # performance_schema THREAD_ID
    name: str  # NAME, e.g. thread/sql/one_connection
    background: bool  # TYPE = 'BACKGROUND'
    connection_id: int | None = None
    user: str | None = None
    host: str | None = None
    db: str | None = None
    client_socket: bool = False  # it holds a client connection's socket (socket_instances)

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
            int(self.client_socket),
        ]

    @classmethod
    def from_row(cls, row: list[Any]) -> ServerThread:
        # traces recorded before client_socket have 8 fields
        tid, thread_id, name, background, conn, user, host, db, *rest = row
        if len(rest) > 1:
            raise ValueError("a thread row of more than 9 fields")
        socket = bool(rest[0]) if rest else False
        return cls(int(tid), int(thread_id), str(name), bool(background), optional_int(conn), user, host, db, socket)


@dataclass(frozen=True)
class Statement:
    """A statement a thread ran: times on the caller's clock; `end` None while running."""

    tid: int  # its thread's tid (ServerThread.tid)
    event_id: int
    start: float
    end: float | None
    digest: str | None
    text: str  # DIGEST_TEXT, else the normalised SQL_TEXT; shortened
    key: str = ""  # query_key() of its SQL_TEXT: the same while it runs and after it ended
    thread_id: int | None = None  # its performance_schema THREAD_ID: one connection (None: older traces)

    def to_row(self) -> list[Any]:
        end = None if self.end is None else round(self.end, 6)
        return [self.tid, self.event_id, round(self.start, 6), end, self.digest, self.text, self.key, self.thread_id]

    @classmethod
    def from_row(cls, row: list[Any]) -> Statement:
        # traces recorded before thread_id have 7 fields
        tid, event_id, start, end, digest, text, key, *rest = row
        if len(rest) > 1:
            raise ValueError("a statement row of more than 8 fields")
        end_t = None if end is None else float(end)
        thread_id = optional_int(rest[0]) if rest else None
        return cls(int(tid), int(event_id), float(start), end_t, digest, str(text), str(key), thread_id)


def query_key(normalised: str) -> str:
    """A query's key: 16 hex digits of the SHA-1 of its normalised text (no text kept)."""
    return hashlib.sha1(normalised.encode(), usedforsecurity=False).hexdigest()[:16]


@dataclass
class ThreadSample:
    """One sample: when (the caller's clock), the threads (None: as in the previous
    sample), the statements running or ended since the previous sample; `warning`, in one
    sample at most, when the server's threads are not the traced process's. `sockets`:
    the connections' sockets learnt in this sample, (THREAD_ID, socket inode); `seeded`:
    (tid, socket inode) of the threads whose requests of no connection (conn 0: before
    they first read a socket since the probes attached) were that connection's
    (connections.StartConnections)."""

    time: float
    threads: list[ServerThread] | None = None
    statements: list[Statement] = field(default_factory=list)
    error: str | None = None
    warning: str | None = None
    sockets: list[tuple[int, int]] = field(default_factory=list)
    owners: list[ServerThread] = field(default_factory=list)  # rows of sockets' threads not in `threads`
    seeded: list[tuple[int, int]] = field(default_factory=list)
    # not stored: when the threads were listed, and when the sockets were learnt (the clock's)
    listed_at: float | None = None
    learnt_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "t": round(self.time, 6),
            "threads": None if self.threads is None else [t.to_row() for t in self.threads],
            "statements": [s.to_row() for s in self.statements],
            "error": self.error,
        }
        if self.warning:
            obj["warning"] = self.warning  # absent from older traces
        if self.sockets:  # absent from older traces, and when none was learnt
            obj["sockets"] = [list(s) for s in self.sockets]
        if self.owners:
            obj["owners"] = [t.to_row() for t in self.owners]
        if self.seeded:
            obj["seeded"] = [list(s) for s in self.seeded]
        return obj

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
                warning=obj.get("warning") if isinstance(obj.get("warning"), str) else None,
                sockets=_pairs(obj.get("sockets")),
                owners=[ServerThread.from_row(r) for r in obj.get("owners") or ()],
                seeded=_pairs(obj.get("seeded")),
            )
        except (KeyError, TypeError, ValueError):
            return None


def _pairs(value: Any) -> list[tuple[int, int]]:
    """A stored list of integer pairs (ValueError / TypeError when damaged)."""
    if value is None:
        return []
    out = []
    for a, b in value:
        if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, int) or not isinstance(b, int):
            raise ValueError("not an integer pair")
        out.append((a, b))
    return out


def optional_int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None

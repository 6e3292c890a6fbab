"""The server's own counters that explain I/O bursts, sampled once per interval.

`StatusSampler.sample()` reads a fixed subset of SHOW GLOBAL STATUS (and, for
what a server only exposes there, information_schema.INNODB_METRICS) and
returns a `ServerStatus`: gauges as they are, counters raw and as per-second
rates over the time since the previous successful sample. Names differ between
servers; each field lists its sources in order and takes the first present:

  field                      MariaDB 10.5+ / MySQL 5.7        MySQL 8.0.30+ / INNODB_METRICS
  dirty_pages                Innodb_buffer_pool_pages_dirty    buffer_pool_pages_dirty
  checkpoint_age_bytes       Innodb_checkpoint_age             redo_lsn - checkpoint_lsn, log_lsn_checkpoint_age
  redo_lsn / checkpoint_lsn  Innodb_lsn_current / _last_checkpoint   Innodb_redo_log_current_lsn / _checkpoint_lsn
  binlog_commits             Binlog_commits (MariaDB)          Binlog_cache_use + Binlog_stmt_cache_use (MySQL)
  checkpoint_max_age_bytes   Innodb_checkpoint_max_age (MariaDB)    (none by default)
  redo_capacity_bytes        (none)                            Innodb_redo_log_capacity_resized

A field no source provides is None (JSON null), never a guess. A failing sample
(server restarting, connection killed, no answer within the 2 s timeouts) does
not raise: it returns a status whose `error` says why, drops the connection and
reconnects on the next call; the first sample after a reconnect has no rates
(a restarted server's counters start from zero again).

Two wrappers run it in a worker thread, so a stalled server never stalls the
caller: `BackgroundSampler.take()` (top: one sample per interval, waiting at
most `wait_s`) and `PeriodicSampler.collect()` (record: the samples taken on
the worker's own schedule since the last call, without waiting).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import pymysql

from .errors import UserError
from .mysql_conn import Connector, error_text, query
from .server_facts_read import read_facts
from .server_timers import REFRESH_S, ServerFacts
from .units import human_bytes, human_rate

# field -> status variables (first present wins); ("+", a, b) sums several
Source = tuple[str, ...]
GAUGES: dict[str, list[Source]] = {
    "dirty_pages": [("Innodb_buffer_pool_pages_dirty",), ("metric", "buffer_pool_pages_dirty")],
    "buffer_pool_pages": [("Innodb_buffer_pool_pages_total",), ("metric", "buffer_pool_pages_total")],
    "redo_lsn": [("Innodb_lsn_current",), ("Innodb_redo_log_current_lsn",), ("metric", "log_lsn_current")],
    "checkpoint_lsn": [
        ("Innodb_lsn_last_checkpoint",),
        ("Innodb_redo_log_checkpoint_lsn",),
        ("metric", "log_lsn_last_checkpoint"),
    ],
    "checkpoint_age_bytes": [("Innodb_checkpoint_age",), ("metric", "log_lsn_checkpoint_age")],
    "checkpoint_max_age_bytes": [("Innodb_checkpoint_max_age",)],
    # MySQL >= 8.0.30 exports no max age by default (INNODB_METRICS' log_max_modified_age_*
    # are disabled): the checkpoint age is shown against the redo log's capacity instead
    "redo_capacity_bytes": [("Innodb_redo_log_capacity_resized",)],
    "history_list_length": [("Innodb_history_list_length",), ("metric", "trx_rseg_history_len")],
    "pending_writes": [("Innodb_data_pending_writes",)],
}
COUNTERS: dict[str, list[Source]] = {
    "data_written_bytes": [("Innodb_data_written",)],
    "data_read_bytes": [("Innodb_data_read",)],
    "data_fsyncs": [("Innodb_data_fsyncs",)],
    "redo_written_bytes": [("Innodb_os_log_written",)],
    "redo_fsyncs": [("Innodb_os_log_fsyncs",)],
    "pages_flushed": [("Innodb_buffer_pool_pages_flushed",)],
    "doublewrite_pages": [("Innodb_dblwr_pages_written",)],
    "binlog_commits": [("Binlog_commits",), ("+", "Binlog_cache_use", "Binlog_stmt_cache_use")],
    "binlog_group_commits": [("Binlog_group_commits",)],
    "binlog_written_bytes": [("Binlog_bytes_written",)],
}
_STATUS_NAMES = sorted(
    {n for sources in (*GAUGES.values(), *COUNTERS.values()) for s in sources for n in s if n not in ("metric", "+")}
)
_METRIC_NAMES = sorted(
    {s[1] for sources in (*GAUGES.values(), *COUNTERS.values()) for s in sources if s[0] == "metric"}
)


@dataclass
class ServerStatus:
    """One sample. `gauges` and `counters` hold every field name (None: this server
    has no such number); `rates` are per second, None on a first sample."""

    time: float
    interval_s: float | None = None
    gauges: dict[str, int | None] = field(default_factory=lambda: dict.fromkeys(GAUGES))
    counters: dict[str, int | None] = field(default_factory=lambda: dict.fromkeys(COUNTERS))
    rates: dict[str, float | None] = field(default_factory=lambda: dict.fromkeys(COUNTERS))
    error: str | None = None
    # the server's timer settings and events as last read (server_timers, every REFRESH_S);
    # `facts_new`: first given, or changed, with this sample (to_json then carries them)
    facts: ServerFacts | None = None
    facts_new: bool = False

    def to_json(self) -> dict[str, Any]:
        """Stable field names: time, interval_s, error, gauges{...}, counters{...}, rates{... per second}."""
        out: dict[str, Any] = {
            "time": round(self.time, 6),
            "interval_s": None if self.interval_s is None else round(self.interval_s, 6),
            "error": self.error,
            "gauges": dict(self.gauges),
            "counters": dict(self.counters),
            "rates": {k: None if v is None else round(v, 3) for k, v in self.rates.items()},
        }
        if self.facts_new and self.facts is not None:
            out["facts"] = self.facts.to_json()  # server_timers.ServerFacts, when new or changed
        return out

    def summary(self) -> str:
        """One line for `top`, e.g. 'server: dirty 1,234 pages · checkpoint age 12.3MiB (15%) · ...'."""
        if self.error:
            return f"server: {self.error}"
        g, r = self.gauges, self.rates
        parts = []
        if g["dirty_pages"] is not None:
            parts.append(f"dirty {g['dirty_pages']:,} pages")
        age = g["checkpoint_age_bytes"]
        if age is not None:
            share = ""
            if g["checkpoint_max_age_bytes"]:
                share = f" ({100 * age / g['checkpoint_max_age_bytes']:.0f}% of max)"
            elif g["redo_capacity_bytes"]:
                share = f" ({100 * age / g['redo_capacity_bytes']:.0f}% of capacity)"
            parts.append(f"checkpoint age {human_bytes(age)}{share}")
        if r["redo_written_bytes"] is not None:
            parts.append(f"redo {human_bytes(r['redo_written_bytes'])}/s")
        if r["data_written_bytes"] is not None:
            parts.append(f"data {human_bytes(r['data_written_bytes'])}/s")
        if r["pages_flushed"] is not None:
            parts.append(f"flushed {human_rate(r['pages_flushed'])} pages/s")
        if r["binlog_commits"] is not None:
            parts.append(f"binlog commits {human_rate(r['binlog_commits'])}/s")
        if all(v is None for v in r.values()):
            parts.append("rates from the next sample")
        return "server: " + " · ".join(parts)


def _pick(sources: list[Source], status: dict[str, int], metrics: dict[str, int]) -> int | None:
    for source in sources:
        if source[0] == "metric":
            if source[1] in metrics:
                return metrics[source[1]]
        elif source[0] == "+":
            if any(n in status for n in source[1:]):
                return sum(status.get(n, 0) for n in source[1:])
        elif source[0] in status:
            return status[source[0]]
    return None


def _as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


class StatusSampler:
    """Samples one server; owns (and re-opens) its connection."""

    def __init__(self, connector: Connector, clock: Callable[[], float] = time.monotonic) -> None:
        self._connector = connector
        self._clock = clock
        self._conn: pymysql.connections.Connection | None = None
        self._use_metrics: bool | None = None  # decided on the first good sample
        self._last: tuple[float, dict[str, int | None]] | None = None
        self._facts: ServerFacts | None = None
        self._facts_at = -REFRESH_S  # clock() of the last read
        self._facts_given: ServerFacts | None = None  # the facts the previous sample gave

    @classmethod
    def open(cls, connector: Connector, clock: Callable[[], float] = time.monotonic) -> StatusSampler:
        """Connect now, so bad credentials fail at start-up with one line (UserError),
        and read the server's timer settings and events once."""
        sampler = cls(connector, clock)
        sampler._conn = connector.open()
        with contextlib.suppress(pymysql.MySQLError, OSError):  # else the first sample tries again
            sampler._refresh_facts(sampler._conn)
        return sampler

    @property
    def facts(self) -> ServerFacts | None:
        """The server's timer settings and events as last read (None: not yet)."""
        return self._facts

    def refresh_facts(self) -> None:
        """Read the settings and events again if due, outside a sample (BackgroundSampler:
        after handing its sample over, so `top` never waits for them). A failure keeps the
        facts read before and drops the connection: the next sample reconnects."""
        if self._conn is None:
            return
        try:
            self._refresh_facts(self._conn)
        except (pymysql.MySQLError, OSError, UserError):
            self.close()
            self._last = None

    def _refresh_facts(self, conn: pymysql.connections.Connection) -> None:
        """Read the settings and events again when REFRESH_S have passed (in the worker)."""
        now = self._clock()
        if self._facts is not None and now - self._facts_at < REFRESH_S:
            return
        facts = read_facts(conn)
        self._facts_at = now
        if facts != self._facts:
            self._facts = facts

    @property
    def describe(self) -> str:
        return self._connector.describe()

    @property
    def timeout_s(self) -> float:
        return self._connector.timeout_s

    def sample(self, facts: bool = True) -> ServerStatus:
        """The counters now; and the timer settings and events read again when due
        (`facts=False`: not in this call, the caller runs `refresh_facts()` itself)."""
        now_wall = time.time()
        try:
            if self._conn is None:
                self._conn = self._connector.open()
                self._last = None  # counters may have restarted with the server
            status, metrics = self._read(self._conn)
            if facts:
                self._refresh_facts(self._conn)
        except (pymysql.MySQLError, OSError, UserError) as exc:
            self.close()
            self._last = None
            return ServerStatus(time=now_wall, error=_one_line(exc))
        now = self._clock()
        out = ServerStatus(time=now_wall, facts=self._facts, facts_new=self._facts is not self._facts_given)
        self._facts_given = self._facts
        for name, sources in GAUGES.items():
            out.gauges[name] = _pick(sources, status, metrics)
        for name, sources in COUNTERS.items():
            out.counters[name] = _pick(sources, status, metrics)
        if out.gauges["checkpoint_age_bytes"] is None:
            lsn, ckpt = out.gauges["redo_lsn"], out.gauges["checkpoint_lsn"]
            if lsn is not None and ckpt is not None:
                out.gauges["checkpoint_age_bytes"] = lsn - ckpt
        if self._last is not None:
            then, before = self._last
            out.interval_s = now - then
            for name, value in out.counters.items():
                old = before.get(name)
                if value is not None and old is not None and value >= old and out.interval_s > 0:
                    out.rates[name] = (value - old) / out.interval_s
        self._last = (now, dict(out.counters))
        return out

    def _read(self, conn: pymysql.connections.Connection) -> tuple[dict[str, int], dict[str, int]]:
        names = ", ".join(f"'{n}'" for n in _STATUS_NAMES)
        rows = query(conn, f"SHOW GLOBAL STATUS WHERE Variable_name IN ({names})")
        status = {}
        for row in rows:
            value = _as_int(row["Value"])
            if value is not None:
                status[_canonical(row["Variable_name"])] = value
        metrics: dict[str, int] = {}
        if self._use_metrics is None:
            self._use_metrics = any(
                _pick([s for s in sources if s[0] != "metric"], status, {}) is None
                for sources in GAUGES.values()
                if any(s[0] == "metric" for s in sources)
            )
        if self._use_metrics:
            metrics = self._read_metrics(conn)
        return status, metrics

    def _read_metrics(self, conn: pymysql.connections.Connection) -> dict[str, int]:
        """Enabled INNODB_METRICS counters among the ones we use (MariaDB: ENABLED=1,
        MySQL: STATUS='enabled'; a disabled counter reads 0 and would mislead)."""
        names = ", ".join(f"'{n}'" for n in _METRIC_NAMES)
        try:
            rows = query(conn, f"SELECT * FROM information_schema.INNODB_METRICS WHERE NAME IN ({names})")
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] in (1227, 1142, 1044):  # no PROCESS privilege: do without
                self._use_metrics = False
                return {}
            raise
        out = {}
        for row in rows:
            keys = {k.upper(): v for k, v in row.items()}
            enabled = keys.get("ENABLED")
            on = bool(enabled) if enabled is not None else str(keys.get("STATUS", "")).lower() == "enabled"
            value = _as_int(keys.get("COUNT"))
            if on and value is not None:
                out[str(keys["NAME"]).lower()] = value
        return out

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(pymysql.MySQLError, OSError):  # already broken: best effort
                conn.close()


_CANONICAL = {n.lower(): n for n in _STATUS_NAMES}


def _canonical(name: str) -> str:
    return _CANONICAL.get(name.lower(), name)


def _one_line(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, UserError) else f"no answer: {error_text(exc)}"


class BackgroundSampler:
    """`StatusSampler` in a worker thread: `take()` asks for a sample and waits at
    most `wait_s` for it, so a hung server costs the caller that much, not the
    connection timeouts. When the worker is still busy, `take()` returns a status
    with an error and no new request is queued."""

    def __init__(self, sampler: StatusSampler, wait_s: float = 0.25) -> None:
        self._sampler = sampler
        self._wait_s = wait_s
        self._request = threading.Event()
        self._done = threading.Event()
        self._done.set()
        self._closed = False
        self._result: ServerStatus | None = None
        self._thread = threading.Thread(target=self._work, name="mysqlio-status", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while True:
            self._request.wait()
            self._request.clear()
            if self._closed:
                return
            result = self._sampler.sample(facts=False)
            self._result = result
            self._done.set()
            self._sampler.refresh_facts()  # when due (every REFRESH_S), the caller not waiting

    def take(self) -> ServerStatus:
        if not self._done.is_set():
            return ServerStatus(time=time.time(), error="no answer yet to the previous request (server busy?)")
        self._done.clear()
        self._request.set()
        if self._done.wait(self._wait_s) and self._result is not None:
            return self._result
        return ServerStatus(time=time.time(), error=f"no answer within {self._wait_s:g} s (server busy?)")

    def close(self) -> None:
        self._closed = True
        self._request.set()
        self._thread.join(timeout=3 * self._sampler.timeout_s + 1)  # connect + read + write at worst
        self._sampler.close()


S = TypeVar("S")


class Sampling(Protocol[S]):
    """What `PeriodicSampler` runs: `StatusSampler`, `thread_sampler.ThreadSampler`."""

    @property
    def timeout_s(self) -> float: ...

    def sample(self) -> S: ...

    def close(self) -> None: ...


class PeriodicSampler(Generic[S]):
    """A sampler (`StatusSampler`, `thread_sampler.ThreadSampler`) on its own schedule in
    a worker thread, for loops that must not block at all (record polls its ring buffer
    every 50 ms; top's thread view samples more often than its interval): `collect()`
    returns the samples completed since the previous call, at once. A server that does
    not answer delays only the worker; its samples then carry the error."""

    def __init__(self, sampler: Sampling[S], every_s: float = 1.0, name: str = "mysqlio-status") -> None:
        self._sampler = sampler
        self._every_s = every_s
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by collect(fresh_s): a sample now, off schedule
        self._done_cond = threading.Condition()
        self._done: list[S] = []
        self._last_start = float("-inf")  # when the last completed sample began
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def _work(self) -> None:
        deadline = time.monotonic()
        while not self._stop.is_set():
            self._wake.clear()
            started = time.monotonic()
            status = self._sampler.sample()
            with self._done_cond:
                self._done.append(status)
                self._last_start = started
                self._done_cond.notify_all()
            deadline += self._every_s
            now = time.monotonic()
            if deadline < now:  # a slow sample: skip the missed slots, keep the phase
                deadline += (now - deadline) // self._every_s * self._every_s + self._every_s
            self._wake.wait(deadline - now)

    def collect(self, fresh_s: float = 0.0) -> list[S]:
        """The samples completed since the previous call. fresh_s > 0: one begun after
        this call too, waited for at most fresh_s (`top` labels an interval with what the
        server says right after it ended: a connection that began late in it is named)."""
        with self._done_cond:
            if fresh_s > 0 and not self._stop.is_set():
                asked = time.monotonic()
                self._wake.set()
                self._done_cond.wait_for(lambda: self._last_start >= asked, timeout=fresh_s)
            done, self._done = self._done, []
        return done

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=3 * self._sampler.timeout_s + 1)
        self._sampler.close()

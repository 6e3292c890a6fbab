"""What the server says about its own timers (`--mysql`, read-only): the settings that make
I/O periodic and the event scheduler's recurring jobs, as `ServerFacts`.

`read_facts(conn)` runs two read-only queries on the existing connection
(mysql_conn.query): SHOW GLOBAL VARIABLES for `VARIABLES` (a server without one simply
lacks it: MySQL has no Aria) and information_schema.EVENTS (only the events the user
may see; the server's other events are then unknown, never guessed). A failing EVENTS
query leaves `events` empty with `events_error` set; the variables still count.

An event counts when it is ENABLED and RECURRING; its period is INTERVAL_VALUE in
INTERVAL_FIELD (SECOND, MINUTE, HOUR, DAY, WEEK and the composite DAY_SECOND,
HOUR_MINUTE, MINUTE_SECOND, ...; MONTH, QUARTER and YEAR have no fixed length: None).
The tables it touches come from EVENT_DEFINITION by `event_tables()`: a deliberately
simple scan, after string literals and comments are removed, for the identifier (`t`,
`s.t`, backquoted or not) that follows INSERT / REPLACE ... INTO, UPDATE, DELETE ... FROM,
TRUNCATE [TABLE] and TABLE (CREATE / ALTER / OPTIMIZE ... TABLE): written; and FROM,
JOIN: read. Unqualified names are in EVENT_SCHEMA. The ENGINE of each written table
(information_schema.TABLES) says whether its changes go to the InnoDB redo log. Not followed: procedures it CALLs,
views, triggers, prepared (dynamic) SQL; `SELECT ... INTO var` reads as a table `var`
(which no file then matches).

The pure matching of a train to these facts is bursts.server_causes.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

# the settings that make a server's I/O periodic (and what the explanations quote)
VARIABLES = (
    "version",
    "datadir",
    "innodb_flush_log_at_trx_commit",
    "innodb_flush_log_at_timeout",
    # MySQL 8.0.22+: ON, the log flusher thread syncs the redo log every innodb_flush_log_at_timeout
    # (trx_commit 0 / 2); OFF, the master thread's 1 s loop does (the default below 32 CPUs with
    # the binary log on; since 9.5, at up to 4 CPUs without it)
    "innodb_log_writer_threads",
    "innodb_page_cleaners",
    "innodb_io_capacity",
    "innodb_io_capacity_max",
    "innodb_adaptive_flushing",
    "innodb_adaptive_flushing_lwm",
    "innodb_max_dirty_pages_pct",
    "innodb_max_dirty_pages_pct_lwm",
    "innodb_doublewrite",
    "aria_checkpoint_interval",
    "event_scheduler",
    "sync_binlog",
    "binlog_group_commit_sync_delay",  # MySQL: µs each binlog group waits before its sync
    "binlog_group_commit_sync_no_delay_count",  # ... unless this many commits came first (0: off)
    "flush_time",
)
REFRESH_S = 60.0  # the settings are read again this often (SET GLOBAL changes them)

_UNIT_S = {"DAY": 86400.0, "HOUR": 3600.0, "MINUTE": 60.0, "SECOND": 1.0, "MICROSECOND": 1e-6}
_UNITS = list(_UNIT_S)


@dataclass(frozen=True)
class ServerEvent:
    """One recurring event the scheduler runs."""

    schema: str
    name: str
    interval_s: float | None  # None: no fixed length (MONTH, QUARTER, YEAR)
    writes: tuple[str, ...] = ()  # "schema.table" its definition writes
    reads: tuple[str, ...] = ()  # ... and reads

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "name": self.name,
            "interval_s": self.interval_s,
            "writes": list(self.writes),
            "reads": list(self.reads),
        }


@dataclass(frozen=True)
class ServerFacts:
    """The server's timer settings (`variables`, lower-case names, values as the server
    gives them) and its recurring events."""

    variables: dict[str, str] = field(default_factory=dict)
    events: tuple[ServerEvent, ...] = ()
    events_error: str | None = None  # EVENTS could not be read: the events are unknown
    engines: dict[str, str] = field(default_factory=dict)  # "schema.table" the events write -> ENGINE

    def text(self, name: str) -> str | None:
        return self.variables.get(name)

    def number(self, name: str) -> float | None:
        try:
            return float(self.variables[name])
        except (KeyError, ValueError):
            return None

    def on(self, name: str) -> bool | None:
        """A boolean setting: ON / 1 / YES -> True, OFF / 0 / NO -> False, else None."""
        value = (self.variables.get(name) or "").upper()
        return True if value in ("ON", "1", "YES") else False if value in ("OFF", "0", "NO") else None

    @property
    def scheduler_on(self) -> bool:
        return (self.text("event_scheduler") or "").upper() in ("ON", "1")

    @property
    def mariadb(self) -> bool | None:
        """MariaDB (its version says so), or Oracle MySQL (or a fork); None: no version."""
        version = self.text("version")
        return None if version is None else "mariadb" in version.lower()

    @property
    def datadir(self) -> str | None:
        d = self.text("datadir")
        return os.path.normpath(d) if d else None

    def to_json(self) -> dict[str, Any]:
        return {
            "variables": dict(self.variables),
            "events": [e.to_json() for e in self.events],
            "events_error": self.events_error,
            "engines": dict(self.engines),
        }

    @classmethod
    def from_json(cls, obj: Any) -> ServerFacts | None:
        """From `to_json()` (a trace's metadata); None when it is not that shape."""
        if not isinstance(obj, dict) or not isinstance(obj.get("variables"), dict):
            return None
        events = []
        for e in obj.get("events") or []:
            if not isinstance(e, dict) or not isinstance(e.get("schema"), str) or not isinstance(e.get("name"), str):
                continue
            interval = e.get("interval_s")
            events.append(
                ServerEvent(
                    e["schema"],
                    e["name"],
                    float(interval) if isinstance(interval, (int, float)) else None,
                    tuple(str(x) for x in e.get("writes") or ()),
                    tuple(str(x) for x in e.get("reads") or ()),
                )
            )
        error = obj.get("events_error")
        variables = {str(k): str(v) for k, v in obj["variables"].items() if v is not None}
        engines = obj.get("engines") if isinstance(obj.get("engines"), dict) else {}
        return cls(
            variables,
            tuple(events),
            error if isinstance(error, str) else None,
            {str(k): str(v) for k, v in engines.items() if v is not None},
        )


def facts_in_samples(samples: list[dict[str, Any]]) -> ServerFacts | None:
    """The last facts a trace's server status samples carry (record --mysql stores them
    with the first sample and whenever they change); None: recorded without them."""
    for sample in reversed(samples):
        facts = ServerFacts.from_json(sample.get("facts")) if isinstance(sample, dict) else None
        if facts is not None:
            return facts
    return None


def interval_seconds(value: Any, unit: Any) -> float | None:
    """INTERVAL_VALUE in INTERVAL_FIELD as seconds: ('5', 'SECOND') -> 5.0,
    ('1:30', 'MINUTE_SECOND') -> 90.0; None for MONTH, QUARTER, YEAR (or junk). Missing
    leading parts of a composite value are left out on the left, as MySQL reads them."""
    unit = str(unit or "").upper()
    if unit == "WEEK":
        unit, scale = "DAY", 7.0
    else:
        scale = 1.0
    first, _, last = unit.partition("_")
    last = last or first
    if first not in _UNIT_S or last not in _UNIT_S or _UNITS.index(first) > _UNITS.index(last):
        return None
    parts = _UNITS[_UNITS.index(first) : _UNITS.index(last) + 1]
    numbers = re.findall(r"\d+", str(value or ""))
    if not numbers or len(numbers) > len(parts):
        return None
    parts = parts[len(parts) - len(numbers) :]
    seconds = sum(int(n) * _UNIT_S[p] for n, p in zip(numbers, parts, strict=True)) * scale
    return seconds if seconds > 0 else None


_IDENT = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+)"
_NAME = rf"(?P<name>{_IDENT}(?:\s*\.\s*{_IDENT})?)"
_WRITE_KW = (
    r"DELETE(?:\s+(?:LOW_PRIORITY|QUICK|IGNORE))*\s+FROM"
    r"|(?:INSERT|REPLACE)(?:\s+(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY|IGNORE))*\s+INTO"
    r"|INTO|UPDATE(?:\s+(?:LOW_PRIORITY|IGNORE))*|TRUNCATE(?:\s+TABLE)?"
    r"|TABLE(?:\s+IF\s+(?:NOT\s+)?EXISTS)?"
)
_TABLE_AFTER = re.compile(rf"\b(?:(?P<w>{_WRITE_KW})|(?P<r>FROM|JOIN))\s+{_NAME}", re.IGNORECASE)
_NOISE = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"|/\*.*?\*/|(?:--\s|#)[^\n]*", re.DOTALL)
_NOT_TABLES = frozenset({"SELECT", "DUAL", "OUTFILE", "DUMPFILE", "IF", "SET", "VALUES", "LATERAL", "WITH"})


def _unquote(ident: str) -> str:
    return ident[1:-1].replace("``", "`") if ident.startswith("`") else ident


def event_tables(definition: str, schema: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(written, read) tables, as "schema.table", named in an event's definition (see the
    module's docstring for what this simple scan sees); unqualified names are in `schema`."""
    text = _NOISE.sub(" ", definition or "")
    written: list[str] = []
    read: list[str] = []
    for m in _TABLE_AFTER.finditer(text):
        parts = [_unquote(p.strip()) for p in re.findall(_IDENT, m["name"])]
        if parts[0].upper() in _NOT_TABLES:
            continue
        name = ".".join(parts) if len(parts) == 2 else f"{schema}.{parts[0]}"
        out = written if m["w"] else read
        if name not in out:
            out.append(name)
    return tuple(written), tuple(x for x in read if x not in written)


def event_of_row(row: dict[str, Any]) -> ServerEvent | None:
    keys = {str(k).upper(): v for k, v in row.items()}
    if str(keys.get("STATUS", "")).upper() != "ENABLED" or str(keys.get("EVENT_TYPE", "")).upper() != "RECURRING":
        return None
    schema = str(keys["EVENT_SCHEMA"])
    writes, reads = event_tables(str(keys.get("EVENT_DEFINITION") or ""), schema)
    interval = interval_seconds(keys.get("INTERVAL_VALUE"), keys.get("INTERVAL_FIELD"))
    return ServerEvent(schema, str(keys["EVENT_NAME"]), interval, writes, reads)

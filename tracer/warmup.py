"""The warm-up after a restart (issue 61): once `top --follow` (or a trace's restart gap)
says the server started again, the bytes its files read from the disk, per table and per
interval, until the reads settle, and how long that took.

The rule (`Warmup.feed`): the server's disk reads per second have *settled* once every
interval of the last SETTLE_S seconds read less than SETTLE_FRACTION of the peak rate seen
since the restart (or nothing at all when there was no peak). The warm-up then took from
the server's start to the end of its last interval at or above that fraction; its bytes
are those read up to there. A server that never gets under the line (a working set larger
than its buffer pool and the page cache) stays "settling".

Pure logic: fed per-interval (seconds, per-table bytes) by mysqlio.top (live intervals)
and mysqlio.report.warmup (a trace's seconds); drawn by mysqlio.warmup_view.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

SETTLE_FRACTION = 0.05  # below 5 % of the peak rate is "quiet"
SETTLE_S = 3.0  # ... for this long: settled
TOP_TABLES = 5  # tables in the JSON and the screen line, busiest first


@dataclass
class TableReads:
    """One table's (or file's) disk reads during the warm-up."""

    name: str
    disk_read_bytes: int = 0
    readahead_bytes: int = 0
    last_bps: float = 0.0  # in the latest interval


@dataclass
class Warmup:
    """The warm-up of one server start. `since`: when the server started (unix time);
    `pid`: the new process."""

    since: float
    pid: int
    first_t: float | None = None  # start of the first traced interval (reads before it are unseen)
    end_t: float | None = None  # end of the latest interval fed
    disk_read_bytes: int = 0  # all reads fed, settled or not
    peak_bps: float = 0.0
    busy_end_t: float | None = None  # end of the last interval at or above the fraction of the peak
    busy_bytes: int = 0  # bytes read up to busy_end_t
    settled: bool = False
    tables: dict[str, TableReads] = field(default_factory=dict)
    _quiet_s: float = 0.0  # how long the reads have stayed under the line

    def feed(self, end_t: float, seconds: float, reads: Iterable[tuple[str, int, int]]) -> None:
        """One interval of `seconds` ending at `end_t`: (table, disk read bytes, readahead
        bytes) per table or file, a name at most once."""
        if seconds <= 0:
            return
        start_t = end_t - seconds
        if self.first_t is None:
            self.first_t = start_t
        self.end_t = end_t
        total = 0
        seen = set()
        for name, nbytes, readahead in reads:
            table = self.tables.get(name)
            if table is None:
                table = self.tables[name] = TableReads(name)
            table.disk_read_bytes += nbytes
            table.readahead_bytes += readahead
            table.last_bps = nbytes / seconds
            seen.add(name)
            total += nbytes
        for name, table in self.tables.items():
            if name not in seen:
                table.last_bps = 0.0
        self.disk_read_bytes += total
        if self.settled:
            return
        bps = total / seconds
        self.peak_bps = max(self.peak_bps, bps)
        if bps > 0 and bps >= SETTLE_FRACTION * self.peak_bps:
            self.busy_end_t = end_t
            self.busy_bytes = self.disk_read_bytes
            self._quiet_s = 0.0
        else:
            self._quiet_s += seconds
            self.settled = self._quiet_s >= SETTLE_S

    @property
    def elapsed_s(self) -> float:
        """Since the server started, to the latest interval."""
        return max(0.0, (self.end_t if self.end_t is not None else self.since) - self.since)

    @property
    def duration_s(self) -> float | None:
        """How long the warm-up took (settled only): from the start to its last busy interval."""
        if not self.settled:
            return None
        return max(0.0, self.busy_end_t - self.since) if self.busy_end_t is not None else 0.0

    @property
    def unseen_s(self) -> float:
        """Seconds from the server's start before tracing began (its reads there are not counted)."""
        return max(0.0, self.first_t - self.since) if self.first_t is not None else 0.0

    def busiest(self, n: int = TOP_TABLES) -> list[TableReads]:
        return sorted(self.tables.values(), key=lambda t: (-t.disk_read_bytes, t.name))[:n]

    def to_json(self, n: int = TOP_TABLES) -> dict[str, Any]:
        duration = self.duration_s
        return {
            "pid": self.pid,
            "since": round(self.since, 6),
            "elapsed_s": round(self.elapsed_s, 3),
            "unseen_s": round(self.unseen_s, 3),  # from the start until tracing began
            "disk_read_bytes": self.disk_read_bytes,
            "peak_bps": round(self.peak_bps),
            "settled": self.settled,
            "duration_s": round(duration, 3) if duration is not None else None,
            "warmup_bytes": self.busy_bytes if self.settled else None,
            "tables": [
                {
                    "table": t.name,
                    "disk_read_bytes": t.disk_read_bytes,
                    "readahead_bytes": t.readahead_bytes,
                    "bps": round(t.last_bps),
                }
                for t in self.busiest(n)
                if t.disk_read_bytes
            ],
        }


def table_reads(files: Iterable[Any]) -> list[tuple[str, int, int]]:
    """An interval's files (model.FileActivity or top's JSON file objects) as (table, disk
    read bytes, readahead bytes): a table's files (partitions) summed, the files that are
    no table's by their kind (as `report --group table`: ibdata1 is "system")."""
    by: dict[str, list[int]] = {}
    for f in files:
        nbytes = int(_field(f, "disk_read_bytes") or 0)
        if not nbytes:
            continue
        row = by.setdefault(_field(f, "table") or _field(f, "kind") or _field(f, "path"), [0, 0])
        row[0] += nbytes
        row[1] += int(_field(f, "readahead_bytes") or 0)
    return [(name, n, ra) for name, (n, ra) in by.items()]


def _field(f: Any, name: str) -> Any:
    return f.get(name) if isinstance(f, dict) else getattr(f, name, None)


class WarmupWatch:
    """What a sink holds: the warm-up of the latest restart, if one was seen."""

    def __init__(self) -> None:
        self.current: Warmup | None = None

    def restarted(self, pid: int, started: float) -> None:
        self.current = Warmup(since=started, pid=pid)

    def feed(self, pid: int, end_t: float, seconds: float, files: Iterable[Any]) -> Warmup | None:
        """An interval of process `pid` (intervals of the process before the restart are not
        the warm-up's); the warm-up, or None before any restart."""
        if self.current is not None and self.current.pid == pid:
            self.current.feed(end_t, seconds, table_reads(files))
        return self.current

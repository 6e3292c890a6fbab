"""The report's data: plain dataclasses, rendered by `to_json` and `text`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..bursts.train import Train
from ..devices import DeviceActivity
from ..events import API_NAMES
from ..filters import Filters
from ..latency import CLASSES
from ..model import COUNTER_FIELDS, Counts
from ..probe import dev_label
from ..trace import TraceMeta


@dataclass
class Stats(Counts):
    """A group's counters over the whole trace (the counters of `top`'s model.Counts)
    and its latency percentiles by class."""

    latency: dict[str, dict[str, int] | None] = field(default_factory=dict)

    @classmethod
    def of(cls, counters: Iterable[int], apis: Iterable[str] = (), latency: dict[str, Any] | None = None) -> Stats:
        """From counters in COUNTER_FIELDS order."""
        stats = cls(apis=set(apis), latency=latency or {})
        for name, value in zip(COUNTER_FIELDS, counters, strict=True):
            stats.add_counter(name, int(value))
        return stats

    def to_json(self) -> dict[str, Any]:
        out = self.counters_json()
        out["apis"] = [api for api in API_NAMES if api in self.apis]
        for cls in CLASSES:
            if cls in self.latency:
                out[f"{cls}_latency_ns"] = self.latency[cls]
        return out


def page_cache_counted(total: Stats) -> bool:
    """The trace was recorded with the page-cache hooks (eBPF, not --no-page-cache, a kernel
    that has them), as its totals show: bytes dirtied, written back, read ahead, or read
    from the disk by buffered reads. Without them its O_DIRECT reads are still counted as
    disk reads, but a buffered read's are not: no page-cache hit can be derived (a trace
    of warm reads alone, nothing written, cannot show it either: its hits stay unknown)."""
    return bool(
        total.dirtied_bytes
        or total.writeback_bytes
        or total.readahead_bytes
        or total.disk_read_bytes > total.direct_read_bytes
    )


@dataclass
class GroupRow:
    """One group of the report: a file, kind, table or thread, and its totals over the
    trace. (`top`'s view.ScreenRow is a line of the live screen: rates over the last
    interval, a history and fading; the two share their counters, model.Counts.)"""

    label: str  # path, kind, table (or kind when not a table) or "name [tid]"
    kind: str
    stats: Stats
    table: str | None = None
    deleted: bool = False
    dev: int | None = None
    ino: int | None = None
    tid: int | None = None
    thread: str | None = None
    region: str = ""  # file group: the region of the file (ibdata1) the row is; "" the whole file

    def to_json(self, group: str) -> dict[str, Any]:
        if group == "file":
            head: dict[str, Any] = {
                "path": self.label[: -len(f" · {self.region}")] if self.region else self.label,
                "region": self.region,
                "kind": self.kind,
                "table": self.table,
                "deleted": self.deleted,
                "dev": None if self.dev is None else dev_label(self.dev),
                "ino": self.ino,
            }
        elif group == "kind":
            head = {"kind": self.label}
        elif group == "thread":
            head = {"tid": self.tid, "name": self.thread}
        elif group in ("user", "connection", "query"):  # model.SERVER_GROUPS
            head = {group: self.label}
        else:
            head = {"name": self.label, "kind": self.kind, "table": self.table}
        return {**head, **self.stats.to_json()}


def busiest_key(r: GroupRow) -> tuple[int, int, int, str]:
    s = r.stats
    return (-s.write_bytes, -s.read_bytes, -s.sync_ops, r.label)


@dataclass
class PerSecond:
    """`report --per-second`'s rows of each second with activity, busiest first, in time
    order when iterated; made one second at a time from the compacted (second, group)
    counters. An hour of a busy trace is about a million rows: held whole (as rows, then
    as JSON objects or a rich table) they took 3 GiB (docs/benchmarks.md)."""

    sec: np.ndarray  # one entry per (second, group), sorted by second (SecondRows.compact)
    ids: np.ndarray  # group ids
    values: np.ndarray  # (entries, len(COUNTER_FIELDS)) counters
    row_of: Callable[[int, Stats], GroupRow]  # group id and counters -> its row (GroupKeys.row)
    _starts: list[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._starts = np.flatnonzero(np.diff(self.sec, prepend=np.int64(-(2**62)))).tolist()

    def __len__(self) -> int:
        """Seconds with activity."""
        return len(self._starts)

    def __iter__(self) -> Iterator[tuple[int, list[GroupRow]]]:
        ends = [*self._starts[1:], len(self.sec)]
        for start, end in zip(self._starts, ends, strict=True):
            rows = [self.row_of(int(self.ids[j]), Stats.of(self.values[j])) for j in range(start, end)]
            yield int(self.sec[start]), sorted(rows, key=busiest_key)

    def labels(self) -> list[str]:
        """The label of every group that has a row in some second (once each)."""
        zero = Stats.of([0] * len(COUNTER_FIELDS))
        return [self.row_of(int(g), zero).label for g in np.unique(self.ids).tolist()]


@dataclass
class BusySecond:
    t: int
    stats: Stats
    top_path: str | None
    top_kind: str | None
    top_bytes: int


@dataclass
class Report:
    trace: str
    meta: TraceMeta
    group: str
    filters: Filters
    events_total: int  # in the trace (what was read of it)
    events: int  # after the filters
    duration_s: float
    lost_events: int
    truncated: bool
    complete: bool
    rows: list[GroupRow]
    kinds: list[GroupRow]
    total: Stats
    busiest: list[BusySecond]
    per_second: PerSecond | None = None  # --per-second's rows, made one second at a time
    bursts: list[Train] | None = None  # periodic bursts (mysqlio.bursts), None: not looked for
    gaps: list[dict[str, Any]] = field(default_factory=list)  # server restarts (record --follow)
    warmups: list[Any] = field(default_factory=list)  # after each restart (report.warmup.ReportWarmup)
    server_status: list[dict[str, Any]] = field(default_factory=list)  # record --mysql samples
    # block devices over the report's time range (record's per-batch samples, summed)
    devices: list[DeviceActivity] = field(default_factory=list)
    device_samples: int = 0  # samples of the trace in that range
    # lost_events by the probe's counter that lost them (traces before it: empty)
    lost_by_reason: dict[str, int] = field(default_factory=dict)

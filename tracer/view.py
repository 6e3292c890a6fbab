"""Shape intervals into screen rows: grouping, filtering, sorting, history, fading.

Pure data in, data out (no terminal): `render.py` draws what this produces.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from .filters import Filters
from .latency import Histogram
from .model import Counts, FileActivity, Interval

HISTORY_LEN = 60  # sparkline: the last 60 intervals
FADE_INTERVALS = 5  # a quiet row stays this many intervals, dimming, before it goes
SORT_KEYS = {
    "write": lambda r: r.write_bps,
    "wops": lambda r: r.write_ops_ps,
    "avg": lambda r: r.avg_write,
    "sync": lambda r: r.sync_ps,
    "read": lambda r: r.read_bps,
    "rops": lambda r: r.read_ops_ps,
    "wlat": lambda r: r.latency_p99("write"),
    "slat": lambda r: r.latency_p99("sync"),
    "name": lambda r: r.label,
    "kind": lambda r: r.kind,
}


@dataclass
class ScreenRow:
    """One line of the screen: per-second rates of a file, kind, table or thread over
    the last interval, its recent history and how long it has been quiet. (A report's
    line, report.model.GroupRow, holds totals over a whole trace instead.)"""

    key: str
    label: str
    kind: str
    write_bps: float
    write_ops_ps: float
    avg_write: float
    sync_ps: float
    read_bps: float
    read_ops_ps: float
    errors: int
    history: list[float]
    quiet_for: int = 0  # intervals since the row last did anything
    # latency summaries (mysqlio.latency.Histogram.summary) by class: write, sync, read
    latency: dict[str, dict[str, int]] = field(default_factory=dict)

    def latency_p99(self, cls: str) -> int:
        summary = self.latency.get(cls)
        return summary["p99_ns"] if summary else 0


@dataclass
class _Track:
    kind: str
    label: str
    history: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_LEN))
    quiet_for: int = 0


def _merge_latency(into: dict[str, Histogram], latency: dict[str, Histogram]) -> None:
    for cls, hist in latency.items():
        if cls not in into:
            into[cls] = Histogram()
        into[cls].merge(hist)


def group_key(f: FileActivity, group: str) -> list[tuple[str, str, Counts]]:
    """(key, label, counts) of the groups a file's activity belongs to."""
    if group == "file":
        label = f.path + (" (deleted)" if f.deleted else "")
        return [(f"{f.file.dev}:{f.file.ino}", label, f)]
    if group == "kind":
        return [(f.kind, f.kind, f)]
    if group == "table":
        table = f.table or f.kind
        return [(table, table, f)]
    if group == "thread":
        return [(str(t.tid), f"{t.name} [{t.tid}]", t) for t in f.threads.values()]
    raise ValueError(f"unknown group {group}")


class ScreenState:
    """Everything `top` remembers across intervals: histories, fading rows, session totals."""

    def __init__(
        self,
        group: str = "file",
        sort: str = "write",
        filters: Filters | None = None,
        latency: bool = False,
    ) -> None:
        self.group = group
        self.sort = sort
        self.latency = latency  # latency columns shown
        self.filters = filters or Filters()
        self._tracks: dict[str, _Track] = {}
        self.totals: dict[str, tuple[str, str, Counts]] = {}  # whole session, per file
        self.lost_events = 0
        self.intervals = 0
        self.elapsed_s = 0.0

    def update(self, interval: Interval) -> list[ScreenRow]:
        """Fold in one interval; the rows to show now."""
        self.intervals += 1
        self.elapsed_s += interval.interval_s
        self.lost_events += interval.lost_events
        secs = interval.interval_s or 1.0
        current: dict[str, tuple[str, str, Counts, dict[str, Histogram]]] = {}
        for f in interval.files:
            self._add_total(f)
            if not self.filters.keep(f):
                continue
            for key, label, counts in group_key(f, self.group):
                if key not in current:
                    current[key] = (label, f.kind if self.group != "thread" else "thread", Counts(), {})
                current[key][2].merge(counts)
                if self.group != "thread":  # histograms are per file, not per thread
                    _merge_latency(current[key][3], f.latency)
        rows = []
        for key, (label, kind, counts, latency) in current.items():
            track = self._tracks.setdefault(key, _Track(kind, label))
            track.label, track.quiet_for = label, 0
            track.history.append(counts.write_bytes / secs)
            row = _row(key, track, counts, secs)
            row.latency = {cls: s for cls, hist in latency.items() if (s := hist.summary())}
            rows.append(row)
        for key, track in list(self._tracks.items()):
            if key in current:
                continue
            track.quiet_for += 1
            track.history.append(0.0)
            if track.quiet_for > FADE_INTERVALS:
                del self._tracks[key]
            else:
                rows.append(_row(key, track, Counts(), secs))
        return self.sorted(rows)

    def sorted(self, rows: Iterable[ScreenRow]) -> list[ScreenRow]:
        key = SORT_KEYS[self.sort]
        reverse = self.sort not in ("name", "kind")
        # quiet rows sink below active ones, in the order they went quiet
        return sorted(rows, key=lambda r: (r.quiet_for, _neg(key(r)) if reverse else key(r)))

    def regroup(self, group: str) -> None:
        self.group = group
        self._tracks.clear()

    def _add_total(self, f: FileActivity) -> None:
        key = f"{f.file.dev}:{f.file.ino}"
        entry = self.totals.get(key)
        if entry is None:
            entry = self.totals[key] = (f.path, f.kind, Counts())
        elif entry[0] != f.path:
            entry = self.totals[key] = (f.path, f.kind, entry[2])
        entry[2].merge(f)


def _neg(value: float | str) -> float | str:
    return -value if isinstance(value, (int, float)) else value


def _row(key: str, track: _Track, c: Counts, secs: float) -> ScreenRow:
    return ScreenRow(
        key=key,
        label=track.label,
        kind=track.kind,
        write_bps=c.write_bytes / secs,
        write_ops_ps=c.write_ops / secs,
        avg_write=c.write_bytes / c.write_ops if c.write_ops else 0.0,
        sync_ps=c.sync_ops / secs,
        read_bps=c.read_bytes / secs,
        read_ops_ps=c.read_ops / secs,
        errors=c.errors,
        history=list(track.history),
        quiet_for=track.quiet_for,
    )

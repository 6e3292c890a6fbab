"""Shape intervals into screen rows: grouping, filtering, sorting, history, fading.

Pure data in, data out (no terminal): `render.py` draws what this produces.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .bursts.fold import FOLDED_KEY, folded_label, redo_dir
from .cache_hits import hit_ratio
from .devices import DeviceActivity
from .filters import Filters
from .latency import Histogram
from .model import SERVER_GROUPS, WRITEBACK_CAUSES, Counts, FileActivity, Interval
from .probe import lost_by_reason
from .thread_attribution import ThreadView

HISTORY_LEN = 60  # sparkline: the last 60 intervals
VIEWS = ("syscalls", "page cache")  # what the columns show (key p switches)
MAX_DEVICES = 4  # device lines in the header: the server's disks first, then the busiest
# how the screen names what wrote a file's pages back (model.WRITEBACK_CAUSES)
CAUSE_LABELS = {
    "fsync": "fsync",
    "fdatasync": "fdatasync",
    "sync_file_range": "sfr",
    "msync": "msync",
    "write": "O_SYNC write",
    "server_other": "server",
    "flusher_periodic": "flusher",
    "flusher_background": "flusher bg",
    "memory": "reclaim",
    "sync": "sync(2)",
    "other": "other",
}
assert set(CAUSE_LABELS) == set(WRITEBACK_CAUSES)
# and the owners of a device's bytes (devices.OWNER_NAMES)
OWNER_LABELS = {"server_files": "server", "server_direct": "direct", "filesystem": "fs", "other": "other"}
# groups of threads: their rows have no per-file latency
THREAD_GROUPS = ("thread", *SERVER_GROUPS)
NO_VIEW = "(no server view)"  # a thread row without the server's view (no sample yet, or none possible)
FADE_INTERVALS = 5  # a quiet row stays this many intervals, dimming, before it goes
# MySQL >= 8.0.30 keeps its redo log in 32 files of #innodb_redo and moves on to the next
# every few seconds: by default the file rows show one row for them (key o, --unfold-redo),
# as the burst detector takes them as one series (bursts.fold)
SORT_KEYS = {
    "write": lambda r: r.write_bps,
    "wops": lambda r: r.write_ops_ps,
    "avg": lambda r: r.avg_write,
    "sync": lambda r: r.sync_ps,
    "dirty": lambda r: r.dirtied_bps,
    "wback": lambda r: r.wback_bps,
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
    # page cache: bytes dirtied and written back per second, what wrote them back (bytes)
    dirtied_bps: float = 0.0
    wback_bps: float = 0.0
    wback_by: dict[str, int] = field(default_factory=dict)
    wback_history: list[float] = field(default_factory=list)
    disk_read_bps: float = 0.0  # bytes read from the device for the file (readahead, O_DIRECT included)
    cache_hit: float | None = None  # the buffered reads' page-cache hit ratio (mysqlio.cache_hits)
    # latency summaries (mysqlio.latency.Histogram.summary) by class: write, sync, read
    latency: dict[str, dict[str, int]] = field(default_factory=dict)

    def latency_p99(self, cls: str) -> int:
        summary = self.latency.get(cls)
        return summary["p99_ns"] if summary else 0

    @property
    def wback_causes(self) -> str:
        return main_causes(self.wback_by)


def main_causes(by: dict[str, int], most: int = 2) -> str:
    """What wrote the pages back, biggest share first: "fsync 80% / flusher 20%" ("-": nothing)."""
    shares: dict[str, int] = {}
    for cause, nbytes in by.items():
        if nbytes > 0:
            label = CAUSE_LABELS.get(cause, cause)
            shares[label] = shares.get(label, 0) + nbytes
    total = sum(shares.values())
    if not total:
        return "-"
    ranked = sorted(shares.items(), key=lambda kv: (-kv[1], kv[0]))
    text = " / ".join(f"{label} {round(100 * n / total)}%" for label, n in ranked[:most])
    return text + (" …" if len(ranked) > most else "")


@dataclass(frozen=True)
class DeviceRate:
    """One block device over the last interval, as the header shows it: what it completed
    per second, and whose bytes the bios queued to it were (fractions, biggest first)."""

    name: str
    write_bps: float
    write_rps: float
    read_bps: float
    read_rps: float
    write_share: tuple[tuple[str, float], ...]
    read_share: tuple[tuple[str, float], ...]
    amplification: float | None


def _shares(by: dict[str, int]) -> tuple[tuple[str, float], ...]:
    total = sum(by.values())
    if total <= 0:
        return ()
    shares = [(OWNER_LABELS.get(owner, owner), n / total) for owner, n in by.items() if n > 0]
    return tuple(sorted(shares, key=lambda kv: -kv[1]))


def _server_bytes(d: DeviceActivity) -> int:
    return d.server_write_bytes + d.read_by.get("server_files", 0) + d.read_by.get("server_direct", 0)


def device_rates(devices: Iterable[DeviceActivity], secs: float, most: int = MAX_DEVICES) -> list[DeviceRate]:
    """The busy devices of an interval (anything completed or queued): those the server's
    bytes went to first (most first), then the others, busiest first."""
    secs = secs or 1.0
    busy = [
        d
        for d in devices
        if d.write_bytes or d.read_bytes or d.write_requests or d.read_requests or any(d.write_by.values())
    ]
    busy.sort(key=lambda d: (-_server_bytes(d), -(d.write_bytes + d.read_bytes), d.name))
    return [
        DeviceRate(
            name=d.name,
            write_bps=d.write_bytes / secs,
            write_rps=d.write_requests / secs,
            read_bps=d.read_bytes / secs,
            read_rps=d.read_requests / secs,
            write_share=_shares(d.write_by),
            read_share=_shares(d.read_by),
            amplification=d.write_amplification,
        )
        for d in busy[:most]
    ]


@dataclass
class _Track:
    kind: str
    label: str
    history: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_LEN))
    wback_history: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_LEN))
    quiet_for: int = 0


def _merge_latency(into: dict[str, Histogram], latency: dict[str, Histogram]) -> None:
    for cls, hist in latency.items():
        if cls not in into:
            into[cls] = Histogram()
        into[cls].merge(hist)


def _server_labels(view: ThreadView | None, group: str) -> tuple[str, str]:
    return (view.key(group), view.label(group)) if view is not None else (NO_VIEW, NO_VIEW)


def group_key(f: FileActivity, group: str, fold_redo: bool = False) -> list[tuple[str, str, Counts]]:
    """(key, label, counts) of the groups a file's activity belongs to; with fold_redo, the
    files of MySQL's redo directory are one row (labelled by ScreenState with their count)."""
    if group == "file":
        directory = redo_dir(f.path, f.kind) if fold_redo else None
        if directory is not None:
            return [(FOLDED_KEY + directory, directory, f)]
        return [(f.key, f.label, f)]
    if group == "kind":
        return [(f.kind, f.kind, f)]
    if group == "table":
        table = f.table or f.kind
        return [(table, table, f)]
    if group == "thread":
        return [(str(t.tid), f"{t.name} [{t.tid}]", t) for t in f.threads.values()]
    if group in SERVER_GROUPS:  # the server's view of each thread (--mysql)
        return [(*_server_labels(t.server, group), t) for t in f.threads.values()]
    raise ValueError(f"unknown group {group}")


class ScreenState:
    """Everything `top` remembers across intervals: histories, fading rows, session totals."""

    def __init__(
        self,
        group: str = "file",
        sort: str = "write",
        filters: Filters | None = None,
        latency: bool = False,
        view: str = "syscalls",
        fold_redo: bool = True,
    ) -> None:
        self.group = group
        self.fold_redo = fold_redo  # MySQL's redo files as one row (group "file")
        self.sort = sort
        self.latency = latency  # latency columns shown
        self.view = view  # VIEWS: the syscall columns or the page cache's
        self.filters = filters or Filters()
        self._tracks: dict[str, _Track] = {}
        self._pending: list[_Pending] = []  # the last interval's rows, their ScreenRows not made
        self._folded: dict[str, set[str]] = {}  # a folded row's key -> the files seen in it (their keys)
        self.totals: dict[str, tuple[str, str, Counts]] = {}  # whole session, per file
        self.lost_events = 0
        self.lost_by: Counter[str] = Counter()  # lost_events by the counter that lost them
        self.intervals = 0
        self.elapsed_s = 0.0

    def update(self, interval: Interval, most: int | None = None) -> list[ScreenRow]:
        """Fold in one interval; the rows to show now (the first `most` of them: the others'
        ScreenRows are made only if `rows()` asks for them, e.g. sorted by another key)."""
        self.intervals += 1
        self.elapsed_s += interval.interval_s
        self.lost_events += interval.lost_events
        self.lost_by.update(lost_by_reason(interval.drops))
        secs = interval.interval_s or 1.0
        # key -> [label, kind, the counts it adds up, their latency histograms]
        current: dict[str, list[Any]] = {}
        kinds: dict[str, dict[str, int]] = {}  # user, connection, query: bytes by file kind
        per_thread = self.group in THREAD_GROUPS  # histograms are per file, not per thread
        for f in interval.files:
            self._add_total(f)
            if not self.filters.keep(f):
                continue
            for key, label, counts in group_key(f, self.group, self.fold_redo):
                if key.startswith(FOLDED_KEY):
                    seen = self._folded.setdefault(key, set())
                    seen.add(f.key)
                    label = folded_label(label, len(seen))
                entry = current.get(key)
                if entry is None:
                    entry = current[key] = [label, self.group if per_thread else f.kind, [], []]
                elif key.startswith(FOLDED_KEY):
                    entry[0] = label  # the count as of the last file
                entry[2].append(counts)
                if self.group in SERVER_GROUPS:
                    by_kind = kinds.setdefault(key, {})
                    by_kind[f.kind] = by_kind.get(f.kind, 0) + counts.write_bytes + counts.read_bytes
                if not per_thread and f.latency:
                    entry[3].append(f.latency)
        pending = []
        for key, (label, kind, parts, latencies) in current.items():
            if key in kinds:  # the kind of file a user, connection or query moved the most bytes of
                kind = max(kinds[key].items(), key=lambda kv: (kv[1], kv[0]))[0]
            track = self._tracks.get(key)
            if track is None:  # (not setdefault: a _Track and its deques made for every row)
                track = self._tracks[key] = _Track(kind, label)
            track.label, track.kind, track.quiet_for = label, kind, 0
            # one part (a file's own row): its counters are the sum; ScreenRow's merge waits
            counts = parts[0] if len(parts) == 1 else _merged(parts)
            track.history.append(counts.write_bytes / secs)
            track.wback_history.append(counts.writeback_bytes / secs)
            pending.append(_Pending(key, track, parts, latencies, counts, secs))
        for key, track in list(self._tracks.items()):
            if key in current:
                continue
            track.quiet_for += 1
            track.history.append(0.0)
            track.wback_history.append(0.0)
            if track.quiet_for > FADE_INTERVALS:
                del self._tracks[key]
            else:
                pending.append(_Pending(key, track, [], [], _QUIET, secs))
        self._pending = pending
        return self.rows(most)

    def rows(self, most: int | None = None) -> list[ScreenRow]:
        """The rows of the last interval in the current sort order, the first `most` of
        them (None: all); sorted from each row's counters, a ScreenRow made only for those."""
        key = SORT_KEYS[self.sort]
        reverse = self.sort not in ("name", "kind")
        # the same order as sorted(): quiet rows sink below active ones; a stable sort of
        # the last order, as sorted() of the last rows was (ties stay where they were)
        self._pending = sorted(self._pending, key=lambda r: (r.quiet_for, _neg(key(r)) if reverse else key(r)))
        return [p.row() for p in self._pending[:most]]

    def sorted(self, rows: Iterable[ScreenRow]) -> list[ScreenRow]:
        key = SORT_KEYS[self.sort]
        reverse = self.sort not in ("name", "kind")
        # quiet rows sink below active ones, in the order they went quiet
        return sorted(rows, key=lambda r: (r.quiet_for, _neg(key(r)) if reverse else key(r)))

    def switch_view(self) -> None:
        """The other set of columns (syscalls <-> page cache)."""
        self.view = VIEWS[(VIEWS.index(self.view) + 1) % len(VIEWS)]

    def regroup(self, group: str) -> None:
        self.group = group
        self._tracks.clear()

    def switch_redo_fold(self) -> None:
        """MySQL's redo files as one row, or a row each (from the next interval on)."""
        self.fold_redo = not self.fold_redo
        self._tracks.clear()

    def _add_total(self, f: FileActivity) -> None:
        key = f.key
        entry = self.totals.get(key)
        if entry is None:
            entry = self.totals[key] = (f.path + (f" · {f.region}" if f.region else ""), f.kind, Counts())
        elif not entry[0].startswith(f.path):
            entry = self.totals[key] = (f.path + (f" · {f.region}" if f.region else ""), f.kind, entry[2])
        entry[2].merge(f)


_QUIET = Counts()  # a quiet row's counts (never changed)


def _merged(parts: list[Counts]) -> Counts:
    total = Counts()
    for part in parts:
        total.merge(part)
    return total


class _Pending:
    """A row of the last interval before its ScreenRow is made: what SORT_KEYS read, from
    its counters (the same values as the ScreenRow's), and the ScreenRow on demand (at
    20,000 files the screen shows ~40 rows: a ScreenRow, its merged Counts and its history
    copied for each of 20,000 files was a third of the screen's update, issue 60)."""

    __slots__ = ("_latency", "counts", "key", "kind", "label", "latencies", "parts", "quiet_for", "secs", "track")

    def __init__(
        self,
        key: str,
        track: _Track,
        parts: list[Counts],
        latencies: list[dict[str, Histogram]],
        counts: Counts,
        secs: float,
    ) -> None:
        self.key, self.track, self.secs = key, track, secs
        self.parts, self.latencies, self.counts = parts, latencies, counts
        self.label, self.kind, self.quiet_for = track.label, track.kind, track.quiet_for
        self._latency: dict[str, dict[str, int]] | None = None

    @property
    def write_bps(self) -> float:
        return self.counts.write_bytes / self.secs

    @property
    def write_ops_ps(self) -> float:
        return self.counts.write_ops / self.secs

    @property
    def avg_write(self) -> float:
        c = self.counts
        return c.write_bytes / c.write_ops if c.write_ops else 0.0

    @property
    def sync_ps(self) -> float:
        return self.counts.sync_ops / self.secs

    @property
    def dirtied_bps(self) -> float:
        return self.counts.dirtied_bytes / self.secs

    @property
    def wback_bps(self) -> float:
        return self.counts.writeback_bytes / self.secs

    @property
    def read_bps(self) -> float:
        return self.counts.read_bytes / self.secs

    @property
    def read_ops_ps(self) -> float:
        return self.counts.read_ops / self.secs

    @property
    def latency(self) -> dict[str, dict[str, int]]:
        if self._latency is None:
            merged: dict[str, Histogram] = {}
            for latency in self.latencies:
                _merge_latency(merged, latency)
            self._latency = {cls: s for cls, hist in merged.items() if (s := hist.summary())}
        return self._latency

    def latency_p99(self, cls: str) -> int:
        summary = self.latency.get(cls)
        return summary["p99_ns"] if summary else 0

    def row(self) -> ScreenRow:
        # the counts merged into a Counts of their own, as they always were (the row's
        # writeback causes in WRITEBACK_CAUSES' order, its APIs a set of its own)
        counts = self.counts if len(self.parts) != 1 else _merged(self.parts)
        row = _row(self.key, self.track, counts, self.secs, self.label, self.kind, self.quiet_for)
        row.latency = self.latency
        return row


def _neg(value: float | str) -> float | str:
    return -value if isinstance(value, (int, float)) else value


def _row(key: str, track: _Track, c: Counts, secs: float, label: str, kind: str, quiet_for: int) -> ScreenRow:
    return ScreenRow(
        key=key,
        label=label,
        kind=kind,
        write_bps=c.write_bytes / secs,
        write_ops_ps=c.write_ops / secs,
        avg_write=c.write_bytes / c.write_ops if c.write_ops else 0.0,
        sync_ps=c.sync_ops / secs,
        read_bps=c.read_bytes / secs,
        read_ops_ps=c.read_ops / secs,
        errors=c.errors,
        history=list(track.history),
        quiet_for=quiet_for,
        dirtied_bps=c.dirtied_bytes / secs,
        wback_bps=c.writeback_bytes / secs,
        wback_by=dict(c.writeback_by),
        wback_history=list(track.wback_history),
        disk_read_bps=c.disk_read_bytes / secs,
        cache_hit=hit_ratio(c.read_bytes, c.disk_read_bytes, c.direct_read_bytes),
    )

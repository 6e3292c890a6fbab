"""What one interval of tracing found, per file and per thread: the data every output renders."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .abi import Op
from .classify import Classifier
from .events import API_NAMES
from .latency import CLASS_OF_OP, CLASSES, Histogram
from .probe import FileIdentity, LatencyRow, OpCount, dev_label
from .resolve import FileResolver

COUNTER_FIELDS = (
    "write_bytes",
    "write_ops",
    "read_bytes",
    "read_ops",
    "fsync_ops",
    "fdatasync_ops",
    "sync_file_range_ops",
    "errors",
)
# the counters a successful request of each op adds to: (its bytes, or None; its requests)
OP_COUNTERS: dict[Op, tuple[str | None, str]] = {
    Op.WRITE: ("write_bytes", "write_ops"),
    Op.READ: ("read_bytes", "read_ops"),
    Op.FSYNC: (None, "fsync_ops"),
    Op.FDATASYNC: (None, "fdatasync_ops"),
    Op.SYNC_FILE_RANGE: (None, "sync_file_range_ops"),
}
# what a row of `top` or of a report can stand for
GROUPS = ("file", "kind", "table", "thread")


@dataclass
class Counts:
    """Bytes, requests and errors of some set of requests."""

    write_bytes: int = 0
    write_ops: int = 0
    read_bytes: int = 0
    read_ops: int = 0
    fsync_ops: int = 0
    fdatasync_ops: int = 0
    sync_file_range_ops: int = 0
    errors: int = 0
    apis: set[str] = field(default_factory=set)

    @property
    def sync_ops(self) -> int:
        return self.fsync_ops + self.fdatasync_ops + self.sync_file_range_ops

    def add(self, row: OpCount) -> None:
        self.errors += row.errors
        if row.ops:
            self.apis.add(API_NAMES[row.api])
        nbytes, nops = OP_COUNTERS[row.op]
        if nbytes:
            setattr(self, nbytes, getattr(self, nbytes) + row.bytes)
        setattr(self, nops, getattr(self, nops) + row.ops)

    def merge(self, other: Counts) -> None:
        for name in COUNTER_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.apis |= other.apis

    def counters_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "write_bytes": self.write_bytes,
            "write_ops": self.write_ops,
            "read_bytes": self.read_bytes,
            "read_ops": self.read_ops,
            "sync_ops": self.sync_ops,
        }
        out.update({name: getattr(self, name) for name in COUNTER_FIELDS[4:]})
        return out


@dataclass(kw_only=True)
class ThreadActivity(Counts):
    """One thread's share of a file's requests (or of all files)."""

    tid: int
    name: str

    def to_json(self) -> dict[str, Any]:
        return {"tid": self.tid, "name": self.name, **self.counters_json(), "apis": sorted(self.apis)}


@dataclass(kw_only=True)
class FileActivity(Counts):
    """Counts of one file over one interval, and which threads made them."""

    file: FileIdentity
    path: str
    kind: str
    table: str | None = None
    deleted: bool = False
    threads: dict[int, ThreadActivity] = field(default_factory=dict)
    # latencies of the requests that completed in the interval, by op class
    latency: dict[str, Histogram] = field(default_factory=dict)

    def add_latency(self, row: LatencyRow) -> None:
        cls = CLASS_OF_OP[row.op]
        hist = self.latency.get(cls)
        if hist is None:
            hist = self.latency[cls] = Histogram()
        hist.merge(row.hist)

    def latency_json(self) -> dict[str, dict[str, int]]:
        out = {}
        for cls in CLASSES:
            summary = self.latency[cls].summary() if cls in self.latency else None
            if summary:
                out[cls] = summary
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "table": self.table,
            "deleted": self.deleted,
            "dev": dev_label(self.file.dev),
            "ino": self.file.ino,
            **self.counters_json(),
            "apis": sorted(self.apis),
            "latency": self.latency_json(),
            "threads": [t.to_json() for t in sorted(self.threads.values(), key=_busiest)],
        }


@dataclass
class Interval:
    """One tick of `top`: when, how long, and what each file did."""

    time: float
    interval_s: float
    pid: int
    lost_events: int
    drops: dict[str, int]
    files: list[FileActivity]
    server: Any = None  # mysqlio.server_status.ServerStatus with --mysql

    def to_json(self) -> dict[str, Any]:
        out = {
            "time": round(self.time, 6),
            "interval_s": round(self.interval_s, 6),
            "pid": self.pid,
            "lost_events": self.lost_events,
            "drops": self.drops,
            "files": [f.to_json() for f in self.files],
        }
        if self.server is not None:
            out["server"] = self.server.to_json()
        return out


def _busiest(c: Counts) -> tuple[int, int, int]:
    return (-c.write_bytes, -c.read_bytes, -c.sync_ops)


def aggregate(
    rows: list[OpCount],
    resolver: FileResolver,
    classifier: Classifier,
    thread_name: Callable[[int], str],
    fold_partitions: bool = False,
    latencies: list[LatencyRow] | None = None,
) -> list[FileActivity]:
    """Fold (file, thread, op, api) rows into one FileActivity per file, busiest writer first,
    with the latency histograms of its requests. (A recorded trace's events are counted
    into the same counters by trace_counts.count, vectorised: millions of events there,
    a few hundred pre-counted rows per interval here.)"""
    by_file: dict[FileIdentity, FileActivity] = {}

    def activity_of(file: FileIdentity) -> FileActivity:
        activity = by_file.get(file)
        if activity is None:
            resolved = resolver.resolve(file)
            activity = by_file[file] = FileActivity(
                file=file,
                path=resolved.path,
                kind=classifier.kind(resolved.path),
                table=classifier.table(resolved.path, fold_partitions),
                deleted=resolved.deleted,
            )
        return activity

    for row in rows:
        activity = activity_of(row.file)
        activity.add(row)
        thread = activity.threads.get(row.tid)
        if thread is None:
            thread = activity.threads[row.tid] = ThreadActivity(tid=row.tid, name=thread_name(row.tid))
        thread.add(row)
    # a libaio request is counted at submission and timed at completion,
    # which can fall in the next interval: such a file has latency only
    for lat in latencies or ():
        activity_of(lat.file).add_latency(lat)
    return sorted(by_file.values(), key=lambda a: (*_busiest(a), a.path))

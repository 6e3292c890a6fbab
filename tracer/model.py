"""What one interval of tracing found, per file and per thread: the data every output renders."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .abi import By, Op, Region
from .cache_hits import hit_bytes
from .classify import Classifier
from .devices import DeviceActivity
from .events import API_NAMES
from .ibdata_regions import region_name
from .latency import CLASS_OF_OP, CLASSES, Histogram
from .probe import FileIdentity, LatencyRow, OpCount, dev_label
from .resolve import FileResolver

# what made the kernel write a file's pages back (abi.By), as reports and JSON name it
WRITEBACK_CAUSES = tuple(by.name.lower() for by in By if by is not By.NONE)
WRITEBACK_BY_FIELDS = tuple(f"wb_{cause}_bytes" for cause in WRITEBACK_CAUSES)
COUNTER_FIELDS = (
    "write_bytes",
    "write_ops",
    "read_bytes",
    "read_ops",
    "fsync_ops",
    "fdatasync_ops",
    "sync_file_range_ops",
    "errors",
    "msync_ops",
    # page cache: bytes that went clean -> dirty, and written back to the device (by cause)
    "dirtied_bytes",
    "writeback_bytes",
    *WRITEBACK_BY_FIELDS,
    # read from the device for the file: all of it (page cache and O_DIRECT), the readahead's
    # part, and the O_DIRECT reads' part (also in read_bytes: they were requested)
    "disk_read_bytes",
    "readahead_bytes",
    "direct_read_bytes",
)
# the counters a successful request of each op adds to: (its bytes, or None; its requests,
# or None: page-cache rows count folios and bios, which no one asked for)
OP_COUNTERS: dict[Op, tuple[str | None, str | None]] = {
    Op.WRITE: ("write_bytes", "write_ops"),
    Op.READ: ("read_bytes", "read_ops"),
    Op.FSYNC: (None, "fsync_ops"),
    Op.FDATASYNC: (None, "fdatasync_ops"),
    Op.SYNC_FILE_RANGE: (None, "sync_file_range_ops"),
    Op.MSYNC: (None, "msync_ops"),
    Op.DIRTY: ("dirtied_bytes", None),
    Op.WRITEBACK: ("writeback_bytes", None),
    Op.DISK_READ: ("disk_read_bytes", None),
    # and disk_read_bytes too (Counts.add, trace_counts.count): readahead is read from the disk
    Op.READAHEAD: ("readahead_bytes", None),
    # and disk_read_bytes too, as readahead (its MIO_READ row has the request's bytes and ops)
    Op.DIRECT_READ: ("direct_read_bytes", None),
}
# page-cache rows: the kernel's work, not a request (no API, not in `apis`); a direct read's
# row is its request's READ row again, seen from the disk
PAGE_CACHE_OPS = frozenset({Op.DIRTY, Op.WRITEBACK, Op.DISK_READ, Op.READAHEAD, Op.DIRECT_READ})
# the rows whose bytes were read from the disk besides their own counter (Counts.add)
DISK_READ_TOO = (Op.READAHEAD, Op.DIRECT_READ)
# what a row of `top` or of a report can stand for
GROUPS = ("file", "kind", "table", "thread", "user", "connection", "query")
# the groups that need the server's view of its threads (--mysql, performance_schema)
SERVER_GROUPS = ("user", "connection", "query")


# COUNTER_FIELDS held as attributes (the wb_* ones live in Counts.writeback_by)
_ATTRIBUTE_COUNTERS = tuple(name for name in COUNTER_FIELDS if not name.startswith("wb_"))


def writeback_field(by: By) -> str:
    """The counter of bytes written back for that cause."""
    return f"wb_{by.name.lower()}_bytes"


@dataclass
class Counts:
    """Bytes, requests and errors of some set of requests; the page cache's bytes."""

    write_bytes: int = 0
    write_ops: int = 0
    read_bytes: int = 0
    read_ops: int = 0
    fsync_ops: int = 0
    fdatasync_ops: int = 0
    sync_file_range_ops: int = 0
    errors: int = 0
    msync_ops: int = 0
    dirtied_bytes: int = 0
    writeback_bytes: int = 0
    # writeback bytes by cause (WRITEBACK_CAUSES), only the causes seen
    writeback_by: dict[str, int] = field(default_factory=dict)
    disk_read_bytes: int = 0
    readahead_bytes: int = 0
    direct_read_bytes: int = 0
    apis: set[str] = field(default_factory=set)

    @property
    def sync_ops(self) -> int:
        return self.fsync_ops + self.fdatasync_ops + self.sync_file_range_ops + self.msync_ops

    @property
    def cache_hit_bytes(self) -> int:
        """Read bytes the page cache gave (mysqlio.cache_hits: derived, approximate)."""
        return hit_bytes(self.read_bytes, self.disk_read_bytes)

    def counter(self, name: str) -> int:
        """A counter of COUNTER_FIELDS by name (the wb_* ones live in writeback_by)."""
        if name.startswith("wb_"):
            return self.writeback_by.get(name[3:-6], 0)
        return int(getattr(self, name))

    def add_counter(self, name: str, value: int) -> None:
        if not value:
            return
        if name.startswith("wb_"):
            cause = name[3:-6]
            self.writeback_by[cause] = self.writeback_by.get(cause, 0) + value
        else:
            setattr(self, name, getattr(self, name) + value)

    def add(self, row: OpCount) -> None:
        self.errors += row.errors
        if row.ops and row.op not in PAGE_CACHE_OPS:
            self.apis.add(API_NAMES[row.api])
        nbytes, nops = OP_COUNTERS[row.op]
        if nbytes:
            self.add_counter(nbytes, row.bytes)
        if nops:
            self.add_counter(nops, row.ops)
        if row.op == Op.WRITEBACK and row.by is not By.NONE:
            self.add_counter(writeback_field(row.by), row.bytes)
        elif row.op in DISK_READ_TOO:
            self.add_counter("disk_read_bytes", row.bytes)

    def merge(self, other: Counts) -> None:
        # add_counter(name, other.counter(name)) for each of COUNTER_FIELDS, unrolled: the
        # screen merges every file of every interval into its totals (issue 60)
        mine, theirs = self.__dict__, other.__dict__
        for name in _ATTRIBUTE_COUNTERS:
            if theirs[name]:
                mine[name] += theirs[name]
        if other.writeback_by:
            by = self.writeback_by
            for cause in WRITEBACK_CAUSES:
                if other.writeback_by.get(cause, 0):
                    by[cause] = by.get(cause, 0) + other.writeback_by[cause]
        self.apis |= other.apis

    def counters_json(self) -> dict[str, Any]:
        # spelt out (COUNTER_FIELDS' order), not looked up by name: top's JSON at 20,000
        # active files calls this 40,000 times an interval
        wb = self.writeback_by
        return {
            "write_bytes": self.write_bytes,
            "write_ops": self.write_ops,
            "read_bytes": self.read_bytes,
            "read_ops": self.read_ops,
            "sync_ops": self.fsync_ops + self.fdatasync_ops + self.sync_file_range_ops + self.msync_ops,
            "fsync_ops": int(self.fsync_ops),
            "fdatasync_ops": int(self.fdatasync_ops),
            "sync_file_range_ops": int(self.sync_file_range_ops),
            "errors": int(self.errors),
            "msync_ops": int(self.msync_ops),
            "dirtied_bytes": int(self.dirtied_bytes),
            "writeback_bytes": int(self.writeback_bytes),
            "writeback_by": {cause: wb[cause] for cause in WRITEBACK_CAUSES if cause in wb} if wb else {},
            "disk_read_bytes": int(self.disk_read_bytes),
            "readahead_bytes": int(self.readahead_bytes),
            "direct_read_bytes": int(self.direct_read_bytes),
            "cache_hit_bytes": hit_bytes(self.read_bytes, self.disk_read_bytes),
        }


@dataclass(kw_only=True)
class ThreadActivity(Counts):
    """One thread's share of a file's requests (or of all files)."""

    tid: int
    name: str
    # the connection the thread served (--mysql, eBPF: the probes' conn, a socket inode; 0 none)
    conn: int = 0
    # the server's view of the thread (thread_attribution.ThreadView, --mysql): user, connection, query
    server: Any = None

    def to_json(self) -> dict[str, Any]:
        out = {"tid": self.tid, "name": self.name, **self.counters_json(), "apis": sorted(self.apis)}
        if self.server is not None:
            out.update(self.server.to_json())
        return out


@dataclass(kw_only=True)
class FileActivity(Counts):
    """Counts of one file over one interval, and which threads made them."""

    file: FileIdentity
    path: str
    kind: str
    table: str | None = None
    deleted: bool = False
    # the part of the file (ibdata_regions.region_name: "doublewrite", "system", ...) its
    # reads and writes were in; "" = the whole file (not split, folded, or syncs and page cache)
    region: str = ""
    # by (tid, conn): a thread's requests for each connection it served (conn 0 without --mysql)
    threads: dict[tuple[int, int], ThreadActivity] = field(default_factory=dict)
    # latencies of the requests that completed in the interval, by op class
    latency: dict[str, Histogram] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The file as rows name it: its path, region and whether it was deleted."""
        return self.path + (f" · {self.region}" if self.region else "") + (" (deleted)" if self.deleted else "")

    @property
    def key(self) -> str:
        """What tells this row from another file's or another region's."""
        return f"{self.file.dev}:{self.file.ino}" + (f"/{self.region}" if self.region else "")

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
            "region": self.region,
            "dev": dev_label(self.file.dev),
            "ino": self.file.ino,
            **self.counters_json(),
            "apis": sorted(self.apis),
            "latency": self.latency_json(),
            "threads": [
                t.to_json()
                for t in (
                    self.threads.values() if len(self.threads) < 2 else sorted(self.threads.values(), key=_busiest)
                )
            ],
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
    # block devices (page-cache accounting on; empty with SystemTap)
    devices: list[DeviceActivity] = field(default_factory=list)
    server: Any = None  # mysqlio.server_status.ServerStatus with --mysql
    # each file's reads from the disk counted (mysqlio.cache_hits.disk_reads_counted): else
    # no page-cache hit is derived, cache_hit_bytes is null in JSON
    disk_reads: bool = True

    def to_json(self, files: bool = True) -> dict[str, Any]:
        """files=False: "files" empty (output.write_json writes them a chunk at a time)."""
        out = {
            "time": round(self.time, 6),
            "interval_s": round(self.interval_s, 6),
            "pid": self.pid,
            "lost_events": self.lost_events,
            "drops": self.drops,
            "files": [no_hits(f.to_json(), self.disk_reads) for f in self.files] if files else [],
            "devices": [d.to_json() for d in self.devices],
        }
        if self.server is not None:
            out["server"] = self.server.to_json()
        return out


def no_hits(obj: dict[str, Any], disk_reads: bool) -> dict[str, Any]:
    """A file's JSON, its and its threads' cache_hit_bytes null where the disk reads were
    not counted (Interval.disk_reads)."""
    if not disk_reads:
        obj["cache_hit_bytes"] = None
        for thread in obj.get("threads", ()):
            thread["cache_hit_bytes"] = None
    return obj


def _busiest(c: Counts) -> tuple[int, int, int]:
    return (-c.write_bytes, -c.read_bytes, -c.sync_ops)


def aggregate(
    rows: list[OpCount],
    resolver: FileResolver,
    classifier: Classifier,
    thread_name: Callable[[int], str],
    fold_partitions: bool = False,
    latencies: list[LatencyRow] | None = None,
    fold_regions: bool = False,
) -> list[FileActivity]:
    """Fold (file, thread, op, api) rows into one FileActivity per file, busiest writer first,
    with the latency histograms of its requests. (A recorded trace's events are counted
    into the same counters by trace_counts.count, vectorised: millions of events there,
    a few hundred pre-counted rows per interval here.)"""
    by_file: dict[tuple[FileIdentity, Region], FileActivity] = {}

    def activity_of(file: FileIdentity, region: Region = Region.NONE) -> FileActivity:
        activity = by_file.get((file, region))
        if activity is None:
            resolved = resolver.resolve(file)
            activity = by_file[(file, region)] = FileActivity(
                file=file,
                path=resolver.shown(resolved.path),  # classified by its path here, as the layout's
                kind=classifier.kind(resolved.path),
                table=classifier.table(resolved.path, fold_partitions),
                deleted=resolved.deleted,
                region=region_name(region),
            )
        return activity

    # a file on overlayfs: its page-cache rows (upper inode) joined to its requests' (overlay inode)
    joined = resolver.join_overlays(row.file for row in rows)
    for row in rows:
        activity = activity_of(joined.get(row.file, row.file), Region.NONE if fold_regions else row.region)
        activity.add(row)
        thread = activity.threads.get((row.tid, row.conn))
        if thread is None:
            thread = activity.threads[(row.tid, row.conn)] = ThreadActivity(
                tid=row.tid, name=thread_name(row.tid), conn=row.conn
            )
        thread.add(row)
    # a libaio request is counted at submission and timed at completion,
    # which can fall in the next interval: such a file has latency only
    # latencies are per file: a file split by region has them on its first region's row
    first_of = {file: activity for (file, _), activity in reversed(by_file.items())}
    for lat in latencies or ():
        (first_of.get(lat.file) or activity_of(lat.file)).add_latency(lat)
    return sorted(by_file.values(), key=lambda a: (*_busiest(a), a.path))

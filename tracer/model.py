"""What one interval of tracing found, per file and per thread: the data every output renders."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mysqlio.bpf_types import API_NAMES, Op
from mysqlio.classify import Classifier
from mysqlio.probe import FileIdentity, OpCount
from mysqlio.resolve import FileResolver

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
        if row.op is Op.WRITE:
            self.write_bytes += row.bytes
            self.write_ops += row.ops
        elif row.op is Op.READ:
            self.read_bytes += row.bytes
            self.read_ops += row.ops
        elif row.op is Op.FSYNC:
            self.fsync_ops += row.ops
        elif row.op is Op.FDATASYNC:
            self.fdatasync_ops += row.ops
        else:
            self.sync_file_range_ops += row.ops

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
        out["apis"] = sorted(self.apis)
        return out


@dataclass(kw_only=True)
class ThreadActivity(Counts):
    """One thread's share of a file's requests (or of all files)."""

    tid: int
    name: str

    def to_json(self) -> dict[str, Any]:
        return {"tid": self.tid, "name": self.name, **self.counters_json()}


@dataclass(kw_only=True)
class FileActivity(Counts):
    """Counts of one file over one interval, and which threads made them."""

    file: FileIdentity
    path: str
    kind: str
    table: str | None = None
    deleted: bool = False
    threads: dict[int, ThreadActivity] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "table": self.table,
            "deleted": self.deleted,
            "dev": f"{os.major(self.file.dev)}:{os.minor(self.file.dev)}",
            "ino": self.file.ino,
            **self.counters_json(),
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

    def to_json(self) -> dict[str, Any]:
        return {
            "time": round(self.time, 6),
            "interval_s": round(self.interval_s, 6),
            "pid": self.pid,
            "lost_events": self.lost_events,
            "drops": self.drops,
            "files": [f.to_json() for f in self.files],
        }


def _busiest(c: Counts) -> tuple[int, int, int]:
    return (-c.write_bytes, -c.read_bytes, -c.sync_ops)


def aggregate(
    rows: list[OpCount],
    resolver: FileResolver,
    classifier: Classifier,
    thread_name: Callable[[int], str],
    fold_partitions: bool = False,
) -> list[FileActivity]:
    """Fold (file, thread, op, api) rows into one FileActivity per file, busiest writer first."""
    by_file: dict[FileIdentity, FileActivity] = {}
    for row in rows:
        activity = by_file.get(row.file)
        if activity is None:
            resolved = resolver.resolve(row.file)
            activity = FileActivity(
                file=row.file,
                path=resolved.path,
                kind=classifier.kind(resolved.path),
                table=classifier.table(resolved.path, fold_partitions),
                deleted=resolved.deleted,
            )
            by_file[row.file] = activity
        activity.add(row)
        thread = activity.threads.get(row.tid)
        if thread is None:
            thread = activity.threads[row.tid] = ThreadActivity(tid=row.tid, name=thread_name(row.tid))
        thread.add(row)
    return sorted(by_file.values(), key=lambda a: (*_busiest(a), a.path))

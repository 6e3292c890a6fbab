"""What one interval of tracing found, per file: the data every output renders."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from mysqlio.bpf_types import API_NAMES, Op
from mysqlio.classify import classify
from mysqlio.probe import FileIdentity, OpCount
from mysqlio.resolve import FileResolver


@dataclass
class FileActivity:
    """Counts of one file over one interval."""

    file: FileIdentity
    path: str
    kind: str
    deleted: bool = False
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

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "deleted": self.deleted,
            "dev": f"{os.major(self.file.dev)}:{os.minor(self.file.dev)}",
            "ino": self.file.ino,
            "write_bytes": self.write_bytes,
            "write_ops": self.write_ops,
            "read_bytes": self.read_bytes,
            "read_ops": self.read_ops,
            "sync_ops": self.sync_ops,
            "fsync_ops": self.fsync_ops,
            "fdatasync_ops": self.fdatasync_ops,
            "sync_file_range_ops": self.sync_file_range_ops,
            "errors": self.errors,
            "apis": sorted(self.apis),
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


def aggregate(rows: list[OpCount], resolver: FileResolver) -> list[FileActivity]:
    """Fold (file, op, api) rows into one FileActivity per file, busiest writer first."""
    by_file: dict[FileIdentity, FileActivity] = {}
    for row in rows:
        activity = by_file.get(row.file)
        if activity is None:
            resolved = resolver.resolve(row.file)
            activity = FileActivity(row.file, resolved.path, classify(resolved.path), resolved.deleted)
            by_file[row.file] = activity
        activity.add(row)
    return sorted(by_file.values(), key=lambda a: (-a.write_bytes, -a.read_bytes, a.path))

"""The window of `mysqlio verify`: performance_schema read at both edges, each edge
bracketing a drain of the probe, and mysqlio's per-file counts in between."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..model import Interval
from .pfs import FileIo, Instances, PfsSnapshot

DRAIN_EVERY_S = 1.0  # the kernel maps are drained at least this often during the window


@dataclass
class Reading:
    """What the server said at one moment: per-file counts and the redo counter; per
    instance, the file each named (pfs.follow_renames)."""

    files: PfsSnapshot
    redo_written: int | None
    instances: Instances = field(default_factory=dict)


@dataclass
class TracedFile:
    path: str
    kind: str
    deleted: bool = False
    io: FileIo = field(default_factory=FileIo)
    file: tuple[int, int] | None = None  # (st_dev, st_ino)


@dataclass
class Window:
    """Both sides of one window; start/end edges are (before drain, after drain)."""

    start: tuple[Reading, Reading]
    end: tuple[Reading, Reading]
    traced: dict[str, TracedFile]
    seconds: float
    lost_events: int = 0
    intervals: int = 0


class Drainer(Protocol):
    """What verify needs of sampling.IntervalSampler: everything counted since the last call."""

    def sample(self) -> Interval: ...


def _add_interval(traced: dict[tuple[int, int], TracedFile], interval: Interval) -> int:
    """Per file (dev, inode): a file renamed during the window stays one file, named as
    in the last interval that saw it."""
    for f in interval.files:
        key = (f.file.dev, f.file.ino)
        row = traced.get(key)
        if row is None:
            row = traced[key] = TracedFile(f.path, f.kind, file=key)
        row.path, row.kind, row.deleted = f.path, f.kind, f.deleted
        row.io = row.io + FileIo(f.write_bytes, f.write_ops, f.read_bytes, f.read_ops)
    return int(interval.lost_events)


def by_path(traced: dict[tuple[int, int], TracedFile], end: Reading) -> dict[str, TracedFile]:
    """The traced files by path, each under the name performance_schema gave it at the end
    where that name held the same inode then (mysqlio's name of a file renamed since it
    last resolved it may be the old one); files that share a path (deleted and made
    again) are added up, as performance_schema keeps one row per name."""
    names = {one.file: one.path for one in end.instances.values() if one.file is not None}
    out: dict[str, TracedFile] = {}
    for key, row in traced.items():
        path = names.get(key, row.path)
        have = out.get(path)
        if have is None:
            out[path] = TracedFile(path, row.kind, row.deleted, row.io, key)
        else:
            have.io = have.io + row.io
            have.deleted = have.deleted and row.deleted
    return out


def measure_window(
    drainer: Drainer,
    read_server: Callable[[], Reading],
    duration_s: float,
    wait: Callable[[float], None] = time.sleep,
) -> Window:
    """Drain (discard) bracketed by two server readings, trace for `duration_s`
    draining every DRAIN_EVERY_S, then the last drain bracketed the same way."""
    s0a = read_server()
    drainer.sample()  # everything before the window
    s0b = read_server()
    started = time.monotonic()
    traced: dict[tuple[int, int], TracedFile] = {}
    lost = intervals = 0
    deadline = started + duration_s
    while True:
        left = deadline - time.monotonic()
        if left <= DRAIN_EVERY_S:
            break
        wait(DRAIN_EVERY_S)
        lost += _add_interval(traced, drainer.sample())
        intervals += 1
    wait(max(0.0, deadline - time.monotonic()))
    s1a = read_server()
    lost += _add_interval(traced, drainer.sample())
    s1b = read_server()
    return Window((s0a, s0b), (s1a, s1b), by_path(traced, s1b), time.monotonic() - started, lost, intervals + 1)

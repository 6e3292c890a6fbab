"""The window of `mysqlio verify`: performance_schema read at both edges, each edge
bracketing a drain of the probe, and mysqlio's per-file counts in between."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..model import Interval
from .pfs import FileIo, PfsSnapshot

DRAIN_EVERY_S = 1.0  # the kernel maps are drained at least this often during the window


@dataclass
class Reading:
    """What the server said at one moment: per-file counts and the redo counter."""

    files: PfsSnapshot
    redo_written: int | None


@dataclass
class TracedFile:
    path: str
    kind: str
    deleted: bool = False
    io: FileIo = field(default_factory=FileIo)


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


def _add_interval(traced: dict[str, TracedFile], interval: Interval) -> int:
    for f in interval.files:
        row = traced.get(f.path)
        if row is None:
            row = traced[f.path] = TracedFile(f.path, f.kind)
        row.deleted = f.deleted
        row.io = row.io + FileIo(f.write_bytes, f.write_ops, f.read_bytes, f.read_ops)
    return int(interval.lost_events)


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
    traced: dict[str, TracedFile] = {}
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
    return Window((s0a, s0b), (s1a, s1b), traced, time.monotonic() - started, lost, intervals + 1)

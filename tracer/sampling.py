"""The interval loop of `top`, the exporter and `verify`: every interval, drain a session's
probe into an `Interval` (per-file counts, named and classified) and hand it to a sink.

Sinks: `top`'s stream (mysqlio.top.StreamSink) and screen (mysqlio.live.LiveScreen), the
exporter's state (mysqlio.exporter); `verify` calls the sampler itself.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import threading
import time
from typing import Any, Protocol

import numpy as np

from . import target
from .cache_hits import disk_reads_counted
from .devices import DeviceDeltas
from .early_drain import EarlyDrain
from .errors import TargetGone
from .fold import Memo, fold
from .model import Interval, aggregate
from .probe import lost_events
from .session import Session

# new objects (net of those freed) between two collections of the young ones, in run_loop:
# above what one interval makes. An interval's objects are freed by their counts when the
# next replaces them, so the count falls back; at 100,000 a collection came in every
# interval at 19,000 files and walked its ~100,000 live objects for nothing, ~110 ms of
# ~700 (tools/bench_phases.py; 317 objects in cycles in 8 intervals, JSON and screen)
GC_YOUNG = 1_000_000


class IntervalSampler:
    """Turns successive drains of a session's probe into Interval records."""

    def __init__(self, session: Session, fold_partitions: bool = False, fold_regions: bool = False) -> None:
        self._session = session
        self._fold_partitions = fold_partitions
        self.fold_regions = fold_regions  # ibdata1 as one row (a key of the live screen may flip it)
        self.pid = session.pid
        self._last_drops = session.probe.drops().as_dict()
        self._devices = DeviceDeltas(session.probe.device_counts())
        self._disk_reads = disk_reads_counted(session.probe)  # else no page-cache hit derived
        # a probe kept across a restart counts the new process from its re-targeting on
        retargeted = getattr(session.probe, "retargeted_at", None)
        self._last_time = retargeted if retargeted is not None else time.monotonic()
        self.early = EarlyDrain(session.probe)  # parts of an interval drained before its end
        self._memo = Memo()  # what fold keeps from one interval to the next
        self.status: Any = None  # a server_status.BackgroundSampler (--mysql)
        self.threads: Any = None  # a live_threads.LiveThreads (--mysql): user, connection, query of threads

    def sample(self) -> Interval:
        session, probe = self._session, self._session.probe
        rows = self.early.take()
        latencies = probe.drain_latency()
        session.new_interval()
        now = time.monotonic()
        drops = probe.drops().as_dict()
        delta = {k: drops[k] - self._last_drops.get(k, 0) for k in drops}
        self.early.learn(delta.get("stats_full", 0))
        named = (session.resolver, session.classifier, session.thread_name, self._fold_partitions)
        if isinstance(rows, np.ndarray):  # eBPF drains an array (folded with numpy), SystemTap OpCount rows
            files = fold(rows, *named, latencies, fold_regions=self.fold_regions, memo=self._memo)
        else:
            files = aggregate(rows, *named, latencies, fold_regions=self.fold_regions)
        # the next request walks the path again: renames stay visible
        probe.forget_names(list(dict.fromkeys(activity.file for activity in files)))
        if self.threads is not None:
            self.threads.label(files, self._last_time, now)
        interval = Interval(
            time=time.time(),
            interval_s=now - self._last_time,
            pid=self.pid,
            lost_events=lost_events(delta),
            drops=delta,
            files=files,
            devices=self._devices.take(probe.device_counts()),
            disk_reads=self._disk_reads,
        )
        self._last_drops = drops
        self._last_time = now
        if self.status is not None:
            interval.server = self.status.take()
        return interval


class StopFlag:
    """Set by SIGINT / SIGTERM / SIGHUP (terminal closed); the loop then prints
    what it has and detaches, and `with` blocks around it clean up.

    The handler only writes a byte to a pipe; a thread of its own reads it and sets the
    event. Setting a threading.Event from the handler itself can hang for good: Python runs
    handlers in the main thread between bytecodes, and when the signal lands while that
    thread is inside Event.wait holding the event's lock, Event.set blocks on that same lock.
    The likely cause of an exporter still running 600 s after SIGTERM in a Debian sid guest;
    a storm of signals shows the handler caught inside the lock (tests/test_stop_flag.py)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum = 0
        self._wake_fd = -1

    def install(self) -> None:
        read_fd, self._wake_fd = os.pipe()
        os.set_blocking(self._wake_fd, False)
        threading.Thread(target=self._relay, args=(read_fd,), name="mysqlio-stop", daemon=True).start()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self._handle)

    def requested(self) -> bool:
        """Whether a stop came: at once in the thread the handler ran in (the event follows
        when the relay thread has run), or the event set by other code."""
        return self.signum != 0 or self.event.is_set()

    def _handle(self, signum: int, _frame: object) -> None:
        self.signum = signum
        with contextlib.suppress(BlockingIOError):  # full: bytes already wait to be read
            os.write(self._wake_fd, b"\0")

    def _relay(self, read_fd: int) -> None:
        while os.read(read_fd, 64):  # a daemon thread: it ends with the process
            self.event.set()


class Sink(Protocol):
    """Where the interval loop puts each interval: a stream, the screen, the exporter."""

    quit: bool

    def emit(self, interval: Interval) -> None: ...

    def wait(self, timeout_s: float) -> None: ...


def run_loop(
    sampler: IntervalSampler,
    sink: Sink,
    stop: StopFlag,
    interval_s: float,
    count: int = 0,
    emitted: list[int] | None = None,
    watch_exit: bool = False,
) -> int:
    """Sample every interval_s into the sink until stopped, `count` intervals are out
    (0: no limit; emitted[0] counts across calls), or the process exits (TargetGone).
    A stop that comes while an interval is being sampled gets one more interval: what
    the process did after that drain began. watch_exit (--follow): the process's exit
    ends the interval within target.EXIT_CHECK_S (a shorter last one), so that its
    restart is looked for at once."""
    emitted = emitted if emitted is not None else [0]
    watch = target.ExitWatch(sampler.pid) if watch_exit else None
    # an interval at 20,000 files makes ~200,000 objects, none in a cycle: a collection
    # every 700 of them (the default) took a third of the fold's time (issue 60)
    gc.set_threshold(max(gc.get_threshold()[0], GC_YOUNG), *gc.get_threshold()[1:])
    sampler.early.start(interval_s)  # mid-interval drains, where the maps call for them
    try:
        deadline = time.monotonic()
        while True:
            deadline += interval_s
            while not stop.requested() and not sink.quit and time.monotonic() < deadline:
                if watch is None:
                    sink.wait(deadline - time.monotonic())
                    continue
                sink.wait(min(target.EXIT_CHECK_S, deadline - time.monotonic()))
                if watch.gone():
                    break
            stopping = stop.requested() or sink.quit
            alive = target.is_alive(sampler.pid)
            sink.emit(sampler.sample())
            emitted[0] += 1
            done = bool(count) and emitted[0] >= count
            if stop.requested() and not stopping and not done:
                sink.emit(sampler.sample())
                emitted[0] += 1
            if stop.requested() or sink.quit or done:
                return 0
            if not alive:
                raise TargetGone(f"process {sampler.pid} exited; stopped tracing")
    finally:
        sampler.early.close()
        if watch is not None:
            watch.close()

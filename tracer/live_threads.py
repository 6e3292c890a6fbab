"""The server's view of the traced threads in `top` (--mysql): a `ThreadSampler` in a
worker thread at `RATE_HZ`, its samples into a `Timeline`, each interval's thread rows
labelled with user, connection and query (thread_attribution's rules). Where the probe
gives each request its connection (eBPF), the connections the threads served when it
attached are named too (connections.StartConnections)."""

from __future__ import annotations

from typing import Any

from .connections import FRESH_S, StartConnections
from .model import FileActivity
from .server_status import PeriodicSampler
from .server_threads import ThreadSample
from .thread_attribution import Timeline
from .thread_sampler import ThreadSampler

RATE_HZ = 4.0  # samples a second: a statement running for 250 ms is seen while it runs
KEEP_S = 1.0  # statements and exited threads remembered before an interval's start


class LiveThreads:
    """Owns the worker; `label()` is called once per interval by the sampling loop."""

    def __init__(self, sampler: ThreadSampler, pid: int, rate_hz: float = RATE_HZ) -> None:
        self.timeline = Timeline()
        self._sampler = sampler
        self._told = False  # the timeline's warning was taken
        self._starts: StartConnections | None = None
        sampler.follow(pid)  # before its first sample
        self._worker: PeriodicSampler[ThreadSample] = PeriodicSampler(
            sampler, every_s=1.0 / rate_hz, name="mysqlio-threads"
        )

    def label(self, files: list[FileActivity], t0: float, t1: float) -> None:
        """Give each thread row of the interval [t0, t1] (time.monotonic) its view."""
        self.timeline.add_all(self._worker.collect(FRESH_S if self._starts is not None else 0.0))
        if self._starts is not None:
            self._starts.resolve(self.timeline.conns)
        for f in files:
            for thread in f.threads.values():
                thread.server = self.timeline.view(thread.tid, t0, t1, thread.conn)
        self.timeline.prune(t1 - KEEP_S)  # the next interval starts at t1: memory stays bounded

    def follow(self, pid: int, probe: Any = None) -> None:
        """The traced process is now `pid` (at start, and after a restart under --follow):
        its tids from now on; `probe` its probe, which may give each request its connection."""
        self._sampler.follow(pid)
        connections = bool(getattr(probe, "connections", False))
        self.timeline.connections = connections
        self._starts = StartConnections(probe, pid) if connections else None

    def take_warning(self) -> str | None:
        """The sampler's warning (--mysql reached another server), the first time only."""
        if self._told or self.timeline.warning is None:
            return None
        self._told = True
        return self.timeline.warning

    def close(self) -> None:
        self._worker.close()

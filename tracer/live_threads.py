"""The server's view of the traced threads in `top` (--mysql): a `ThreadSampler` in a
worker thread at `RATE_HZ`, its samples into a `Timeline`, each interval's thread rows
labelled with user, connection and query (thread_attribution's rules)."""

from __future__ import annotations

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
        sampler.follow(pid)  # before its first sample
        self._worker: PeriodicSampler[ThreadSample] = PeriodicSampler(
            sampler, every_s=1.0 / rate_hz, name="mysqlio-threads"
        )

    def label(self, files: list[FileActivity], t0: float, t1: float) -> None:
        """Give each thread row of the interval [t0, t1] (time.monotonic) its view."""
        self.timeline.add_all(self._worker.collect())
        for f in files:
            for thread in f.threads.values():
                thread.server = self.timeline.view(thread.tid, t0, t1)
        self.timeline.prune(t1 - KEEP_S)  # the next interval starts at t1: memory stays bounded

    def follow(self, pid: int) -> None:
        """The traced process is now `pid` (a restart under --follow): its tids from now on."""
        self._sampler.follow(pid)

    def take_warning(self) -> str | None:
        """The sampler's warning (--mysql reached another server), the first time only."""
        if self._told or self.timeline.warning is None:
            return None
        self._told = True
        return self.timeline.warning

    def close(self) -> None:
        self._worker.close()

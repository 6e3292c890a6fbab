"""`mysqlio top`: drain the probes every interval and print what each file did."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from mysqlio import target
from mysqlio.errors import TargetGone
from mysqlio.model import Interval, aggregate
from mysqlio.probe import IoProbe
from mysqlio.resolve import FileResolver


@dataclass
class TopOptions:
    pid: int
    interval_s: float = 1.0
    count: int = 0  # 0 = until interrupted or the process exits
    output: str = "text"  # "text" | "json"


class IntervalSampler:
    """Turns successive drains of the probe into Interval records."""

    def __init__(self, probe: IoProbe, resolver: FileResolver, pid: int) -> None:
        self._probe = probe
        self._resolver = resolver
        self._pid = pid
        self._last_drops = probe.drops().as_dict()
        self._last_time = time.monotonic()
        self._thread_names: dict[int, str] = {}

    def _thread_name(self, tid: int) -> str:
        name = self._thread_names.get(tid)
        if name is None:
            name = self._probe.thread_name(tid) or target.thread_name(self._pid, tid)
            self._thread_names[tid] = name
        return name

    def sample(self) -> Interval:
        rows = self._probe.drain()
        self._thread_names.clear()  # tids are reused and threads rename themselves
        now = time.monotonic()
        drops = self._probe.drops().as_dict()
        delta = {k: drops[k] - self._last_drops.get(k, 0) for k in drops}
        files = aggregate(rows, self._resolver, self._thread_name)
        for activity in files:
            # the next request walks the path again: renames stay visible
            self._probe.forget_name(activity.file)
        interval = Interval(
            time=time.time(),
            interval_s=now - self._last_time,
            pid=self._pid,
            lost_events=sum(delta.values()),
            drops=delta,
            files=files,
        )
        self._last_drops = drops
        self._last_time = now
        return interval


class _StopFlag:
    """Set by SIGINT / SIGTERM; the loop then prints what it has and detaches."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum = 0

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: object) -> None:
        self.signum = signum
        self.event.set()


def run_top(
    options: TopOptions, out: TextIO = sys.stdout, emit: Callable[[Interval, TextIO], None] | None = None
) -> int:
    from mysqlio.output import write_json, write_text

    emit = emit or (write_json if options.output == "json" else write_text)
    stop = _StopFlag()
    stop.install()
    with IoProbe(options.pid) as probe:
        resolver = FileResolver(options.pid, probe.kernel_name)
        resolver.scan_fds()
        sampler = IntervalSampler(probe, resolver, options.pid)
        print(
            f"mysqlio: tracing pid {options.pid} ({target.process_name(options.pid)}), Ctrl-C to stop", file=sys.stderr
        )
        emitted = 0
        deadline = time.monotonic()
        while True:
            deadline += options.interval_s
            stop.event.wait(max(0.0, deadline - time.monotonic()))
            alive = target.is_alive(options.pid)
            emit(sampler.sample(), out)
            emitted += 1
            if stop.event.is_set():
                return 0
            if options.count and emitted >= options.count:
                return 0
            if not alive:
                raise TargetGone(f"process {options.pid} exited; stopped tracing")

"""`mysqlio top`: drain the probes every interval and print what each file did."""

from __future__ import annotations

import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

from rich.console import Console

from . import mapped_files, target
from .bpf_types import lost_events
from .bursts.live import BurstTracker
from .classify import Classifier
from .errors import TargetGone
from .filters import Filters
from .follow import trace_following
from .layout import read_layout
from .live import LiveScreen, cbreak, render_totals
from .model import Interval, aggregate
from .output import write_json, write_text
from .probe import IoProbe
from .resolve import FileResolver
from .stap import open_probe
from .units import printable
from .view import ScreenState


@dataclass
class TopOptions:
    pid: int
    interval_s: float = 1.0
    count: int = 0  # 0 = until interrupted or the process exits
    output: str = "text"  # "text" | "json" | "live"
    group: str = "file"
    sort: str = "write"
    filters: Filters = field(default_factory=Filters)
    fold_partitions: bool = False
    latency: bool = False  # p50 / p99 / max latency columns
    follow: bool = False  # when the server exits, wait for it to restart and go on
    status: Any = None  # mysqlio.server_status.StatusSampler (--mysql), sampled each interval
    backend: str = "bpf"  # "bpf" | "stap", chosen by stap.select_backend()


class IntervalSampler:
    """Turns successive drains of the probe into Interval records."""

    def __init__(
        self, probe: IoProbe, resolver: FileResolver, classifier: Classifier, pid: int, fold_partitions: bool = False
    ) -> None:
        self._fold_partitions = fold_partitions
        self._probe = probe
        self._resolver = resolver
        self._classifier = classifier
        self._pid = pid
        self._last_drops = probe.drops().as_dict()
        self._last_time = time.monotonic()
        self._thread_names: dict[int, str] = {}
        self.status: Any = None  # a server_status.BackgroundSampler (--mysql)

    def _thread_name(self, tid: int) -> str:
        name = self._thread_names.get(tid)
        if name is None:
            name = self._probe.thread_name(tid) or target.thread_name(self._pid, tid)
            self._thread_names[tid] = name
        return name

    def sample(self) -> Interval:
        rows = self._probe.drain()
        latencies = self._probe.drain_latency()
        self._thread_names.clear()  # tids are reused and threads rename themselves
        now = time.monotonic()
        drops = self._probe.drops().as_dict()
        delta = {k: drops[k] - self._last_drops.get(k, 0) for k in drops}
        files = aggregate(rows, self._resolver, self._classifier, self._thread_name, self._fold_partitions, latencies)
        for activity in files:
            # the next request walks the path again: renames stay visible
            self._probe.forget_name(activity.file)
        interval = Interval(
            time=time.time(),
            interval_s=now - self._last_time,
            pid=self._pid,
            lost_events=lost_events(delta),
            drops=delta,
            files=files,
        )
        self._last_drops = drops
        self._last_time = now
        if self.status is not None:
            interval.server = self.status.take()
        return interval


class StopFlag:
    """Set by SIGINT / SIGTERM / SIGHUP (terminal closed); the loop then prints
    what it has and detaches, and `with` blocks around it clean up."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum = 0

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: object) -> None:
        self.signum = signum
        self.event.set()


class StreamSink:
    """Non-interactive output: one JSON line or one text block per interval."""

    def __init__(
        self, out: TextIO, output: str, filters: Filters, stop: threading.Event, latency: bool = False
    ) -> None:
        self._out = out
        self._latency = latency
        self._write = write_json if output == "json" else write_text
        self._filters = filters
        self._stop = stop
        self.quit = False
        self._json = output == "json"
        self._bursts = BurstTracker()
        self.notes: list[str] = []  # limits of what is counted (mysqlio.mapped_files), in each JSON line

    def emit(self, interval: Interval) -> None:
        interval.files = [f for f in interval.files if self._filters.keep(f)]
        trains = self._bursts.feed(interval)
        if self._json:
            write_json(interval, self._out, [t.to_json() for t in trains], self.notes)
            return
        write_text(interval, self._out, self._latency)
        if interval.server is not None:
            self._out.write(printable(interval.server.summary()) + "\n\n")
            self._out.flush()
        banner = self._bursts.banner()
        if banner:
            self._out.write(printable(banner) + "\n\n")
            self._out.flush()

    def wait(self, timeout_s: float) -> None:
        self._stop.wait(max(0.0, timeout_s))


class Sink(Protocol):
    """Where the interval loop puts each interval: a stream, the screen, the exporter."""

    quit: bool

    def emit(self, interval: Interval) -> None: ...

    def wait(self, timeout_s: float) -> None: ...


def run_top(options: TopOptions, out: TextIO = sys.stdout) -> int:
    stop = StopFlag()
    stop.install()
    sink = StreamSink(out, options.output, options.filters, stop.event, options.latency)
    state = ScreenState(options.group, options.sort, options.filters, options.latency)
    console = Console()
    datadir: list[str | None] = [None]
    emitted = [0]  # across restarts: -n counts the intervals of the whole session

    def trace_once(pid: int) -> int:
        with open_probe(options.backend, pid, stop=stop.event) as probe:
            resolver = FileResolver(pid, probe.kernel_name)
            resolver.scan_fds()
            layout = read_layout(pid)
            datadir[0] = layout.datadir
            sampler = IntervalSampler(probe, resolver, Classifier(layout), pid, options.fold_partitions)
            sampler.status = status
            name = target.process_name(pid)
            note = mapped_files.redo_note(mapped_files.mapped_redo(pid, layout))
            # what this backend cannot count on this kernel (e.g. io_uring on a kernel whose
            # tracepoints name no request)
            sink.notes = [n for n in (note, *getattr(probe, "uncounted", list)()) if n]
            if options.output != "live":
                print(f"mysqlio: tracing pid {pid} ({name}), Ctrl-C to stop", file=sys.stderr)
                for limit in sink.notes:
                    print(f"mysqlio: note: {limit}", file=sys.stderr)
                return run_loop(options, pid, sampler, sink, stop, emitted)
            server = f"{name} {layout.version}" if layout.version else name
            server += " (redo log memory-mapped: not counted)" if note else ""
            with cbreak(sys.stdin.fileno()), LiveScreen(state, pid, server, layout.datadir, console) as screen:
                return run_loop(options, pid, sampler, screen, stop, emitted)

    status = None
    if options.status is not None:
        from .server_status import BackgroundSampler

        # waits at most a quarter of the interval for the server's answer
        status = BackgroundSampler(options.status, wait_s=min(0.25, options.interval_s / 4))
    try:
        return trace_following(options.pid, options.follow, stop.event, trace_once)
    finally:
        if status is not None:
            status.close()
        if options.output == "live":
            console.print(render_totals(state, datadir[0]))


def run_loop(
    options: TopOptions,
    pid: int,
    sampler: IntervalSampler,
    sink: Sink,
    stop: StopFlag,
    emitted: list[int] | None = None,
) -> int:
    """Sample every interval into the sink until stopped, the count is reached
    (emitted[0] counts across calls), or the process exits (TargetGone)."""
    emitted = emitted if emitted is not None else [0]
    deadline = time.monotonic()
    while True:
        deadline += options.interval_s
        while not stop.event.is_set() and not sink.quit and time.monotonic() < deadline:
            sink.wait(deadline - time.monotonic())
        alive = target.is_alive(pid)
        sink.emit(sampler.sample())
        emitted[0] += 1
        if stop.event.is_set() or sink.quit:
            return 0
        if options.count and emitted[0] >= options.count:
            return 0
        if not alive:
            raise TargetGone(f"process {pid} exited; stopped tracing")

"""`mysqlio top`: drain the probes every interval and print what each file did."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from rich.console import Console

from . import mapped_files, target
from .bursts.live import BurstTracker
from .cache_hits import disk_reads_counted
from .container_identity import container_identity
from .filters import Filters
from .follow import trace_following
from .kept_probe import KeptProbe
from .live import LiveScreen, cbreak, render_totals
from .model import GROUPS, SERVER_GROUPS, Interval
from .output import format_groups, write_json, write_text, write_whole
from .sampling import IntervalSampler, StopFlag, run_loop
from .session import open_session, region_notes
from .units import printable
from .view import ScreenState
from .warmup import WarmupWatch
from .warmup_view import warmup_line


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
    fold_regions: bool = False  # ibdata1 as one row, not one per region
    fold_redo: bool = True  # the live screen's rows: MySQL's redo files as one row
    latency: bool = False  # p50 / p99 / max latency columns
    follow: bool = False  # when the server exits, wait for it to restart and go on
    status: Any = None  # mysqlio.server_status.StatusSampler (--mysql), sampled each interval
    threads: Any = None  # mysqlio.thread_sampler.ThreadSampler (--mysql): user, connection, query of threads
    backend: str = "bpf"  # "bpf" | "stap", chosen by backend.select_backend()


class StreamSink:
    """Non-interactive output: one JSON line or one text block per interval."""

    def __init__(
        self, out: TextIO, output: str, filters: Filters, stop: threading.Event, latency: bool = False
    ) -> None:
        self._out = out
        self._latency = latency
        self._filters = filters
        self._stop = stop
        self.quit = False
        self._json = output == "json"
        self._bursts = BurstTracker()
        self.notes: list[str] = []  # limits of what is counted (mysqlio.mapped_files), in each JSON line
        self.page_cache = False  # the probe counts the page cache: its columns and the devices in text
        self.group = "file"  # user, connection, query: a block of rows per group after the files
        self.threads: Any = None  # a live_threads.LiveThreads (--mysql): its warning, once
        self.container: dict[str, Any] | None = None  # the server's container, in each JSON line
        self.tables: dict[str, Any] | None = None  # the kernel tables' sizes (map_sizing), in each JSON line
        self.warmup = WarmupWatch()  # the warm-up after a restart (--follow)

    def emit(self, interval: Interval) -> None:
        interval.files = [f for f in interval.files if self._filters.keep(f)]
        warning = self.threads.take_warning() if self.threads is not None else None
        if warning:  # --mysql reached another server: one line, and in each JSON line's notes
            print(f"mysqlio: warning: {warning}", file=sys.stderr)
            self.notes.append(warning)
        trains = self._bursts.feed(interval)
        warmup = self.warmup.feed(interval.pid, interval.time, interval.interval_s, interval.files)
        if self._json:
            warm = warmup.to_json() if warmup is not None else None
            write_json(
                interval, self._out, [t.to_json() for t in trains], self.notes, self.container, self.tables, warm
            )
            return
        write_text(interval, self._out, self._latency, self.page_cache)
        if self.group in SERVER_GROUPS:
            write_whole(self._out, format_groups(interval, self.group) + "\n")
        if interval.server is not None:
            write_whole(self._out, printable(interval.server.summary()) + "\n\n")
        for line in (self._bursts.banner(), warmup_line(warmup)):
            if line:
                write_whole(self._out, printable(line) + "\n\n")

    def wait(self, timeout_s: float) -> None:
        self._stop.wait(max(0.0, timeout_s))


def page_cache_counted(probe: Any) -> bool:
    """The probe counts page-cache dirtying and writeback here (eBPF with its hooks, not
    --no-page-cache); SystemTap and kernels without the tracepoints do not. The same hooks
    count the disk reads (mysqlio.cache_hits)."""
    return disk_reads_counted(probe)


def run_top(options: TopOptions, out: TextIO = sys.stdout) -> int:
    stop = StopFlag()
    stop.install()
    sink = StreamSink(out, options.output, options.filters, stop.event, options.latency)
    state = ScreenState(options.group, options.sort, options.filters, options.latency, fold_redo=options.fold_redo)
    console = Console()
    datadir: list[str | None] = [None]
    page_cache = [False]  # the probe counts the page cache (dirtied, written back, devices)
    emitted = [0]  # across restarts: -n counts the intervals of the whole session
    # --follow: the probe stays loaded across a restart, re-targeted at the new process
    kept = KeptProbe() if options.follow else None

    def trace_once(pid: int) -> int:
        # latency off: requests are timed only once it is turned on (key l; kept
        # on across a restart), which spares the probes an enter program per
        # syscall (docs/benchmarks.md)
        with open_session(
            options.backend, pid, stop=stop.event, timed=state.latency, connections=threads is not None, kept=kept
        ) as session:
            datadir[0] = session.shown_datadir
            container = container_identity(pid)  # read again after a restart: a new container id
            sink.container = container.to_json() if container.in_container else None
            where = f" in {container.describe()}" if container.in_container else ""
            sampler = IntervalSampler(session, options.fold_partitions, options.fold_regions)
            sizes = getattr(session.probe, "map_sizes", None)  # eBPF only
            sink.tables = sizes.to_json() if sizes is not None else None
            sampler.status = status
            sampler.threads = threads
            if threads is not None:
                threads.follow(pid, session.probe)
            page_cache[0] = sink.page_cache = page_cache_counted(session.probe)
            note = mapped_files.redo_note(mapped_files.mapped_redo(pid, session.layout), page_cache[0])
            # what this backend cannot count on this kernel (e.g. io_uring on a kernel whose
            # tracepoints name no request)
            sink.notes = [n for n in (note, *session.probe.uncounted(), *region_notes(session)) if n]
            if options.output != "live":
                print(f"mysqlio: tracing pid {pid} ({session.process}{where}), Ctrl-C to stop", file=sys.stderr)
                for limit in sink.notes:
                    print(f"mysqlio: note: {limit}", file=sys.stderr)
                return run_loop(sampler, sink, stop, options.interval_s, options.count, emitted, options.follow)
            mapped = (
                " (redo log memory-mapped: page cache only)"
                if page_cache[0]
                else " (redo log memory-mapped: not counted)"
            )
            server = session.server() + where + (mapped if note else "")
            screen = LiveScreen(state, pid, server, session.shown_datadir, console, page_cache[0])
            screen.sampler = sampler
            screen.warmup = sink.warmup
            screen.probe = session.probe
            if threads is not None:
                screen.groups = GROUPS
            with cbreak(sys.stdin.fileno()), screen:
                return run_loop(sampler, screen, stop, options.interval_s, options.count, emitted, options.follow)

    sink.group = options.group
    threads = None
    if options.threads is not None:
        from .live_threads import LiveThreads

        threads = sink.threads = LiveThreads(options.threads, options.pid)
    status = None
    if options.status is not None:
        from .server_status import BackgroundSampler

        # waits at most a quarter of the interval for the server's answer
        status = BackgroundSampler(options.status, wait_s=min(0.25, options.interval_s / 4))

    def on_restart(_old_pid: int, new_pid: int) -> None:
        # the warm-up counts from the server's start, a little before it was found
        started = target.started_at(new_pid)
        sink.warmup.restarted(new_pid, started if started is not None else time.time())

    try:
        found = kept.retarget if kept is not None else None
        return trace_following(options.pid, options.follow, stop.event, trace_once, on_restart, found=found)
    finally:
        if kept is not None:
            kept.close()
        if status is not None:
            status.close()
        if threads is not None:
            threads.close()
        if options.output == "live":
            console.print(render_totals(state, datadir[0], page_cache[0]))
            warning = threads.take_warning() if threads is not None else None
            if warning:  # not said over the screen: after it
                print(f"mysqlio: warning: {warning}", file=sys.stderr)

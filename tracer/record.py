"""`mysqlio record`: stream one event per request into a trace file.

The probes write events to a ring buffer without waking us; the recorder copies all
committed events out in bulk every FLUSH_S, or sooner when the ring fills fast
(`poll_wait_s`), and every FLUSH_S it names
the new files and threads and appends one record batch to the trace, so a
kill -9 loses at most about a second. Each batch also carries what the block
devices did since the previous one (the probe's cumulative device counters as
deltas, `devices.DeviceDeltas`), when they did anything.
"""

from __future__ import annotations

import os
import platform
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import target
from .connections import FRESH_S, Connections, StartConnections
from .devices import DeviceDeltas
from .errors import TargetGone
from .follow import trace_following
from .kept_probe import KeptProbe
from .layout import read_layout
from .probe import EventReader, FileIdentity, lost_by_reason
from .root_paths import shown_path
from .sampling import StopFlag
from .session import KERNEL_THREAD, KERNEL_TID, Session, open_session, system_regions
from .trace import BatchKeys, FileInfo, TraceMeta, TraceWriter
from .units import human_bytes

FLUSH_S = 0.5
POLL_MIN_S = 0.05  # the shortest wait between two reads of the events (a ring filling fast)
# Read the ring often enough that, at the rate of the last read, it is at most this full at
# the next, and that it holds a wait's worth of SUDDEN_RATE (an idle server that starts a
# bulk load). The default 64 MiB ring is read every FLUSH_S up to 260k events/s; a small
# one (1 MiB, as in a test) every POLL_MIN_S. Reading every POLL_MIN_S whatever the rate was
# a quarter of record's own CPU on MariaDB 11.8 at 12k events/s (1.79 -> 1.28 % of a
# core; issue 19).
RING_FILL_AT_READ = 1 / 8
SUDDEN_RATE = 1_000_000  # events/s
PROGRESS_S = 1.0
# The probes' per-interval counts (top's) are drained unread, only so that they never
# fill: every COUNTS_DRAIN_S, not at each flush. Each drain swaps the map-in-map slots
# (an RCU grace period each: the stats table's, the hash maps', the latency maps') and reads every row back: a fifth of record's py-spy samples
# on MariaDB 11.8 when done every FLUSH_S, mostly that wait (its CPU: x 0.98; issue 19).
# Record makes a row only when a thread's file changes; MAX_FILE_OPS rows hold far more
# than 5 s of those.
COUNTS_DRAIN_S = 5.0
DEFAULT_RING_BYTES = 64 << 20  # 1M events of 64 bytes: ~1 s of headroom at 1M events/s


@dataclass
class RecordOptions:
    pid: int
    output: str
    duration_s: float = 0.0  # 0 = until Ctrl-C / SIGTERM or the process exits
    max_size: int = 0  # bytes of trace, 0 = unbounded
    quiet: bool = False
    ring_bytes: int = DEFAULT_RING_BYTES
    command: str = ""
    backend: str = "bpf"  # "bpf" | "stap", chosen by backend.select_backend()
    follow: bool = False  # when the server exits, wait for it to restart; the trace notes the gap
    status: Any = None  # mysqlio.server_status.StatusSampler (--mysql): samples stored in the trace
    threads: Any = None  # mysqlio.thread_sampler.ThreadSampler (--mysql): the threads' view, stored too


def parse_size(text: str) -> int:
    """'512M', '2G', '100k', '4096' -> bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(i?[bB])?\s*", text)
    if not match:
        raise ValueError(f"not a size: {text!r} (e.g. 500M, 2G)")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[match.group(2).lower()]
    return int(float(match.group(1)) * scale)


class _Names:
    """(kernel dev, ino) -> FileInfo (checked every batch) and tid -> thread name (looked up once)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self.files: dict[tuple[int, int], FileInfo] = {}
        self.threads: dict[int, str] = {}

    def learn(self, keys: BatchKeys) -> None:
        """The names of a batch's files: each asked of the resolver again in every batch,
        which checks them once an interval (a file renamed since, as MySQL recycles its
        redo files, is named anew: the trace holds each event's path as it was then)."""
        session = self._session
        batch = [
            (kdev, ino, FileIdentity.from_kernel(kdev, ino))
            for kdev, ino in zip(keys.u_dev.tolist(), keys.u_ino.tolist(), strict=True)
        ]
        # a file on overlayfs: its upper inode's events (page cache) under its overlay file's name
        joined = session.resolver.join_overlays(file for _, _, file in batch)
        for kdev, ino, file in batch:
            resolved = session.resolver.resolve(joined.get(file, file))
            known = self.files.get((kdev, ino))
            if known is not None and resolved.source == "unknown":
                continue  # no name now (closed, walked long ago): the one it had stays
            if known is None or (known.path, known.deleted) != (resolved.path, resolved.deleted):
                self.files[(kdev, ino)] = FileInfo(
                    path=session.resolver.shown(resolved.path),
                    kind=session.classifier.kind(resolved.path),
                    table=session.classifier.table(resolved.path),
                    deleted=resolved.deleted,
                )
        # the kernel's names of these files let go, as top does each interval: its table of
        # names is an LRU that files opened and closed 20,000 a second filled, and then it
        # evicted names before they were read (the 100k-file benchmark's unnamed files); the
        # file's next row walks its path again, so a rename is seen
        session.probe.forget_names([file for _, _, file in batch])
        for tid in keys.u_tid.tolist():
            if tid not in self.threads:
                # tid 0: page-cache writeback by the kernel itself (flusher, reclaim)
                self.threads[tid] = KERNEL_THREAD if tid == KERNEL_TID else session.thread_name(tid)


class _Devices:
    """The block devices' activity since the previous batch, one sample per batch."""

    def __init__(self, session: Session, start_mono_ns: int) -> None:
        self.probe = session.probe
        self._start_mono_ns = start_mono_ns
        # the probe's counters start at zero when it attaches, as its event stream does:
        # the first sample covers the recording from its first event on
        self._deltas = DeviceDeltas([])
        self._last_ns = time.monotonic_ns()

    def sample(self) -> dict[str, Any] | None:
        """{"t": seconds since the trace's start, "interval_s", "devices": [...]}, or None
        when no device did anything (or the backend has no device counters)."""
        devices = self._deltas.take(self.probe.device_counts())
        now = time.monotonic_ns()
        interval_s, self._last_ns = (now - self._last_ns) / 1e9, now
        if not devices:
            return None
        return {
            "t": round((now - self._start_mono_ns) / 1e9, 6),
            "interval_s": round(interval_s, 6),
            "devices": [d.to_json() for d in devices],
        }


class _Progress:
    def __init__(self, quiet: bool) -> None:
        self._quiet = quiet
        self._tty = sys.stderr.isatty()
        self._last = 0.0

    def show(self, elapsed: float, events: int, size: int, lost: int, final: bool = False) -> None:
        now = time.monotonic()
        if self._quiet or (not final and now - self._last < (PROGRESS_S if self._tty else 10 * PROGRESS_S)):
            return
        self._last = now
        line = f"mysqlio record: {elapsed:6.1f} s  {events:,} events  {human_bytes(size)}  lost {lost}"
        if self._tty:
            sys.stderr.write("\r" + line + ("\n" if final else ""))
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


@dataclass
class _Recording:
    """What a recording keeps across the processes it traces (--follow)."""

    options: RecordOptions
    writer: TraceWriter
    stop: StopFlag
    progress: _Progress
    started: float  # monotonic; -d counts from here, across restarts
    status: Any = None  # a server_status.PeriodicSampler (--mysql)
    threads: Any = None  # a server_status.PeriodicSampler of thread_sampler.ThreadSampler (--mysql)
    # events the kernel side could not deliver, by the counter that lost them
    lost_by: dict[str, int] = field(default_factory=dict)
    lost_base: dict[str, int] = field(default_factory=dict)  # of those, by processes traced before
    counts_due: float = 0.0  # monotonic time of the next drain of the unread counts
    full_at_drain: int = 0  # the probe's stats_full then: more since, drained at once
    # the connections learnt from the thread samples, and what names those the threads
    # served at the attach (eBPF with --mysql: connections.py); one per traced process
    conns: Connections = field(default_factory=Connections)
    starts: StartConnections | None = None
    # --follow: the probe kept loaded across a restart (mysqlio.kept_probe), and the
    # devices' counters read from it (cumulative since its attach: the deltas go on)
    kept: KeptProbe = field(default_factory=KeptProbe)
    devices: _Devices | None = None

    @property
    def lost_total(self) -> int:
        return sum(self.lost_by.values())

    def count_lost(self, drops: dict[str, int]) -> None:
        """The probe's drops now, on top of those of the processes traced before; a
        counter never goes back (stap's are read again when it stops)."""
        now = Counter(self.lost_base) + Counter(lost_by_reason(drops))
        self.lost_by = dict(Counter(self.lost_by) | now)  # the larger of each counter


def run_record(options: RecordOptions) -> int:
    layout = read_layout(options.pid)
    meta = TraceMeta(
        host=platform.node(),
        kernel=platform.release(),
        pid=options.pid,
        server_exe=_exe(options.pid),
        server_version=layout.version,
        datadir=shown_path(layout.datadir, layout.root) if layout.datadir else None,  # as its files are named
        start_wall=time.time(),
        start_mono_ns=time.monotonic_ns(),
        command=options.command,
        # ibdata1's regions, for report to split its events by offset
        regions=[
            {"dev": f.dev, "ino": f.ino, **m.to_json(), "path": shown_path(m.path, layout.root)}
            for f, m in system_regions(layout).items()
        ],
        # eBPF gives each event its thread's connection when the threads are sampled
        connections=options.threads is not None and options.backend == "bpf",
    )
    # the output is created before the probes load: an unwritable path fails first
    writer = TraceWriter(options.output, meta)
    stop = StopFlag()
    stop.install()
    recording = _Recording(options, writer, stop, _Progress(options.quiet), started=time.monotonic())
    if options.status is not None:
        from .server_status import PeriodicSampler

        recording.status = PeriodicSampler(options.status, every_s=1.0)
    if options.threads is not None:
        from .live_threads import RATE_HZ
        from .server_status import PeriodicSampler

        # the samples' times in the events' time base: seconds since the trace's start
        options.threads.clock = lambda: (time.monotonic_ns() - meta.start_mono_ns) / 1e9
        options.threads.follow(options.pid)  # the probes' tids (host_tids.py), before its first sample
        recording.threads = PeriodicSampler(options.threads, every_s=1.0 / RATE_HZ, name="mysqlio-threads")
    gone_at = [0.0]  # trace time the traced process was last seen

    def trace_once(pid: int) -> int:
        if options.threads is not None:
            options.threads.follow(pid)
        try:
            return _record_process(recording, pid)
        except TargetGone:
            gone_at[0] = (time.monotonic_ns() - meta.start_mono_ns) / 1e9
            if options.follow:
                print(f"mysqlio: process {pid} exited; the trace notes the gap", file=sys.stderr)
            raise

    found_at = [0.0]  # trace time a kept probe was re-targeted at the new process

    def found(new_pid: int) -> None:
        if recording.kept.probe is not None:
            recording.kept.retarget(new_pid)
            found_at[0] = (time.monotonic_ns() - meta.start_mono_ns) / 1e9

    def on_restart(old_pid: int, new_pid: int) -> None:
        # traced again from the re-targeting (a kept probe), else from now (the probe opened next)
        back_at = found_at[0] or (time.monotonic_ns() - meta.start_mono_ns) / 1e9
        found_at[0] = 0.0
        writer.note_gap(gone_at[0], back_at, old_pid, new_pid, recording.lost_total, recording.lost_by)
        if recording.kept.probe is None:  # a new probe counts its losses from 0 (a kept one goes on)
            recording.lost_base = dict(recording.lost_by)

    try:
        return trace_following(options.pid, options.follow, stop.event, trace_once, on_restart, found=found)
    finally:
        recording.kept.close()
        if recording.status is not None:
            recording.status.close()
        if recording.threads is not None:
            recording.threads.close()
        writer.close(lost_total=recording.lost_total, end_wall=time.time(), lost_by=recording.lost_by)


def _record_process(recording: _Recording, pid: int) -> int:
    """Record one process until done (0) or it exits (TargetGone)."""
    options = recording.options
    threads = options.threads
    kept = recording.kept if options.follow else None
    with open_session(
        options.backend, pid, recording.stop.event, options.ring_bytes, connections=threads is not None, kept=kept
    ) as session:
        recording.conns, recording.starts = Connections(), None
        if threads is not None and getattr(session.probe, "connections", False):
            threads.follow(pid)  # the sockets learnt again, now that the probes are attached
            start_ns = recording.writer.meta.start_mono_ns
            recording.starts = StartConnections(
                session.probe, pid, clock=threads.clock, ns_to_clock=lambda ns: (ns - start_ns) / 1e9
            )
        ring = session.probe.events_reader()
        if not options.quiet:
            print(
                f"mysqlio: recording pid {pid} ({session.process}) to {options.output}, Ctrl-C to stop",
                file=sys.stderr,
            )
        devices = recording.devices
        if devices is None or devices.probe is not session.probe:
            devices = recording.devices = _Devices(session, recording.writer.meta.start_mono_ns)
        try:
            return _loop(recording, session, ring, _Names(session), devices)
        finally:
            ring.close()
            # stap reports skipped probes and lost output lines only when it stops
            recording.count_lost(_event_drops(session.probe.drops().as_dict()))


def _event_drops(drops: dict[str, int]) -> dict[str, int]:
    """The probe's drops that lose events: all but stats_full (the per-interval counts,
    which record drains unread)."""
    return {**drops, "stats_full": 0}


def _loop(recording: _Recording, session: Session, ring: EventReader, names: _Names, devices: _Devices) -> int:
    # --follow: the process's exit seen within EXIT_CHECK_S (a pidfd), so its restart is
    # looked for at once
    watch = target.ExitWatch(session.pid) if recording.options.follow else None
    try:
        return _poll_events(recording, session, ring, names, devices, watch)
    finally:
        if watch is not None:
            watch.close()


def _wait(stop: StopFlag, watch: target.ExitWatch | None, wait_s: float) -> bool:
    """Wait wait_s, or until a stop or the watched process's exit; whether it exited."""
    if watch is None:
        stop.event.wait(wait_s)
        return False
    until = time.monotonic() + wait_s
    while not watch.gone():
        left = until - time.monotonic()
        if left <= 0 or stop.event.wait(min(target.EXIT_CHECK_S, left)):
            return watch.gone()
    return True


def _poll_events(
    recording: _Recording,
    session: Session,
    ring: EventReader,
    names: _Names,
    devices: _Devices,
    watch: target.ExitWatch | None,
) -> int:
    options, writer = recording.options, recording.writer
    start = recording.started
    pending: list[np.ndarray] = []
    last_flush = last_read = time.monotonic()
    wait_s = POLL_MIN_S
    while True:
        exited = _wait(recording.stop, watch, wait_s)
        events = ring.read()
        pending.append(events)
        now = time.monotonic()
        last_read, wait_s = now, poll_wait_s(len(events), now - last_read, ring.capacity)
        # whether the process lives (a /proc read) is asked at each flush, not at
        # each poll: it was a tenth of record's own CPU at 25k events/s (issue 19)
        flush_due = now - last_flush >= FLUSH_S
        done_reason = _done(options, session.pid, start, now, writer, recording.stop, flush_due or exited)
        if flush_due or done_reason:
            _flush(recording, session, pending, names, devices, final=bool(done_reason))
            pending = []
            last_flush = now
            # the size limit is checked again at once: the next read may be FLUSH_S away
            done_reason = done_reason or _done(options, session.pid, start, now, writer, recording.stop, False)
            recording.progress.show(
                now - start, writer.events_written, writer.bytes_written, recording.lost_total, bool(done_reason)
            )
        if done_reason == "gone":
            raise TargetGone(f"process {session.pid} exited; trace {options.output} is complete")
        if done_reason:
            return 0
        # a read at each flush, and at the end of --duration
        wait_s = min(wait_s, max(0.0, last_flush + FLUSH_S - now))
        if options.duration_s:
            wait_s = min(wait_s, max(0.0, start + options.duration_s - now))


def poll_wait_s(events_read: int, waited_s: float, capacity: int | None) -> float:
    """How long to wait before the next read of the events: FLUSH_S, or less when at the
    rate of this read (`events_read` in `waited_s`) the reader would be more than
    RING_FILL_AT_READ full by then, or full at SUDDEN_RATE; never less than POLL_MIN_S,
    which is also the wait when its capacity is not known."""
    if capacity is None:
        return POLL_MIN_S
    wait = capacity / SUDDEN_RATE
    if events_read:
        wait = min(wait, RING_FILL_AT_READ * capacity * max(waited_s, 1e-3) / events_read)
    return min(FLUSH_S, max(POLL_MIN_S, wait))


def _done(
    options: RecordOptions,
    pid: int,
    start: float,
    now: float,
    writer: TraceWriter,
    stop: StopFlag,
    check_alive: bool = True,
) -> str:
    if stop.requested():
        return "signal"
    if options.duration_s and now - start >= options.duration_s:
        return "duration"
    if options.max_size and writer.bytes_written >= options.max_size:
        return "size"
    if check_alive and not target.is_alive(pid):
        return "gone"
    return ""


def _flush(
    recording: _Recording,
    session: Session,
    pending: list[np.ndarray],
    names: _Names,
    devices: _Devices,
    final: bool = False,
) -> None:
    """Write what the ring held (and the server and device samples taken meanwhile) as one
    batch; the final one with a thread sample begun after the last events (their
    connections are learnt, connections.FRESH_S)."""
    events = np.concatenate(pending)
    now = time.monotonic()
    drops = session.probe.drops().as_dict()
    # a request the counts had no row for loses nothing here (record reads its events; the
    # probe names its file and thread without a row), but costs those lookups: a full
    # table is drained at once
    full = drops.get("stats_full", 0)
    if now >= recording.counts_due or full > recording.full_at_drain:
        recording.counts_due = now + COUNTS_DRAIN_S
        recording.full_at_drain = full
        # (the latency histograms stay empty in record mode: drain_latency only ages
        # out AIO requests that never completed)
        session.probe.drain()
        session.probe.drain_latency()
    session.new_interval()  # _Names keeps what the trace needs; the session's caches stay small
    keys = BatchKeys.of(events)  # once: the names learnt and the writer's columns share them
    names.learn(keys)
    recording.count_lost(_event_drops(drops))
    server = [s.to_json() for s in recording.status.collect()] if recording.status is not None else []
    device_sample = devices.sample()
    fresh_s = FRESH_S if final and recording.starts is not None else 0.0
    samples = recording.threads.collect(fresh_s) if recording.threads is not None else []
    for warning in (s.warning for s in samples if s.warning):  # one sample at most says it
        print(f"mysqlio: warning: {warning}", file=sys.stderr)
    if recording.starts is not None and samples:
        for sample in samples:
            recording.conns.add(sample)
        # stored with the last sample: report gives those threads' events of conn 0 to them
        samples[-1].seeded = sorted(recording.starts.resolve(recording.conns).items())
    threads = [s.to_json() for s in samples]
    if len(events) or server or device_sample or threads:
        recording.writer.write(
            events,
            names.files,
            names.threads,
            recording.lost_total,
            server,
            device_sample,
            threads,
            keys,
            lost_by=recording.lost_by,
        )


def _exe(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None

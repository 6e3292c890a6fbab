"""`mysqlio exporter`: the probes' counts as Prometheus metrics on /metrics.

The sampling engine of `top` (mysqlio.session, mysqlio.sampling: the same probe,
sampler and interval loop) feeds an `ExporterState` every interval; a custom
collector turns a consistent view of it into metric families when Prometheus
scrapes. Counters are cumulative since the
exporter started and survive restarts of the server (the totals go on; with eBPF the
probe stays loaded and is re-targeted at the new process: mysqlio.kept_probe).

Label cardinality is bounded: per kind always (a fixed set of kinds); per file
only for the --top-files files with most bytes (read + written; dirtied, for a file
without write requests) lately. The per-file totals of at most `max_files` files are
kept (least recently active evicted first), so a file that leaves the top N and comes
back continues its counters instead of restarting them; only an evicted file restarts
from 0, which Prometheus treats as a counter reset.

With the page cache counted (eBPF with its hooks), bytes dirtied and written back
(by cause: fsync, the kernel's flusher, msync ...) are counted per kind and per file,
and each block device's completed bytes and requests, with whose bytes they were
(`owner`: the server's files, its direct I/O, the filesystem, other); "device" is
the device's own count.
Reads: bytes read from the device for the files (their page cache's reads, the readahead's
part, O_DIRECT reads), per kind and per file, and the page cache's hits (mysqlio.cache_hits,
derived per file and interval, then summed).

Every sample carries the labels `namespace`, `pod`, `container` (the traced server's
Kubernetes names, else its docker / podman name as `container`; "" on the host), as
`exporter --all` gives them; a containerised server's files are named as the server
names them (never /proc/PID/root/...).
"""

from __future__ import annotations

import argparse
import heapq
import math
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from wsgiref.simple_server import WSGIServer

import numpy as np
from prometheus_client import start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry

from . import target
from .bursts.live import BurstTracker
from .bursts.train import SYNC_CALLS, Train
from .container_identity import container_identity
from .devices import OWNER_NAMES, DeviceActivity
from .errors import TargetGone, UserError
from .follow import trace_following
from .kept_probe import KeptProbe
from .kinds import KINDS
from .latency import SUB, Histogram
from .model import WRITEBACK_CAUSES, Counts, Interval
from .sampling import IntervalSampler, StopFlag, run_loop
from .session import choose_target, open_session
from .units import printable

CONTAINER_LABELS = ("namespace", "pod", "container")  # on every sample (exporter_fleet.LABELS too)
RANK_TIME_CONSTANT_S = 60.0  # "lately": bytes decay with this time constant when ranking files
MIN_TRACKED_FILES = 4096  # per-file totals kept at least for this many files (4 x --top-files if more)

# (metric suffix, Counts field, help) of the byte and request counters, per kind and per file
_COUNTERS = (
    ("write_bytes", "write_bytes", "Bytes written (write, pwrite, writev, libaio, io_uring ...)"),
    ("write_ops", "write_ops", "Write requests"),
    ("read_bytes", "read_bytes", "Bytes read"),
    ("read_ops", "read_ops", "Read requests"),
    ("errors", "errors", "Requests that failed"),
    ("dirtied_bytes", "dirtied_bytes", "Page-cache bytes that went clean -> dirty (writes, stores into a mapping)"),
    ("disk_read_bytes", "disk_read_bytes", "Bytes read from the device for the files (readahead, O_DIRECT included)"),
    ("readahead_bytes", "readahead_bytes", "Bytes the kernel's readahead read from the device"),
    ("direct_read_bytes", "direct_read_bytes", "Bytes O_DIRECT reads read from the device (also in read_bytes)"),
)
# bytes of buffered reads the page cache gave, summed over intervals (mysqlio.cache_hits; hit
# ratio: rate(cache_hit_bytes) / (rate(read_bytes) - rate(direct_read_bytes)))
_HIT_HELP = "Bytes of buffered reads the page cache gave (read - read from the device, per file and interval)"
_WRITEBACK_HELP = "Page-cache bytes the kernel wrote to the device, by cause (fsync, flusher_periodic, msync ...)"


@dataclass
class _FileSeries:
    """One file's totals since the exporter started, and how busy it was lately."""

    kind: str
    counts: Counts = field(default_factory=Counts)
    cache_hit_bytes: int = 0  # per interval derived, then summed: a counter never goes down
    score: float = 0.0  # bytes, decayed with RANK_TIME_CONSTANT_S
    scored_at: float = 0.0

    def score_at(self, now: float) -> float:
        return self.score * math.exp(-max(0.0, now - self.scored_at) / RANK_TIME_CONSTANT_S)


@dataclass
class _Target:
    pid: int
    process: str = "?"
    datadir: str = ""
    server_version: str = ""
    up: bool = False
    restarts: int = 0
    unseen_s: float = 0.0  # from the process's start until it was counted


class ExporterState:
    """Cumulative counts fed one Interval at a time; read by the collector from
    the HTTP server's threads, hence the lock."""

    def __init__(self, top_files: int, interval_s: float, backend: str, follow: bool, pid: int) -> None:
        self.top_files = top_files
        self.max_files = max(MIN_TRACKED_FILES, 4 * top_files)
        self.interval_s = interval_s
        self.backend = backend
        self.hits_counted = backend != "stap"  # the latest interval's disk_reads (add)
        self.follow = follow
        self.target = _Target(pid)
        # the traced server's Kubernetes names (CONTAINER_LABELS), read at each attach
        self.container_labels: dict[str, str] = dict.fromkeys(CONTAINER_LABELS, "")
        self._lock = threading.Lock()
        self._kinds: dict[str, Counts] = {kind: Counts() for kind in KINDS}
        self._kind_hits: dict[str, int] = dict.fromkeys(KINDS, 0)
        # (path, kind, region): region "" but for ibdata1's regions (model.FileActivity.region)
        self._files: OrderedDict[tuple[str, str, str], _FileSeries] = OrderedDict()  # least recently active first
        self._exported: list[tuple[str, str, str]] = []
        self._lost_events = 0
        self._drops: dict[str, int] = {}
        self._last_sample = 0.0
        self._bursts = BurstTracker()
        self._trains: list[Train] = []
        self._latency: dict[tuple[str, str], Histogram] = {}  # (kind, op class) -> since start
        self._devices: dict[str, DeviceActivity] = {}  # by device name, since start

    # ---- fed by the sampling loop

    def add(self, interval: Interval) -> None:
        trains = self._bursts.feed(interval)  # outside the lock: the tracker is ours alone
        with self._lock:
            now = interval.time
            # where the disk reads are not counted (SystemTap, --no-page-cache, a kernel
            # without the hooks) a hit cannot be told from a disk read: no hit series
            self.hits_counted = interval.disk_reads
            for activity in interval.files:
                kind_totals = self._kinds.get(activity.kind)
                if kind_totals is None:  # (not setdefault: its default is made for every file)
                    kind_totals = self._kinds[activity.kind] = Counts()
                kind_totals.merge(activity)
                hits = activity.cache_hit_bytes if interval.disk_reads else 0
                self._kind_hits[activity.kind] = self._kind_hits.get(activity.kind, 0) + hits
                key = (printable(activity.path), activity.kind, activity.region)
                series = self._files.get(key)
                if series is None:
                    series = self._files[key] = _FileSeries(activity.kind)
                else:
                    self._files.move_to_end(key)
                series.counts.merge(activity)
                series.cache_hit_bytes += hits
                for cls, hist in activity.latency.items():
                    total = self._latency.get((activity.kind, cls))
                    if total is None:
                        total = self._latency[(activity.kind, cls)] = Histogram()
                    total.merge(hist)
                series.score = series.score_at(now) + _bytes(activity)
                series.scored_at = now
            while len(self._files) > self.max_files:
                self._files.popitem(last=False)
            self._exported = [
                key for key, _ in heapq.nsmallest(self.top_files, self._files.items(), key=lambda kv: _rank(kv, now))
            ]
            for device in interval.devices:
                total_device = self._devices.get(device.name)
                if total_device is None:
                    total_device = self._devices[device.name] = DeviceActivity(dev=device.dev, name=device.name)
                total_device.merge(device)
            self._lost_events += interval.lost_events
            for reason, count in interval.drops.items():
                self._drops[reason] = self._drops.get(reason, 0) + count
            self._trains = trains[: self.top_files]
            self._last_sample = now

    def attached(
        self, pid: int, process: str, datadir: str | None, server_version: str | None, unseen_s: float = 0.0
    ) -> None:
        c = container_identity(pid)  # a restarted container: a new id, the same names
        with self._lock:
            self.container_labels = c.labels()
            self.target.pid, self.target.process, self.target.datadir = pid, process, datadir or ""
            self.target.server_version = server_version or ""
            self.target.unseen_s = unseen_s
            self.target.up = True

    def detached(self) -> None:
        """The target exited: its trains end; bursts start over with the next process."""
        with self._lock:
            self.target.up = False
            self._trains = []
        self._bursts = BurstTracker()

    def restarted(self) -> None:
        with self._lock:
            self.target.restarts += 1

    # ---- read by the collector

    def families(self) -> list[Metric]:
        with self._lock:
            return [
                *self._kind_families(),
                *self._file_families(),
                *self._device_families(),
                *self._other_families(),
                *_latency_families(self._latency),
            ]

    def _kind_families(self) -> Iterator[Metric]:
        for suffix, attr, text in _COUNTERS:
            family = CounterMetricFamily(f"mysqlio_{suffix}_total", f"{text}, by file kind", labels=["kind"])
            for kind, counts in self._kinds.items():
                family.add_metric([kind], getattr(counts, attr))
            yield family
        if self.hits_counted:
            hits = CounterMetricFamily("mysqlio_cache_hit_bytes_total", f"{_HIT_HELP}, by file kind", labels=["kind"])
            for kind, n in self._kind_hits.items():
                hits.add_metric([kind], n)
            yield hits
        syncs = CounterMetricFamily(
            "mysqlio_sync_ops_total", "Sync requests, by file kind and system call", labels=["kind", "call"]
        )
        for kind, counts in self._kinds.items():
            for call in SYNC_CALLS:
                syncs.add_metric([kind, call], getattr(counts, f"{call}_ops"))
        yield syncs
        wback = CounterMetricFamily(
            "mysqlio_writeback_bytes_total", f"{_WRITEBACK_HELP}, by file kind", labels=["kind", "by"]
        )
        for kind, counts in self._kinds.items():
            for cause in WRITEBACK_CAUSES:
                wback.add_metric([kind, cause], counts.writeback_by.get(cause, 0))
        yield wback

    def _file_families(self) -> Iterator[Metric]:
        exported = [(key, self._files[key].counts) for key in self._exported]
        for suffix, attr, text in _COUNTERS:
            family = CounterMetricFamily(
                f"mysqlio_file_{suffix}_total",
                f"{text}, for the files with most bytes lately (--top-files)",
                labels=["path", "kind", "region"],
            )
            for (path, kind, region), counts in exported:
                family.add_metric([path, kind, region], getattr(counts, attr))
            yield family
        if self.hits_counted:
            hits = CounterMetricFamily(
                "mysqlio_file_cache_hit_bytes_total",
                f"{_HIT_HELP}, for the files with most bytes lately (--top-files)",
                labels=["path", "kind", "region"],
            )
            for key in self._exported:
                hits.add_metric(list(key), self._files[key].cache_hit_bytes)
            yield hits
        syncs = CounterMetricFamily(
            "mysqlio_file_sync_ops_total",
            "Sync requests by system call, for the files with most bytes lately (--top-files)",
            labels=["path", "kind", "region", "call"],
        )
        for (path, kind, region), counts in exported:
            for call in SYNC_CALLS:
                syncs.add_metric([path, kind, region, call], getattr(counts, f"{call}_ops"))
        yield syncs
        wback = CounterMetricFamily(
            "mysqlio_file_writeback_bytes_total",
            f"{_WRITEBACK_HELP}, for the files with most bytes lately (--top-files); the causes seen",
            labels=["path", "kind", "region", "by"],
        )
        for (path, kind, region), counts in exported:
            for cause in WRITEBACK_CAUSES:
                if cause in counts.writeback_by:
                    wback.add_metric([path, kind, region, cause], counts.writeback_by[cause])
        yield wback
        yield from _train_families(self._trains)

    def _device_families(self) -> Iterator[Metric]:
        nbytes = CounterMetricFamily(
            "mysqlio_device_bytes_total",
            "Block device bytes: owner=device, what the device completed; else whose bios they were "
            "(server_files, server_direct, filesystem, other)",
            labels=["device", "direction", "owner"],
        )
        requests = CounterMetricFamily(
            "mysqlio_device_requests_total", "Requests the block device completed", labels=["device", "direction"]
        )
        for name, d in sorted(self._devices.items()):
            device = printable(name)
            for direction, total, count, by in (
                ("write", d.write_bytes, d.write_requests, d.write_by),
                ("read", d.read_bytes, d.read_requests, d.read_by),
            ):
                nbytes.add_metric([device, direction, "device"], total)
                for owner in OWNER_NAMES.values():
                    nbytes.add_metric([device, direction, owner], by.get(owner, 0))
                requests.add_metric([device, direction], count)
        yield nbytes
        yield requests

    def _other_families(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            "mysqlio_lost_events_total",
            "Requests whose bytes could not be counted (kernel map full, too many in flight ...)",
            value=self._lost_events,
        )
        drops = CounterMetricFamily(
            "mysqlio_drops_total",
            "What the probe could not account, by reason (lost events and latency-only losses)",
            labels=["reason"],
        )
        for reason, count in sorted(self._drops.items()):
            drops.add_metric([reason], count)
        yield drops
        t = self.target
        yield GaugeMetricFamily("mysqlio_target_pid", "Process id of the traced server", value=t.pid)
        yield GaugeMetricFamily(
            "mysqlio_target_up", "1 while the server is traced, 0 while waiting for it to restart", value=int(t.up)
        )
        yield CounterMetricFamily(
            "mysqlio_target_restarts_total", "Restarts of the server followed (a new process traced)", value=t.restarts
        )
        yield GaugeMetricFamily(
            "mysqlio_target_unseen_seconds",
            "Seconds from the traced process's start until its I/O was counted (what it did before is not "
            "in the counters); after a restart followed with eBPF, well under a second",
            value=round(t.unseen_s, 3),
        )
        info = GaugeMetricFamily(
            "mysqlio_target_info",
            "The traced server; follow=1: a restarted server (same name and datadir) is traced again",
            labels=["process", "datadir", "server_version", "follow", "backend"],
        )
        info.add_metric([t.process, printable(t.datadir), t.server_version, str(int(self.follow)), self.backend], 1)
        yield info
        yield GaugeMetricFamily(
            "mysqlio_last_sample_timestamp_seconds",
            "Unix time of the last read of the probe (0: none yet)",
            value=self._last_sample,
        )
        yield GaugeMetricFamily(
            "mysqlio_sample_interval_seconds", "Seconds between reads of the probe (-i)", value=self.interval_s
        )
        yield GaugeMetricFamily(
            "mysqlio_tracked_files",
            "Files whose totals are kept (at most max(4096, 4 x --top-files))",
            value=len(self._files),
        )


def _bytes(c: Counts) -> int:
    """A file's bytes for ranking: read and written; for a file without write requests, the
    bytes its pages were dirtied instead (a file the server only maps, e.g. a redo log). Not
    written back: that comes later, and from anyone's sync(2), even after the file is gone."""
    return (c.write_bytes if c.write_ops else c.dirtied_bytes) + c.read_bytes


def _rank(item: tuple[tuple[str, str, str], _FileSeries], now: float) -> tuple[float, int, int, tuple[str, str, str]]:
    """Busiest first: bytes lately, then bytes in all, then syncs (a sync-only file has no bytes)."""
    key, series = item
    c = series.counts
    return (-series.score_at(now), -_bytes(c), -c.sync_ops, key)


def _train_families(trains: Iterable[Train]) -> Iterator[Metric]:
    labels = ["path", "kind", "metric"]
    period = GaugeMetricFamily(
        "mysqlio_burst_train_period_seconds", "Period of a file's repeating bursts (active trains only)", labels=labels
    )
    size = GaugeMetricFamily(
        "mysqlio_burst_train_bytes_per_burst",
        "Median bytes a burst writes above the file's baseline (0 for sync trains)",
        labels=labels,
    )
    ops = GaugeMetricFamily(
        "mysqlio_burst_train_ops_per_burst",
        "Write requests (write trains) or syncs (sync trains) per burst",
        labels=labels,
    )
    confidence = GaugeMetricFamily(
        "mysqlio_burst_train_confidence", "How sure the detector is of the train, 0..1 (a heuristic)", labels=labels
    )
    for t in trains:
        values = [printable(t.file), t.kind, t.metric]
        period.add_metric(values, t.period_s)
        size.add_metric(values, t.bytes_per_burst)
        ops.add_metric(values, t.ops_per_burst)
        confidence.add_metric(values, t.confidence)
    yield from (period, size, ops, confidence)


# `le` bounds of the latency histograms: powers of two of nanoseconds from 16 µs to
# ~17 s. They are bucket edges of mysqlio.latency's log-linear scheme, so each
# cumulative count is exact, not interpolated.
LATENCY_LE_EXPONENTS = range(14, 35)


def _latency_families(latency: dict[tuple[str, str], Histogram]) -> Iterator[Metric]:
    """`mysqlio_request_duration_seconds{kind,op}`: cumulative histograms of the
    latency of the requests completed, per file kind and op class (write, sync, read)."""
    family = HistogramMetricFamily(
        "mysqlio_request_duration_seconds",
        "Latency of completed requests (syscall entry to exit; libaio and io_uring submit to completion)",
        labels=["kind", "op"],
    )
    for (kind, cls), hist in sorted(latency.items()):
        cumulative = np.cumsum(hist.counts)
        buckets = [(f"{2.0**e / 1e9:.9g}", float(cumulative[1 + SUB * e - 1])) for e in LATENCY_LE_EXPONENTS]
        buckets.append(("+Inf", float(cumulative[-1])))
        family.add_metric([kind, cls], buckets, sum_value=hist.sum_ns / 1e9)
    yield family


class IoCollector:
    """prometheus_client collector over an ExporterState (registered on a private registry)."""

    def __init__(self, state: ExporterState) -> None:
        self._state = state

    def collect(self) -> Iterable[Metric]:
        labels = self._state.container_labels
        for family in self._state.families():
            family.samples = [s._replace(labels={**s.labels, **labels}) for s in family.samples]
            yield family


class _StateSink:
    """What the interval loop writes to: the exporter's state instead of a screen."""

    quit = False

    def __init__(self, state: ExporterState, stop: threading.Event) -> None:
        self._state = state
        self._stop = stop

    def emit(self, interval: Interval) -> None:
        self._state.add(interval)

    def wait(self, timeout_s: float) -> None:
        self._stop.wait(max(0.0, timeout_s))


def serve_metrics(listen: tuple[str, int], registry: CollectorRegistry) -> tuple[WSGIServer, str]:
    host, port = listen
    shown = f"[{host}]" if ":" in host else host
    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise UserError(f"cannot listen on {shown}:{port}: {exc.strerror or exc}") from None
    return server, f"http://{shown}:{server.server_port}/metrics"


def trace_into(
    pid: int, args: argparse.Namespace, state: ExporterState, stop: StopFlag, url: str, kept: KeptProbe | None = None
) -> int:
    """Feed the state from one process until stopped (0) or the process exits (TargetGone).
    kept (following restarts): the probe kept from the process traced before, and this
    one's kept when it exits; its exit is then seen within target.EXIT_CHECK_S."""
    with open_session(args.backend, pid, stop=stop.event, kept=kept) as session:
        layout = session.layout
        state.attached(pid, session.process, session.shown_datadir, layout.version, _unseen_s(session.probe, pid))
        print(f"mysqlio: exporting pid {pid} ({session.process}) on {url}", file=sys.stderr, flush=True)
        sink = _StateSink(state, stop.event)
        return run_loop(IntervalSampler(session), sink, stop, args.interval, watch_exit=kept is not None)


def _unseen_s(probe: object, pid: int) -> float:
    """Seconds from the process's start until the probe counted it: until a kept probe was
    re-targeted at it (found), else until now (the probe has just been attached)."""
    started = target.started_at(pid)
    if started is None:
        return 0.0
    retargeted = getattr(probe, "retargeted_at", None)  # monotonic; eBPF only
    counted = time.time() - (time.monotonic() - retargeted if retargeted is not None else 0.0)
    return max(0.0, counted - started)


def trace_server(
    pid: int,
    args: argparse.Namespace,
    state: ExporterState,
    stop: StopFlag,
    url: str,
    follow: bool,
    taken: Callable[[], set[int]] | None = None,
) -> int:
    """Feed the state from the server until stopped; with `follow`, across its restarts
    (never onto one of `taken`'s pids), its eBPF probe kept loaded and re-targeted at the
    new process as soon as it is found, so its start-up I/O is counted (mysqlio.kept_probe:
    a probe opened anew takes 1-2 s)."""
    kept = KeptProbe() if follow else None

    def trace_once(traced: int) -> int:
        try:
            return trace_into(traced, args, state, stop, url, kept)
        except TargetGone:
            state.detached()
            raise

    try:
        return trace_following(
            pid,
            follow,
            stop.event,
            trace_once,
            lambda _old, _new: state.restarted(),
            taken=taken,
            found=kept.retarget if kept is not None else None,
        )
    finally:
        if kept is not None:
            kept.close()


def run_exporter(args: argparse.Namespace) -> int:
    pid, args.backend = choose_target(args.pid, args.backend, mode=args.command)
    state = ExporterState(args.top_files, args.interval, args.backend, args.follow, pid)
    registry = CollectorRegistry(auto_describe=False)  # ours alone: no process / platform collectors
    registry.register(IoCollector(state))
    server, url = serve_metrics(args.listen, registry)
    stop = StopFlag()
    stop.install()
    try:
        return trace_server(pid, args, state, stop, url, args.follow)
    finally:
        server.shutdown()
        server.server_close()

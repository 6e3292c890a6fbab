"""`mysqlio exporter --all`: one exporter for every mysqld / mariadbd on the host.

Each server gets the single-server exporter's own pieces: an `ExporterState` fed by a
session of its own (one probe per server: the probe filters on one thread group), run
in a thread by `exporter.trace_server`, so a server that restarts is traced again (its
eBPF probe kept loaded and re-targeted: mysqlio.kept_probe) and its counters go on.
`scan` looks for servers every SCAN_S seconds and starts a tracer for each server
identity (name + datadir + container, `follow.ServerIdentity`) it has not seen; a server
that starts after the exporter is picked up at the next scan.

Series are told apart by the labels `server` (the datadir as the server names it, else
"pid N") and `namespace`, `pod`, `container` (its Kubernetes names, else its docker /
podman name as `container`; "" on the host),
added to every sample at scrape time; the pid is not a label of the counters (a restart
would restart every series) but the value of `mysqlio_target_pid{server}`. Two servers
still alike in all of these (same datadir, no container names: two `unshare --mount`
sandboxes) are told apart by their mount namespace, in `server`, with a warning.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Iterable

import psutil
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry

from .errors import TargetGone, UserError
from .exporter import CONTAINER_LABELS, ExporterState, serve_metrics, trace_server
from .follow import ServerIdentity, identity_of
from .sampling import StopFlag
from .session import choose_target
from .target import SERVER_NAMES

SCAN_S = 2.0  # how often the process table is scanned for servers not yet traced
DATADIR_GRACE_S = 10.0  # a server names its datadir (chdir) once started; until then wait


LABELS = ("server", *CONTAINER_LABELS)  # added to every sample of a server
_Key = tuple[str, str | tuple[str, ...], tuple[str, ...], int]


def server_label(identity: ServerIdentity, pid: int) -> str:
    return identity.datadir or f"pid {pid}"


class _Traced:
    """One server of the fleet: its identity, counters and tracing thread."""

    def __init__(self, identity: ServerIdentity, label: str, state: ExporterState) -> None:
        self.identity = identity
        self.label = label
        c = identity.container
        self.labels = {"server": label, **c.labels()}
        self.state = state
        self.thread: threading.Thread | None = None

    def tracing(self) -> int | None:
        """The pid traced now, while the thread runs and that process is up."""
        if self.thread is None or not self.thread.is_alive() or not self.state.target.up:
            return None
        return self.state.target.pid


class Fleet:
    """The servers traced, by identity; read by the collector, grown by the scanner."""

    def __init__(self, args: argparse.Namespace, stop: StopFlag, url: str) -> None:
        self._args = args
        self._stop = stop
        self._url = url
        self._lock = threading.Lock()
        # by identity; the last member is the mount namespace of a server that collided
        # with one traced already (0 for all others)
        self._servers: dict[_Key, _Traced] = {}

    def servers(self) -> list[_Traced]:
        with self._lock:
            return sorted(self._servers.values(), key=lambda s: tuple(s.labels.values()))

    def traced_pids(self) -> set[int]:
        return {s.state.target.pid for s in self.servers() if s.thread is not None and s.thread.is_alive()}

    def add(self, pid: int, identity: ServerIdentity) -> None:
        key: _Key = (identity.name, identity.datadir or identity.cmdline, identity.place, 0)
        label = server_label(identity, pid)
        with self._lock:
            known = self._servers.get(key)
            if known is not None:
                tracing = known.tracing()
                if tracing is None or tracing == pid or not _alive(tracing):
                    return  # its thread follows it across restarts (or it failed: not retried)
                if any(k[:3] == key[:3] and s.tracing() is None for k, s in self._servers.items()):
                    return  # one of them is waiting for its restart: this may be it
                # a second live server of the same identity: another mount namespace
                mnt = identity.container.mnt_ns
                key, label = (*key[:3], mnt), f"{label} (mnt:[{mnt}])"
                if key in self._servers:
                    return
                print(
                    f"mysqlio: warning: pid {pid} and pid {tracing} are both {identity.describe()}; "
                    f"pid {pid}'s series are labelled server={label!r}",
                    file=sys.stderr,
                    flush=True,
                )
            state = ExporterState(self._args.top_files, self._args.interval, self._args.backend, True, pid)
            traced = self._servers[key] = _Traced(identity, label, state)
        traced.thread = threading.Thread(
            target=self._run, args=(traced, pid), name=f"mysqlio-exporter-{pid}", daemon=True
        )
        traced.thread.start()

    def _run(self, traced: _Traced, pid: int) -> None:
        state = traced.state
        try:
            # its probe kept across the server's restarts (exporter.trace_server)
            trace_server(
                pid, self._args, state, self._stop, self._url, True, lambda: self.traced_pids() - {state.target.pid}
            )
        except (UserError, TargetGone, OSError) as exc:
            # one server that cannot be traced (its probe refused, gone before attach)
            # does not stop the others: said once, and its target_up stays 0
            state.detached()
            print(f"mysqlio: {traced.label}: {exc}", file=sys.stderr, flush=True)


def scan(fleet: Fleet) -> int:
    """Start tracing the servers not traced yet; the number of servers found running."""
    traced = fleet.traced_pids()
    found = 0
    for proc in psutil.process_iter(["name", "create_time"]):
        if proc.info["name"] not in SERVER_NAMES:
            continue
        found += 1
        if proc.pid in traced:
            continue
        identity = identity_of(proc.pid)
        if identity is None:
            continue
        age = max(0.0, time.time() - (proc.info["create_time"] or 0.0))
        if identity.datadir is None and age < DATADIR_GRACE_S:
            continue  # not chdir()ed to its datadir yet: its identity is not final
        fleet.add(proc.pid, identity)
    return found


class FleetCollector:
    """The states' families, merged by name, each sample labelled with its server."""

    def __init__(self, fleet: Fleet) -> None:
        self._fleet = fleet

    def collect(self) -> Iterable[Metric]:
        merged: dict[str, Metric] = {}
        servers = self._fleet.servers()
        for traced in servers:
            for family in traced.state.families():
                out = merged.get(family.name)
                if out is None:
                    out = merged[family.name] = Metric(family.name, family.documentation, family.type)
                for sample in family.samples:
                    out.samples.append(sample._replace(labels={**sample.labels, **traced.labels}))
        yield from merged.values()
        yield GaugeMetricFamily(
            "mysqlio_servers", "Servers (mysqld / mariadbd) this exporter knows of", value=len(servers)
        )


def run_fleet(args: argparse.Namespace) -> int:
    """Serve /metrics for every server on the host until stopped."""
    if not args.follow:
        raise UserError("--no-follow is for -p PID: --all traces every server again when it restarts")
    _pid, args.backend = choose_target(_any_server_or_self(), args.backend, mode=args.command)
    registry = CollectorRegistry(auto_describe=False)
    stop = StopFlag()
    stop.install()
    server, url = serve_metrics(args.listen, registry)
    fleet = Fleet(args, stop, url)
    registry.register(FleetCollector(fleet))
    print(f"mysqlio: exporting every mysqld / mariadbd of this host on {url}", file=sys.stderr, flush=True)
    try:
        if not scan(fleet):
            print("mysqlio: no mysqld or mariadbd running yet; waiting for one", file=sys.stderr, flush=True)
        while not stop.event.wait(SCAN_S):
            scan(fleet)
        return 0
    finally:
        server.shutdown()
        server.server_close()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _any_server_or_self() -> int:
    """A pid to check the backend with before any server runs: a server, else ourselves."""
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] in SERVER_NAMES:
            return proc.pid
    return psutil.Process().pid

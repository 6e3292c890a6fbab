"""One traced process, as every live command sees it: the probe of the chosen backend, the
server's layout and the kinds of its files, and the names of its files and threads.

`top`, `record`, the exporter and `verify` each open a `Session` (`open_session`) and read
the probe through it: mysqlio.sampling turns it into intervals, mysqlio.record into events.
Names are looked up again each interval (`new_interval`): inode numbers and thread ids are
reused, files are renamed, threads rename themselves; the names of closed files kept for
requests the kernel did not name again stay two intervals' worth (mysqlio.resolve).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

from . import backend, target
from .classify import Classifier
from .ibdata_regions import RegionMap, read_regions, separate_doublewrite
from .kept_probe import KeptProbe
from .layout import ServerLayout, read_layout
from .probe import FileIdentity, NameSource, Probe
from .resolve import FileResolver


def choose_target(
    pid: int | None, requested_backend: str, stap_module: str | None = None, mode: str = "top"
) -> tuple[int, str]:
    """The thread group to trace (`pid`, else the single running server), checked, and the
    backend to trace it with ("bpf" or "stap", checked usable; see backend.select_backend)."""
    pid = pid if pid is not None else target.find_server()
    target.check_pid(pid)
    chosen = backend.select_backend(requested_backend, stap_module, mode)
    target.check_readable(pid)  # after the backend's checks: without root, "needs root" comes first
    return target.tgid_of(pid), chosen


class ThreadNames:
    """tid -> name: the name the probe saw when the thread last made a request, else its
    current one in /proc; each looked up once until `forget`."""

    def __init__(self, probe: NameSource, pid: int) -> None:
        self._probe = probe
        self._pid = pid
        self._names: dict[int, str] = {}

    def __call__(self, tid: int) -> str:
        if tid == KERNEL_TID:
            return KERNEL_THREAD
        name = self._names.get(tid)
        if name is None:
            name = self._names[tid] = self._probe.thread_name(tid) or target.thread_name(self._pid, tid)
        return name

    def forget(self) -> None:
        self._names.clear()


# page-cache writeback the kernel did on its own (flusher, reclaim) is given to no thread
# of the server: tid 0 in the probe's rows
KERNEL_TID = 0
KERNEL_THREAD = "[kernel]"


class Session:
    """A probe attached to one process, with what names and classifies its files and threads."""

    def __init__(self, probe: Probe, pid: int, layout: ServerLayout | None = None, server_names: bool = True) -> None:
        self.probe = probe
        self.pid = pid
        self.layout = layout if layout is not None else read_layout(pid)
        self.classifier = Classifier(self.layout)
        # server_names: files shown by the server's own names, never /proc/PID/root/...
        self.resolver = FileResolver(pid, probe.kernel_name, server_names)
        datadir = self.layout.datadir
        self.shown_datadir = self.resolver.shown(datadir) if datadir else None  # as the files are shown
        self.resolver.scan_fds()
        # files the server has open or mapped: their pages written back are its own
        probe.add_server_files(self.resolver.open_files())
        self.thread_name = ThreadNames(probe, pid)
        self.process = target.process_name(pid)
        # the system tablespace's first file, split by region (read from its own pages)
        self.regions = system_regions(self.layout)
        self.regions_split = probe.set_regions(self.regions) if self.regions else False

    def new_interval(self) -> None:
        """Names of closed files and of threads are looked up again from now on: a renamed
        file, a reused inode or tid gets its own name, and the names kept stay few."""
        self.resolver.new_interval()
        self.thread_name.forget()

    def server(self) -> str:
        """The process and its server version, e.g. "mariadbd 11.4.2"."""
        return f"{self.process} {self.layout.version}" if self.layout.version else self.process


def system_regions(layout: ServerLayout) -> dict[FileIdentity, RegionMap]:
    """The regions of the InnoDB system tablespace's first file (the one that holds its
    fixed pages and the doublewrite buffer), by file identity; {} when it is not found."""
    name = layout.data_files[0] if layout.data_files else "ibdata1"  # innodb_data_file_path's default
    home = layout.data_home_dir or layout.datadir
    path = name if os.path.isabs(name) else os.path.join(home, name) if home else None
    if path is None:
        return {}
    try:
        st = os.stat(path)
    except OSError:
        return {}
    regions = read_regions(path, assume_doublewrite=not separate_doublewrite(layout.version))
    # a file of that name that is no InnoDB tablespace (or cannot be read) stays whole
    return {FileIdentity(st.st_dev, st.st_ino): regions} if regions.fsp_header else {}


def region_notes(session: Session) -> list[str]:
    """What top says about the regions of ibdata1: where a position was assumed."""
    return [
        f"{os.path.basename(m.path)}: {m.assumed}"
        for m in session.regions.values()
        if m.assumed and session.regions_split
    ]


@contextlib.contextmanager
def open_session(
    backend_name: str,
    pid: int,
    stop: threading.Event | None = None,
    record_ring_bytes: int = 0,
    layout: ServerLayout | None = None,
    timed: bool = True,
    connections: bool = False,
    server_names: bool = True,
    kept: KeptProbe | None = None,
) -> Iterator[Session]:
    """Attach the backend's probe (record_ring_bytes > 0: with record's event stream) to the
    process; detached when the block ends. `stop` set meanwhile abandons a slow start.
    timed: requests timed from the start (latency; else from probe.start_timing()).
    connections: rows and events keyed by the connection each thread served (--mysql, eBPF).
    server_names: a containerised server's files named as it names them (False: as paths here).
    kept (--follow): the probe kept from the process traced before, re-targeted at this one,
    and this one's kept when it exits (mysqlio.kept_probe)."""
    if kept is not None:
        with kept.open(backend_name, pid, record_ring_bytes, stop, timed, connections) as probe:
            yield Session(probe, pid, layout, server_names)
        return
    with backend.open_probe(
        backend_name, pid, record_ring_bytes, stop=stop, timed=timed, connections=connections
    ) as probe:
        yield Session(probe, pid, layout, server_names)

"""What a data source gives the commands, whatever the backend: the rows of an interval and
the `Probe` protocol that `top`, `record`, the exporter and `verify` call.

Two backends implement `Probe` today, each in a module of its own: `bpf_probe.BpfProbe`
(the eBPF programs) and `stap_probe.StapProbe` (the SystemTap scripts); `backend` is the
only module that knows both (it chooses one and opens it).

The protocol is split by capability, so that a further source need implement only what it
has:
- `CountSource`: per-interval rows (`OpCount` counters, `LatencyRow` histograms), what
  could not be counted (`Drops`, cumulative) and what this kernel keeps from being counted
  (`uncounted()`, notes shown by top);
- `NameSource`: the kernel's name of a file and of a thread, seen when the request was made;
- `Probe`: both, plus the per-request event stream of `record` (`events_reader()`) and its
  lifetime (close, context manager).
The page cache (pages dirtied, written back and why) comes as rows of the same shape, keyed
by `FileIdentity`, with op codes of their own (`Op.DIRTY`, `Op.WRITEBACK` with its cause
`By`), so the model, views, sinks and trace files take them as they are. Block devices are
a `DeviceSource`: cumulative counters per (device, direction, owner), which the sampler
turns into per-interval deltas.

Devices: the kernel's dev_t is major << 20 | minor (the eBPF maps, the scripts, trace
events); userspace's st_dev (stat(), /proc, FileIdentity) is glibc's encoding. The
conversions are here, and only here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .abi import Api, By, Dir, Op, Owner, Region
from .ibdata_regions import RegionMap
from .latency import Histogram

KERNEL_MINOR_BITS = 20


def dev_from_kernel(kdev: int) -> int:
    """The st_dev of a kernel dev_t (major << 20 | minor)."""
    return os.makedev(kdev >> KERNEL_MINOR_BITS, kdev & ((1 << KERNEL_MINOR_BITS) - 1))


def dev_to_kernel(dev: int) -> int:
    """The kernel dev_t (major << 20 | minor) of an st_dev."""
    return (os.major(dev) << KERNEL_MINOR_BITS) | os.minor(dev)


def dev_label(dev: int) -> str:
    """An st_dev as people write it: "major:minor"."""
    return f"{os.major(dev)}:{os.minor(dev)}"


@dataclass(frozen=True)
class FileIdentity:
    """A file as the kernel knows it: device (userspace st_dev encoding) and inode."""

    dev: int
    ino: int

    @classmethod
    def from_kernel(cls, kdev: int, ino: int) -> FileIdentity:
        return cls(dev_from_kernel(kdev), ino)

    @property
    def kernel_dev(self) -> int:
        return dev_to_kernel(self.dev)


@dataclass(frozen=True)
class OpCount:
    """What one (file, thread, op, api) row held for an interval."""

    file: FileIdentity
    tid: int
    op: Op
    api: Api
    bytes: int
    ops: int
    errors: int
    by: By = By.NONE  # Op.WRITEBACK: what made the kernel write
    region: Region = Region.NONE  # a region file's reads and writes: the region of their first byte
    # the connection the thread served (--mysql, eBPF): the inode of the socket it last read
    # (probes/connection.bpf.h); 0: none seen since the probes attached, or not tracked
    conn: int = 0


@dataclass(frozen=True)
class DeviceCount:
    """Cumulative counters of one block device (a disk: st_dev encoding), one
    direction and one owner: Owner.DEVICE is what the device completed (bytes,
    requests), the others split the bios queued to it (bytes, bios)."""

    dev: int
    dir: Dir
    owner: Owner
    bytes: int
    count: int


@dataclass(frozen=True)
class LatencyRow:
    """Latencies of one (file, op, api) over an interval."""

    file: FileIdentity
    op: Op
    api: Api
    hist: Histogram


@dataclass(frozen=True)
class KernelName:
    """A file's path as walked from its dentry in the kernel."""

    path: str
    complete: bool
    deleted: bool


class Drops:
    """Cumulative counts of what a probe could not account, by name (the eBPF
    probe's kernel and userspace counters; SystemTap has its own)."""

    def __init__(self, counts: dict[str, int]) -> None:
        self._counts = dict(counts)

    def as_dict(self) -> dict[str, int]:
        return dict(self._counts)


# Counters that lose a request's latency but not its bytes: not "lost events".
LATENCY_ONLY_DROPS = frozenset({"lat_full", "lat_unmatched", "aged_out"})
# Counters of the block devices' split by owner (a device's row that did not fit): every
# request and page-cache byte of the server is still counted. Shown apart, not "lost events".
DEVICE_ONLY_DROPS = frozenset({"dev_full"})
# A thread whose connection did not fit the probes' map: its requests are counted, their
# connection is unknown (shown as such). Not "lost events".
CONNECTION_ONLY_DROPS = frozenset({"conn_full"})


def lost_by_reason(drops: dict[str, int]) -> dict[str, int]:
    """The counters of a drops dict that lose a request's bytes or event, those not zero."""
    return {
        k: v for k, v in drops.items() if v and k not in LATENCY_ONLY_DROPS | DEVICE_ONLY_DROPS | CONNECTION_ONLY_DROPS
    }


def lost_events(drops: dict[str, int]) -> int:
    """Requests (or page-cache bytes) whose bytes or event were lost, from a drops dict."""
    return sum(lost_by_reason(drops).values())


class EventReader(Protocol):
    """record's stream of requests: each read() returns those that arrived since the last."""

    # events it holds between two reads before it drops some; None: not known (read it often)
    capacity: int | None

    def read(self) -> np.ndarray:
        """EVENT_DTYPE records, on CLOCK_MONOTONIC."""
        ...

    def close(self) -> None: ...


class CountSource(Protocol):
    """Counters and latencies, interval by interval."""

    def drain(self) -> list[OpCount]:
        """Everything counted since the previous drain."""
        ...

    def drain_latency(self) -> list[LatencyRow]:
        """Latency histograms of the requests completed since the previous call."""
        ...

    def start_timing(self) -> None:
        """Time requests from now on, for drain_latency (a probe opened untimed)."""
        ...

    def drops(self) -> Drops: ...

    def uncounted(self) -> list[str]:
        """What this kernel keeps the source from counting, one sentence each."""
        ...

    def set_regions(self, files: dict[FileIdentity, RegionMap]) -> bool:
        """Split these files' reads and writes by region from now on (replacing the
        previous set; at most abi.MAX_REGION_FILES); False: this source cannot."""
        ...


class DeviceSource(Protocol):
    """Block devices as they saw the I/O (a source without them returns [])."""

    def device_counts(self) -> list[DeviceCount]:
        """Cumulative since the source opened."""
        ...

    def add_server_files(self, files: list[FileIdentity]) -> None:
        """Files of the server (open or mapped) whose writeback is the server's, though
        no request of it was seen yet."""
        ...


class NameSource(Protocol):
    """Names the kernel saw when the traced process made its requests."""

    def kernel_name(self, file: FileIdentity) -> KernelName | None: ...

    def thread_name(self, tid: int) -> str | None:
        """None: not known here (the caller reads /proc/PID/task/TID/comm)."""
        ...

    def forget_names(self, files: Iterable[FileIdentity]) -> None:
        """Let the kernel walk the files' paths again at their next request."""
        ...


class Probe(CountSource, DeviceSource, NameSource, Protocol):
    """A syscall backend attached to one process (opened by `backend.open_probe`)."""

    def events_reader(self) -> EventReader:
        """record mode: the per-request events."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Probe: ...

    def __exit__(self, *exc: object) -> None: ...

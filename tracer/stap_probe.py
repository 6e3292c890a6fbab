"""The SystemTap backend: the eBPF probes' counts and events from stap/*.stp, for
kernels where eBPF is missing or too old (RHEL / CentOS 7) but SystemTap works.

`StapProbe` is a `probe.Probe`: `drain()` (rows of one interval), `drops()`,
`kernel_name()`, `thread_name()`, `forget_names()`, and for record `events_reader()`
(itself: `read()` -> EVENT_DTYPE array, `close()`). Its records come from a
`StapProcess` (staprun running a script's module on the live system) or, for
tests and offline analysis of a capture, from the lines of one (`replay_probe`).

The module is compiled by stap_compile (or built elsewhere: stap_modules) and loaded for
one pid by staprun. Each interval is requested by writing to the module's procfs file
`flush`; the script answers with the interval's rows and a mark (see stap_protocol).
File names come from the script at each open (walked from the dentry to the
root of its filesystem; the mount point is found in /proc/PID/mountinfo) and,
for files opened before tracing, from /proc/PID/fd through `FileResolver`.
"""

from __future__ import annotations

import contextlib
import os
import queue
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from . import stap_protocol as proto
from .abi import Api, Op
from .errors import StapError, UserError
from .events import EVENT_DTYPE
from .ibdata_regions import RegionMap
from .mountinfo import MountTable
from .probe import DeviceCount, Drops, FileIdentity, KernelName, LatencyRow, OpCount
from .stap_compile import MODES, compile_module
from .stap_process import RecordSource, ReplaySource, StapProcess, staprun_command

LOAD_TIMEOUT_S = 120.0  # staprun: load the module, register the probes
ANSWER_TIMEOUT_S = 30.0  # from a flush request to its mark
ANSWER_RETRY_S = 3.0  # no mark yet: ask again (a flush stap skipped prints nothing)
MOUNTS_REFRESH_S = 1.0
DROP_KEYS = proto.DROP_FIELDS  # the marks' counters; stap's own two also come from its exit message


class StapProbe:
    """A `probe.Probe` over the records of a SystemTap script."""

    capacity: int | None = None  # record reads the script's output every POLL_MIN_S

    def __init__(
        self,
        source: RecordSource,
        pid: int,
        mode: str,
        mounts: MountTable | None = None,
        clock_offset_ns: int | None = None,
        startup_timeout_s: float = LOAD_TIMEOUT_S,
    ) -> None:
        """mounts None: read /proc/PID/mountinfo (live). clock_offset_ns: CLOCK_REALTIME
        minus CLOCK_MONOTONIC, to put the scripts' times on the trace's clock (None: now)."""
        self._regions_asked = False
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        self.pid = pid
        self.mode = mode
        self._source = source
        self._live_mounts = mounts is None
        self._mounts = MountTable.of_process(pid) if mounts is None else mounts
        self._mounts_read = time.monotonic()
        self._offset = time.time_ns() - time.monotonic_ns() if clock_offset_ns is None else clock_offset_ns
        self._names: dict[tuple[int, int], proto.Name] = {}
        self._rows: list[proto.Row] = []
        self._events: list[proto.Event] = []
        self._drops = dict.fromkeys(DROP_KEYS, 0)
        self._last_mark = 0
        self.ended = False
        first = source.get(startup_timeout_s)
        if not isinstance(first, proto.Hello):
            raise StapError(f"the SystemTap script did not start as expected (first record {first!r})")
        if first.version != proto.PROTOCOL_VERSION or first.mode != mode:
            raise StapError(
                f"the SystemTap script speaks protocol {first.version} for {first.mode}, "
                f"mysqlio expects {proto.PROTOCOL_VERSION} for {mode}: scripts and mysqlio differ"
            )
        self.hello = first
        self.uses_io_uring = False  # the process uses io_uring (told once)
        self.io_uring_calls = 0  # io_uring_setup / io_uring_enter calls the script counted

    @classmethod
    def start(
        cls,
        pid: int,
        mode: str,
        quiet: bool = False,
        stop: threading.Event | None = None,
        module: Path | None = None,
    ) -> StapProbe:
        """Load a script's module for one process: `module` (built by stap-build), else the
        script compiled here (first run on a kernel only). `stop` set meanwhile (a signal)
        abandons the start."""
        if module is None:
            module = compile_module(mode, stop, quiet)
        process = StapProcess(staprun_command(module, pid, mode), stop, mode)
        try:
            probe = cls(process, pid, mode, startup_timeout_s=LOAD_TIMEOUT_S)
        except queue.Empty:
            process.close()
            if stop is not None and stop.is_set():
                raise UserError("interrupted while SystemTap was starting") from None
            raise process.failure(f"the SystemTap module did not start within {LOAD_TIMEOUT_S:.0f} s") from None
        except BaseException:
            process.close()
            raise
        procfs = os.environ.get("MYSQLIO_STAP_PROCFS", "/proc/systemtap")  # tests point it elsewhere
        process.procfs_dir = f"{procfs}/{probe.hello.module}"
        probe.check_io_uring(always_tell=True)
        return probe

    def check_io_uring(self, always_tell: bool = False) -> bool:
        """Tell once, on stderr, that the process uses io_uring, whose requests the scripts cannot
        see: an io_uring instance among its fds at start, or io_uring calls the script counted
        (told later only when stderr is not the terminal of top's screen)."""
        if self.uses_io_uring:
            return True
        rings = 0
        if always_tell and isinstance(self._source, StapProcess):
            rings = io_uring_instances(self.pid)
        if not rings and not self.io_uring_calls:
            return False
        self.uses_io_uring = True
        if always_tell or not sys.stderr.isatty():
            seen = (
                f"holds {rings} io_uring instance{'s' if rings > 1 else ''}"
                if rings
                else f"made {self.io_uring_calls} io_uring call{'s' if self.io_uring_calls > 1 else ''}"
            )
            print(
                f"mysqlio: pid {self.pid} {seen}: the SystemTap backend does not see io_uring requests, "
                "which are missing from these counts (the eBPF backend traces them)",
                file=sys.stderr,
            )
        return True

    # -- reading --

    def _take(self, record: proto.Record) -> None:
        if isinstance(record, proto.Name):
            self._names[(record.dev, record.ino)] = record
        elif isinstance(record, proto.Row):
            self._rows.append(record)
        elif isinstance(record, proto.Event):
            self._events.append(record)
        elif isinstance(record, proto.Mark):
            self._last_mark = record.seq
            self._drops.update(record.drops)
            self.io_uring_calls = record.io_uring_calls
        else:
            raise StapError(f"unexpected record {record!r} from the SystemTap script")

    def _pump(self, until_mark: bool, timeout_s: float, after: int = 0) -> None:
        """Take records: up to a mark newer than `after`, or (until_mark False) those already
        there. Without a mark for ANSWER_RETRY_S the flush is asked for again: a flush stap
        skipped answers nothing, and one that was only slow answers twice (the second mark then
        ends the next interval early: late, not lost)."""
        deadline = time.monotonic() + timeout_s
        retry = time.monotonic() + ANSWER_RETRY_S
        while not self.ended:
            try:
                if not until_mark:
                    record = self._source.get(0)
                elif self._last_mark > after:
                    return
                elif time.monotonic() >= deadline:
                    raise StapError(f"the SystemTap module did not answer within {timeout_s:.0f} s")
                else:
                    if time.monotonic() >= retry:
                        self._source.request_mark(again=True)
                        retry = time.monotonic() + ANSWER_RETRY_S
                    record = self._source.get(max(0.0, min(deadline, retry) - time.monotonic()))
            except queue.Empty:
                if not until_mark:
                    return
                continue
            if record is None:
                self.ended = True
                self._collect_exit_counts()
                return
            self._take(record)

    def _collect_exit_counts(self) -> None:
        """stap's exit message: its counters at the very end (the marks have them up to the last one)."""
        if isinstance(self._source, StapProcess):
            for key, value in (
                ("skipped_probes", self._source.skipped_probes),
                ("transport_failures", self._source.transport_failures),
            ):
                self._drops[key] = max(self._drops[key], value)

    def drain(self) -> list[OpCount]:
        """Everything counted since the previous drain (top); record: the loss counters only."""
        after = self._last_mark
        if not self.ended:
            self._source.request_mark()
        self._pump(until_mark=True, timeout_s=ANSWER_TIMEOUT_S, after=after)
        self.check_io_uring()
        rows, self._rows = self._rows, []
        return [_op_count(r) for r in rows]

    def drain_latency(self) -> list[LatencyRow]:
        """The scripts keep no latency histograms (record events carry latency)."""
        return []

    def start_timing(self) -> None:
        """The scripts always time requests."""

    def drops(self) -> Drops:
        return Drops(self._drops)

    def read(self) -> np.ndarray:
        """record: the events that arrived since the last read, as EVENT_DTYPE records."""
        self._pump(until_mark=False, timeout_s=0)
        events, self._events = self._events, []
        return events_array(events, self._offset)

    def events_reader(self) -> StapProbe:
        """record: the probe itself is the event stream (read(), close())."""
        return self

    def uncounted(self) -> list[str]:
        """io_uring, which the scripts cannot see, is told on stderr when the process uses it."""
        out = [
            "page cache, writeback, disk reads (O_DIRECT ones too), page-cache hits, devices and msync are counted"
            " by the eBPF backend only, not SystemTap"
        ]
        if self._regions_asked:
            out.append("ibdata1 regions (doublewrite, system, ...) are split by the eBPF backend only, not SystemTap")
        return out

    def set_regions(self, files: dict[FileIdentity, RegionMap]) -> bool:
        """The scripts do not split files by region: said by uncounted()."""
        self._regions_asked = bool(files)
        return False

    def device_counts(self) -> list[DeviceCount]:
        """The scripts do not trace block devices."""
        return []

    def add_server_files(self, files: list[FileIdentity]) -> None:
        """The scripts do not trace writeback."""

    # -- names --

    def kernel_name(self, file: FileIdentity) -> KernelName | None:
        """The path the script walked when the process opened the file."""
        name = self._names.get((file.kernel_dev, file.ino))
        if name is None:
            return None
        relative = "/".join(c.decode(errors="surrogateescape") for c in name.components)
        path = None
        if name.complete:
            path = self._mounts.absolute(file.dev, relative)
            if path is None and self._live_mounts and time.monotonic() - self._mounts_read >= MOUNTS_REFRESH_S:
                self._mounts = MountTable.of_process(self.pid)
                self._mounts_read = time.monotonic()
                path = self._mounts.absolute(file.dev, relative)
        if path is None:
            return KernelName(path=".../" + relative, complete=False, deleted=name.nlink == 0)
        return KernelName(path=path, complete=True, deleted=name.nlink == 0)

    def thread_name(self, tid: int) -> str | None:
        """Not known to the scripts: the caller reads /proc/PID/task/TID/comm."""
        return None

    def forget_names(self, files: Iterable[FileIdentity]) -> None:
        """Names are walked at open, not per interval: nothing to forget."""

    # -- lifetime --

    def close(self) -> None:
        self._source.close()
        self._collect_exit_counts()

    def __enter__(self) -> StapProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def io_uring_instances(pid: int) -> int:
    """How many io_uring instances the process holds open (fds to anon_inode:[io_uring])."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    rings = 0
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[io_uring]":
                rings += 1
    return rings


def _op_count(row: proto.Row) -> OpCount:
    try:
        op, api = Op(row.op), Api(row.api)
    except ValueError:
        raise StapError(f"the SystemTap script sent op {row.op} api {row.api}, which mysqlio does not know") from None
    return OpCount(
        file=FileIdentity.from_kernel(row.dev, row.ino),
        tid=row.tid,
        op=op,
        api=api,
        bytes=row.bytes,
        ops=row.ops,
        errors=row.errors,
    )


def events_array(events: list[proto.Event], clock_offset_ns: int) -> np.ndarray:
    """Events as the ring buffer's records (EVENT_DTYPE), on CLOCK_MONOTONIC."""
    out = np.zeros(len(events), dtype=EVENT_DTYPE)
    if not events:
        return out
    cols = np.array(
        [(e.time_ns, e.latency_ns, e.ino, e.offset, e.result, e.dev, e.tid, e.op, e.api) for e in events],
        dtype=np.int64,
    )
    if int(cols[:, 7].max()) > max(Op) or int(cols[:, 8].max()) > max(Api) or int(cols[:, 7:9].min()) < 0:
        raise StapError("the SystemTap script sent an op or api code mysqlio does not know")
    out["ts_ns"] = np.maximum(cols[:, 0] - clock_offset_ns, 0)
    out["latency_ns"] = np.maximum(cols[:, 1], 0)
    out["ino"] = cols[:, 2]
    out["offset"] = cols[:, 3]
    out["result"] = cols[:, 4]
    out["dev"] = cols[:, 5]
    out["tid"] = cols[:, 6]
    out["op"] = cols[:, 7]
    out["api"] = cols[:, 8]
    return out


def replay_probe(lines: Iterable[str], pid: int, mode: str, mounts: MountTable, clock_offset_ns: int = 0) -> StapProbe:
    """A probe that reads a script's captured output (`stap ... -o FILE`) instead of a live stap:
    each drain() takes the lines up to the next mark."""
    return StapProbe(ReplaySource(lines), pid, mode, mounts=mounts, clock_offset_ns=clock_offset_ns)

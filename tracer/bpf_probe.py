"""The eBPF backend: load mysqlio.bpf.o for one pid and drain its counts (a `probe.Probe`).

Each `drain()` flips the stats table's half in the control line, then swaps the
active stats map (stats_a <-> stats_b) in the one-slot map-in-map. The kernel
waits for an RCU grace period on that update, so when it returns no program still
writes the old half or the old map, which are then read and emptied: counts are
never lost between read and reset.
"""

from __future__ import annotations

import ctypes
import enum
import os
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

import numpy as np

from . import abi, abi_check, bpf_arch, kernel_features, map_batch, map_sizing, stats_cells, syscall_hook, unpreempted
from .conn_map import ConnectionMap, unused_conn_programs
from .devices import device_bios
from .disk_stat import DiskCounters
from .errors import BpfError
from .ibdata_regions import RegionMap
from .kernel_features import KernelFeatures
from .latency import Histogram
from .libbpf import BpfMap, BpfObject, create_ring_buffer, possible_cpus, program_counters
from .probe import DeviceCount, Drops, FileIdentity, KernelName, LatencyRow, OpCount
from .ringbuf import CpuEventSlots, EventSlots, PerCpuRingsReader, RingBufferReader

BPF_MAP_TYPE_ARRAY = 2
MIN_RING_BYTES = 256 << 10  # a CPU's ring buffer: 4,096 events at least
# programs built twice: without the compare-and-swap instruction for kernels
# that lack BPF atomics (the verifier rejects it even where it is never run)
NOCAS_SUFFIX = "_nocas"
CAS_PROGRAMS = (
    "handle_exit",
    "handle_sys_exit",
    "handle_uring_complete",
    "handle_dirty_folio",
    "handle_dirty_page",
    "handle_bio_queue",
)
# twins that read a request's file, a dirtied folio's flags and a bio's page through the
# kfunc bpf_rdonly_cast (6.2), loaded where the kernel takes it (the kfunc is weak: the
# object opens on kernels without it)
CAST_SUFFIX = "_cast"
CAST_PROGRAMS = ("handle_exit", "handle_sys_exit", "handle_dirty_folio", "handle_bio_queue")
# msync's enter programs, by how this kernel finds the file at an address, and hook
MSYNC_PROGRAMS = {
    ("find_vma", "tracepoints"): "handle_enter_msync",
    ("mm_rb", "tracepoints"): "handle_enter_msync_rb",
    ("find_vma", "raw"): "handle_sys_enter_msync",
    ("mm_rb", "raw"): "handle_sys_enter_msync_rb",
}
# page cache and block devices (probes/pagecache.bpf.h), by the kernel's variant
DIRTY_PROGRAMS = {"writeback_dirty_folio": "handle_dirty_folio", "writeback_dirty_page": "handle_dirty_page"}
BIO_PROGRAMS = {1: "handle_bio_queue", 2: "handle_bio_queue_q"}
PAGE_CACHE_PROGRAMS = (
    *DIRTY_PROGRAMS.values(),
    *BIO_PROGRAMS.values(),
    "handle_writeback_start",
    "handle_writeback_written",
)


def bpf_object_path() -> str:
    return os.environ.get("MYSQLIO_BPF_OBJECT", str(bpf_arch.default_object()))


# cells of the stats table the programs use: all, or fewer to test its overflow
STATS_CELLS_ENV = "MYSQLIO_STATS_CELLS"


def stats_cells_used() -> int:
    text = os.environ.get(STATS_CELLS_ENV, str(abi.STATS_CELLS))
    used = int(text) if text.isdigit() else 0
    if not 0 < used <= abi.STATS_CELLS or used & (used - 1):
        raise BpfError(f"{STATS_CELLS_ENV}={text}: give a power of two from 1 to {abi.STATS_CELLS}")
    return used


def ring_bytes_per_cpu(total: int, cpus: int) -> int:
    """Each CPU's ring buffer: `total` bytes shared out, a power of two, at least MIN_RING_BYTES."""
    share = max(total // cpus, MIN_RING_BYTES)
    return 1 << (share.bit_length() - 1)


class BpfProbe:
    """Attach the probes to one process and read what it did, interval by interval."""

    def __init__(
        self,
        pid: int,
        object_path: str | None = None,
        record_ring_bytes: int = 0,
        page_cache: bool = True,
        timed: bool = True,
        connections: bool = False,
    ) -> None:
        """See _open. Should the kernel refuse a per-syscall tracepoint's program at
        attach, the probes are opened again on the raw hook (syscall_hook.fall_back)."""
        unpreempted.install()  # where a map call switched out midway would hide syscalls
        try:
            self._open(pid, object_path, record_ring_bytes, page_cache, timed, connections)
        except syscall_hook.TracepointsRefused as refused:
            if not syscall_hook.fall_back(refused):  # forced to the tracepoints
                raise
            self._open(pid, object_path, record_ring_bytes, page_cache, timed, connections)

    def _open(
        self,
        pid: int,
        object_path: str | None,
        record_ring_bytes: int,
        page_cache: bool,
        timed: bool,
        connections: bool,
    ) -> None:
        """record_ring_bytes > 0 also streams one event per request through a
        ring buffer of that size (a power of two, multiple of the page size).
        page_cache: also count page-cache dirtying, writeback and block devices
        (where the kernel has the hooks). timed: time each request for the
        latency histograms from the start (else from start_timing(); record
        always times). connections: key each row and event by the connection its
        thread served (--mysql: probes/connection.bpf.h)."""
        self.pid = pid
        self.page_cache = page_cache
        self.connections = connections
        self._ring_bytes = record_ring_bytes
        path = object_path or bpf_object_path()
        cells_used = stats_cells_used()  # a bad value: one line, before anything is open
        self._obj = BpfObject(path)
        try:
            abi_check.check_object(path)  # a clear error before the map sizes' check
            self._check_layout()
            self.features = kernel_features.probe()
            self._adapt(self.features, record=bool(record_ring_bytes))
            self.map_sizes = map_sizing.apply(self._obj, pid)  # per-file tables sized to the server
        except BaseException:
            self._obj.close()
            raise
        # the control line (struct mio_control), kept here and written whole
        self._control = abi.Control(tgid=pid)
        self._obj.set_rodata("targ_cells_mask", ctypes.c_uint32(cells_used - 1))
        self._obj.set_rodata("targ_page_shift", ctypes.c_uint32(bpf_arch.page_shift()))
        self._rings: list[int] = []  # record: each CPU's ring buffer (fds)
        self._slots_per_cpu = 0  # record with event slots: each CPU's slots
        if record_ring_bytes:
            self._obj.set_rodata("targ_record", ctypes.c_bool(True))
            if self.event_slots:
                self._size_event_slots(record_ring_bytes)
            else:
                self._obj.set_max_entries("events", possible_cpus())
        # Where syscall arguments are read at exit, the enter programs only stamp a
        # request's start: attached when requests are timed (issue 19: top's cost
        # per request without them). Else they keep the arguments: always attached.
        self.args_at_exit = self.features.task_pt_regs
        self._obj.set_rodata("targ_args_at_exit", ctypes.c_bool(self.args_at_exit))
        self.timed = timed or bool(record_ring_bytes) or not self.args_at_exit
        self._cells: stats_cells.StatsCells | None = None
        try:
            self._obj.load()
            self._write_control()  # the target's tgid, before any program runs
            if record_ring_bytes and not self.event_slots:
                self._create_rings(record_ring_bytes)
            # the stats table, where the cas programs use it (see _adapt): its
            # cells in use written before any program runs
            self._cells = stats_cells.StatsCells(self._obj.map("cells"), cells_used) if self.features.atomics else None
            if self._cells:
                self._write_cells_in_use(self._cells)
            if self.timed:
                self._set_timing()
            self._obj.attach_all(later=() if self.timed else self._enter_programs())
            if self.syscall_hook == "tracepoints":
                syscall_hook.attach(self._obj, exit=self._program(syscall_hook.EXIT_PROGRAM), entries=self.timed)
        except BaseException:
            self.close()
            raise
        self._stats = _SwappedMaps(self._obj, "stats")
        self._latency = _SwappedMaps(self._obj, "lat")
        self._pending = [self._obj.map("aio_pending"), self._obj.map("uring_pending")]
        self._aged_out = 0
        self._next_aging = time.monotonic() + AGING_EVERY_S
        self._names = self._obj.map("names")
        self._threads = self._obj.map("threads")
        self._devslots = self._obj.map("devslots")
        self._disks = DiskCounters() if self.page_cache else None  # the devices' own view, from now on
        self._prog_fds = self._obj.program_fds()
        self._server_files = self._obj.map("server_files")
        self.conn_map = ConnectionMap(self._obj.map("conns"))  # read, pruned by connections.py
        self.retargeted_at: float | None = None  # when `retarget` last moved it (monotonic)

    def park(self) -> None:
        """The traced process exited (--follow: mysqlio.kept_probe): count nothing, programs
        attached, and drop what is kept of it: undrained counts, names, files, connections."""
        self._control.tgid = 0  # no thread matches
        self._write_control()
        self.drain()
        self.drain_latency()
        for table in (self._names, self._threads, self._server_files, self._obj.map("conns"), *self._pending):
            map_batch.clear(table)

    def retarget(self, pid: int) -> None:
        """Count process `pid` from now on (a parked probe: one write of the control line)."""
        self.pid = self._control.tgid = pid
        self._write_control()
        self.retargeted_at = time.monotonic()

    def _enter_programs(self) -> tuple[str, ...]:
        """The programs with an attach point in their section that only time
        requests where arguments are read at exit (the raw hook's sys_enter)."""
        return syscall_hook.RAW_PROGRAMS[:1] if self.syscall_hook == "raw" else ()

    def start_timing(self) -> None:
        """Time requests from now on (top's latency turned on): attach the enter
        programs. Requests already in flight are counted, not timed."""
        if self.timed:
            return
        # before the enter programs: an exit that reads its thread's slot finds
        # it unstamped (not timed) until they run
        self._set_timing()
        if self.syscall_hook == "tracepoints":
            syscall_hook.attach(self._obj, exits=False)
        else:
            for program in self._enter_programs():
                self._obj.attach_program(program)
        self.timed = True

    def _set_timing(self) -> None:
        """Tell the exit programs that requests are timed: they read the thread's
        in-flight slot (its start stamp) from now on."""
        self._control.timed = 1
        self._write_control()

    def _write_control(self) -> None:
        self._obj.map("control").update(ctypes.c_uint32(0), self._control)

    def _write_cells_in_use(self, cells: stats_cells.StatsCells) -> None:
        """Tell the programs how many cells of a half they may use (control->cells_mask)."""
        self._control.cells_mask = cells.in_use - 1
        self._write_control()

    def add_server_files(self, files: list[FileIdentity]) -> None:
        """Files the server has open or mapped (from /proc): their pages written
        back by anyone are the server's, though no request was seen yet."""
        one = ctypes.c_uint8(1)
        for file in files:
            self._server_files.update(_file_key(file), one)

    def _program(self, name: str) -> str:
        """The variant of a program this kernel loads."""
        if name in CAS_PROGRAMS and not self.features.atomics:
            return name + NOCAS_SUFFIX
        if name in CAST_PROGRAMS and self.features.rdonly_cast:
            return name + CAST_SUFFIX
        return name

    def _adapt(self, features: KernelFeatures, record: bool) -> None:
        """Shape the object to this kernel before load: fallbacks for what it
        lacks, programs it cannot take left out (kernel_features.degraded()
        says what each costs)."""
        obj = self._obj
        # .rodata and .bss out of vmalloc'd pages (measured: untimed top x 0.97, with
        # the target's tgid in the control line x 0.89 per request; 6.18, MariaDB
        # 10.11, tools/ab_objects.py, issue 19)
        obj.unmappable_global_data()
        # rows in the stats table: its cells are claimed by compare-and-swap
        obj.set_rodata("targ_stats_cells", ctypes.c_bool(features.atomics))
        for name in CAS_PROGRAMS:  # the twins this kernel does not load
            twins = (name, name + NOCAS_SUFFIX) + ((name + CAST_SUFFIX,) if name in CAST_PROGRAMS else ())
            for twin in twins:
                if twin != self._program(name):
                    obj.disable_program(twin)
        complete = self._program("handle_uring_complete")
        self.uring_counted = features.uring_complete_req_arg is not None or features.uring_complete_by_user_data
        if features.uring_complete_req_arg is not None:
            obj.set_rodata("targ_uring_complete_req_arg", ctypes.c_uint32(features.uring_complete_req_arg))
        elif features.uring_complete_by_user_data:
            obj.set_rodata("targ_uring_by_user_data", ctypes.c_bool(True))
        else:
            obj.disable_program(complete)
        # io_uring requests are timed from a submission tracepoint that carries the
        # request (without one, the completion is the only place they are seen)
        self.uring_latency = self.uring_counted and features.uring_submit is not None
        if self.uring_latency and features.uring_submit:
            tracepoint, arg = features.uring_submit
            obj.set_attach_target("handle_uring_submit", tracepoint)
            obj.set_rodata("targ_uring_submit_req_arg", ctypes.c_uint32(arg))
        else:
            obj.disable_program("handle_uring_submit")
        self.syscall_hook = syscall_hook.choose_hook()
        unused = (
            syscall_hook.RAW_PROGRAMS
            if self.syscall_hook == "tracepoints"
            else (*syscall_hook.ENTER_PROGRAMS, syscall_hook.EXIT_PROGRAM, syscall_hook.IO_SUBMIT_PROGRAM)
        )
        for program in unused:
            obj.disable_program(self._program(program))
        self.msync_counted = features.msync_vma is not None
        for (how, hook), program in MSYNC_PROGRAMS.items():
            if how != features.msync_vma or hook != self.syscall_hook:
                obj.disable_program(program)
        self.page_cache = self.page_cache and features.page_cache
        for program in PAGE_CACHE_PROGRAMS:
            chosen = self.page_cache and (
                program == DIRTY_PROGRAMS.get(features.dirty_event or "")
                or program == BIO_PROGRAMS.get(features.bio_queue_args or 0)
                or program not in (*DIRTY_PROGRAMS.values(), *BIO_PROGRAMS.values())
            )
            if not chosen:
                obj.disable_program(self._program(program))
        # O_DIRECT disk bytes: the bios' where the bio program runs (unwritten extents read none)
        obj.set_rodata("targ_direct_bios", ctypes.c_bool(self.page_cache))
        obj.set_rodata("targ_conns", ctypes.c_bool(self.connections))
        for program in unused_conn_programs(self.connections, self.syscall_hook == "raw", features.rdonly_cast):
            obj.disable_program(program)
        self._adapt_event_stream(features, record)

    def _adapt_event_stream(self, features: KernelFeatures, record: bool) -> None:
        """record's event stream: each CPU's event slots where the object has them
        (x86-64) and every program that emits an event takes an index by
        compare-and-swap (BPF atomics; not the pre-5.11 bio program), else each
        CPU's BPF ring buffer."""
        obj = self._obj
        nocas_emitter = self.page_cache and features.bio_queue_args == 2
        self.event_slots = record and obj.has_map("event_slots") and features.atomics and not nocas_emitter
        if self.event_slots:
            obj.set_rodata("targ_event_slots", ctypes.c_bool(True))
        elif record and not features.ringbuf:
            raise BpfError(
                "record needs the BPF ring buffer (Linux 5.8 or a kernel with it backported), which this "
                "kernel lacks; top and exporter work here, or record with --backend stap"
            )
        if not record or self.event_slots:  # referenced, never used: no ring buffer made for it
            obj.retype_map("events", BPF_MAP_TYPE_ARRAY, 1)
            obj.set_key_size("events", 4)
            obj.set_value_size("events", 8)

    def uncounted(self) -> list[str]:
        """What this kernel keeps the probes from counting (shown by top)."""
        out = []
        if not self.uring_counted:
            out.append("io_uring requests are not counted on this kernel (no io_uring tracepoint names the request)")
        if not self.msync_counted:
            out.append("msync is not counted on this kernel (no way to find the file at an address)")
        if not self.features.page_cache:
            out.append("page cache, writeback and devices are not counted on this kernel (a tracepoint is missing)")
        return out

    def _check_layout(self) -> None:
        """Fail loudly if probes/mysqlio.h and abi.py disagree."""
        expected = {
            "stats_a": (abi.FileOpKey, abi.FileOpStats),
            "cells": (ctypes.c_uint32, abi.StatsCell),
            "names": (abi.FileId, abi.FileName),
            "threads": (ctypes.c_uint32, abi.ThreadName),
            "lat_a": (abi.LatKey, abi.LatHist),
            "aio_pending": (ctypes.c_uint64, abi.PendingIo),
            "regions": (ctypes.c_uint32, abi.RegionTable),
            "control": (ctypes.c_uint32, abi.Control),
        }
        for name, (key_t, value_t) in expected.items():
            m = self._obj.map(name)
            if (m.key_size, m.value_size) != (ctypes.sizeof(key_t), ctypes.sizeof(value_t)):
                raise AssertionError(f"map {name}: BPF and Python layouts differ")

    def set_regions(self, files: dict[FileIdentity, RegionMap]) -> bool:
        """Write the region table the programs consult (at most MAX_REGION_FILES files)."""
        table = abi.RegionTable()
        for f, (file, regions) in enumerate(list(files.items())[: abi.MAX_REGION_FILES]):
            table.ino[f] = file.ino
            table.dev[f] = file.kernel_dev
            table.nranges[f] = min(len(regions.ranges), abi.MAX_REGION_RANGES)
            for r, rng in enumerate(regions.ranges[: abi.MAX_REGION_RANGES]):
                slot = f * abi.MAX_REGION_RANGES + r
                table.start[slot], table.end[slot], table.region[slot] = rng.start, rng.end, rng.region
        # the table first: a request that finds its file in the control line
        # then finds its ranges (the programs check the table names it too)
        self._obj.map("regions").update(ctypes.c_uint32(0), table)
        for f in range(abi.MAX_REGION_FILES):
            self._control.region_ino[f], self._control.region_dev[f] = table.ino[f], table.dev[f]
        self._write_control()
        return True

    def drain(self) -> list[OpCount]:  # everything counted since the previous drain
        return [_op_count(row[:8], row[8:]) for row in self.drain_table().tolist()]

    def drain_table(self) -> np.ndarray:
        """drain's rows as a stats_cells.ROW array (what top folds with numpy)."""
        full_half = self._control.cells_half
        if self._cells:
            self._control.cells_half ^= 1
            self._write_control()
        # the stats maps' swap waits for an RCU grace period, after the flip of the
        # cells' half above: no program writes that half either once it returns
        full = self._stats.swap()
        rows = self._cells.take(full_half) if self._cells else stats_cells.CELL_ROWS_NONE
        more = full.drain(abi.FileOpKey, abi.FileOpStats)
        if self._cells and self._cells.fit(len(rows) + len(more)):
            self._write_cells_in_use(self._cells)
        return stats_cells.table(rows, more)

    @property
    def cells_in_use(self) -> int:
        """The cells of each half of the stats table the programs use now (0: no table)."""
        return self._cells.in_use if self._cells else 0

    def drain_latency(self) -> list[LatencyRow]:
        """Latency histograms of the requests completed since the previous call;
        also ages out requests that never completed (at most every AGING_EVERY_S).
        Untimed, the programs fill no histogram (not even io_uring's): none to read."""
        rows: list[LatencyRow] = []
        if self.timed:
            rows = [_latency_row(k, v) for k, v in self._latency.swap().drain(abi.LatKey, abi.LatHist)]
        if time.monotonic() >= self._next_aging:
            self._age_pending()
        return rows

    def _age_pending(self) -> None:
        """Delete libaio / io_uring requests submitted more than PENDING_MAX_AGE_S
        ago: their completion was missed (io_destroy, a lost io_getevents result)
        and the tables must not fill up with them. Counted as aged_out."""
        self._next_aging = time.monotonic() + AGING_EVERY_S
        oldest_ns = time.monotonic_ns() - int(PENDING_MAX_AGE_S * 1e9)  # bpf_ktime_get_ns clock
        pending = abi.PendingIo()
        for table in self._pending:
            for key in list(table.keys(ctypes.c_uint64)):
                if table.lookup(key, pending) and pending.ts_ns < oldest_ns and table.delete(key):
                    self._aged_out += 1

    def pending_requests(self) -> int:
        """libaio iocbs and io_uring requests waiting for their completion now."""
        return sum(sum(1 for _ in table.keys(ctypes.c_uint64)) for table in self._pending)

    def device_counts(self) -> list[DeviceCount]:
        """Cumulative block-device counters since attach (empty without page_cache): the
        bios by owner, and what each disk they went to completed (the kernel's counters)."""
        if not self._disks:
            return []
        bios = device_bios(self._devslots.per_cpu_array(ctypes.sizeof(abi.DevSlot) // 8))
        return bios + self._disks.since_start(c.dev for c in bios)

    def drops(self) -> Drops:
        """Cumulative counts of what could not be accounted: the kernel's, the
        pending requests aged out here, and the runs the kernel skipped."""
        kernel = self._obj.read_bss("drops", abi.DropCounters).as_dict()
        # top counts a libaio / io_uring request's bytes at submission: aging it out loses only
        # its latency. record emits the event at completion: one aged out (its completion
        # missed, e.g. returned by an io_getevents that was already waiting when the probes
        # attached) is an event lost (its completion, should it come after all, also counts
        # `unmatched`: a request in flight over 60 s may be counted lost twice, never zero times)
        aged = "aged_out_events" if self._ring_bytes else "aged_out"
        return Drops({**kernel, aged: self._aged_out, **self._skipped_runs()})

    def _skipped_runs(self) -> dict[str, int]:
        """Runs of a program the kernel skipped because the same program was already
        running on that CPU (`recursion_misses`, 5.12+: a completion interrupting the
        completion program): events lost."""
        return {"skipped_runs": sum(program_counters(fd).recursion_misses for fd in self._prog_fds.values())}

    def kernel_name(self, file: FileIdentity) -> KernelName | None:
        raw = abi.FileName()
        if not self._names.lookup(_file_key(file), raw):
            return None
        return _kernel_name(raw)

    def _size_event_slots(self, total: int) -> None:
        """record on x86-64: `total` bytes of event slots shared out among the possible
        CPUs (a power of two slots each), before load."""
        cpus = possible_cpus()
        per_cpu = ring_bytes_per_cpu(total, cpus) // abi.SLOT_BYTES
        self._obj.set_max_entries("event_slots", cpus * per_cpu)
        self._obj.set_max_entries("event_pos", 2 * cpus)
        self._obj.set_rodata("targ_slot_bits", ctypes.c_uint32(per_cpu.bit_length() - 1))
        self._slots_per_cpu = per_cpu

    def _create_rings(self, total: int) -> None:
        """record: a ring buffer for each possible CPU (the events map's entries),
        `total` bytes shared out, put in the map before any program is attached."""
        events = self._obj.map("events")
        size = ring_bytes_per_cpu(total, events.max_entries)
        for cpu in range(events.max_entries):
            self._rings.append(create_ring_buffer(f"events_{cpu}", size))
            events.update(ctypes.c_uint32(cpu), ctypes.c_uint32(self._rings[-1]))

    def events_reader(self) -> PerCpuRingsReader:
        """The event stream of the record mode (opened with record_ring_bytes): each
        CPU's event slots or ring buffer."""
        if self.event_slots and self._ring_bytes:
            pos = self._obj.map("event_pos")
            slots = EventSlots(self._obj.map("event_slots").fd, pos.fd, pos.max_entries // 2, self._slots_per_cpu)
            return PerCpuRingsReader([CpuEventSlots(slots, cpu) for cpu in range(slots.cpus)], slots)
        if not self._rings:
            raise ValueError("this probe was opened without a ring buffer (record_ring_bytes 0)")
        size = ring_bytes_per_cpu(self._ring_bytes, len(self._rings))
        return PerCpuRingsReader([RingBufferReader(fd, size) for fd in self._rings])

    def thread_name(self, tid: int) -> str | None:
        """The thread's name when it last started a row (it may have exited since)."""
        raw = abi.ThreadName()
        if not self._threads.lookup(ctypes.c_uint32(tid), raw):
            return None
        return raw.comm.decode(errors="replace")

    def forget_names(self, files: Iterable[FileIdentity]) -> None:
        """Let the kernel walk the files' paths again at their next request."""
        map_batch.delete_keys(self._names, map_batch.file_ids(files))

    def close(self) -> None:
        if self._cells:
            self._cells.close()
            self._cells = None
        for fd in self._rings:  # a reader's mappings keep their pages
            os.close(fd)
        self._rings = []
        self._obj.close()

    def __enter__(self) -> BpfProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# Pending requests older than this are taken as never completing. InnoDB's
# slowest writes complete in seconds even on a saturated disk.
PENDING_MAX_AGE_S = 60.0
AGING_EVERY_S = 10.0


class _SwappedMaps:
    """Two maps <name>_a / <name>_b behind the one-slot map-in-map <name>_slot:
    the programs write the one in the slot; swap() puts the other one there and
    returns the first, which no program writes any more (the kernel's update of
    a map-in-map slot waits for an RCU grace period)."""

    def __init__(self, obj: BpfObject, name: str) -> None:
        self._slot = obj.map(f"{name}_slot")
        self._maps = [obj.map(f"{name}_a"), obj.map(f"{name}_b")]
        self._active = 0

    def swap(self) -> BpfMap:
        full = self._maps[self._active]
        self._active ^= 1
        self._slot.update(ctypes.c_uint32(0), ctypes.c_uint32(self._maps[self._active].fd))
        return full


def _file_key(file: FileIdentity) -> abi.FileId:
    return abi.FileId(ino=file.ino, dev=file.kernel_dev)


def _latency_row(key: abi.LatKey, value: abi.LatHist) -> LatencyRow:
    return LatencyRow(
        file=FileIdentity.from_kernel(key.dev, key.ino),
        op=abi.Op(key.op),
        api=abi.Api(key.api),
        hist=Histogram.from_kernel(value.slots, value.sum_ns, value.max_ns),
    )


EnumT = TypeVar("EnumT", bound=enum.Enum)


def _members(kind: type[EnumT]) -> Callable[[int], EnumT]:
    """value -> member of an enum, by a dict lookup: calling the enum costs ~1 us, and
    top turns hundreds of rows a second into four members each."""
    table = {m.value: m for m in kind}
    return lambda value: table[value] if value in table else kind(value)


_OP, _API, _BY, _REGION = _members(abi.Op), _members(abi.Api), _members(abi.By), _members(abi.Region)


def _op_count(key: tuple[int, ...], counts: list[int]) -> OpCount:
    """A row of stats_cells.table: its key (stats_cells.KEY_FIELDS), its counts."""
    ino, dev, tid, op, api, by, region, conn = key
    return OpCount(
        file=FileIdentity.from_kernel(dev, ino),
        tid=tid,
        op=_OP(op),
        api=_API(api),
        bytes=counts[0],
        ops=counts[1],
        errors=counts[2],
        by=_BY(by),
        region=_REGION(region),
        conn=conn,
    )


def _kernel_name(raw: abi.FileName) -> KernelName:
    depth = min(raw.depth, abi.PATH_DEPTH)
    parts = [bytes(raw.comps[i]).split(b"\0", 1)[0].decode(errors="surrogateescape") for i in range(depth)]
    joined = "/".join(reversed(parts))
    path = "/" + joined if raw.complete else ".../" + joined
    return KernelName(path=path, complete=bool(raw.complete), deleted=raw.nlink == 0)

#!/usr/bin/env python3
"""Soak: `mysqlio top` and `mysqlio record` on one steady iogen load for minutes.

    .venv/bin/python tools/soak.py --minutes 10 --rate 20000 --json
    .venv/bin/python tools/soak.py --seconds 45            # what tests/test_soak.py runs

iogen runs every default scenario once (libaio, io_uring, rename, unlink,
short-lived files: the pending tables and the name maps get entries), then
writes --rate small pwrites a second across --threads files for the duration.
`top -i 1 --json` and `record` trace it at the same time, each with its own
probe. Every --sample seconds the runner reads, for both tracers: RSS and USS,
open fds, CPU time, the entries of every hash / LRU map they hold and the unread
bytes of their ring buffers or unread event slots (maps found by id in /proc/PID/fdinfo, read through
the BPF syscall), and the probe's drop counters (its .bss), so a loss is dated
and has a reason.

Pass criteria (all must hold; the result lists each that failed):
- memory flat: median RSS of the last third within ±10% of the second third's
  (the first third is warm-up);
- kernel maps bounded: no hash / LRU map holds more entries in the last third
  than it ever held before, none exceeds its max_entries; maps swapped every
  interval (stats_a / stats_b, lat_a / lat_b) are judged as one pair and must be
  empty after the load, as must aio_pending and uring_pending (inflight is a
  fixed array, one cell per traced thread: not judged); no CPU's share of
  record's event stream (its ring buffer or event slots) is ever more than half full; the maps held never change (same names,
  same ids); open fds do not grow;
- lost events 0 in top's JSON and in the trace;
- counts exact: top's per-file sums over all intervals and `report --json`'s
  per-file totals equal iogen's ground truth, file by file, counter by counter.

Exit 0 when it passed, 1 when a criterion failed, 2 on bad arguments.
`run_soak(SoakOptions(...))` returns a `SoakResult` (`to_json()`, `table()`,
`bench_rows()`) for tools/bench.py.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import os
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import psutil

from mysqlio.abi import DropCounters, SlotPos
from mysqlio.devtools.traced import (  # one list of counters for tests and tools
    COUNTERS,
    IOGEN_SCENARIOS,
    FileTotals,
    held_bpf_ids,
)

REPO = Path(__file__).resolve().parent.parent
IOGEN = REPO / "tools" / "iogen"
MYSQLIO = [sys.executable, "-m", "mysqlio"]

# iogen's default scenario set, run once before the steady phase (see iogen --help):
# libaio, io_uring, rename, unlink, short-lived files, errors
ONE_SHOT_SCENARIOS = IOGEN_SCENARIOS
# empty once the load has stopped: pending requests all completed, no thread
# inside a syscall (and every swapped X_a / X_b pair drained by the last interval)
EMPTY_AT_END = ("aio_pending", "uring_pending")
MEMORY_TOLERANCE = 0.10  # ±10% between the second and the last third
MAP_GROWTH_SLACK = 2  # entries a steady map may differ by between two samples (a row caught mid-swap)
FD_GROWTH_SLACK = 4  # transient fds (a /proc scan) a sample may catch
TRACERS = ("top", "record")


class SoakError(Exception):
    """The soak could not run (a process failed to start or answer)."""


# ---------------------------------------------------------------- BPF maps of a process

BPF_MAP_TYPES = {1: "hash", 2: "array", 5: "percpu_hash", 6: "percpu_array", 9: "lru_hash", 12: "array_of_maps"}
BPF_MAP_TYPES |= {10: "lru_percpu_hash", 13: "hash_of_maps", 27: "ringbuf"}
COUNTABLE = {"hash", "percpu_hash", "lru_hash", "lru_percpu_hash", "hash_of_maps"}  # entries = keys


class _BpfMapInfo(ctypes.Structure):
    """struct bpf_map_info of <linux/bpf.h>, up to map_extra."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("id", ctypes.c_uint32),
        ("key_size", ctypes.c_uint32),
        ("value_size", ctypes.c_uint32),
        ("max_entries", ctypes.c_uint32),
        ("map_flags", ctypes.c_uint32),
        ("name", ctypes.c_char * 16),
        ("ifindex", ctypes.c_uint32),
        ("btf_vmlinux_value_type_id", ctypes.c_uint32),
        ("netns_dev", ctypes.c_uint64),
        ("netns_ino", ctypes.c_uint64),
        ("btf_id", ctypes.c_uint32),
        ("btf_key_type_id", ctypes.c_uint32),
        ("btf_value_type_id", ctypes.c_uint32),
        ("btf_vmlinux_id", ctypes.c_uint32),
        ("map_extra", ctypes.c_uint64),
    ]


class _Libbpf:
    """The libbpf calls the census needs: fd by id, info by fd, next key, lookup."""

    def __init__(self) -> None:
        lib = ctypes.CDLL("libbpf.so.1", use_errno=True)
        self.get_fd_by_id = lib.bpf_map_get_fd_by_id
        self.get_fd_by_id.argtypes, self.get_fd_by_id.restype = [ctypes.c_uint32], ctypes.c_int
        self.info_by_fd = lib.bpf_obj_get_info_by_fd
        self.info_by_fd.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32)]
        self.info_by_fd.restype = ctypes.c_int
        self.next_key = lib.bpf_map_get_next_key
        self.next_key.argtypes, self.next_key.restype = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p], ctypes.c_int
        self.lookup = lib.bpf_map_lookup_elem
        self.lookup.argtypes, self.lookup.restype = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p], ctypes.c_int


@dataclass
class MapCount:
    """One map held by a tracer, at one moment."""

    map_id: int
    name: str
    type: str
    max_entries: int
    # hash-like maps: keys; ringbuf: bytes not yet consumed; event_slots: the most slots a CPU
    # has not yet consumed; None: arrays (always full)
    entries: int | None
    value: bytes | None = None  # the .bss section, where the drop counters live


def held_map_ids(pid: int) -> set[int]:
    """Ids of the BPF maps whose fds the process holds (/proc/PID/fdinfo)."""
    return held_bpf_ids(pid)["map"]


def count_map(lib: _Libbpf, map_id: int) -> MapCount | None:
    """Name, type, size and current number of entries of one map; None if it is gone."""
    fd = lib.get_fd_by_id(map_id)
    if fd < 0:
        return None
    try:
        info = _BpfMapInfo()
        size = ctypes.c_uint32(ctypes.sizeof(info))
        if lib.info_by_fd(fd, ctypes.byref(info), ctypes.byref(size)):
            return None
        kind = BPF_MAP_TYPES.get(info.type, f"type{info.type}")
        entries = _count_keys(lib, fd, info.key_size, info.max_entries) if kind in COUNTABLE else None
        name = info.name.decode(errors="replace")
        value = None
        if name.endswith(".bss") and kind == "array":
            buf = ctypes.create_string_buffer(info.value_size)
            if lib.lookup(fd, ctypes.byref(ctypes.c_uint32(0)), buf) == 0:
                value = buf.raw
        if kind == "ringbuf":
            entries = _ring_used(fd)
        if name == "event_pos" and kind == "array":  # record's event slots: their heads and tails
            kind, entries = "event_slots", _slots_unread(lib, fd, info.max_entries // 2)
        return MapCount(map_id, name, kind, info.max_entries, entries, value)
    finally:
        os.close(fd)


def _ring_used(fd: int) -> int:
    """Bytes written to a BPF ring buffer and not yet consumed: producer_pos -
    consumer_pos, from its first two pages (mapped read-only, the reader unaffected)."""
    page = mmap.PAGESIZE
    with mmap.mmap(fd, 2 * page, mmap.MAP_SHARED, mmap.PROT_READ) as head:
        (consumer,) = struct.unpack_from("<Q", head, 0)
        (producer,) = struct.unpack_from("<Q", head, page)
    return producer - consumer


def _slots_unread(lib: _Libbpf, fd: int, cpus: int) -> int:
    """The most event slots any CPU has written and the reader not yet read: its
    head (entry 2 x cpu of event_pos) less its tail (2 x cpu + 1)."""
    pos = SlotPos()
    unread = 0
    for cpu in range(cpus):
        lib.lookup(fd, ctypes.byref(ctypes.c_uint32(2 * cpu)), ctypes.byref(pos))
        head = pos.pos
        lib.lookup(fd, ctypes.byref(ctypes.c_uint32(2 * cpu + 1)), ctypes.byref(pos))
        unread = max(unread, head - pos.pos)
    return unread


def _count_keys(lib: _Libbpf, fd: int, key_size: int, max_entries: int) -> int:
    """Distinct keys met walking the map. A key deleted under the walk restarts it
    at the first key, so keys are collected in a set and the walk is capped: the
    count can only err upwards, by keys deleted while it ran."""
    seen: set[bytes] = set()
    key = ctypes.create_string_buffer(key_size)
    prev: ctypes.Array[ctypes.c_char] | None = None
    for _ in range(4 * max_entries + 4):
        if lib.next_key(fd, prev, key):
            break  # ENOENT: past the last key
        raw = key.raw
        seen.add(raw)
        prev = ctypes.create_string_buffer(raw, key_size)
    return len(seen)


# ---------------------------------------------------------------- one sample


@dataclass
class ProcSample:
    rss: int
    uss: int
    fds: int
    cpu_s: float
    maps: dict[str, MapCount]  # by map name
    drops: dict[str, int]  # the probe's drop counters, cumulative, by reason


@dataclass
class Sample:
    t: float  # seconds since iogen started its load
    procs: dict[str, ProcSample]


def sample_process(lib: _Libbpf, proc: psutil.Process) -> ProcSample:
    mem = proc.memory_full_info()
    cpu = proc.cpu_times()
    maps: dict[str, MapCount] = {}
    for map_id in sorted(held_map_ids(proc.pid)):
        counted = count_map(lib, map_id)
        if counted is not None:
            maps[counted.name] = counted
    return ProcSample(mem.rss, mem.uss, proc.num_fds(), cpu.user + cpu.system, maps, _drops(maps))


def _drops(maps: dict[str, MapCount]) -> dict[str, int]:
    """The probe's drop counters, read from its .bss (`drops` is the only variable
    there, at offset 0; abi.DropCounters mirrors it): which reason lost what, when."""
    bss = next((m.value for m in maps.values() if m.value is not None), None)
    if bss is None or len(bss) < ctypes.sizeof(DropCounters):
        return {}
    return DropCounters.from_buffer_copy(bss[: ctypes.sizeof(DropCounters)]).as_dict()


# ---------------------------------------------------------------- the processes


class LineReader:
    """Reads a child's pipe line by line in a thread, so it never blocks the child."""

    def __init__(self, stream: IO[str], name: str, keep: bool = True) -> None:
        self.lines: list[str] = []
        self._stream = stream
        self._keep = keep
        self._cond = threading.Condition()
        self._closed = False
        self.handlers: list[Callable[[str], None]] = []
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for line in self._stream:
            for handler in self.handlers:
                handler(line)
            with self._cond:
                if self._keep:
                    self.lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[str], bool], timeout_s: float) -> str | None:
        """The first kept line satisfying predicate, or None after timeout_s or at EOF."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                for line in self.lines:
                    if predicate(line):
                        return line
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    return None
                self._cond.wait(left)

    def expect(self, prefix: str, timeout_s: float, what: str) -> str:
        """The first line starting with prefix; SoakError with the last lines seen if none comes."""
        line = self.wait_for(lambda text: text.startswith(prefix), timeout_s)
        if line is None:
            raise SoakError(f"{what} within {timeout_s:.0f} s: {self.tail() or 'no output'}")
        return line

    def tail(self, n: int = 5) -> str:
        with self._cond:
            return " | ".join(line.strip() for line in self.lines[-n:])

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)


class TopSums:
    """Folds top's JSON lines into per-file totals as they arrive (FileTotals)."""

    def __init__(self) -> None:
        self.totals = FileTotals()
        self.drops: dict[str, int] = {}
        self.bad_lines: list[str] = []
        self._lock = threading.Lock()

    def feed(self, line: str) -> None:
        if not line.strip():
            return
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            self.bad_lines.append(line[:200])
            return
        with self._lock:
            self.totals.add(obj)
            for reason, n in obj.get("drops", {}).items():
                self.drops[reason] = self.drops.get(reason, 0) + n


def _stop(proc: subprocess.Popen[str] | None, sig: int = signal.SIGINT, timeout_s: float = 60) -> int | None:
    """Signal a child we started and reap it (killed if it does not stop in time)."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


# ---------------------------------------------------------------- options and result


@dataclass
class SoakOptions:
    seconds: float = 600.0
    rate: int = 20_000  # requests/s, all threads together
    threads: int = 4  # files written at the steady rate, one thread each
    size: int = 512  # bytes per pwrite
    sample_s: float = 0.0  # 0: a 24th of the run, between 1 and 5 s
    work_dir: str | None = None  # where iogen writes (default: a temp dir on /dev/shm)
    keep_trace: bool = False

    def sample_every(self) -> float:
        return self.sample_s or min(5.0, max(1.0, self.seconds / 24))


@dataclass
class SoakResult:
    options: SoakOptions
    iogen: dict[str, Any] = field(default_factory=dict)
    elapsed_s: float = 0.0
    samples: list[Sample] = field(default_factory=list)
    final: Sample | None = None  # after iogen finished, before the tracers stop
    memory: dict[str, dict[str, float]] = field(default_factory=dict)
    maps: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    fds: dict[str, dict[str, int]] = field(default_factory=dict)
    lost_events: dict[str, int] = field(default_factory=dict)
    top_drops: dict[str, int] = field(default_factory=dict)
    drops: dict[str, dict[str, Any]] = field(default_factory=dict)  # per tracer, from its .bss
    counts: dict[str, dict[str, Any]] = field(default_factory=dict)
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    trace: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        produced = self.iogen_ops()
        return {
            "passed": self.passed,
            "failures": self.failures,
            "options": asdict(self.options) | {"sample_s": self.options.sample_every()},
            "load": {
                "requests": produced,
                "steady_requests": sum(
                    f["write_ops"] for f in self.iogen.get("files", []) if Path(f["path"]).name.startswith("rate")
                ),
                "seconds": round(self.elapsed_s, 3),
                "achieved_rate": round(produced / self.elapsed_s) if self.elapsed_s else 0,
                "files": len(self.iogen.get("files", [])),
            },
            "memory": self.memory,
            "maps": self.maps,
            "fds": self.fds,
            "lost_events": self.lost_events,
            "top_drops": self.top_drops,
            "drops": self.drops,
            "counts": self.counts,
            "exit_codes": self.exit_codes,
            "trace": self.trace,
            "samples": [_sample_json(s) for s in self.samples + ([self.final] if self.final else [])],
        }

    def iogen_ops(self) -> int:
        return sum(f["write_ops"] + f["read_ops"] + f["sync_ops"] for f in self.iogen.get("files", []))

    def table(self) -> str:
        """A short text table: what was measured and whether each criterion held."""
        o = self.options
        rate = self.iogen_ops() / self.elapsed_s if self.elapsed_s else 0
        lines = [
            f"soak: {self.elapsed_s:.0f} s of {o.rate:,} requests/s asked ({rate:,.0f}/s done) over {o.threads} files,"
            f" sampled every {o.sample_every():g} s: {'PASSED' if self.passed else 'FAILED'}",
            "",
            f"{'tracer':8} {'RSS 2nd third':>13} {'RSS last third':>14} {'change':>7} {'RSS max':>9} {'USS max':>9}"
            f" {'CPU':>6} {'fds':>7} {'lost':>5}  counts",
        ]
        for name in TRACERS:
            m = self.memory.get(name, {})
            fds = self.fds.get(name, {})
            fd_range = f"{fds.get('first', 0)}→{fds.get('last', 0)}"
            lines.append(
                f"{name:8} {m.get('rss_second_third_mib', 0):9.1f} MiB {m.get('rss_last_third_mib', 0):10.1f} MiB"
                f" {m.get('rss_change_pct', 0):+6.1f}% {m.get('rss_max_mib', 0):5.1f} MiB {m.get('uss_max_mib', 0):5.1f} MiB"
                f" {m.get('cpu_pct', 0):5.1f}% {fd_range:>7} {self.lost_events.get(name, -1):5}"
                f"  {'exact' if self.counts.get(name, {}).get('exact') else 'DIFFER'}"
            )
        lines += [
            "",
            f"{'tracer':8} {'map (entries)':16} {'type':9} {'capacity':>8} {'before last third':>17} {'last third':>10}"
            f" {'end':>4}",
        ]
        for name in TRACERS:
            for map_name, m in sorted(self.maps.get(name, {}).items()):
                if map_name.endswith(("_a", "_b")) and map_name[:-2] + "_a+" + map_name[:-2] + "_b" in self.maps[name]:
                    continue  # shown as the pair
                lines.append(
                    f"{name:8} {map_name:16} {m['type']:9} {m['max_entries']:8} {m['before_last_third_max']:17}"
                    f" {m['last_third_max']:10} {m['final']:4}"
                )
        if self.trace:
            events, size = self.trace["events"], self.trace["bytes"]
            lines += ["", f"trace: {events:,} events, {size / 2**20:.1f} MiB ({size / max(events, 1):.1f} B/event)"]
        lines += [f"FAILED: {f}" for f in self.failures]
        return "\n".join(lines)

    def bench_rows(self) -> list[tuple[str, str, float, str, str]]:
        """(scenario, metric, value, unit, note) rows for tools/bench.py's table."""
        label = f"soak {self.elapsed_s / 60:.0f} min @ {self.options.rate / 1000:.0f}k/s"
        rows: list[tuple[str, str, float, str, str]] = []
        for name in TRACERS:
            m = self.memory.get(name, {})
            note = f"{m.get('rss_second_third_mib', 0):.1f} → {m.get('rss_last_third_mib', 0):.1f} MiB"
            rows.append((f"{label}: {name}", "RSS change, 2nd → last third", m.get("rss_change_pct", 0), "%", note))
            rows.append((f"{label}: {name}", "RSS max", m.get("rss_max_mib", 0), "MiB", ""))
            rows.append((f"{label}: {name}", "lost events", self.lost_events.get(name, -1), "", ""))
            exact = self.counts.get(name, {}).get("exact", False)
            rows.append((f"{label}: {name}", "counts equal iogen's", 1.0 if exact else 0.0, "", ""))
        rows.append((label, "criteria failed", len(self.failures), "", "; ".join(self.failures)[:200]))
        return rows


def _mib(n: float) -> float:
    return round(n / 2**20, 2)


def _sample_json(s: Sample) -> dict[str, Any]:
    return {
        "t": round(s.t, 2),
        **{
            name: {
                "rss_mib": _mib(p.rss),
                "uss_mib": _mib(p.uss),
                "fds": p.fds,
                "cpu_s": round(p.cpu_s, 2),
                "map_entries": {m.name: m.entries for m in p.maps.values() if m.entries is not None},
                "drops": {reason: n for reason, n in p.drops.items() if n},
            }
            for name, p in s.procs.items()
        },
    }


# ---------------------------------------------------------------- the run


def run_soak(options: SoakOptions) -> SoakResult:
    """Run the load and both tracers for options.seconds, then judge. Raises SoakError
    when something could not start; a criterion that does not hold is a failure."""
    if not os.access(IOGEN, os.X_OK):
        raise SoakError(f"{IOGEN} is not built (make setup)")
    result = SoakResult(options)
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    work = Path(options.work_dir or tempfile.mkdtemp(prefix="mysqlio-soak-", dir=shm))
    trace_dir = Path(tempfile.mkdtemp(prefix="mysqlio-soak-trace-"))
    trace = trace_dir / "soak.trace"
    gen = top = rec = None
    try:
        gen = subprocess.Popen(
            [str(IOGEN), "--dir", str(work), "--wait", *_iogen_args(options)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert gen.stdin is not None and gen.stdout is not None
        gen_out = LineReader(gen.stdout, "iogen")
        gen_out.expect('{"pid"', 30, "iogen did not start")
        top = _Tracer.start("top", ["top", "-p", str(gen.pid), "--json", "-i", "1"])
        # not -q: record's first line says the probes are attached, and its
        # progress lines (every 10 s off a terminal) are kept for the log
        rec = _Tracer.start("record", ["record", "-p", str(gen.pid), "-o", str(trace)])
        sums = TopSums()
        assert top.stdout is not None
        top.stdout.handlers.append(sums.feed)
        top.stderr.expect("mysqlio: tracing pid", 60, "mysqlio top did not attach")
        rec.stderr.expect("mysqlio: recording pid", 60, "mysqlio record did not attach")
        try:
            lib = _Libbpf()
        except OSError as exc:
            raise SoakError(f"cannot load libbpf.so.1: {exc}") from exc

        start = time.monotonic()
        gen.stdin.write("go\n")
        gen.stdin.flush()
        result.iogen = _sample_until_done(result, lib, gen, gen_out, (top, rec), start)
        result.elapsed_s = time.monotonic() - start
        # one top interval and one record flush after the last request, then the end state
        time.sleep(1.6)
        result.final = _sample(lib, (top, rec), start)

        result.exit_codes["top"] = _stop(top.popen)
        result.exit_codes["record"] = _stop(rec.popen)
        top.stdout.join(30)
        gen.stdin.close()
        result.exit_codes["iogen"] = gen.wait(timeout=30)
        result.top_drops = sums.drops
        result.lost_events["top"] = sums.totals.lost_events
        if sums.bad_lines:
            result.failures.append(f"top printed {len(sums.bad_lines)} lines that are not JSON: {sums.bad_lines[0]!r}")
        report = _report(trace)
        result.trace = {
            "bytes": trace.stat().st_size,
            "events": report["events"],
            "truncated": report["truncated"],
            "record_progress": [line.strip() for line in rec.stderr.lines[-2:]],
        }
        result.lost_events["record"] = report["lost_events"]
        judge(result, sums.totals, report, work, [*top.stderr.lines, *rec.stderr.lines])
        return result
    finally:
        for tracer in (top, rec):
            if tracer is not None:
                _stop(tracer.popen, signal.SIGKILL, 10)
        if gen is not None and gen.poll() is None:
            gen.kill()
            gen.wait()
        if not options.work_dir:
            shutil.rmtree(work, ignore_errors=True)
        if options.keep_trace:
            print(f"soak: trace kept at {trace}", file=sys.stderr)
        else:
            shutil.rmtree(trace_dir, ignore_errors=True)


@dataclass
class _Tracer:
    """One mysqlio command under test: its process and its output, read as it comes."""

    name: str
    popen: subprocess.Popen[str]
    ps: psutil.Process
    stderr: LineReader
    stdout: LineReader | None

    @classmethod
    def start(cls, name: str, args: list[str]) -> _Tracer:
        popen = subprocess.Popen(
            [*MYSQLIO, *args],
            stdout=subprocess.PIPE if name == "top" else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert popen.stderr is not None
        stdout = LineReader(popen.stdout, f"{name} stdout", keep=False) if popen.stdout else None
        return cls(name, popen, psutil.Process(popen.pid), LineReader(popen.stderr, f"{name} stderr"), stdout)


def _iogen_args(o: SoakOptions) -> list[str]:
    scenarios = [arg for name in (*ONE_SHOT_SCENARIOS, "rate") for arg in ("--scenario", name)]
    steady = {"--rate": o.rate, "--seconds": o.seconds, "--threads": o.threads, "--size": o.size}
    return scenarios + [arg for opt, value in steady.items() for arg in (opt, str(value))]


def _sample(lib: _Libbpf, tracers: Sequence[_Tracer], start: float) -> Sample:
    now = time.monotonic()
    try:
        return Sample(now - start, {t.name: sample_process(lib, t.ps) for t in tracers})
    except psutil.Error as exc:
        raise SoakError(f"cannot sample a tracer: {exc}") from exc


def _sample_until_done(
    result: SoakResult,
    lib: _Libbpf,
    gen: subprocess.Popen[str],
    gen_out: LineReader,
    tracers: Sequence[_Tracer],
    start: float,
) -> dict[str, Any]:
    """Sample every sample_every() seconds until iogen prints its ground truth, which is returned."""
    every = result.options.sample_every()
    limit = result.options.seconds * 3 + 120  # iogen starved of CPU still ends; this is for a hang
    next_at = start
    while True:
        line = gen_out.wait_for(lambda text: '"files"' in text, max(0.0, next_at - time.monotonic()))
        if line is not None:
            return json.loads(line)
        if gen.poll() is not None:
            raise SoakError(f"iogen exited {gen.returncode} before the end of the load")
        for tracer in tracers:
            if tracer.popen.poll() is not None:
                raise SoakError(
                    f"mysqlio {tracer.name} exited {tracer.popen.returncode} during the soak: {tracer.stderr.tail()}"
                )
        if time.monotonic() - start > limit:
            raise SoakError(f"iogen did not finish within {limit:.0f} s")
        result.samples.append(_sample(lib, tracers, start))
        next_at += every


def _report(trace: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [*MYSQLIO, "report", str(trace), "--json"], capture_output=True, text=True, timeout=600, check=False
    )
    if proc.returncode != 0:
        raise SoakError(f"mysqlio report exited {proc.returncode}: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


# ---------------------------------------------------------------- judging


def thirds(samples: Sequence[Sample], elapsed_s: float) -> tuple[list[Sample], list[Sample]]:
    """(second third, last third) of the samples by time; the first third is warm-up."""
    second = [s for s in samples if elapsed_s / 3 <= s.t < 2 * elapsed_s / 3]
    last = [s for s in samples if s.t >= 2 * elapsed_s / 3]
    return second, last


def judge(result: SoakResult, top: FileTotals, report: dict[str, Any], work: Path, stderr_lines: Iterable[str]) -> None:
    second, last = thirds(result.samples, result.elapsed_s)
    if len(second) < 3 or len(last) < 3:
        result.failures.append(f"too few samples to judge ({len(second)} and {len(last)} in the last two thirds)")
        return
    for name in TRACERS:
        _judge_memory(result, name, second, last)
        _judge_maps(result, name, second, last)
        _judge_fds(result, name, second, last)
        result.drops[name] = _drops_summary(result, name)
        if result.lost_events.get(name):
            reasons = ", ".join(f"{k} {v}" for k, v in result.drops[name]["total"].items()) or "reason unknown"
            result.failures.append(f"{name}: {result.lost_events[name]} events lost ({reasons})")
        code = result.exit_codes.get(name)
        if code != 0:
            result.failures.append(f"mysqlio {name} exited {code}")
    if result.exit_codes.get("iogen") != 0:
        result.failures.append(f"iogen exited {result.exit_codes.get('iogen')}")
    if report["truncated"]:
        result.failures.append("the trace is truncated")
    expected = {f["path"]: f for f in result.iogen.get("files", [])}
    result.counts["top"] = compare_counts(expected, top.under(str(work)), {p: top.deleted[p] for p in top.totals})
    prefix = str(work).rstrip("/") + "/"
    recorded = {f["path"]: f for f in report["files"] if f["path"].startswith(prefix)}
    result.counts["record"] = compare_counts(expected, recorded, {p: f["deleted"] for p, f in recorded.items()})
    for name in TRACERS:
        counts = result.counts[name]
        if not counts["exact"]:
            result.failures.append(f"{name}: counts differ from iogen's: {'; '.join(counts['mismatches'][:5])}")
    tracebacks = [line for line in stderr_lines if "Traceback" in line]
    if tracebacks:
        result.failures.append("a tracer printed a traceback")


def _drops_summary(result: SoakResult, name: str) -> dict[str, Any]:
    """The probe's non-zero drop counters at the end, and when each was first seen."""
    everything = [*result.samples, *([result.final] if result.final else [])]
    total = {k: v for k, v in everything[-1].procs[name].drops.items() if v}
    first_seen = {k: next(s.t for s in everything if s.procs[name].drops.get(k)) for k in total}
    return {"total": total, "first_seen_s": {k: round(t, 1) for k, t in first_seen.items()}}


def _judge_memory(result: SoakResult, name: str, second: list[Sample], last: list[Sample]) -> None:
    rss_second = statistics.median(s.procs[name].rss for s in second)
    rss_last = statistics.median(s.procs[name].rss for s in last)
    everything = [*result.samples, *([result.final] if result.final else [])]
    change = rss_last / rss_second - 1
    result.memory[name] = {
        "rss_second_third_mib": _mib(rss_second),
        "rss_last_third_mib": _mib(rss_last),
        "rss_change_pct": round(100 * change, 2),
        "rss_max_mib": _mib(max(s.procs[name].rss for s in everything)),
        "rss_first_mib": _mib(everything[0].procs[name].rss),
        "uss_second_third_mib": _mib(statistics.median(s.procs[name].uss for s in second)),
        "uss_last_third_mib": _mib(statistics.median(s.procs[name].uss for s in last)),
        "uss_max_mib": _mib(max(s.procs[name].uss for s in everything)),
        "cpu_pct": round(
            100 * (everything[-1].procs[name].cpu_s - everything[0].procs[name].cpu_s) / result.elapsed_s, 1
        ),
    }
    if abs(change) > MEMORY_TOLERANCE:
        result.failures.append(
            f"{name}: RSS not flat: median {_mib(rss_second)} MiB in the second third, {_mib(rss_last)} MiB in the last"
            f" ({100 * change:+.1f}%, allowed ±{100 * MEMORY_TOLERANCE:.0f}%)"
        )


def _entries(sample: Sample, name: str, map_names: Sequence[str]) -> int:
    """Entries of the named maps (added up) in one sample."""
    total = 0
    for map_name in map_names:
        counted = sample.procs[name].maps.get(map_name)
        total += counted.entries or 0 if counted else 0
    return total


def _judge_maps(result: SoakResult, name: str, second: list[Sample], last: list[Sample]) -> None:
    """A map grows when its last third holds more entries than it ever held before
    (warm-up included: the one-shot scenarios ran then). Maps swapped every interval
    (X_a / X_b: one fills while the other is drained) are judged as one, since which
    of the two is filling depends on when the sample fell, and must be empty at the end."""
    everything = [*result.samples, *([result.final] if result.final else [])]
    before_last = [s for s in result.samples if s.t < 2 * result.elapsed_s / 3]
    first = result.samples[0].procs[name].maps
    groups: dict[str, tuple[str, ...]] = {
        map_name: (map_name,) for map_name, m in first.items() if m.entries is not None
    }
    pairs = {(a, a[:-2] + "_b") for a in groups if a.endswith("_a") and a[:-2] + "_b" in groups}
    swapped = {m for pair in pairs for m in pair}
    groups |= {"+".join(pair): pair for pair in pairs}
    maps: dict[str, dict[str, Any]] = {}
    for label, members in sorted(groups.items()):
        capacity = sum(first[m].max_entries for m in members)
        if first[members[0]].type == "event_slots":  # a CPU's slots: the slot array's share
            capacity = first["event_slots"].max_entries // (first[members[0]].max_entries // 2)
        earlier_max = max(_entries(s, name, members) for s in before_last)
        last_max = max(_entries(s, name, members) for s in last)
        most = max(_entries(s, name, members) for s in everything)
        end = _entries(everything[-1], name, members)
        maps[label] = {
            "type": first[members[0]].type,
            "max_entries": capacity,
            "first": _entries(result.samples[0], name, members),
            "second_third_max": max(_entries(s, name, members) for s in second),
            "before_last_third_max": earlier_max,
            "last_third_max": last_max,
            "max": most,
            "final": end,
        }
        if first[members[0]].type in ("ringbuf", "event_slots"):
            # bytes or slots not yet read: they come and go every poll; the reader must keep far ahead
            if most > capacity // 2:
                result.failures.append(f"{name}: event stream {label} was {most} of {capacity} full")
        elif len(members) == 1 and members[0] in swapped:
            pass  # judged as the pair
        elif last_max > earlier_max + MAP_GROWTH_SLACK:
            result.failures.append(
                f"{name}: map {label} grows: at most {earlier_max} entries before the last third, {last_max} in it"
            )
        if most > capacity:
            result.failures.append(f"{name}: map {label} held {most} entries, more than its {capacity}")
        if (label in EMPTY_AT_END or set(members) <= swapped) and end != 0:
            result.failures.append(f"{name}: map {label} holds {end} entries after the load ended (must be 0)")
    result.maps[name] = maps
    held = [{(m.name, m.map_id) for m in s.procs[name].maps.values()} for s in everything]
    if any(h != held[0] for h in held):
        result.failures.append(f"{name}: the BPF maps it holds changed during the run (a map re-created or leaked)")


def _judge_fds(result: SoakResult, name: str, second: list[Sample], last: list[Sample]) -> None:
    second_max = max(s.procs[name].fds for s in second)
    last_max = max(s.procs[name].fds for s in last)
    result.fds[name] = {
        "first": result.samples[0].procs[name].fds,
        "second_third_max": second_max,
        "last_third_max": last_max,
        "last": (result.final or result.samples[-1]).procs[name].fds,
    }
    if last_max > second_max + FD_GROWTH_SLACK:
        result.failures.append(
            f"{name}: open fds grow: at most {second_max} in the second third, {last_max} in the last"
        )


def compare_counts(
    expected: dict[str, dict[str, Any]], traced: dict[str, dict[str, int]], deleted: dict[str, bool]
) -> dict[str, Any]:
    """Every file iogen touched, no other file in its directory, every counter equal."""
    mismatches: list[str] = []
    for path in sorted(set(expected) | set(traced)):
        if path not in traced:
            mismatches.append(f"{path}: not traced")
            continue
        if path not in expected:
            mismatches.append(f"{path}: traced, but iogen never touched it")
            continue
        for counter in COUNTERS:
            want, got = expected[path][counter], traced[path][counter]
            if want != got:
                mismatches.append(f"{path}: {counter} {got}, iogen {want}")
        if deleted.get(path) != expected[path]["deleted"]:
            mismatches.append(f"{path}: deleted {deleted.get(path)}, iogen {expected[path]['deleted']}")
    totals = {c: sum(f[c] for f in traced.values()) for c in COUNTERS}
    return {"exact": not mismatches, "files": len(traced), "totals": totals, "mismatches": mismatches}


# ---------------------------------------------------------------- command line


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    length = ap.add_mutually_exclusive_group()
    length.add_argument("--minutes", type=float, help="length of the load (default 10)")
    length.add_argument("--seconds", type=float, help="length of the load in seconds")
    ap.add_argument("--rate", type=int, default=20_000, help="requests per second, all files (default 20000)")
    ap.add_argument("--threads", type=int, default=4, help="files written at the rate, one thread each (default 4)")
    ap.add_argument("--size", type=int, default=512, help="bytes per pwrite (default 512)")
    ap.add_argument("--sample", type=float, default=0.0, help="seconds between samples (default: run/24, 1..5)")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON object")
    ap.add_argument("--out", help="also write the JSON result to this file")
    ap.add_argument("--keep-trace", action="store_true", help="keep the recorded trace (its path goes to stderr)")
    args = ap.parse_args(argv)
    seconds = args.seconds if args.seconds is not None else 60 * (args.minutes if args.minutes is not None else 10)
    if seconds < 9 or args.rate < 1 or not 1 <= args.threads <= 32 or args.size < 1 or args.sample < 0:
        ap.error("need --seconds >= 9, --rate >= 1, --threads 1..32, --size >= 1, --sample >= 0")
    options = SoakOptions(seconds, args.rate, args.threads, args.size, args.sample, keep_trace=args.keep_trace)
    try:
        result = run_soak(options)
    except SoakError as exc:
        print(f"soak: {exc}", file=sys.stderr)
        return 1
    if args.out:
        Path(args.out).write_text(json.dumps(result.to_json(), indent=1) + "\n")
    print(json.dumps(result.to_json(), indent=1) if args.json else result.table())
    return 0 if result.passed else 1


if __name__ == "__main__":
    sys.exit(main())

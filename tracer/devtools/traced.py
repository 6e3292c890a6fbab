"""Run a workload under `mysqlio top --json` and collect both sides' numbers."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

# iogen's default scenarios (all but the on-request rate, periodic and latency ones)
IOGEN_SCENARIOS = (
    "write",
    "pwrite",
    "writev",
    "pwritev",
    "pwritev2",
    "reads",
    "sync",
    "aio",
    "uring",
    "odirect",
    "reuse",
    "rename",
    "unlink",
    "shortlived",
    "errors",
    "nonfile",
)

COUNTERS = (
    "write_bytes",
    "write_ops",
    "read_bytes",
    "read_ops",
    "sync_ops",
    "fsync_ops",
    "fdatasync_ops",
    "sync_file_range_ops",
    "errors",
)
# iogen gives these for its page-cache scenarios (pc_*) only; writeback_by beside them
PAGE_CACHE_COUNTERS = ("msync_ops", "dirtied_bytes", "writeback_bytes")
# read from the disk for the file (iogen's coldread gives disk_read_bytes, and
# direct_read_bytes: its O_DIRECT reads' part); readahead_bytes is the readahead's part,
# which iogen cannot know
DISK_READ_COUNTERS = ("disk_read_bytes", "readahead_bytes", "direct_read_bytes")
# iogen's page-cache scenarios whose ground truth holds on any real block device (not
# tmpfs: no writeback); pc_flusher also needs the flusher's sysctls shortened
PAGE_CACHE_SCENARIOS = ("pc_fsync", "pc_small", "pc_sfr", "pc_mmap")


def page_cache_row(counts: dict[str, Any], writeback_by: dict[str, int]) -> dict[str, int]:
    """A file's page-cache counters, writeback causes flattened as wb_<cause>."""
    row = {c: int(counts.get(c, 0)) for c in PAGE_CACHE_COUNTERS}
    row.update({f"wb_{cause}": int(n) for cause, n in writeback_by.items() if n})
    return row


BPF_KINDS = ("prog", "link", "map")


def bpf_fdinfo(pid: int) -> list[dict[str, str]]:
    """/proc/PID/fdinfo of each BPF object fd a process holds, as key -> value
    (prog_id, prog_type, run_cnt, map_id, link_id, ...); empty once it has gone."""
    try:
        fds = os.listdir(f"/proc/{pid}/fdinfo")
    except OSError:
        return []
    infos = []
    for fd in fds:
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                text = f.read()
        except OSError:
            continue
        info = {key: value.strip() for key, _, value in (line.partition(":") for line in text.splitlines())}
        if any(f"{kind}_id" in info for kind in BPF_KINDS):
            infos.append(info)
    return infos


def held_bpf_ids(pid: int) -> dict[str, set[int]]:
    """BPF object ids whose fds a process holds, by kind ("prog", "link", "map")."""
    ids: dict[str, set[int]] = {kind: set() for kind in BPF_KINDS}
    for info in bpf_fdinfo(pid):
        for kind in BPF_KINDS:
            if f"{kind}_id" in info:
                ids[kind].add(int(info[f"{kind}_id"]))
    return ids


# The line mysqlio prints once when it mounted tracefs itself (the first run on
# a fresh machine: syscall_hook.HookChoice.notice); tests that read a tracer's
# first stderr line look past it.
TRACEFS_NOTICE = "mysqlio: tracefs was not mounted; mounted it at "


def attached_line(stream: TextIO) -> str:
    """A tracer's first stderr line (printed once the probes are attached),
    past the tracefs notice."""
    line = stream.readline()
    while line.startswith(TRACEFS_NOTICE):
        line = stream.readline()
    return line


def without_tracefs_notice(stderr: str) -> str:
    return "".join(line for line in stderr.splitlines(keepends=True) if not line.startswith(TRACEFS_NOTICE))


def read_json_line(stream: TextIO, timeout_s: float, what: str) -> dict[str, Any]:
    """The next line of stream as JSON, or fail after timeout_s."""
    ready, _, _ = select.select([stream], [], [], timeout_s)
    if not ready:
        raise AssertionError(f"no output from {what} within {timeout_s}s")
    line = stream.readline()
    if not line:
        raise AssertionError(f"{what} closed its output")
    return json.loads(line)


def start_iogen(
    iogen: str,
    directory: str,
    args: Sequence[str],
    preexec_fn: Callable[[], None] | None = None,
    ready_timeout_s: float = 10,
) -> subprocess.Popen[str]:
    """iogen --wait: prints its ready line, then waits for a line on stdin to start."""
    gen = subprocess.Popen(
        [iogen, "--dir", directory, "--wait", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=preexec_fn,
    )
    assert gen.stdout is not None
    assert read_json_line(gen.stdout, ready_timeout_s, "iogen").get("ready") is True
    return gen


def end_iogen(gen: subprocess.Popen[str], timeout_s: float = 10) -> None:
    """iogen's stdin closed (it exits when it waits for a line), killed after timeout_s."""
    if gen.poll() is None:
        if gen.stdin:
            gen.stdin.close()
        try:
            gen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            gen.kill()
            gen.wait()


def start_record(pid: int, trace: str, extra: Sequence[str] = ()) -> subprocess.Popen[str]:
    """`mysqlio record` of pid into trace, once it says it records (its probes attached)."""
    rec = subprocess.Popen(
        [sys.executable, "-m", "mysqlio", "record", "-p", str(pid), "-o", trace, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert rec.stderr is not None
    first = attached_line(rec.stderr)
    assert first.startswith("mysqlio: recording pid"), first
    return rec


MYSQLIO_CLI = (sys.executable, "-m", "mysqlio")


def start_fleet_exporter(port: int, interval_s: float, extra: Sequence[str] = ()) -> subprocess.Popen[str]:
    """`mysqlio exporter --all` on 127.0.0.1:port, once it says it exports (its stderr stays
    piped for the caller; killed if it never says so)."""
    exporter = subprocess.Popen(
        [*MYSQLIO_CLI, "exporter", "--all", *extra, "-i", str(interval_s), "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert exporter.stderr is not None
        ready, _, _ = select.select([exporter.stderr], [], [], 60)
        assert ready and exporter.stderr.readline().startswith("mysqlio: exporting every mysqld / mariadbd")
    except BaseException:
        exporter.kill()
        exporter.wait()
        raise
    return exporter


def start_top(
    pid: int, interval_s: float = 0.3, extra: Sequence[str] = (), command: Sequence[str] = ()
) -> subprocess.Popen[str]:
    """COMMAND: what runs mysqlio (default: this Python's `-m mysqlio`)."""
    mysqlio = list(command) or [sys.executable, "-m", "mysqlio"]
    return subprocess.Popen(
        [*mysqlio, "top", "-p", str(pid), "--json", "-i", str(interval_s), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop_top(top: subprocess.Popen[str], timeout_s: float = 20) -> tuple[list[dict[str, Any]], str]:
    """SIGINT (the last partial interval is printed), then every remaining object."""
    top.send_signal(signal.SIGINT)
    out, err = top.communicate(timeout=timeout_s)
    assert top.returncode == 0, f"mysqlio top exited {top.returncode}: {err}"
    return [json.loads(line) for line in out.splitlines() if line.strip()], err


class TopCollector:
    """`mysqlio top --json` in the background, its intervals read as they come (a reader
    thread: the pipe never fills)."""

    def __init__(self, pid: int, interval_s: float, extra: Sequence[str] = ()) -> None:
        self.proc = start_top(pid, interval_s, extra)
        self.intervals: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                obj = json.loads(line)
                with self._lock:
                    self.intervals.append(obj)

    def wait_until(self, t: float, timeout_s: float = 30) -> None:
        """Until top has printed an interval that ends at or after unix time t (0: any)."""
        deadline = time.monotonic() + max(0.0, t - time.time()) + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if self.intervals and self.intervals[-1]["time"] >= t:
                    return
            if self.proc.poll() is not None:
                raise AssertionError(f"mysqlio top exited {self.proc.returncode}: {self.stderr()}")
            time.sleep(0.05)
        raise AssertionError(f"mysqlio top printed nothing after {t} within {timeout_s} s")

    def between(self, start: float, end: float) -> list[dict[str, Any]]:
        with self._lock:
            return [o for o in self.intervals if start <= o["time"] <= end]

    def stop(self) -> int:
        """SIGINT (it prints the last partial interval and exits 0); its exit code."""
        return interrupt(self.proc, self._thread)

    def stderr(self) -> str:
        """What it printed on stderr, once it has exited ("" while it runs)."""
        return self.proc.stderr.read() if self.proc.stderr and self.proc.poll() is not None else ""


def interrupt(proc: subprocess.Popen[str], reader: threading.Thread) -> int:
    """Stop a mysqlio command as Ctrl-C does (killed if it does not exit within 30 s), then
    wait for the thread that alone reads its output, to its end; its exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    reader.join(timeout=5)
    return proc.returncode


_TOTALLED = COUNTERS + PAGE_CACHE_COUNTERS + DISK_READ_COUNTERS


@dataclass
class FileTotals:
    """Per-path sums over all intervals of a trace."""

    totals: dict[str, dict[str, int]] = field(default_factory=dict)
    writeback_by: dict[str, dict[str, int]] = field(default_factory=dict)  # path -> cause -> bytes
    deleted: dict[str, bool] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    lost_events: int = 0
    intervals: int = 0

    def add(self, obj: dict[str, Any]) -> None:
        self.intervals += 1
        self.lost_events += obj["lost_events"]
        for f in obj["files"]:
            row = self.totals.setdefault(f["path"], dict.fromkeys(_TOTALLED, 0))
            for c in _TOTALLED:
                row[c] += f.get(c, 0)
            by = self.writeback_by.setdefault(f["path"], {})
            for cause, n in f.get("writeback_by", {}).items():
                by[cause] = by.get(cause, 0) + n
            self.deleted[f["path"]] = f["deleted"]
            self.kinds[f["path"]] = f["kind"]

    def under(self, directory: str) -> dict[str, dict[str, int]]:
        prefix = directory.rstrip("/") + "/"
        return {p: c for p, c in self.totals.items() if p.startswith(prefix)}


@dataclass
class IogenRun:
    expected: dict[str, Any]
    traced: FileTotals
    intervals: list[dict[str, Any]]


def run_iogen_traced(
    iogen: str,
    directory: str,
    args: Sequence[str],
    interval_s: float = 0.3,
    ready_timeout_s: float = 10,
    stop_timeout_s: float = 20,
) -> IogenRun:
    """iogen waits until top has attached, runs, and stays alive for the last drain.
    stop_timeout_s: for top to print its last intervals and exit after SIGINT."""
    gen = start_iogen(iogen, directory, args, ready_timeout_s=ready_timeout_s)
    top = None
    try:
        assert gen.stdin is not None and gen.stdout is not None
        top = start_top(gen.pid, interval_s)
        assert top.stdout is not None
        first = read_json_line(top.stdout, 30, "mysqlio top")  # probes attached
        gen.stdin.write("go\n")
        gen.stdin.flush()
        expected = read_json_line(gen.stdout, 300, "iogen run")
        time.sleep(interval_s)
        rest, _ = stop_top(top, stop_timeout_s)
        intervals = [first, *rest]
        traced = FileTotals()
        for obj in intervals:
            traced.add(obj)
        return IogenRun(expected, traced, intervals)
    finally:
        if top is not None and top.poll() is None:
            top.kill()
            top.wait()
        end_iogen(gen)


def run_iogen_recorded(
    iogen: str,
    directory: str,
    args: Sequence[str],
    trace: str,
    extra: Sequence[str] = (),
    ready_timeout_s: float = 10,
) -> dict[str, Any]:
    """iogen under `mysqlio record`: iogen's expectations; the trace is left at `trace`."""
    gen = start_iogen(iogen, directory, args, ready_timeout_s=ready_timeout_s)
    rec = None
    try:
        assert gen.stdin is not None and gen.stdout is not None
        rec = start_record(gen.pid, trace, extra)
        gen.stdin.write("go\n")
        gen.stdin.flush()
        expected = read_json_line(gen.stdout, 300, "iogen run")
        time.sleep(1.0)
        rec.send_signal(signal.SIGINT)
        _, err = rec.communicate(timeout=60)
        assert rec.returncode == 0, f"record exited {rec.returncode}: {err}"
        return expected
    finally:
        if rec is not None and rec.poll() is None:
            rec.kill()
            rec.wait()
        end_iogen(gen)


def report_json(trace: str, *args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "mysqlio", "report", trace, "--json", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """A user error: non-zero exit, exactly one line on stderr holding each fragment, no traceback."""
    assert proc.returncode != 0
    lines = without_tracefs_notice(proc.stderr).strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def assert_exact(run: IogenRun, directory: Path) -> None:
    """Every file iogen touched, and no other file in its directory, with equal counts."""
    traced = run.traced.under(str(directory))
    expected = {f["path"]: f for f in run.expected["files"]}
    assert run.traced.lost_events == 0
    assert sorted(traced) == sorted(expected), "files traced differ from files written"
    for path, want in expected.items():
        got = traced[path]
        assert {c: got[c] for c in COUNTERS} == {c: want[c] for c in COUNTERS}, path
        assert run.traced.deleted[path] == want["deleted"], path
        if "dirtied_bytes" in want:  # a page-cache scenario's file
            assert {c: got[c] for c in PAGE_CACHE_COUNTERS} == {c: want[c] for c in PAGE_CACHE_COUNTERS}, path
            assert run.traced.writeback_by[path] == want["writeback_by"], path
        if "disk_read_bytes" in want:  # a read scenario's file (coldread)
            assert got["disk_read_bytes"] == want["disk_read_bytes"], path
            assert got["direct_read_bytes"] == want["direct_read_bytes"], path

#!/usr/bin/env python3
"""One kernel's cell of the kernel matrix: is every iogen scenario traced exactly, per mode?

Run as root with the project's venv, inside a guest booted on another kernel
(tests/test_kernel_matrix.py does it through tools/guest.py) or on the host itself:

    .venv/bin/python tools/matrix_guest.py --out build/matrix/host.json --alias host

What it does (all of it within a few minutes under emulation, 5-10x slower than a host):
1. Notes the kernel: release, /proc/version, BTF, where tracefs and debugfs are mounted
   (before mysqlio runs, since mysqlio may mount tracefs itself), io_uring's sysctl.
   In a guest, makes a fresh ext4 on a loop device for all the writing (see scratch()).
2. Runs every iogen scenario of mysqlio.devtools.traced's IOGEN_SCENARIOS once untraced, in
   parallel, each in its own directory: the scenarios this kernel can run (iogen exits 0;
   `uring` fails where io_uring is missing or disabled) and the file names each one writes.
   The on-request `latency`, `rate` and `periodic` scenarios are skipped for time (said in
   the JSON, "skipped"). Where the scratch is a real block device (ext4 on a loop device),
   the page-cache scenarios (PAGE_CACHE_SCENARIOS: writeback) and `coldread` (READ_SCENARIOS:
   reads from the disk, buffered and O_DIRECT by pread, libaio and io_uring) run too.
3. Starts `mysqlio doctor --json` and the three tracers at once, each with its own probe, on
   ONE iogen run of all runnable scenarios (iogen --wait: it starts once all are attached):
   `mysqlio top --json` (mysqlio.devtools.traced's start_top / FileTotals; stopped once two
   intervals stamped after the workload are out, as the exporter is scraped), `mysqlio
   record` then `mysqlio report --json`, and `mysqlio exporter` scraped on a free
   127.0.0.1 port (mysqlio.devtools.scrape's scrape_after / iogen_files / exported_files).
4. Judges each (mode, scenario) cell against iogen's own JSON ground truth, file by file,
   counter by counter (COUNTERS; `deleted` where the mode reports it; a coldread file's
   disk_read_bytes and direct_read_bytes in every mode, the exporter's per-file counters
   included), as mysqlio.devtools.traced's assert_exact does (it is also run on top's trace).
   As tests/test_coldread.py, a read file's readahead_bytes (which iogen cannot know) must be
   within its disk reads, 0 for O_DIRECT and not 0 for the cold sequential read, and its files'
   disk reads must sum to the kernel's /proc/PID/io read_bytes over iogen's reads (tools/matrix_reads.py):
      "exact" | "differs: <what>" | "load failed: <the tracer's error line>" | "error: <line>"
   A file is a scenario's when iogen wrote a file of that name running the scenario alone
   (a traced file of no scenario's name goes to `nonfile`, whose files must be none).
   Lost events or drops make every cell of the mode differ, with one exception: runs of the
   tracer's programs the kernel skipped (their recursion_misses) that the tracer counted as
   lost (`skipped_runs` in top's drops, the exporter's drops_total, record's trace) and that
   are all its losses; the losses' counters are named in the verdict. Then a cell is
   judged on its files: "exact", or "skipped: ..." when its files are short by no more
   requests than the runs skipped (tests/test_kernel_matrix.py accepts that only on a kernel
   whose programs on the syscall tracepoints can be preempted, as Debian's PREEMPT_LAZY 7.x
   kernels, the only ones where such runs were seen).
   record's cells also differ where a file's requests of a class (write, sync, read) were
   counted but none was timed (report's <class>_latency_ns): the enter programs stamp each
   request with its syscall's number, read from the tracepoint's context, which the exit
   checks; a number read from the wrong place leaves every request untimed.
   --tracer CMD runs the tracers and doctor as CMD instead of this Python's `-m mysqlio`
   (record's report still runs here): tools/dist_roots.py passes the single-file build
   (make dist) chrooted in a Debian root, and --iogen CMD a static iogen in the same root
   (a traced process in another root has its files named through /proc/PID/root). The programs' process is then the first of CMD's
   process tree that holds BPF objects (the build's bootloaders hold none); the shared
   libraries it has mapped are noted per mode ("libraries").
5. Notes which syscall hook each tracer runs on (its programs, from its fds and bpftool):
   "tracepoints" (the per-syscall tracepoints' handle_exit*) or "raw" (handle_sys_exit*,
   where mysqlio fell back to the raw sys_enter/sys_exit).

The JSON written to --out (schema 1; tools/compat_table.py reads it):
    {"schema": 1, "alias": "6.1", "where": "guest" | "host", "date": "<UTC>", "seconds": 312.5,
     "tracer": "<the command that ran mysqlio>",
     "source": {"commit": "<HEAD>", "uncommitted_changes": false}, "repo": "<the checkout>",
     "kernel": {"release", "proc_version", "btf", "btf_bytes", "tracefs_mounts",
                "debugfs_mounts", "io_uring_disabled", "preempt", "faultable_tracepoints"},
     "scratch": {"fs": "ext4 (loop device)" | "tmpfs" | ..., "path", "note"?},
     "doctor": {"returncode", "seconds", "json" (doctor's own JSON) | null, "output"},
     "lacked": ["<what the kernel lacked, and the fallback used>", ...],
     "scenarios": {"run": [...], "skipped": {"latency": "<why>", ...},
                   "files": {"aio": ["aio_a.dat", ...], ...}, "notes": ["iogen: ...", ...]},
     "ebpf": {"top" | "record" | "exporter": {
                  "status": "ran" | "load failed" | "error", "error": "<line>" | null,
                  "load_seconds", "seconds", "stderr" (its tail), "lost_events",
                  "syscall_hook": "tracepoints" | "raw" | "none",
                  "cells": {"write": "exact", "aio": "differs: ...", ...}}},
     "stap": {same shape as "ebpf", per stap mode} (absent until stap runs are added)}
Another runner may add its own backend under "stap" (same per-mode shape); the table
generator shows "not run" for a backend a file does not carry.

Exit status: 0 when every cell is "exact", 1 otherwise, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from matrix_reads import (
    READ_SCENARIOS,
    exported_reads,
    iogen_reads,
    read_issues,
    reads_seen,
    traced_reads,
    unnamed_reads,
)

from mysqlio.devtools.scrape import (
    EXPORTER_INTERVAL_S,
    exported_files,
    free_port,
    iogen_files,
    scrape_after,
)
from mysqlio.devtools.traced import (
    COUNTERS,
    IOGEN_SCENARIOS,
    PAGE_CACHE_SCENARIOS,
    FileTotals,
    IogenRun,
    assert_exact,
    bpf_fdinfo,
    page_cache_row,
    read_json_line,
    start_top,
)
from mysqlio.doctor_kernel import faultable_syscall_tracepoints, preemption_model
from mysqlio.probe import DEVICE_ONLY_DROPS

REPO = Path(__file__).resolve().parent.parent
IOGEN = REPO / "tools" / "iogen"
MODES = ("top", "record", "exporter")
SKIPPED = {
    "latency": "skipped for time (thousands of timed requests; slow under emulation)",
    "rate": "skipped for time (a timed load, not an exactness scenario)",
    "periodic": "skipped for time (a timed burst train, not an exactness scenario)",
}
TOP_INTERVAL_S = 1.0
LOAD_TIMEOUT_S = 900.0  # loading a probe under emulation on a busy host: minutes
RUN_TIMEOUT_S = 600.0
MAX_ISSUES = 4
# what runs mysqlio for the tracers and doctor (--tracer); report always runs here
TRACER: list[str] = [sys.executable, "-m", "mysqlio"]
IOGEN_CMD: list[str] = [str(IOGEN)]  # --iogen: iogen in the tracers' root
# what each tracer prints on stderr once attached (tracer/top.py, record.py, exporter.py):
# it says the tracer ran, not why it stopped
BANNERS = {"top": "mysqlio: tracing pid ", "record": "mysqlio: recording pid ", "exporter": "mysqlio: exporting pid "}


def log(msg: str) -> None:
    print(f"matrix: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the kernel


def _mounts(fstype: str) -> list[str]:
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    return [f.split()[1] for f in lines if len(f.split()) > 2 and f.split()[2] == fstype]


def source_state() -> dict[str, Any]:
    """Which mysqlio was measured: the commit, and whether probes/ or tracer/ differ from it."""

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)

    head = git("rev-parse", "--short=12", "HEAD")
    if head.returncode != 0:
        return {"commit": None}
    dirty = git("diff", "--quiet", "HEAD", "--", "probes", "tracer").returncode != 0
    return {"commit": head.stdout.strip(), "uncommitted_changes": dirty}


def kernel_facts() -> dict[str, Any]:
    btf = Path("/sys/kernel/btf/vmlinux")
    uring = Path("/proc/sys/kernel/io_uring_disabled")
    return {
        "release": os.uname().release,
        "proc_version": Path("/proc/version").read_text().strip(),
        "btf": btf.exists(),
        "btf_bytes": btf.stat().st_size if btf.exists() else None,
        "tracefs_mounts": _mounts("tracefs"),
        "debugfs_mounts": _mounts("debugfs"),
        "io_uring_disabled": int(uring.read_text()) if uring.exists() else None,
        "preempt": preemption_model(),
        # whether the syscall tracepoints' programs can be preempted at all (6.13)
        "faultable_tracepoints": faultable_syscall_tracepoints(),
    }


# ---------------------------------------------------------------- where iogen writes


def scratch(kind: str) -> tuple[Path, dict[str, Any]]:
    """A directory for iogen, the trace and doctor's test write (TMPDIR points there).

    ext4: a fresh ext4 on a loop device (the guest's /tmp is an overlay, whose files the
    kernel and stat(2) name by different inodes; tmpfs before 6.6 refuses O_DIRECT). Falls
    back to tmpfs (/dev/shm) with the reason. tmp: the system's temp directory (the host).
    """
    if kind == "ext4":
        img, mnt = Path("/dev/shm/mysqlio-matrix.img"), Path("/run/mysqlio-matrix")
        steps = [
            ["modprobe", "-q", "loop"],
            ["modprobe", "-q", "ext4"],
            ["truncate", "-s", "384M", str(img)],
            # 4 KiB blocks (mkfs picks 1 KiB for a small image): a page written back is a block
            ["mkfs.ext4", "-q", "-F", "-b", "4096", "-E", "lazy_itable_init=0,lazy_journal_init=0", str(img)],
            ["mkdir", "-p", str(mnt)],
            ["mount", "-o", "loop", str(img), str(mnt)],
        ]
        for cmd in steps:
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0 and cmd[0] != "modprobe":
                why = f"{' '.join(cmd[:2])}: {(p.stderr or p.stdout).strip() or f'exit {p.returncode}'}"
                log(f"no ext4 scratch ({why}); tmpfs instead")
                d = Path(tempfile.mkdtemp(prefix="mysqlio-matrix-", dir="/dev/shm"))
                return d, {"fs": "tmpfs", "path": str(d), "note": f"ext4 on a loop device failed: {why}"}
        return mnt, {"fs": "ext4 (loop device)", "path": str(mnt)}
    d = Path(tempfile.gettempdir())
    fs = subprocess.run(["stat", "-f", "-c", "%T", str(d)], capture_output=True, text=True).stdout.strip()
    return d, {"fs": fs or "?", "path": str(d)}


# ---------------------------------------------------------------- scenarios


@dataclass
class Scenarios:
    run: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)  # scenario -> basenames iogen wrote
    notes: list[str] = field(default_factory=list)

    def of(self, path: str) -> str:
        """The scenario a file belongs to: its own name, else the longest shared name prefix
        (renamed_before.dat is rename's), else nonfile (pipes, sockets: no file at all)."""
        name = os.path.basename(path)
        best, best_len = "nonfile" if "nonfile" in self.run else "other", 3
        for scenario, names in self.files.items():
            if name in names:
                return scenario
            for n in names:
                common = next(
                    (i for i, (a, b) in enumerate(zip(n, name, strict=False)) if a != b), min(len(n), len(name))
                )
                if common > best_len:
                    best, best_len = scenario, common
        return best


def discover(base: Path, wanted: Sequence[str]) -> Scenarios:
    """Each scenario alone, untraced, all at once: which run here, and the files each writes."""
    out = Scenarios(skipped=dict(SKIPPED))
    procs = {}
    for s in wanted:
        d = base / f"alone-{s}"
        d.mkdir()
        procs[s] = subprocess.Popen(
            [*IOGEN_CMD, "--dir", str(d), "--scenario", s], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    for s, p in procs.items():
        try:
            so, se = p.communicate(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            p.kill()
            so, se = p.communicate()
        if p.returncode != 0:
            last = (se.strip().splitlines() or [f"exit {p.returncode}"])[-1]
            out.skipped[s] = f"iogen cannot run it on this kernel: {last}"
            continue
        out.run.append(s)
        out.files[s] = [os.path.basename(f["path"]) for f in json.loads(so.strip().splitlines()[-1])["files"]]
        out.notes += [line for line in se.strip().splitlines() if line]
    return out


# ---------------------------------------------------------------- tracers


class Tracer:
    """One tracer process; its stdout and stderr read by threads (so a tracer waiting for the
    others to attach never blocks on a full pipe)."""

    def __init__(self, mode: str, proc: subprocess.Popen[str], *, port: int = 0, trace: str = "") -> None:
        self.mode, self.proc, self.port, self.trace = mode, proc, port, trace
        self.status = "starting"  # ran | load failed | error
        self.error: str | None = None
        self.load_seconds: float | None = None
        self.seconds = 0.0
        self.t0 = time.monotonic()
        self.want: dict[str, dict[str, int]] = {}
        self.got: dict[str, dict[str, int]] = {}
        self.lost: dict[str, float] = {}
        self.cells: dict[str, str] = {}
        self.extra: dict[str, Any] = {}
        self.out: list[str] = []
        self.err: list[str] = []
        self._threads = [
            threading.Thread(target=self._read, args=(stream, sink), daemon=True)
            for stream, sink in ((proc.stdout, self.out), (proc.stderr, self.err))
            if stream is not None
        ]
        for th in self._threads:
            th.start()

    @staticmethod
    def _read(stream: Any, sink: list[str]) -> None:
        for line in stream:
            sink.append(line)

    def stderr(self) -> str:
        return "".join(self.err)

    def wait_for(self, ok: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ok():
                return True
            if self.proc.poll() is not None:
                self.join()
                return ok()
            time.sleep(0.2)
        return False

    def join(self, timeout_s: float = 30) -> None:
        for th in self._threads:
            th.join(timeout_s)

    def stop(self, sig: int, timeout_s: float = RUN_TIMEOUT_S) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            # hung: `mysqlio` prints every thread's stack on SIGUSR1 (faulthandler), then dies
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(3)
            self.proc.kill()
            rc = self.proc.wait()
            self.extra["hung"] = f"still running {timeout_s:.0f} s after {signal.Signals(sig).name}; killed"
        self.join()
        return rc

    def fail(self, status: str, what: str) -> None:
        """What happened (an exit code, a timeout), then the line of stderr that says why."""
        self.status = status
        said = error_line(self.stderr())
        what = f"{what} ({self.extra['hung']})" if "hung" in self.extra else what
        self.error = f"{what}: {said}" if said else what

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "error": self.error,
            "load_seconds": None if self.load_seconds is None else round(self.load_seconds, 1),
            "seconds": round(self.seconds, 1),
            "stderr": self.stderr()[-4000:],
            "lost_events": self.lost,
            "cells": self.cells,
            **self.extra,
        }


def error_line(stderr: str) -> str | None:
    """The line that says why: a traceback's last line, else the last `mysqlio:` line (not
    the banner a tracer prints once attached, which only says it ran), else the last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if any(line.startswith("Traceback ") for line in lines):
        return lines[-1]
    said = [line for line in lines if line.startswith("mysqlio:") and not line.startswith(tuple(BANNERS.values()))]
    return (said or lines or [None])[-1]


def exit_text(rc: int) -> str:
    """An exit code as a reader wants it: a signal by name (a crash says SIGSEGV)."""
    if rc < 0:
        try:
            return f"on {signal.Signals(-rc).name}"
        except ValueError:
            return f"on signal {-rc}"
    return str(rc)


def _python_m(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*TRACER, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def bpf_holder(pid: int) -> int:
    """The process holding the tracer's BPF objects: PID, or (a wrapper, the single-file
    build's bootloaders) the first of its descendants that holds any."""
    if bpf_fdinfo(pid):
        return pid
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return pid
    return next((c.pid for c in children if bpf_fdinfo(c.pid)), pid)


def mapped_libraries(pid: int) -> list[str]:
    """The shared libraries process pid has mapped (from /proc/PID/maps, as the kernel names them)."""
    try:
        lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    except OSError:
        return []
    paths = {line.split(None, 5)[5] for line in lines if len(line.split(None, 5)) == 6}
    return sorted(p for p in paths if re.search(r"\.so(\.[\d.]+)?$", p))


def start_tracers(modes: Sequence[str], pid: int, workdir: Path) -> list[Tracer]:
    """All at once: their probes load in parallel (minutes each under emulation)."""
    tracers = []
    for mode in modes:
        if mode == "top":
            tracers.append(Tracer(mode, start_top(pid, TOP_INTERVAL_S, command=TRACER)))
        elif mode == "record":
            trace = str(workdir / "matrix.trace")
            tracers.append(Tracer(mode, _python_m("record", "-p", str(pid), "-o", trace), trace=trace))
        elif mode == "exporter":
            port = free_port()
            proc = _python_m(
                "exporter", "-p", str(pid), "-i", str(EXPORTER_INTERVAL_S), "--listen", str(port), "--top-files", "1000"
            )
            tracers.append(Tracer(mode, proc, port=port))
    return tracers


def wait_attached(t: Tracer, pid: int) -> None:
    """Until the tracer says its probes are attached; else its load error."""
    if t.mode == "top":
        ok = lambda: any(line.startswith("{") for line in t.out)  # noqa: E731
    elif t.mode == "record":
        ok = lambda: any(line.startswith(f"{BANNERS['record']}{pid} ") for line in t.err)  # noqa: E731
    else:
        ok = lambda: any(line.startswith(f"{BANNERS['exporter']}{pid} ") for line in t.err)  # noqa: E731
    if t.wait_for(ok, LOAD_TIMEOUT_S):
        t.load_seconds = time.monotonic() - t.t0
        t.status = "ran"
        return
    if t.proc.poll() is None:
        t.stop(signal.SIGKILL)
        t.fail("load failed", f"not attached within {LOAD_TIMEOUT_S:.0f} s")
    else:
        t.fail("load failed", f"exited {exit_text(t.proc.returncode)} before attaching")


def _drops_seen(intervals: list[dict[str, Any]]) -> dict[str, int]:
    """The drop counters that moved during the run (each interval's are its own)."""
    seen: dict[str, int] = {}
    for obj in intervals:
        for reason, count in (obj.get("drops") or {}).items():
            if count:
                seen[reason] = seen.get(reason, 0) + count
    return seen


def _iogen_rows(expected: dict[str, Any]) -> dict[str, dict[str, int]]:
    """iogen's counters per path; page-cache ones for the files of its page-cache scenarios."""
    return {
        f["path"]: {
            **{c: f[c] for c in COUNTERS},
            "deleted": int(f["deleted"]),
            **(page_cache_row(f, f["writeback_by"]) if "dirtied_bytes" in f else {}),
            **iogen_reads(f),
        }
        for f in expected["files"]
    }


def _elsewhere(paths: Any, workdir: Path, limit: int = 20) -> list[str]:
    """Traced paths outside iogen's directory (the library, /dev/null, or a name the
    tracer could not resolve): shown when a file of iogen's is missing."""
    prefix = str(workdir) + "/"
    return sorted(p for p in paths if not str(p).startswith(prefix))[:limit]


def skipped_by_program(pid: int) -> dict[str, int]:
    """Runs the kernel skipped of each program process pid holds (recursion_misses in the
    program fd's fdinfo, 5.12+), by program name; programs with none left out."""
    misses = {
        int(info["prog_id"]): int(info["recursion_misses"])
        for info in bpf_fdinfo(pid)
        if "prog_id" in info and int(info.get("recursion_misses", "0") or 0)
    }
    if not misses:
        return {}
    listing = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True, check=False)
    names = {p["id"]: p.get("name", str(p["id"])) for p in json.loads(listing.stdout or "[]")}
    return {names.get(prog_id, str(prog_id)): n for prog_id, n in misses.items()}


def syscall_hook_held(pid: int) -> str:
    """The syscall hook process pid's programs are on: "tracepoints" when it holds the
    per-syscall tracepoints' exit program (handle_exit*, a tracepoint program), "raw" for
    the raw hook's (handle_sys_exit*; bpftool cuts names at 15 characters), else "none"."""
    ids = {int(info["prog_id"]) for info in bpf_fdinfo(pid) if "prog_id" in info}
    listing = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True, check=False)
    for prog in json.loads(listing.stdout or "[]"):
        name = prog.get("name", "")
        if prog.get("id") not in ids:
            continue
        if name.startswith("handle_sys_exit"):
            return "raw"
        if name.startswith("handle_exit") and prog.get("type") == "tracepoint":
            return "tracepoints"
    return "none"


# report's latency classes, with the counter of each class's requests
LATENCY_CLASSES = (("write", "write_ops"), ("sync", "sync_ops"), ("read", "read_ops"))


def untimed_classes(row: dict[str, Any]) -> list[str]:
    """The classes of a report file row whose requests were counted but none timed."""
    return [cls for cls, ops in LATENCY_CLASSES if row.get(ops) and not row.get(f"{cls}_latency_ns")]


def finish(t: Tracer, expected: dict[str, Any], workdir: Path, done: float) -> None:
    """Stop a tracer that ran and collect its per-file counts (in iogen's names) and losses."""
    try:
        # by program name, for the verdict's text; read again just before record stops
        holder = bpf_holder(t.proc.pid)
        t.extra["skipped_by_program"] = skipped_by_program(holder)
        t.extra["syscall_hook"] = syscall_hook_held(holder)
        t.extra["libraries"] = mapped_libraries(holder)
        if t.mode == "top":
            # Two intervals stamped after the workload: the first may have drained just before
            # it ended, the second cannot (a sample takes seconds under emulation, and a SIGINT
            # arriving while one is being written ends top without another drain).
            def after() -> int:
                return sum(1 for line in list(t.out) if line.startswith("{") and json.loads(line)["time"] > done)

            if not t.wait_for(lambda: after() >= 2, RUN_TIMEOUT_S):
                t.extra["note"] = "fewer than 2 intervals after the workload before the timeout"
            rc = t.stop(signal.SIGINT)  # the last partial interval is printed
            if rc != 0:
                t.fail("error", f"top exited {exit_text(rc)}")
                return
            intervals = [json.loads(line) for line in t.out if line.strip()]
            totals = FileTotals()
            for obj in intervals:
                totals.add(obj)
            t.got = {
                path: {
                    **{k: c[k] for k in COUNTERS},
                    "deleted": int(totals.deleted[path]),
                    **page_cache_row(c, totals.writeback_by.get(path, {})),
                    **traced_reads(c),
                }
                for path, c in totals.under(str(workdir)).items()
            }
            t.want = _iogen_rows(expected)
            t.lost = {"lost_events": totals.lost_events}
            t.extra["intervals"] = len(intervals)
            t.extra["drops"] = _drops_seen(intervals)  # which counters the lost events came from
            t.extra["paths_elsewhere"] = _elsewhere(totals.totals, workdir)
            t.extra["unnamed_disk_reads"] = unnamed_reads(totals.totals)
            try:
                assert_exact(IogenRun(expected, totals, intervals), workdir)
                t.extra["assert_exact"] = "passed"
            except AssertionError as e:
                t.extra["assert_exact"] = f"failed: {e}"
        elif t.mode == "record":
            # by program name, as late as possible; the count judged is the trace's own
            t.extra["skipped_by_program"] = skipped_by_program(holder)
            rc = t.stop(signal.SIGINT)
            if rc != 0:
                t.fail("error", f"record exited {exit_text(rc)}")
                return
            rep = subprocess.run(
                [sys.executable, "-m", "mysqlio", "report", t.trace, "--json"],
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT_S,
            )
            if rep.returncode != 0:
                t.status, t.error = "error", error_line(rep.stderr) or f"report exited {rep.returncode}"
                return
            report = json.loads(rep.stdout)
            prefix = str(workdir) + "/"
            t.got = {
                f["path"]: {
                    **{c: f[c] for c in COUNTERS},
                    "deleted": int(f.get("deleted", False)),
                    **page_cache_row(f, f.get("writeback_by", {})),
                    **traced_reads(f),
                }
                for f in report["files"]
                if f["path"].startswith(prefix)
            }
            t.want = _iogen_rows(expected)
            t.lost = {"lost_events": report["lost_events"], "truncated": int(bool(report.get("truncated")))}
            t.extra["untimed"] = {
                f["path"]: untimed_classes(f)
                for f in report["files"]
                if f["path"].startswith(prefix) and untimed_classes(f)
            }
            t.extra["lost_by_reason"] = report.get("lost_by_reason", {})  # which counters lost them
            t.extra["paths_elsewhere"] = _elsewhere({f["path"]: f for f in report["files"]}, workdir)
            t.extra["unnamed_disk_reads"] = unnamed_reads({f["path"]: f for f in report["files"]})
        else:
            m = scrape_after(t.port, done)
            t.got = exported_files(m, workdir)
            t.want = iogen_files(expected, workdir)
            exported_reads(m, workdir, expected, t.got, t.want)
            exported_disk = m.by_path("mysqlio_file_disk_read_bytes_total")
            t.extra["unnamed_disk_reads"] = unnamed_reads({p: {"disk_read_bytes": v} for p, v in exported_disk.items()})
            device_only = sum(m.total("mysqlio_drops_total", reason=r) for r in DEVICE_ONLY_DROPS)
            t.lost = {
                "lost_events": m.value("mysqlio_lost_events_total"),
                "drops": m.total("mysqlio_drops_total") - device_only,
            }
            t.extra["drops_by_reason"] = {
                lab.get("reason", "?"): v for lab, v in m.samples.get("mysqlio_drops_total", []) if v
            }
            rc = t.stop(signal.SIGTERM)
            if rc != 0:
                t.fail("error", f"exporter exited {exit_text(rc)}")
        t.extra["read_issues"] = read_issues(t.got, expected)
        t.extra.update(reads_seen(t.got, expected))
    except (AssertionError, subprocess.TimeoutExpired, OSError, ValueError, KeyError) as e:
        t.stop(signal.SIGKILL, 30)
        t.status, t.error = "error", f"{type(e).__name__}: {e}"


# ---------------------------------------------------------------- verdicts


def judge(t: Tracer, scenarios: Scenarios) -> None:
    if t.status != "ran":
        for s in scenarios.run:
            t.cells[s] = f"{t.status}: {t.error}"
        return
    issues: dict[str, list[str]] = {s: [] for s in scenarios.run}
    for path in sorted(set(t.want) | set(t.got)):
        s = scenarios.of(path)
        name = os.path.basename(path)
        bucket = issues.setdefault(s, [])
        if path not in t.got:
            bucket.append(f"{name} not traced")
        elif path not in t.want:
            bucket.append(f"{name} traced, but iogen did not write it")
        else:
            want, got = t.want[path], t.got[path]
            diffs = [f"{c} {got.get(c, 0)} (iogen {want[c]})" for c in want if got.get(c, 0) != want[c]]
            if diffs:
                bucket.append(f"{name}: {', '.join(diffs)}")
    for path, what in t.extra.get("read_issues", []):
        issues.setdefault(scenarios.of(path), []).append(f"{os.path.basename(path)}: {what}")
    # a disk read of no file of the process's (tools/matrix_reads.py unnamed_reads): the
    # read scenario's, which checks that a page fault's is none
    for path, n in t.extra.get("unnamed_disk_reads", {}).items():
        where = READ_SCENARIOS[0] if READ_SCENARIOS[0] in issues else scenarios.of(path)
        issues.setdefault(where, []).append(f"{path}: {n} B read from the disk, named nowhere")
    for path, classes in t.extra.get("untimed", {}).items():
        issues.setdefault(scenarios.of(path), []).append(
            f"{os.path.basename(path)}: {', '.join(classes)} requests counted, none timed"
        )
    reasons = ", ".join(f"{k} {v:g}" for k, v in sorted(_loss_reasons(t).items()))
    losses = [
        f"{k} {v:g}" + (f" ({reasons})" if reasons and k == "lost_events" else "") for k, v in t.lost.items() if v
    ]
    skipped = _skipped_event_runs(t)
    counted = {k: v for k, v in t.lost.items() if v}
    # record's "truncated" is a flag, not a count: any other loss than the skipped runs differs
    if skipped and set(counted) <= {"lost_events", "drops"} and all(v == skipped for v in counted.values()):
        _judge_skipped(t, issues, skipped)
        return
    for s, found in issues.items():
        found = losses + found
        if not found:
            t.cells[s] = "exact"
        else:
            more = f" (+{len(found) - MAX_ISSUES} more)" if len(found) > MAX_ISSUES else ""
            t.cells[s] = "differs: " + "; ".join(found[:MAX_ISSUES]) + more


# the request counters (sync_ops is the sum of the three sync ones)
SKIPPABLE_OPS = ("write_ops", "read_ops", "fsync_ops", "fdatasync_ops", "sync_file_range_ops", "msync_ops", "errors")


def _loss_reasons(t: Tracer) -> dict[str, int]:
    """The tracer's own counters of what it lost, by reason: top's drops, the exporter's
    drops_total, record's trace (lost_by_reason)."""
    key = {"top": "drops", "exporter": "drops_by_reason", "record": "lost_by_reason"}[t.mode]
    return {k: int(v) for k, v in t.extra.get(key, {}).items() if v}


def _skipped_event_runs(t: Tracer) -> int:
    """Runs of the tracer's event programs the kernel skipped, as the tracer itself counted
    them among its lost events, in the same reading as its lost total (a snapshot of the
    programs' counters taken earlier missed the skips that came after it, a CI run on sid
    7.2)."""
    return _loss_reasons(t).get("skipped_runs", 0)


def _judge_skipped(t: Tracer, issues: dict[str, list[str]], skipped: int) -> None:
    """All the tracer's losses are runs the kernel skipped, each counted as lost: each cell on
    its own files; short by at most the runs skipped, and never over, it is "skipped: ..."."""
    short = 0
    over = False
    for path in set(t.want) & set(t.got):
        for c, want in t.want[path].items():
            got = t.got[path].get(c, 0)
            # a skipped run loses one request, or the bytes of one page-cache event
            if c in SKIPPABLE_OPS:
                short += max(want - got, 0)
            elif c not in ("sync_ops", *SKIPPABLE_OPS):
                short += int(got < want)
            over = over or got > want
    names = ", ".join(sorted(t.extra.get("skipped_by_program", {}))) or "its programs"
    for s, found in issues.items():
        if not found:
            t.cells[s] = "exact"
        elif over or short > skipped or any("not traced" in f or "did not write" in f for f in found):
            t.cells[s] = f"differs: skipped runs {skipped} ({names}); " + "; ".join(found[:MAX_ISSUES])
        else:
            t.cells[s] = (
                f"skipped: {'; '.join(found[:MAX_ISSUES])}; {skipped} run(s) of {names} skipped by the kernel, counted as lost"
            )


def lacked(doctor: dict[str, Any] | None) -> list[str]:
    """What the kernel lacked and what mysqlio did instead, from doctor's non-ok eBPF checks."""
    if not doctor:
        return []
    out = []
    for c in doctor.get("checks", []):
        if c.get("section", "ebpf") != "ebpf" or c.get("status") in ("ok", "skip"):
            continue
        text = f"{c.get('name')}: {c.get('detail')}"
        out.append(re.sub(r"\s+", " ", text).strip())
    return out


# ---------------------------------------------------------------- the run


def run_matrix(modes: Sequence[str], alias: str, where: str, scratch_kind: str) -> dict[str, Any]:
    t_start = time.monotonic()
    started = time.time() - psutil.Process().create_time()  # the interpreter and the imports
    result: dict[str, Any] = {
        "schema": 1,
        "alias": alias,
        "where": where,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "kernel": kernel_facts(),
        "startup_seconds": round(started, 1),
        "tracer": shlex.join(TRACER),
        "repo": str(REPO),
        "source": source_state(),
    }
    log(f"kernel {result['kernel']['release']}")
    root, result["scratch"] = scratch(scratch_kind)
    os.environ["TMPDIR"] = str(root)  # doctor's test write and the tracers' temp files too
    tempfile.tempdir = None
    base = Path(os.path.realpath(tempfile.mkdtemp(prefix="mysqlio-matrix-", dir=root)))
    try:
        doctor = _python_m("doctor", "--json")
        t0 = time.monotonic()
        # and aio_reuse (issue 60), on request only: SystemTap, which runs IOGEN_SCENARIOS,
        # still reads the iocbs at io_submit's exit
        wanted = [*IOGEN_SCENARIOS, "aio_reuse"]
        if result["scratch"]["fs"].startswith("ext4"):
            wanted += [*PAGE_CACHE_SCENARIOS, *READ_SCENARIOS]  # writeback and disk reads need a block device
        scenarios = discover(base, wanted)
        for s in (*PAGE_CACHE_SCENARIOS, *READ_SCENARIOS):
            if s not in wanted:
                scenarios.skipped[s] = (
                    f"the scratch is {result['scratch']['fs']}, not an ext4 of the run's own on a loop device "
                    "(--scratch ext4)"
                )

        result["scenarios"] = {
            "run": scenarios.run,
            "skipped": scenarios.skipped,
            "files": scenarios.files,
            "notes": sorted(set(scenarios.notes)),
            "seconds": round(time.monotonic() - t0, 1),
        }
        log(f"scenarios: {len(scenarios.run)} run here, skipped: {', '.join(scenarios.skipped)}")
        result["ebpf"] = trace_all(modes, scenarios, base)
        try:
            out, err = doctor.communicate(timeout=LOAD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            doctor.kill()
            out, err = doctor.communicate()
        try:
            doc_json = json.loads(out)
        except json.JSONDecodeError:
            doc_json = None
        result["doctor"] = {
            "returncode": doctor.returncode,
            "json": doc_json,
            "output": "" if doc_json is not None else out[-8000:],
            "stderr": err[-4000:],
        }
        result["lacked"] = lacked(doc_json)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    result["seconds"] = round(time.monotonic() - t_start, 1)
    return result


def trace_all(modes: Sequence[str], scenarios: Scenarios, base: Path) -> dict[str, Any]:
    work = base / "traced"
    work.mkdir()
    args = [a for s in scenarios.run for a in ("--scenario", s)]
    gen = subprocess.Popen(
        [*IOGEN_CMD, "--dir", str(work), "--wait", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    tracers: list[Tracer] = []
    try:
        assert gen.stdin is not None and gen.stdout is not None
        assert read_json_line(gen.stdout, 120, "iogen").get("ready") is True
        tracers = start_tracers(modes, gen.pid, base)
        for t in tracers:
            wait_attached(t, gen.pid)
            log(f"{t.mode}: {t.status}" + (f" ({t.error})" if t.error else f" in {t.load_seconds:.0f} s"))
        gen.stdin.write("go\n")
        gen.stdin.flush()
        expected = read_json_line(gen.stdout, RUN_TIMEOUT_S, "iogen run")
        done = time.time()
        time.sleep(TOP_INTERVAL_S)  # top's and record's last drain
        # stopped and read at once: record's report and the exporter's scrapes take a while
        workers = [
            threading.Thread(target=finish, args=(t, expected, work, done)) for t in tracers if t.status == "ran"
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        for t in tracers:
            t.seconds = time.monotonic() - t.t0
            judge(t, scenarios)
            log(f"{t.mode}: " + summary(t.cells))
    finally:
        for t in tracers:
            if t.proc.poll() is None:
                t.stop(signal.SIGKILL, 30)
        if gen.poll() is None:
            if gen.stdin:
                gen.stdin.close()
            try:
                gen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                gen.kill()
                gen.wait()
    return {t.mode: t.to_json() for t in tracers}


def summary(cells: dict[str, str]) -> str:
    exact = sum(v == "exact" for v in cells.values())
    bad = sorted({v for v in cells.values() if v != "exact"})
    return f"{exact}/{len(cells)} exact" + (f"; {bad[0]}" if bad else "")


def all_exact(result: dict[str, Any]) -> bool:
    cells = [v for mode in result.get("ebpf", {}).values() for v in mode["cells"].values()]
    return bool(cells) and all(v == "exact" for v in cells)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="where to write the JSON result")
    ap.add_argument(
        "--alias", default="host", help="the kernel's alias in the matrix (5.10, 6.1, 6.12, sid, 6.1-rt, host)"
    )
    ap.add_argument("--where", choices=("guest", "host"), default=None, help="default: guest unless --alias host")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    ap.add_argument(
        "--tracer",
        help="the command that runs mysqlio for the tracers and doctor, as one shell-quoted string "
        "(default: this Python's -m mysqlio; tools/dist_roots.py passes the single-file build in a root)",
    )
    ap.add_argument(
        "--iogen",
        help="the command that runs iogen, one shell-quoted string (default: tools/iogen; tools/dist_roots.py "
        "runs a static one in the tracers' root, where a server would be)",
    )
    ap.add_argument(
        "--scratch",
        choices=("ext4", "tmp"),
        default=None,
        help="where iogen writes: a fresh ext4 on a loop device (default in a guest) or the temp directory (host)",
    )
    args = ap.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if any(m not in MODES for m in modes):
        ap.error(f"--modes: one of {', '.join(MODES)}")
    if os.geteuid() != 0:
        print("matrix_guest: run as root (it loads BPF programs)", file=sys.stderr)
        return 2
    if args.tracer:
        TRACER[:] = shlex.split(args.tracer)
    if args.iogen:
        IOGEN_CMD[:] = shlex.split(args.iogen)
    where = args.where or ("host" if args.alias == "host" else "guest")
    result = run_matrix(modes, args.alias, where, args.scratch or ("ext4" if where == "guest" else "tmp"))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(result, indent=2, sort_keys=False) + "\n")
    tmp.replace(out)
    log(f"wrote {out} in {result['seconds']:.0f} s")
    return 0 if all_exact(result) else 1


if __name__ == "__main__":
    sys.exit(main())

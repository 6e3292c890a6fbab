"""The tracers tools/bench.py compares: started on a pid, stopped, their BPF programs known.

    none          no tracer
    floor         tracer/bpf/empty.bpf.o: the same syscall tracepoints with only the pid filter
    floor-pc      the same, and empty programs (the pid filter only) on the page-cache and
                  device tracepoints mysqlio hooks: the floor of mysqlio with those hooks on
    floor-exits, floor-pc-exits
                  the same on the syscalls' exits (and msync's enter) only: the hooks of
                  untimed `top` (the floors above have an enter and an exit per syscall)
    top, record   mysqlio's commands
    bpftrace      a bpftrace per-fd byte sum, what `mysqlio top` does, on the same tracepoints
    pt-ioprofile  percona-toolkit's pt-ioprofile: `strace -T -f -p PID` of every syscall

Suffixes: "-raw" puts mysqlio's probes (or the floor) on the raw sys_enter/sys_exit
hook instead of the per-syscall tracepoints (tracer/syscall_hook.py); "-nopc" runs
mysqlio without its page-cache and device hooks (--no-page-cache).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import psutil

from mysqlio import syscall_hook
from mysqlio.devtools.processes import wait_or_kill
from mysqlio.devtools.traced import held_bpf_ids  # one fdinfo reader for tests and tools
from mysqlio.syscall_hook import Hook

REPO = Path(__file__).resolve().parent.parent
MYSQLIO = [sys.executable, "-m", "mysqlio"]

# What each tracer of the TPS rows can see of a MariaDB's I/O (the "sees:" of a row's note).
CAN_SEE = {
    "none": "",
    "floor": "nothing: counts the server's syscalls, no accounting",
    "top": "bytes and ops per file of syscalls, io_uring and libaio requests (with --latency: and latency)",
    "record": "every syscall, io_uring and libaio request, to a trace file",
    "bpftrace": "bytes per fd of read/write syscalls only: no io_uring or libaio bytes",
    "pt-ioprofile": "time and calls per file of syscalls (strace): io_submit/io_uring_enter calls, not the async I/O",
}

# the programs a tracer needs besides Python, by tracer
REQUIRED_TOOLS = {
    "bpftrace": ("bpftrace",),
    "pt-ioprofile": ("pt-ioprofile", "strace", "lsof"),
}
# empty.bpf.o's programs on the page-cache and device tracepoints (floor-pc only)
FLOOR_PAGE_CACHE_PROGRAMS = (
    "floor_dirty_folio",
    "floor_writeback_start",
    "floor_writeback_written",
    "floor_bio_queue",
)
PTRACE_TIMEOUT_S = 30.0
POLL_S = 0.05


def thread_cpu_seconds(pid: int) -> float:
    """CPU time of the process's live threads, from their schedstat (nanoseconds: its
    utime and stime count 10 ms ticks, 0.1 % of a core over a 10 s window, the size of
    the figures measured). A tracer's threads live as long as it does (a thread gone
    between two reads would take its time with it). Without schedstat
    (CONFIG_SCHED_INFO), its ticks."""
    if not os.path.exists("/proc/self/schedstat"):
        t = psutil.Process(pid).cpu_times()
        return t.user + t.system
    total_ns = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(FileNotFoundError, ProcessLookupError), open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            total_ns += int(f.read().split()[0])
    return total_ns / 1e9


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float:
    """User+system CPU of the whole process so far, its exited threads included, from
    /proc/PID/stat (10 ms ticks). For a server, whose threads come and go (connections,
    io_uring workers): schedstat is per live thread, and a gone thread's time would go
    with it. In-kernel work done in its threads' context (its syscalls, the BPF programs
    they run) is its system time."""
    fields = stat_fields(f"/proc/{pid}/stat")
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


class SetupError(RuntimeError):
    """What a benchmark needs is missing (a tool, a server root): main() prints one line
    and exits non-zero."""


class MissingTool(SetupError):
    """A program a benchmark needs is not installed."""


def require(*tools: str) -> None:
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        raise MissingTool(f"missing {', '.join(missing)}: install it (tools/install-deps.sh as root)")


def require_tracers(names: list[str] | tuple[str, ...]) -> None:
    require("bpftool", *(tool for name in names for tool in REQUIRED_TOOLS.get(base_name(name), ())))


def base_name(name: str) -> str:
    """The tracer of a variant: "top-raw" -> "top", "top-lat" -> "top"."""
    return (
        name.removesuffix("-exits").removesuffix("-nopc").removesuffix("-pc").removesuffix("-raw").removesuffix("-lat")
    )


def wait_line(stream: IO[str] | None, prefix: str, timeout_s: float = 30) -> str:
    assert stream is not None
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        if line.startswith(prefix):
            return line
        seen.append(line.rstrip())
    said = f" (it said: {' / '.join(seen[:2])})" if seen else ""  # its error comes first
    raise RuntimeError(f"no line starting with {prefix!r}{said}")


def bpf_prog_stats(prog_ids: set[int]) -> dict[int, tuple[str, int, int]]:
    """(name, run_time_ns, run_cnt) of each of the given programs, by id (the
    kernel keeps 15 characters of a name)."""
    progs = json.loads(subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, check=True).stdout)
    return {
        p["id"]: (p.get("name", str(p["id"])), p.get("run_time_ns", 0), p.get("run_cnt", 0))
        for p in progs
        if p["id"] in prog_ids
    }


def held_prog_ids(pid: int) -> set[int]:
    return held_bpf_ids(pid)["prog"]


def ensure_tracefs() -> None:
    """bpftrace's tracepoints and the floor's per-syscall ones need tracefs: mounted,
    if nothing is, where libbpf and bpftrace look (as mysqlio itself does)."""
    tracefs = syscall_hook.find_tracefs()
    if not tracefs.events:
        raise RuntimeError(f"{tracefs.problem} (fix: {tracefs.fix})")


def bpftrace_script(pid: int) -> str:
    """A bpftrace one-liner doing the same per-fd byte sum as mysqlio top."""
    rw = ["write", "pwrite64", "writev", "pwritev", "pwritev2", "read", "pread64", "readv", "preadv", "preadv2"]
    enters = ",".join(f"tracepoint:syscalls:sys_enter_{s}" for s in rw)
    exits = ",".join(f"tracepoint:syscalls:sys_exit_{s}" for s in rw)
    return (
        f"{enters} /pid == {pid}/ {{ @fd[tid] = args->fd; }} "
        f"{exits} /pid == {pid} && @fd[tid]/ {{ @bytes[@fd[tid]] = sum(args->ret); delete(@fd[tid]); }} "
        "interval:s:1 { clear(@bytes); }"
    )


PF_IO_WORKER = 0x10  # include/linux/sched.h: an io_uring worker thread (5.12)


def stat_fields(path: str) -> list[str]:
    """The fields of a /proc stat file after the command name: [0] state, [2] pgrp, [6] flags."""
    return Path(path).read_text().rsplit(")", 1)[1].split()


def tracer_pids(pid: int) -> list[int]:
    """The TracerPid of each thread of `pid` (0: not traced), io_uring's workers left out;
    [] once it is gone. The workers (iou-wrk-*, threads the kernel starts in the server for
    requests it cannot complete inline) are not clones: one started after `strace -f`
    attached is not traced (seen on 6.18), and under load they come and go, so waiting
    for them can time pt-ioprofile's start out (the likely cause of a .ci/run's smoke failure)."""
    found = []
    with contextlib.suppress(FileNotFoundError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, IndexError, ValueError):
                flags = int(stat_fields(f"/proc/{pid}/task/{task}/stat")[6])
                if flags & PF_IO_WORKER:
                    continue
                status = Path(f"/proc/{pid}/task/{task}/status").read_text()
                found.append(int(status.split("TracerPid:", 1)[1].split()[0]))
    return found


def group_alive(pgid: int) -> list[int]:
    """Processes of process group `pgid` that are not zombies."""
    alive = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError, IndexError):
            fields = stat_fields(f"/proc/{entry}/stat")
            if int(fields[2]) == pgid and fields[0] != "Z":
                alive.append(int(entry))
    return alive


class Tracer:
    """One of the tracers compared: started on a pid, stopped, its BPF programs known.
    `run_s`: how long a run under it lasts (pt-ioprofile is given that and a margin)."""

    def __init__(self, name: str, pid: int, tmp: str, run_s: float = 60) -> None:
        self.exits_only = name.endswith("-exits")  # floor-exits: the hooks of untimed top
        name = name.removesuffix("-exits")
        self.page_cache = not name.endswith("-nopc")
        name = name.removesuffix("-nopc")
        self.floor_page_cache = name.endswith("-pc")  # floor-pc
        name = name.removesuffix("-pc")
        self.hook: Hook = "raw" if name.endswith("-raw") else "tracepoints"
        name = name.removesuffix("-raw")
        self.latency = name.endswith("-lat")  # top --latency: requests timed
        self.name = name.removesuffix("-lat")
        self.pid = pid
        self.proc: subprocess.Popen[str] | None = None
        self._floor: Any = None
        self._tmp = tmp
        self._run_s = run_s

    def start(self) -> None:
        starters = {
            "none": lambda: None,
            "top": lambda: self._start_mysqlio(
                ["top", "-p", str(self.pid), "--json", "-i", "1", *(["--latency"] if self.latency else [])],
                "mysqlio: tracing pid",
            ),
            "record": lambda: self._start_mysqlio(
                ["record", "-p", str(self.pid), "-o", f"{self._tmp}/bench.trace"], "mysqlio: recording pid"
            ),
            "bpftrace": self._start_bpftrace,
            "pt-ioprofile": self._start_pt_ioprofile,
            "floor": self._start_floor,
        }
        if self.name not in starters:
            raise ValueError(self.name)
        starters[self.name]()

    def _start_mysqlio(self, args: list[str], ready: str) -> None:
        """A mysqlio command, returned once it says its probes are attached."""
        env = {**os.environ, syscall_hook.HOOK_ENV: self.hook}
        if not self.page_cache:
            args = [*args, "--no-page-cache"]
        self.proc = subprocess.Popen(
            [*MYSQLIO, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
        )
        wait_line(self.proc.stderr, ready)

    def _start_bpftrace(self) -> None:
        ensure_tracefs()
        self.proc = subprocess.Popen(
            ["bpftrace", "-e", bpftrace_script(self.pid)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        wait_line(self.proc.stdout, "Attaching")
        time.sleep(0.5)

    def _start_pt_ioprofile(self) -> None:
        """pt-ioprofile (lsof, then strace of the server for --run-time s) in a process
        group of its own, returned once strace traces every thread of the server."""
        run_time = int(self._run_s) + 60  # ended by stop() long before
        self.proc = subprocess.Popen(
            ["pt-ioprofile", "--profile-pid", str(self.pid), "--run-time", str(run_time)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
            env={**os.environ, "TMPDIR": self._tmp},  # its samples file goes with our temp dir
        )
        deadline = time.monotonic() + PTRACE_TIMEOUT_S
        while not all(tracer_pids(self.pid)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"pt-ioprofile did not attach strace to pid {self.pid}")
            time.sleep(POLL_S)

    def _start_floor(self) -> None:
        from mysqlio.libbpf import BpfObject

        self._floor = BpfObject(str(REPO / "tracer" / "bpf" / "empty.bpf.o"))
        unused = ("floor_sys_enter", "floor_sys_exit") if self.hook == "tracepoints" else ("floor_enter", "floor_exit")
        if not self.floor_page_cache:
            unused += FLOOR_PAGE_CACHE_PROGRAMS
        for program in unused:
            self._floor.disable_program(program)
        self._floor.set_rodata("targ_tgid", ctypes.c_uint32(self.pid))
        # its pid filter's read as cheap as mysqlio's (BpfProbe does the same)
        self._floor.unmappable_global_data()
        self._floor.load()
        self._floor.attach_all()
        if self.hook == "tracepoints":
            ensure_tracefs()
            syscall_hook.attach(self._floor, enter="floor_enter", exit="floor_exit", entries=not self.exits_only)
            # and, timed or not, the enters mysqlio always has: msync's (it reads the address
            # there) and io_submit's (its iocbs)
            for syscall in syscall_hook.OWN_ENTERS:
                self._floor.attach_tracepoint("floor_enter", "syscalls", f"sys_enter_{syscall}")

    def prog_ids(self) -> set[int]:
        if self.name == "floor":
            return held_prog_ids(os.getpid())
        return held_prog_ids(self.proc.pid) if self.proc else set()

    def cpu_seconds(self) -> float:
        """CPU time of the tracer's process so far (0 without one), to the nanosecond."""
        return thread_cpu_seconds(self.proc.pid) if self.proc is not None else 0.0

    def stop(self) -> None:
        if self._floor is not None:
            self._floor.close()
            self._floor = None
        if self.proc is None:
            return
        if self.name == "pt-ioprofile":
            self._stop_group(self.proc)
        else:
            self.proc.send_signal(signal.SIGINT)
            wait_or_kill(self.proc, 30, group=False)
        self.proc = None

    def _stop_group(self, proc: subprocess.Popen[str]) -> None:
        """pt-ioprofile and its strace gone, the server traced by nobody: SIGTERM to the
        group (strace detaches, the script removes its temp dir), SIGKILL what is left,
        SIGCONT to the server (as pt-ioprofile does: strace may leave threads stopped)."""
        for sig, grace_s in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            deadline = time.monotonic() + grace_s
            while group_alive(proc.pid) and time.monotonic() < deadline:
                proc.poll()
                time.sleep(POLL_S)
            if not group_alive(proc.pid):
                break
        proc.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGCONT)
        left = group_alive(proc.pid)
        if left or any(tracer_pids(self.pid)):
            raise RuntimeError(f"pt-ioprofile left processes {left} or pid {self.pid} still traced")

"""The cost to a fast MariaDB (issue 19) and to Oracle MySQL (issue 56): sysbench at full
speed (4 threads) under each tracer, for each server configuration. Called by
tools/bench.py (scenarios "tps" and "kernel_cost"), each configuration its own server:

    10.11-io_uring  the host's MariaDB, InnoDB on io_uring, datadir on tmpfs (/dev/shm)
    10.11-aio       the same on libaio
    11.8            MariaDB 11.8 in a Debian 13 (trixie) root (tools/server_roots.py), its
                    datadir in the root, on the host's disk, InnoDB's default backend
    9.7             Oracle MySQL 9.7 in a Debian sid root (server_roots.py sid-mysql), its
                    datadir in the root, on the host's disk, MySQL's defaults (libaio,
                    O_DIRECT); not in the default set (DEFAULT_CONFIGS)

MYSQLIO_BENCH_CONFIGS=10.11-io_uring,11.8 chooses some (9.7 only when named);
MYSQLIO_BENCH_ROUNDS the rounds; MYSQLIO_BENCH_WORKLOADS=oltp_write_only the TPS workloads.
Every TPS window also gives the server process's own CPU per commit (bench.windowed_tps).
The datadir on tmpfs: the virtual disk's jitter would hide a few percent of tracer cost;
without it the server is CPU-bound, which shows the cost fully. On tmpfs the page-cache
hooks never run, so top/record without them ("-nopc") are only compared on disk (11.8).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from bench import (
    LOAD_WARMUP_S,
    WINDOW_OVERHEAD_S,
    WINDOW_SETTLE_S,
    Result,
    Suite,
    add_tps_results,
    one_load,
    syscall_tax_ns,
    tracer_window,
    windowed_tps,
)
from bench_tracers import (
    CAN_SEE,
    SetupError,
    Tracer,
    base_name,
    bpf_prog_stats,
    require,
    require_tracers,
    wait_line,
)

from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.devtools.rooted_mariadb import RootedMariaDB
from mysqlio.devtools.rooted_mysql import RootedMySQL
from mysqlio.devtools.sysbench import Sysbench

WORKLOADS = ("oltp_write_only", "oltp_read_write")
KERNEL_WORKLOAD = "oltp_write_only"
TPS_VARIANTS = ("none", "floor", "top", "record", "bpftrace", "pt-ioprofile")
# The other tools get TPS windows under the first workload only: what they see and cost
# is shown side by side there, and 40 more windows a configuration under the second
# (9 minutes in all) made `make bench` too long to share a session with a CI run.
COMPARED = ("bpftrace", "pt-ioprofile")
# A variant's ratio is taken to the floor on its hooks: "floor" has an enter and an exit
# program per syscall, the hooks of timed requests (record, top --latency); "-exits"
# only the exits (and msync's enter), untimed top's.
KERNEL_VARIANTS = (
    "floor",
    "floor-exits",
    "floor-raw",
    "top",
    "top-lat",
    "top-raw",
    "record",
    "record-raw",
    "bpftrace",
)
NOPC = ("top-nopc", "record-nopc")  # where the page-cache hooks run: not on tmpfs
# there, the floor of mysqlio with its page-cache hooks on has empty programs on them too
FLOOR_PC = "floor-pc"
FLOOR_PC_EXITS = "floor-pc-exits"
# kernel_cost's rounds: each variant with a target and its floor get a window in every
# round, one right after the other (which first alternates from round to round), the
# pairs in a new order each round; a ratio is taken to the floor's window of the same
# round. The other variants get one window, in the first round. (Until 2026-11-29: one
# 10 s run of each, minutes apart; a floor read 0.59-0.93x of itself from one complete
# run to the next, more than the gaps to the targets.) The floor is not attached beside
# the variant in one window: the second program on a hook finds the lines the first
# brought in, and the floor read 78 ns a run beside top against 134 alone (2026-11-29).
ROUND_KERNEL_VARIANTS = ("top", "record")
UNTIMED = ("top", "top-nopc")  # no enter program: compared with an exits-only floor
RATIO_TO_FLOOR = {"top": "target ≤ 2.5×", "record": "target ≤ 3×"}  # by tracer, on the same hook
CPU_TARGET = {"top": "target ≤ 0.5 %", "record": "target ≤ 2 %"}
PER_PROGRAM = ("top", "top-lat", "record")  # kernel_cost rows program by program
ROOTS_TIMEOUT_S = 900
# Program names as the kernel keeps them (15 characters): one run per request.
# mysqlio's and the floor's syscall-exit programs run once per syscall leaving a hooked
# tracepoint, of any process (the pid filter is inside); io_uring submissions have their own.
# (Exits, not enters: top without --latency runs no enter program where the kernel gives
# the registers at exit.)
REQUEST_PROGRAMS = {
    "tracepoints": ("handle_exit", "floor_exit", "handle_uring_su"),
    "raw": ("handle_sys_exit", "floor_sys_exit", "handle_uring_su"),
}
BPFTRACE_ENTER = "sys_enter_"  # bpftrace names a tracepoint's program after it
# per-run overheads for the estimate: a tracer's start and stop, sysbench's connect
RUN_OVERHEAD_S = 1.0
KERNEL_WINDOW_OVERHEAD_S = 1.5  # a tracer's start and stop, two reads of bpf_stats
SERVER_START_S = 15.0


@dataclass(frozen=True)
class ServerConfig:
    key: str  # its name in MYSQLIO_BENCH_CONFIGS
    backend: str  # MariaDBOptions.innodb_backend
    root: str | None  # the tools/server_roots.py root it runs in; None: the host's server
    where: str  # which server, for the notes
    on_tmpfs: bool  # its datadir: then the page-cache hooks never run ("-nopc" left out)
    product: str = "MariaDB"  # or "MySQL": Oracle's server (RootedMySQL), in a root

    def tps_variants(self, compared: bool = True) -> tuple[str, ...]:
        """The TPS windows of a round; without the other tools when not `compared`."""
        mine = TPS_VARIANTS if compared else tuple(v for v in TPS_VARIANTS if v not in COMPARED)
        return mine if self.on_tmpfs else (*mine, *NOPC)

    @property
    def kernel_variants(self) -> tuple[str, ...]:
        """Every kernel_cost variant, floors first."""
        return KERNEL_VARIANTS if self.on_tmpfs else (FLOOR_PC, FLOOR_PC_EXITS, *KERNEL_VARIANTS, *NOPC)

    @property
    def kernel_pairs(self) -> tuple[tuple[str, str], ...]:
        """(floor, variant): the kernel_cost windows of every round."""
        variants = ROUND_KERNEL_VARIANTS if self.on_tmpfs else (*ROUND_KERNEL_VARIANTS, *NOPC)
        return tuple((floor_of(v, self.kernel_variants), v) for v in variants)


CONFIGS = {
    c.key: c
    for c in (
        ServerConfig("10.11-io_uring", "io_uring", None, "the host's server", on_tmpfs=True),
        ServerConfig("10.11-aio", "aio", None, "the host's server", on_tmpfs=True),
        ServerConfig("11.8", "default", "trixie", "in a Debian trixie root", on_tmpfs=False),
        ServerConfig("9.7", "default", "sid-mysql", "in a Debian sid root", on_tmpfs=False, product="MySQL"),
    )
}
# What `make bench` runs unless MYSQLIO_BENCH_CONFIGS says otherwise. Not MySQL 9.7: its
# windows (about 34 minutes by estimate_s, as many as 11.8's) would take a full run past
# the time it must leave a CI run in one session (tests/test_bench_plan.py); run on its
# own with MYSQLIO_BENCH_CONFIGS=9.7 tools/bench.py --only kernel_cost,tps.
DEFAULT_CONFIGS = ("10.11-io_uring", "10.11-aio", "11.8")
# A smoke run (part of every CI run, whose time is short) leaves out 10.11-aio: the same
# bench code as 10.11-io_uring with another server option.
SMOKE_CONFIGS = ("10.11-io_uring", "11.8")


def chosen_configs(smoke: bool = False) -> list[ServerConfig]:
    default = SMOKE_CONFIGS if smoke else DEFAULT_CONFIGS
    keys = [k for k in os.environ.get("MYSQLIO_BENCH_CONFIGS", ",".join(default)).split(",") if k]
    unknown = [k for k in keys if k not in CONFIGS]
    if unknown:
        raise ValueError(f"MYSQLIO_BENCH_CONFIGS: unknown {', '.join(unknown)} (known: {', '.join(CONFIGS)})")
    return [CONFIGS[k] for k in keys]


def chosen_workloads(smoke: bool = False) -> list[str]:
    """The TPS workloads: MYSQLIO_BENCH_WORKLOADS (comma-separated), else all of WORKLOADS;
    in a smoke run the first only (the others take the same code with another script, and
    the smoke run is part of every CI run, whose time is short)."""
    default = WORKLOADS[:1] if smoke else WORKLOADS
    names = [w for w in os.environ.get("MYSQLIO_BENCH_WORKLOADS", ",".join(default)).split(",") if w]
    unknown = [w for w in names if w not in WORKLOADS]
    if unknown:
        raise ValueError(f"MYSQLIO_BENCH_WORKLOADS: unknown {', '.join(unknown)} (known: {', '.join(WORKLOADS)})")
    return names


def run_seconds(smoke: bool) -> int:
    """The run counting the server's syscalls (_syscall_rows)."""
    return 3 if smoke else 10


def kernel_window_seconds(smoke: bool) -> int:
    """One kernel_cost window: some 100,000 traced requests at this load."""
    return 1 if smoke else 3


def kernel_plan(config: ServerConfig, rounds: int, seed: int) -> list[list[str]]:
    """The kernel_cost windows, round by round (ROUND_KERNEL_VARIANTS): the pairs in a
    new order each round, the floor first in even rounds; the other variants once, at
    the end of the first."""
    rng = random.Random(seed)
    paired = {name for pair in config.kernel_pairs for name in pair}
    plan = []
    for r in range(rounds):
        pairs = list(config.kernel_pairs)
        rng.shuffle(pairs)
        names = [name for pair in pairs for name in (pair if r % 2 == 0 else reversed(pair))]
        if r == 0:
            names += [v for v in config.kernel_variants if v not in paired]
        plan.append(names)
    return plan


def window_seconds(smoke: bool) -> int:
    """One TPS window. 8 s (10 until 2026-11-28): the load's TPS moves in plateaus of
    several seconds either way, and 10 rounds of windows of every variant, workload and
    server are most of `make bench`, which must leave a session room for its CI run."""
    return 2 if smoke else 8


def rounds_of(smoke: bool) -> int:
    return 1 if smoke else int(os.environ.get("MYSQLIO_BENCH_ROUNDS", "10"))


def estimate_s(smoke: bool, kernel_cost: bool, tps: bool) -> float:
    """How long the chosen configurations take (seconds, roughly)."""
    per_run = run_seconds(smoke) + RUN_OVERHEAD_S
    total = 0.0
    for config in chosen_configs(smoke):
        if kernel_cost:
            windows = sum(map(len, kernel_plan(config, rounds_of(smoke), seed=0)))
            per_window = kernel_window_seconds(smoke) + WINDOW_SETTLE_S + KERNEL_WINDOW_OVERHEAD_S
            # and one run counting the syscalls (_syscall_rows)
            total += SERVER_START_S + LOAD_WARMUP_S + windows * per_window + per_run
        if tps:
            per_window = window_seconds(smoke) + WINDOW_SETTLE_S + WINDOW_OVERHEAD_S
            total += SERVER_START_S + sum(
                LOAD_WARMUP_S + rounds_of(smoke) * len(config.tps_variants(i == 0)) * per_window
                for i in range(len(chosen_workloads(smoke)))
            )
    return total


# ---------------------------------------------------------------- the servers


@dataclass
class Server:
    db: MariaDB
    bench: Sysbench
    title: str  # "MariaDB 10.11 io_uring", "MySQL 9.7 aio"
    note: str  # which server, where its datadir is, the backend asked when another is in use


def root_of(name: str) -> str:
    """The directory of the server root `name` (tools/server_roots.py builds it if
    missing); a clear error if it cannot be built."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "server_roots.py")
    res = subprocess.run(
        [sys.executable, script, "--json", name], capture_output=True, text=True, timeout=ROOTS_TIMEOUT_S, check=False
    )
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise SetupError(f"cannot build the server root {name} (tools/server_roots.py {name}): {last}")
    return str(json.loads(res.stdout)[name])


@contextlib.contextmanager
def started(
    config: ServerConfig, buffer_pool_mb: int | None = None, redo_log_mb: int | None = None
) -> Iterator[Server]:
    """The configuration's server with sysbench's tables, gone afterwards; its buffer
    pool and redo log MariaDBOptions' unless given (tools/tps_noise.py)."""
    require("sysbench", "mariadb")
    options = MariaDBOptions(innodb_backend=config.backend)
    if buffer_pool_mb is not None:
        options.buffer_pool_mb = buffer_pool_mb
    if redo_log_mb is not None:
        options.redo_log_mb = redo_log_mb
    base = None
    db: MariaDB
    if config.root is None:
        base = tempfile.mkdtemp(prefix="mysqlio-bench-db-", dir="/dev/shm")
        db = MariaDB(options, base_dir=base)
    elif config.product == "MySQL":
        db = RootedMySQL(root_of(config.root), options)
    else:
        # a tmpfs on its /dev/shm, as on a booted system: 11.8 writes its redo log with
        # pwrite (on a plain directory it would memory-map it, no syscall to see)
        db = RootedMariaDB(root_of(config.root), options, shm_on_disk=False)
    try:
        with db:
            bench = Sysbench(db, tables=4, table_size=10000, threads=4)
            bench.prepare()
            try:
                yield describe(db, bench, config)
            finally:
                bench.stop()
    finally:
        if base:
            shutil.rmtree(base, ignore_errors=True)


def datadir_fstype(path: str) -> str:
    """The type of the filesystem `path` is on (of the top mount where several are stacked)."""
    found = subprocess.run(
        ["findmnt", "-n", "-o", "FSTYPE", "--target", path], capture_output=True, text=True, check=True
    ).stdout.split()
    return found[-1] if found else "?"


def describe(db: MariaDB, bench: Sysbench, config: ServerConfig) -> Server:
    version = ".".join(db.version().split("-")[0].split(".")[:2])
    in_use = db.innodb_backend_in_use()
    fstype = datadir_fstype(db.datadir)
    note = f"{config.where}, datadir on {fstype}" + ("" if fstype == "tmpfs" else " (not tmpfs)")
    if config.on_tmpfs != (fstype == "tmpfs"):
        expected = "tmpfs" if config.on_tmpfs else "a filesystem other than tmpfs"
        raise SetupError(f"{config.key}: its datadir {db.datadir} is on {fstype}, not on {expected}")
    if config.backend != "default" and in_use != config.backend:
        note += f"; asked {config.backend}, the server fell back"
    return Server(db, bench, f"{config.product} {version} {in_use}", note)


def bench_server(suite: Suite, kernel_cost: bool, tps: bool) -> None:
    require("findmnt")
    require_tracers((*(KERNEL_VARIANTS if kernel_cost else ()), *(TPS_VARIANTS if tps else ())))
    configs = chosen_configs(suite.smoke)
    for config in configs:
        print(f"-- {config.key}", flush=True)
        with started(config) as server, tempfile.TemporaryDirectory() as tmp:
            if kernel_cost:
                _kernel_cost(suite, server, config, suite.smoke, tmp)
            if tps:
                for i, workload in enumerate(chosen_workloads(suite.smoke)):
                    _tps(suite, server, config, workload, tmp, compared=i == 0)


# ---------------------------------------------------------------- TPS


def _tps(suite: Suite, server: Server, config: ServerConfig, workload: str, tmp: str, compared: bool) -> None:
    run_s, rounds = window_seconds(suite.smoke), rounds_of(suite.smoke)
    variants = config.tps_variants(compared)
    cpu: dict[str, list[float]] = {name: [] for name in CPU_TARGET}
    server_cpu: dict[str, list[float]] = {name: [] for name in variants}
    tps = windowed_tps(
        server.db.pid,
        server.bench,
        lambda: server.db.status("Com_commit"),
        run_s,
        rounds,
        tmp,
        variants,
        seed=7,
        script=workload,
        cpu=cpu,
        server_cpu=server_cpu,
        warmup_s=1.0 if suite.smoke else LOAD_WARMUP_S,
    )
    title = f"sysbench {workload}, {server.title},"
    note = f"{rounds} rounds of a {run_s} s window each, one sysbench run, Com_commit; {server.note}"
    sees = {name: CAN_SEE[base_name(name)] for name in variants}
    notes = {name: f"{note}; sees: {seen}" if seen else note for name, seen in sees.items()}
    add_tps_results(suite, tps, f"{title} under", note, notes=notes)
    # the same windows: the tracer's cost in the server's own threads (its programs, the
    # syscall tax) per transaction, whatever the machine's speed does to TPS
    add_tps_results(
        suite,
        server_cpu,
        f"{title} under",
        f"the server process's user+system CPU (/proc/PID/stat, 10 ms ticks) over its Com_commit, "
        f"in the TPS windows ({rounds} rounds of {run_s} s); sysbench's side not counted",
        metric="server CPU per commit",
        unit="µs",
    )
    for name, values in cpu.items():
        suite.add(
            Result(
                f"{title} {name}",
                "mysqlio userspace CPU",
                values,
                "% of a core",
                note=f"CPU of the mysqlio process's threads over each window (schedstat, ns); {rounds} windows of {run_s} s; {CPU_TARGET[name]}",
            )
        )


# ---------------------------------------------------------------- in the kernel


def _kernel_cost(suite: Suite, server: Server, config: ServerConfig, smoke: bool, tmp: str) -> None:
    """Every variant's windows (kernel_plan) in one run of oltp_write_only, with
    kernel.bpf_stats_enabled; then the run counting the server's syscalls."""
    window_s = kernel_window_seconds(smoke)
    with bpf_stats_enabled():
        windows = windowed_program_runs(
            server.db.pid,
            server.bench,
            kernel_plan(config, rounds_of(smoke), seed=11),
            window_s,
            tmp,
            warmup_s=1.0 if smoke else LOAD_WARMUP_S,
        )
    per_request = {name: [ns_per_request(name, runs) for runs in windows[name]] for name in config.kernel_variants}
    for name in config.kernel_variants:
        _kernel_rows(suite, server, name, windows[name], window_s, per_request)
    _syscall_rows(suite, server, run_seconds(smoke))


def syscall_counts(server: Server, run_s: int) -> tuple[int, int, int]:
    """The server's syscalls, all processes' (sysbench's included) and the server's
    commits over run_s seconds of the kernel-cost workload, counted by bpftrace on the
    raw sys_enter tracepoint (itself a tracer: the rates are those under one)."""
    # BEGIN runs once the probes are attached: the commits are read from then on, so
    # that both counts cover the same run_s seconds (bpftrace's start takes about one)
    script = (
        'BEGIN { printf("counting\\n"); } '
        f"tracepoint:raw_syscalls:sys_enter {{ @all = count(); if (pid == {server.db.pid}) {{ @server = count(); }} }} "
        f"interval:s:{run_s} {{ exit(); }}"
    )
    server.bench.start(run_s + 30, script=KERNEL_WORKLOAD)
    try:
        time.sleep(2)  # sysbench's connections made
        proc = subprocess.Popen(["bpftrace", "-e", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_line(proc.stdout, "counting")
        c0 = server.db.status("Com_commit")
        stdout, stderr = proc.communicate(timeout=run_s + 60)
        c1 = server.db.status("Com_commit")
    finally:
        server.bench.stop()
    counts = dict(re.findall(r"^@(\w+): (\d+)$", stdout, re.MULTILINE))
    if proc.returncode != 0 or "all" not in counts or "server" not in counts or c1 <= c0:
        raise RuntimeError(f"no syscall counts from bpftrace:\n{stdout}{stderr}")
    return int(counts["server"]), int(counts["all"]), c1 - c0


def _syscall_rows(suite: Suite, server: Server, run_s: int) -> None:
    """How many syscalls the tax of the syscall tracepoints (tools/bench.py syscall_tax)
    falls on at this load: the server's and every process's, per second and per commit,
    and what `top`'s tax on the server's syscalls comes to."""
    server_calls, all_calls, commits = syscall_counts(server, run_s)
    label = f"syscalls, sysbench {KERNEL_WORKLOAD}, {server.title}"
    note = f"{run_s} s under bpftrace's count of raw sys_enter; {commits / run_s:,.0f} commits/s"
    suite.add(Result(label, "server syscalls per commit", [server_calls / commits], note=note))
    suite.add(Result(label, "all syscalls per commit", [all_calls / commits], note=f"{note}; sysbench's included"))
    tax = syscall_tax_ns(suite, "top")
    if tax is not None:
        share = 100 * tax * server_calls / run_s / 1e9
        suite.add(
            Result(
                label,
                "top's tax on the server's syscalls",
                [share],
                "% of a core",
                note=f"{tax:.0f} ns (syscall_tax) x {server_calls / run_s:,.0f} server syscalls/s; not in bpf_stats",
            )
        )


BPF_STATS_RUN_TIME = 0  # enum bpf_stats_type


@contextlib.contextmanager
def bpf_stats_enabled() -> Iterator[None]:
    """The programs' run time and count kept for the block, by an fd of BPF_ENABLE_STATS
    (Linux 5.8; libbpf's bpf_enable_stats) held as long as it lasts. Each such fd counts
    once towards keeping the stats on, the kernel.bpf_stats_enabled sysctl once more:
    another process turning the sysctl off (a test, another benchmark on this shared
    machine) no longer stops them mid-run (it did, 2026-12-06: windows of 0 runs), and
    this block never turns off theirs."""
    cdll = ctypes.CDLL("libbpf.so.1", use_errno=True)
    fd = int(cdll.bpf_enable_stats(BPF_STATS_RUN_TIME))
    if fd < 0:  # libbpf returns -errno
        raise SetupError(f"cannot keep BPF run-time stats (BPF_ENABLE_STATS): {os.strerror(-fd)}")
    try:
        yield
    finally:
        os.close(fd)


ProgramRuns = dict[int, tuple[str, int, int]]  # by program id: (name, ns, runs)


def runs_between(before: ProgramRuns, after: ProgramRuns) -> ProgramRuns:
    """Each program's run time and runs between two reads of bpf_prog_stats."""
    runs = {}
    for prog_id, (prog, ns, cnt) in after.items():
        _, ns0, cnt0 = before.get(prog_id, (prog, 0, 0))
        runs[prog_id] = (prog, ns - ns0, cnt - cnt0)
    return runs


def program_runs(
    pid: int,
    bench: Sysbench,
    name: str,
    run_s: int,
    tmp: str,
    script: str = KERNEL_WORKLOAD,
    cpu: list[float] | None = None,
) -> ProgramRuns:
    """(name, ns, runs) of each of the tracer's programs over one run of the load on the
    server PID (inside bpf_stats_enabled); the tracer's own CPU over the run, in % of a
    core, appended to cpu when given."""
    tracer = Tracer(name, pid, tmp, run_s=run_s)
    tracer.start()
    try:
        ids = tracer.prog_ids()
        before = bpf_prog_stats(ids)
        cpu0, t0 = tracer.cpu_seconds(), time.monotonic()
        bench.start(run_s, script=script)
        bench.wait(timeout_s=run_s + 60)
        after = bpf_prog_stats(ids)
        if cpu is not None:
            cpu.append(100 * (tracer.cpu_seconds() - cpu0) / (time.monotonic() - t0))
    finally:
        tracer.stop()
    return runs_between(before, after)


def windowed_program_runs(
    pid: int, bench: Sysbench, plan: list[list[str]], window_s: float, tmp: str, warmup_s: float = LOAD_WARMUP_S
) -> dict[str, list[ProgramRuns]]:
    """Each variant's programs' runs over its windows (inside bpf_stats_enabled), all in
    ONE run of the kernel-cost load, as windowed_tps does for TPS: the plan's rounds in
    order, each window begun WINDOW_SETTLE_S after its tracer attached (its first
    lookups done) and ended before it stops."""
    windows: dict[str, list[ProgramRuns]] = {}
    total_s = warmup_s + sum(map(len, plan)) * (window_s + WINDOW_SETTLE_S + KERNEL_WINDOW_OVERHEAD_S)
    with one_load(bench, KERNEL_WORKLOAD, total_s, warmup_s):
        for names in plan:
            for name in names:
                with tracer_window(name, pid, tmp, window_s, bench, KERNEL_WORKLOAD) as tracer:
                    ids = tracer.prog_ids()
                    before = bpf_prog_stats(ids)
                    time.sleep(window_s)
                    after = bpf_prog_stats(ids)
                runs = runs_between(before, after)
                if not sum(cnt for _, _, cnt in runs.values()):
                    raise RuntimeError(f"no run of {name}'s programs in a {window_s} s window of load: stats off?")
                windows.setdefault(name, []).append(runs)
    return windows


def requests_of(name: str, runs: ProgramRuns) -> tuple[int, str]:
    """The requests a variant's programs served, and how they were counted."""
    if base_name(name) == "bpftrace":
        enters = sum(cnt for prog, _, cnt in runs.values() if prog.startswith(BPFTRACE_ENTER))
        return enters, "runs of its sys_enter_* programs"
    hook = "raw" if name.endswith("-raw") else "tracepoints"
    enters = sum(cnt for prog, _, cnt in runs.values() if prog.startswith(REQUEST_PROGRAMS[hook]))
    where = "raw sys_enter: every syscall of every process" if hook == "raw" else "the I/O syscalls' tracepoints"
    return enters, f"runs of its exit programs ({where}) and io_uring submits"


def floor_of(name: str, per_request: Collection[str]) -> str:
    """The floor a variant is compared with: the floor on the same hooks. Untimed top
    attaches no enter program: its floor has exit programs only. Where the floor with
    the page-cache hooks was measured (not on tmpfs), mysqlio with its page-cache hooks
    on is compared with that one."""
    floor = FLOOR_PC if FLOOR_PC in per_request and not name.endswith("-nopc") else "floor"
    return f"{floor}-exits" if name in UNTIMED else floor


def ns_per_request(name: str, runs: ProgramRuns) -> float:
    """All of the variant's programs' run time over the requests they served."""
    requests, _ = requests_of(name, runs)
    return sum(ns for _, ns, _ in runs.values()) / max(requests, 1)


def ratios_to_floor(name: str, per_request: dict[str, list[float]]) -> list[float]:
    """The variant's ns per traced request over its floor's, round by round: window i
    of each is in round i (kernel_plan), and a variant with one window has it in the
    first round, where every floor has one."""
    floor = per_request[floor_of(name, per_request)]
    return [mine / theirs for mine, theirs in zip(per_request[name], floor, strict=False)]


def _kernel_rows(
    suite: Suite,
    server: Server,
    name: str,
    windows: list[ProgramRuns],
    window_s: int,
    per_request: dict[str, list[float]],
) -> None:
    """The variant's rows from its windows (per_request: every variant's ns per traced
    request, window by window, round by round)."""
    label = f"in-kernel cost: {name}, sysbench {KERNEL_WORKLOAD}, {server.title}"
    span = f"{len(windows)} window{'s' if len(windows) > 1 else ''} of {window_s} s"
    ns = [sum(ns for _, ns, _ in runs.values()) for runs in windows]
    count = [sum(cnt for _, _, cnt in runs.values()) for runs in windows]
    requests = [requests_of(name, runs)[0] for runs in windows]
    counted = requests_of(name, windows[0])[1]
    bpf_ms = f"{statistics.median(ns) / 1e6 / window_s:.1f} ms of BPF per second of load"
    suite.add(
        Result(
            label,
            "ns per program run",
            [n / max(c, 1) for n, c in zip(ns, count, strict=True)],
            "ns",
            note=f"{span}; {statistics.median(count):,.0f} runs a window, {bpf_ms}",
        )
    )
    suite.add(
        Result(
            label,
            "ns per traced request",
            per_request[name],
            "ns",
            note=f"{span}; {statistics.median(requests):,.0f} requests a window: {counted}",
        )
    )
    target = RATIO_TO_FLOOR.get(base_name(name))
    floor = floor_of(name, per_request)
    if target and not name.endswith("-raw") and per_request.get(floor):
        # (not on the raw hook: there the requests are every syscall of the machine)
        ratios = ratios_to_floor(name, per_request)
        suite.add(
            Result(
                label,
                "ratio to the floor",
                ratios,
                note=f"ns per traced request over {floor}'s in the same round, "
                f"{len(ratios)} round{'s' if len(ratios) > 1 else ''}; {target}",
            )
        )
    if name in PER_PROGRAM:  # where the time goes, program by program
        for prog in sorted({prog for runs in windows for prog, _, _ in runs.values()}):
            # (ns, runs) of this program in each window it ran in
            ran = [
                (sum(p_ns for p, p_ns, _ in runs.values() if p == prog), p_runs)
                for runs in windows
                if (p_runs := sum(cnt for p, _, cnt in runs.values() if p == prog))
            ]
            if ran:
                per_run = [p_ns / p_runs for p_ns, p_runs in ran]
                note = f"{span}; {statistics.median(r for _, r in ran):,.0f} runs a window it ran in ({len(ran)})"
                suite.add(Result(f"{label}, {prog}", "ns per program run", per_run, "ns", note=note))

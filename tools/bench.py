#!/usr/bin/env python3
"""mysqlio benchmarks: cost to mysqld and capacity, side by side with what users use today.

    make bench                                   # full suite, writes docs/benchmarks.md
    .venv/bin/python tools/bench.py --smoke      # one short pair of each (CI keeps it working)
    .venv/bin/python tools/bench.py --only capacity,top_cpu
    MYSQLIO_BENCH_CONFIGS=9.7 .venv/bin/python tools/bench.py --only kernel_cost,tps   # MySQL 9.7

Benchmarks never fail on a number: they print a table (scenario, metric, median,
min-max, ratio to baseline) and write the same to --out. Run as root.

1. kernel_cost  in-kernel cost from kernel.bpf_stats_enabled under sysbench oltp_write_only,
                per server configuration: ns per program run, ns per traced request and
                its ratio to the floor, for mysqlio top and record (each on either
                syscall hook), the pid-filter-only floor (tracer/bpf/empty.bpf.o) and a
                bpftrace per-fd sum (tools/bench_server.py): 3 s windows of one
                sysbench run, top and record and their floors in each of the rounds,
                each next to its floor, the ratios round by round; the other variants
                one window.
2. tps          sysbench oltp_write_only and oltp_read_write TPS at full speed, per server
                configuration (MariaDB 10.11 on io_uring and on libaio, MariaDB 11.8;
                Oracle MySQL 9.7 when asked): no tracer vs the floor vs top vs record
                (vs bpftrace and pt-ioprofile under the first workload), each an 8 s
                window of one sysbench run per round (TPS from the server's Com_commit),
                rounds in new orders, medians and per-round ratios to no tracer; the
                server process's own CPU per commit in the same windows; the mysqlio
                process's CPU during the top and record windows.
   request_cost ns per pwrite64 of iogen flat out, untraced vs top / record on
                either syscall hook: the cost of one traced request, caches warm.
   syscall_tax  ns per getppid of a process no tracer traces, under each tracer: the
                kernel's slow syscall path, taken by every thread while any syscall
                tracepoint has a program (tools/syscall_loop).
3. capacity     record at 100k..2M requests/s of small pwrites to tmpfs (iogen):
                captured vs produced, lost, mysqlio CPU, trace bytes per event.
4. top_cpu      top's userspace CPU at 10k / 100k / 1M events/s.
5. report       offline report speed and peak RSS (tools/bench_report.py).
6. startup      command to first attached probe; RSS of top.
Optional, only when named in --only (too long for `make bench`):
   tables       20,000 sysbench tables on MariaDB 10.11 and Oracle MySQL 9.7, a load that
                writes every table: verify against performance_schema, top's lost events,
                files, CPU and RSS (tools/bench_tables.py, about 20 min).
   trace_scale  record, report (text and --json) and plot of traces of 10k-100k distinct
                files: seconds and peak RSS, counts checked (tools/bench_trace_scale.py, ~6 min).

MYSQLIO_BENCH_CONFIGS (10.11-io_uring,10.11-aio,11.8: the default; 9.7: Oracle MySQL,
only when named) chooses the server configurations of tps and kernel_cost,
MYSQLIO_BENCH_ROUNDS their rounds (10), MYSQLIO_BENCH_WORKLOADS the tps workloads
(oltp_write_only,oltp_read_write: both).
A tool a benchmark needs that is missing (bpftrace, pt-ioprofile, sysbench, ...) ends
the run with one line and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

# the tracers compared (bench_tracers.py); tools/bench_pagecache.py takes them from here
from bench_tracers import (
    MYSQLIO,
    SetupError,
    Tracer,
    bpf_prog_stats,
    process_cpu_seconds,
    thread_cpu_seconds,
    wait_line,
)

if TYPE_CHECKING:
    from mysqlio.devtools.sysbench import Sysbench

__all__ = ["Result", "Suite", "Tracer", "add_tps_results", "bpf_prog_stats", "interleaved_tps", "windowed_tps"]

REPO = Path(__file__).resolve().parent.parent

IOGEN = REPO / "tools" / "iogen"
# how long a sysbench run may overrun its duration before the server is taken as stalled
SYSBENCH_GRACE_S = 120


@dataclass
class Result:
    scenario: str
    metric: str
    values: list[float]
    unit: str = ""
    baseline: float | None = None  # the median this one is compared with
    note: str = ""
    # per-round ratios to a baseline measured in the same round (A/B pairs):
    # the machine's drift between rounds cancels out of each
    paired_ratios: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    def row(self) -> list[str]:
        ratio = f"{self.median / self.baseline:.3f}" if self.baseline else ""
        if self.paired_ratios:
            r = self.paired_ratios
            ratio = f"{statistics.median(r):.3f} (pairs {min(r):.3f}–{max(r):.3f})"
        spread = f"{_figure(min(self.values))}–{_figure(max(self.values))}" if len(self.values) > 1 else ""
        return [self.scenario, self.metric, f"{_figure(self.median)} {self.unit}".strip(), spread, ratio, self.note]


def _figure(value: float) -> str:
    """Four significant digits, but a whole count of 10,000 or more in full (a count of
    files or rows as 2e+04 or 1.253e+04 hid the figure the run measured)."""
    if math.isfinite(value) and value == int(value) and abs(value) >= 10_000:
        return f"{int(value):,}"
    return f"{value:.4g}"


@dataclass
class Suite:
    smoke: bool
    results: list[Result] = field(default_factory=list)

    def add(self, result: Result) -> None:
        self.results.append(result)
        print("  " + " | ".join(result.row()), flush=True)


# ---------------------------------------------------------------- helpers


def iogen_rate(directory: str, rate: int, seconds: float, threads: int = 1) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            str(IOGEN),
            "--dir",
            directory,
            "--wait",
            "--rate",
            str(rate),
            "--seconds",
            str(seconds),
            "--threads",
            str(threads),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


# ---------------------------------------------------------------- scenarios


def bench_capacity(suite: Suite) -> None:
    rates = [100_000] if suite.smoke else [100_000, 300_000, 1_000_000, 2_000_000]
    seconds = 1 if suite.smoke else 5
    for rate in rates:
        work = tempfile.mkdtemp(prefix="mysqlio-bench-", dir="/dev/shm")
        try:
            gen = iogen_rate(work, rate, seconds, threads=2)
            assert gen.stdout and gen.stdin
            json.loads(gen.stdout.readline())
            trace = f"{work}/t.trace"
            rec = subprocess.Popen(
                [*MYSQLIO, "record", "-p", str(gen.pid), "-o", trace], stderr=subprocess.PIPE, text=True
            )
            wait_line(rec.stderr, "mysqlio: recording pid")
            cpu0 = thread_cpu_seconds(rec.pid)
            gen.stdin.write("go\n")
            gen.stdin.flush()
            expected = json.loads(gen.stdout.readline())
            time.sleep(1.0)
            cpu = thread_cpu_seconds(rec.pid) - cpu0
            rec.send_signal(signal.SIGINT)
            rec.communicate(timeout=120)
            gen.stdin.close()
            gen.wait(timeout=30)
            produced = sum(f["write_ops"] for f in expected["files"])
            report = json.loads(
                subprocess.run([*MYSQLIO, "report", trace, "--json"], capture_output=True, text=True, check=True).stdout
            )
            captured = sum(f["write_ops"] for f in report["files"] if f["path"].startswith(work))
            elapsed = expected.get("elapsed_s") or seconds
            achieved = produced / elapsed
            label = f"record @ {rate / 1000:.0f}k/s asked, {achieved / 1000:.0f}k/s done"
            suite.add(Result(label, "captured / produced", [captured / produced], note=f"{captured:,} of {produced:,}"))
            suite.add(Result(label, "lost events", [report["lost_events"]]))
            suite.add(Result(label, "mysqlio CPU", [100 * cpu / (elapsed + 1.0)], "% of a core"))
            suite.add(Result(label, "trace bytes per event", [os.path.getsize(trace) / max(captured, 1)], "B"))
        finally:
            shutil.rmtree(work, ignore_errors=True)


def bench_request_cost(suite: Suite) -> None:
    """The cost of one traced request with warm caches: iogen's pwrite64 loop flat out
    on tmpfs (one thread), untraced and under each tracer, interleaved rounds."""
    variants = ["none", "top", "top-raw", "record", "record-raw"]
    rounds = 1 if suite.smoke else 7
    ops = 200_000 if suite.smoke else 2_000_000
    ns_per_op: dict[str, list[float]] = {v: [] for v in variants}
    order = list(variants)
    rng = random.Random(11)
    for _ in range(rounds):
        rng.shuffle(order)
        for name in order:
            work = tempfile.mkdtemp(prefix="mysqlio-bench-", dir="/dev/shm")
            try:
                rate = 10_000_000  # beyond what one thread can do: flat out
                gen = iogen_rate(work, rate, ops / rate)
                assert gen.stdout and gen.stdin
                json.loads(gen.stdout.readline())
                tracer = Tracer(name, gen.pid, work)
                tracer.start()
                try:
                    gen.stdin.write("go\n")
                    gen.stdin.flush()
                    done = json.loads(gen.stdout.readline())
                finally:
                    tracer.stop()
                gen.stdin.close()
                gen.wait(timeout=30)
                n = sum(f["write_ops"] for f in done["files"])
                ns_per_op[name].append(1e9 * done["elapsed_s"] / n)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    add_ns_rows(
        suite,
        ns_per_op,
        "pwrite64 flat out (1 thread, tmpfs) under",
        "ns per request",
        f"{rounds} rounds of {ops:,}",
        "tracing adds {added:.0f} ns",
    )


def add_ns_rows(suite: Suite, ns: dict[str, list[float]], title: str, metric: str, note: str, added_note: str) -> None:
    """One row per variant ("<title> <variant>") of ns figures, each against no tracer's
    median ("none"); added_note formats what the variant adds ({added}: ns)."""
    base = statistics.median(ns["none"])
    for name, values in ns.items():
        added = statistics.median(values) - base
        suite.add(
            Result(
                f"{title} {name}",
                metric,
                values,
                "ns",
                baseline=None if name == "none" else base,
                note=note if name == "none" else f"{note}; {added_note.format(added=added)}",
            )
        )


SYSCALL_LOOP = REPO / "tools" / "syscall_loop"
TAX_VARIANTS = ("none", "floor-exits", "floor", "top", "record", "top-raw", "bpftrace")
TAX_SCENARIO = "getppid (no tracer hooks it) while a tracer traces another process, under"


def bench_syscall_tax(suite: Suite) -> None:
    """What a tracer on the syscall tracepoints costs every OTHER syscall: while one of
    them has a program, the kernel sends every syscall of every thread on the machine
    through its slow path (the tracepoint work flag is set on all threads), a cost no
    bpf_stats figure holds. tools/syscall_loop's getppid loop, untraced (the tracers
    trace a sleeping process), under each tracer, interleaved rounds."""
    rounds = 1 if suite.smoke else 7
    calls = 200_000 if suite.smoke else 2_000_000
    ns: dict[str, list[float]] = {v: [] for v in TAX_VARIANTS}
    order = list(TAX_VARIANTS)
    rng = random.Random(13)
    with tempfile.TemporaryDirectory() as tmp:
        sleeper = subprocess.Popen(["sleep", "3600"])
        try:
            for _ in range(rounds):
                rng.shuffle(order)
                for name in order:
                    tracer = Tracer(name, sleeper.pid, tmp)
                    tracer.start()
                    try:
                        out = subprocess.run(
                            [str(SYSCALL_LOOP), str(calls)], capture_output=True, text=True, check=True, timeout=60
                        ).stdout
                    finally:
                        tracer.stop()
                    ns[name].append(float(out))
        finally:
            sleeper.kill()
            sleeper.wait()
    add_ns_rows(
        suite,
        ns,
        TAX_SCENARIO,
        "ns per syscall",
        f"{rounds} rounds of {calls:,}",
        "adds {added:.0f} ns to every syscall of every process",
    )


def syscall_tax_ns(suite: Suite, tracer: str) -> float | None:
    """What `tracer` adds to every syscall, from this suite's syscall_tax rows (None: not run)."""
    rows = {r.scenario: r.median for r in suite.results if r.scenario.startswith(TAX_SCENARIO)}
    base, under = rows.get(f"{TAX_SCENARIO} none"), rows.get(f"{TAX_SCENARIO} {tracer}")
    return None if base is None or under is None else under - base


def bench_top_cpu(suite: Suite) -> None:
    rates = [10_000] if suite.smoke else [10_000, 100_000, 1_000_000]
    seconds = 2 if suite.smoke else 10
    for rate in rates:
        work = tempfile.mkdtemp(prefix="mysqlio-bench-", dir="/dev/shm")
        try:
            gen = iogen_rate(work, rate, seconds, threads=2)
            assert gen.stdout and gen.stdin
            json.loads(gen.stdout.readline())
            top = subprocess.Popen(
                [*MYSQLIO, "top", "-p", str(gen.pid), "--json", "-i", "1"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            wait_line(top.stderr, "mysqlio: tracing pid")
            ps = psutil.Process(top.pid)
            cpu0, t0 = thread_cpu_seconds(top.pid), time.monotonic()
            gen.stdin.write("go\n")
            gen.stdin.flush()
            expected = json.loads(gen.stdout.readline())
            cpu, wall = thread_cpu_seconds(top.pid) - cpu0, time.monotonic() - t0
            rss = ps.memory_info().rss / 2**20
            top.send_signal(signal.SIGINT)
            top.communicate(timeout=60)
            gen.stdin.close()
            gen.wait(timeout=30)
            achieved = sum(f["write_ops"] for f in expected["files"]) / (expected.get("elapsed_s") or seconds)
            label = f"top @ {achieved / 1000:.0f}k events/s"
            suite.add(Result(label, "userspace CPU", [100 * cpu / wall], "% of a core"))
            suite.add(Result(label, "RSS", [rss], "MiB"))
        finally:
            shutil.rmtree(work, ignore_errors=True)


def bench_startup(suite: Suite) -> None:
    runs = 2 if suite.smoke else 7
    victim = subprocess.Popen(["sleep", "600"])
    times, rss = [], []
    try:
        for _ in range(runs):
            t0 = time.monotonic()
            top = subprocess.Popen(
                [*MYSQLIO, "top", "-p", str(victim.pid), "--json", "-i", "0.5"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            wait_line(top.stderr, "mysqlio: tracing pid")
            times.append(time.monotonic() - t0)
            assert top.stdout
            top.stdout.readline()
            top.stdout.readline()
            rss.append(psutil.Process(top.pid).memory_info().rss / 2**20)
            top.send_signal(signal.SIGINT)
            top.communicate(timeout=30)
    finally:
        victim.kill()
        victim.wait()
    suite.add(Result("startup", "command to probes attached", times, "s"))
    suite.add(Result("startup", "RSS of top", rss, "MiB"))


def bench_report(suite: Suite) -> None:
    events = 200_000 if suite.smoke else 10_000_000
    out = subprocess.run(
        [sys.executable, str(REPO / "tools" / "bench_report.py"), "--events", str(events)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for line in out.splitlines():
        m = re.search(r"^report (.+?)\s+[\d.]+ s =\s+([\d,]+) events/s, peak RSS (\d+) MiB", line)
        if m:
            label = f"report {m.group(1).strip()} ({events:,} events)"
            suite.add(Result(label, "speed", [int(m.group(2).replace(",", "")) / 1e6], "M events/s"))
            suite.add(Result(label, "peak RSS", [float(m.group(3))], "MiB"))
    if not any(r.scenario.startswith("report") for r in suite.results):
        print(out)


def _sysbench_tps(output: str) -> float:
    m = re.search(r"transactions:\s+\d+\s+\(([\d.]+) per sec", output)
    if not m:
        raise RuntimeError(f"no TPS in sysbench output:\n{output}")
    return float(m.group(1))


def interleaved_tps(
    pid: int,
    bench: Sysbench,
    run_s: int,
    rounds: int,
    tmp: str,
    variants: Sequence[str],
    seed: int,
    *,
    script: str = "oltp_write_only",
    cpu: dict[str, list[float]] | None = None,
    before_run: Callable[[], None] | None = None,
) -> dict[str, list[float]]:
    """sysbench's TPS under each tracer variant, `rounds` rounds, each round running every
    variant once in a new order (A/B interleaved: the machine's drift hits all alike).
    `cpu`: for each variant it names, the tracer process's CPU over each run (% of a core).
    `before_run`: called before each run (e.g. to keep the server's disk from filling)."""
    tps: dict[str, list[float]] = {v: [] for v in variants}
    order = list(variants)
    rng = random.Random(seed)
    for _ in range(rounds):
        rng.shuffle(order)
        for name in order:
            if before_run:
                before_run()
            tracer = Tracer(name, pid, tmp, run_s=run_s)
            tracer.start()
            try:
                cpu0, t0 = tracer.cpu_seconds(), time.monotonic()
                bench.start(run_s, script=script)
                try:
                    output = bench.wait(timeout_s=run_s + SYSBENCH_GRACE_S)
                except subprocess.TimeoutExpired:
                    bench.stop()
                    raise RuntimeError(
                        f"sysbench {script} under {name} did not finish {SYSBENCH_GRACE_S} s after its {run_s} s: "
                        "the server stalled"
                    ) from None
                tps[name].append(_sysbench_tps(output))
                if cpu is not None and name in cpu:
                    cpu[name].append(100 * (tracer.cpu_seconds() - cpu0) / (time.monotonic() - t0))
            finally:
                tracer.stop()
    return tps


# Windows of one sysbench run (windowed_tps): a tracer's start and stop (process start,
# load, attach; detach) fall between windows, with this much on top of the window itself
WINDOW_OVERHEAD_S = 2.0
WINDOW_SETTLE_S = 1.0  # from "attached" to the window's start: the tracer's first reads done
LOAD_WARMUP_S = 5.0  # from sysbench's start to the first window: its connections and caches warm


@dataclass(frozen=True)
class CommitWindow:
    """The server's commits over one window, its length, and the server process's own CPU
    over it (process_cpu_seconds)."""

    commits: int
    seconds: float
    server_cpu_s: float

    @property
    def rate(self) -> float:
        return self.commits / self.seconds

    @property
    def cpu_per_commit_us(self) -> float:
        return 1e6 * self.server_cpu_s / self.commits


def commit_window(commits: Callable[[], int], window_s: float, pid: int) -> CommitWindow:
    """The server's commits and CPU over the next window_s seconds, from its own counter
    and /proc/PID/stat read at both ends; each end's instant is the middle of the counter's
    read (a query under full load takes some milliseconds), the CPU read right after it."""

    def edge() -> tuple[int, float, float]:
        t_a = time.monotonic()
        count = commits()
        return count, (t_a + time.monotonic()) / 2, process_cpu_seconds(pid)

    c0, t0, cpu0 = edge()
    time.sleep(window_s)
    c1, t1, cpu1 = edge()
    return CommitWindow(c1 - c0, t1 - t0, cpu1 - cpu0)


@contextmanager
def one_load(bench: Sysbench, script: str, total_s: float, warmup_s: float) -> Iterator[None]:
    """One sysbench run of `script` for windows taking total_s in all, warmed for
    warmup_s before the first; stopped after the last window (its --time only bounds a
    run left behind)."""
    bench.start(total_s + SYSBENCH_GRACE_S, script=script)
    try:
        time.sleep(warmup_s)
        yield
    finally:
        bench.stop()


@contextmanager
def tracer_window(name: str, pid: int, tmp: str, window_s: float, bench: Sysbench, script: str) -> Iterator[Tracer]:
    """A tracer variant attached for one window of one_load: the window (the with-block)
    begins WINDOW_SETTLE_S after it attached (its first reads done) and ends before it
    stops."""
    tracer = Tracer(name, pid, tmp, run_s=window_s + WINDOW_SETTLE_S)
    tracer.start()
    try:
        time.sleep(WINDOW_SETTLE_S)
        if not bench.running():
            raise RuntimeError(f"sysbench {script} ended before its last window:\n{bench.output()}")
        yield tracer
    finally:
        tracer.stop()


def windowed_tps(
    pid: int,
    bench: Sysbench,
    commits: Callable[[], int],
    window_s: float,
    rounds: int,
    tmp: str,
    variants: Sequence[str],
    seed: int,
    *,
    script: str = "oltp_write_only",
    cpu: dict[str, list[float]] | None = None,
    server_cpu: dict[str, list[float]] | None = None,
    warmup_s: float = LOAD_WARMUP_S,
) -> dict[str, list[float]]:
    """The server's TPS under each tracer variant, all in ONE sysbench run: each round
    gives every variant (in a new order) a window of window_s seconds (tracer_window),
    its TPS the server's commit counter over the window (`commits`: e.g. Com_commit).
    Separate sysbench runs per variant (interleaved_tps) each carry their own connection
    set-up and warm-up and sit minutes apart; here the load is one, and a variant's
    window sits next to the others of its round. `cpu`: for each variant it names, the
    tracer process's CPU over each window (% of a core). `server_cpu`: for each variant
    it names, the server process's (pid's) own CPU per commit over each window (µs)."""
    tps: dict[str, list[float]] = {v: [] for v in variants}
    order = list(variants)
    rng = random.Random(seed)
    total_s = warmup_s + rounds * len(variants) * (window_s + WINDOW_SETTLE_S + WINDOW_OVERHEAD_S)
    with one_load(bench, script, total_s, warmup_s):
        for _ in range(rounds):
            rng.shuffle(order)
            for name in order:
                with tracer_window(name, pid, tmp, window_s, bench, script) as tracer:
                    cpu0, t0 = tracer.cpu_seconds(), time.monotonic()
                    window = commit_window(commits, window_s, pid)
                    if cpu is not None and name in cpu:
                        cpu[name].append(100 * (tracer.cpu_seconds() - cpu0) / (time.monotonic() - t0))
                if window.commits <= 0:
                    raise RuntimeError(f"no commit in a {window_s} s window under {name}: the server stalled")
                tps[name].append(window.rate)
                if server_cpu is not None and name in server_cpu:
                    server_cpu[name].append(window.cpu_per_commit_us)
    return tps


def add_tps_results(
    suite: Suite,
    tps: dict[str, list[float]],
    title: str,
    note: str,
    notes: dict[str, str] | None = None,
    *,
    metric: str = "TPS",
    unit: str = "",
) -> None:
    """One row per variant ("<title> <variant>"), each with its per-round ratios to "none";
    `notes` replaces `note` for the variants it names. `metric` and `unit`: of another
    figure measured round by round the same way (the server's CPU per commit)."""
    for name, values in tps.items():
        paired = [] if name == "none" else [t / n for t, n in zip(values, tps["none"], strict=True)]
        row_note = (notes or {}).get(name, note)
        suite.add(Result(f"{title} {name}", metric, values, unit, note=row_note, paired_ratios=paired))


# ---------------------------------------------------------------- main


def bench_soak(suite: Suite) -> None:
    """top and record side by side on iogen at 20k requests/s: 10 minutes (45 s in
    CI); memory flat, maps bounded, nothing lost, counts exact (tools/soak.py)."""
    if suite.smoke:  # tests/test_soak.py runs this same runner for 45 s in CI
        print("soak: skipped in smoke mode (tests/test_soak.py runs it)", flush=True)
        return
    from soak import SoakOptions, run_soak  # tools/ is sys.path[0] when this runs

    result = run_soak(SoakOptions(seconds=600, rate=20_000))
    print(result.table(), flush=True)
    for scenario, metric, value, unit, note in result.bench_rows():
        suite.add(Result(scenario, metric, [value], unit, note=note))


SCENARIOS: dict[str, Callable[[Suite], None]] = {
    "capacity": bench_capacity,
    "request_cost": bench_request_cost,
    # before kernel_cost, whose rows of the server's syscall rates use its figures
    "syscall_tax": bench_syscall_tax,
    "top_cpu": bench_top_cpu,
    "startup": bench_startup,
    "report": bench_report,
    # a MariaDB per configuration under sysbench (tools/bench_server.py)
    "kernel_cost": lambda s: __import__("bench_server").bench_server(s, kernel_cost=True, tps=False),
    "tps": lambda s: __import__("bench_server").bench_server(s, kernel_cost=False, tps=True),
    "soak": bench_soak,
    # the page-cache hooks on and off, a server on a real block device (tools/bench_pagecache.py)
    "pagecache": lambda s: __import__("bench_pagecache").bench_pagecache(s),
    # top at thousands of active files, iogen's scenario many (tools/bench_scale.py)
    "scale": lambda s: __import__("bench_scale").bench_scale(s),
}
# run only when named in --only: too long for a plain `make bench` (tests/test_bench_plan.py)
OPTIONAL_SCENARIOS: dict[str, Callable[[Suite], None]] = {
    # 20,000 tables under sysbench on MariaDB and MySQL: verify and top (tools/bench_tables.py)
    "tables": lambda s: __import__("bench_tables").bench_tables(s),
    # record / report / plot of a trace of 10k-100k distinct files (tools/bench_trace_scale.py)
    "trace_scale": lambda s: __import__("bench_trace_scale").bench_trace_scale(s),
}


# rough run time of the scenarios with a fixed length (seconds: full, smoke); tps and
# kernel_cost depend on the configurations and rounds chosen (bench_server.estimate_s)
FIXED_ESTIMATE_S = {
    "capacity": (90, 15),
    "request_cost": (150, 20),
    "syscall_tax": (110, 15),
    "top_cpu": (40, 5),
    "startup": (15, 5),
    "report": (60, 10),
    "soak": (650, 0),
    "pagecache": (620, 60),
    "scale": (100, 20),
    "tables": (1200, 180),
    "trace_scale": (360, 60),
}


def estimate_s(chosen: Sequence[str], smoke: bool) -> float:
    """How long the chosen scenarios take, roughly (seconds)."""
    total = sum(FIXED_ESTIMATE_S[name][smoke] for name in chosen if name in FIXED_ESTIMATE_S)
    if "tps" in chosen or "kernel_cost" in chosen:
        from bench_server import estimate_s as server_estimate_s

        total += server_estimate_s(smoke, kernel_cost="kernel_cost" in chosen, tps="tps" in chosen)
    return total


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    models = [line.split(":", 1)[1].strip() for line in cpuinfo if "model name" in line]
    model = models[0] if models else ""
    mem = psutil.virtual_memory().total / 2**30
    return f"{os.cpu_count()} CPUs ({model or cpu}), {mem:.0f} GiB, Linux {platform.release()}"


def write_markdown(path: str, suite: Suite, command: str, failure: str = "") -> None:
    """The table of suite's results; failure: why the run stopped early (its rows so far)."""
    header = ["scenario", "metric", "median", "min–max", "ratio to baseline", "note"]
    lines = [
        "# Benchmarks",
        "",
        f"Machine: {machine()}.  ",
        f"Command: `{command}`{' (smoke: one short pair of each; not representative)' if suite.smoke else ''}.",
        *([f"**Incomplete**: the run stopped at {failure}; the rows below are those it had made."] if failure else []),
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    lines += ["| " + " | ".join(r.row()) + " |" for r in suite.results]
    Path(path).write_text("\n".join(lines) + "\n" + ANALYSIS + _kept_analysis(path))


KEPT_FROM = "## Against the targets"


def _kept_analysis(path: str) -> str:
    """The hand-written reading of the numbers (from KEPT_FROM on) survives a new
    run: the table is regenerated, the analysis is updated by whoever reads it."""
    try:
        old = Path(path).read_text()
    except OSError:
        return ""
    at = old.find(KEPT_FROM)
    return "\n" + old[at:] if at >= 0 else ""


ANALYSIS = """
How to read it: a ratio is the median over the baseline's median, or for TPS the
median of per-round ratios (each round runs every variant once, in a new order)
with their range; the min–max column shows the spread across rounds. "-raw": the
probes (or the floor) on the raw `sys_enter`/`sys_exit` hook, the fallback when
tracefs lacks the per-syscall events; without the suffix, the per-syscall
tracepoints of the 16 I/O syscalls (the default, `tracer/syscall_hook.py`).
Benchmarks never fail on a number.

The server rows (`tools/bench_server.py`) run sysbench at full speed (4 threads)
against each configuration, its own server: the host's MariaDB 10.11 with InnoDB
on io_uring and on libaio, its datadir on tmpfs (CPU-bound: a tracer's cost shows
fully), and MariaDB 11.8 in a Debian 13 root, its datadir on the root's disk
(with MYSQLIO_BENCH_CONFIGS=9.7: Oracle MySQL 9.7 in a Debian sid root, its datadir
on the root's disk, MySQL's defaults: libaio, O_DIRECT, binlog with sync_binlog=1).
"floor": the same tracepoints with only the pid filter, the cost of enabling
them at all: an empty program at each I/O syscall's enter and exit; "floor-pc" (on
disk only): also empty programs, with the pid filter, on the page-cache and device
tracepoints mysqlio hooks; "-exits": the same without the enter programs
but msync's (untimed `top`'s hooks). "pt-ioprofile":
percona-toolkit's, an strace of every syscall of the server for the run.
bpftrace and pt-ioprofile have TPS windows under the first workload only.
"-nopc": mysqlio without its page-cache and device hooks; on tmpfs those hooks
never run (no writeback), so the pair is only compared on disk (11.8;
`pagecache` below measures them on a loop ext4). Each TPS row's note says what
that tracer can see: bpftrace's per-fd sum and pt-ioprofile see
syscalls only, so neither sees the bytes InnoDB moves with io_uring or libaio
(pt-ioprofile sees the io_submit / io_uring_enter calls); mysqlio sees those
requests. "mysqlio userspace CPU": the top or record process's user+system CPU
over each TPS run, % of one core. "server CPU per commit": in the same windows, the
server process's own user+system CPU (/proc/PID/stat, every thread's, exited ones
included) over its commits, in µs; the BPF programs and the slow syscall path run in
the server's threads, so a tracer's cost there shows in it whatever the machine's
speed does to TPS; its ratio is the median of the per-round ratios to no tracer.

"ns per traced request" (kernel_cost): in each 3 s window of one sysbench run, all
of the tracer's programs' run time divided by the requests they served: the runs
of its syscall-exit programs (once per syscall leaving a hooked tracepoint, of
any process: the pid filter is inside; on the raw hook that is every syscall of
the machine) plus its io_uring submissions; for bpftrace, the runs of its
`sys_enter_*` programs. "ratio to the
floor": that figure over the floor's on the same hooks: untimed `top` attaches
no enter program, so its floor is an "-exits" one; `record` and `top --latency`
time requests at enter and exit; floor-pc's for mysqlio with its page-cache hooks
on where floor-pc ran (targets: top ≤ 2.5×, record ≤ 3×). top and record and their
floors have a window in each of the rounds, each right next to its floor (which
first alternates from round to round), the pairs in a new order each round; a
ratio is the median of the ratios round by round (range in min–max). The other
variants have one window, in the first round.
"""


BENCH_ENV = ("MYSQLIO_BENCH_CONFIGS", "MYSQLIO_BENCH_ROUNDS", "MYSQLIO_BENCH_WORKLOADS")


def reproducing_command(smoke: bool, only: str | None) -> str:
    """The command that runs what this run runs, for the table's header: `make bench`
    for the full suite, else the MYSQLIO_BENCH_* settings and options given."""
    env = [f"{name}={os.environ[name]}" for name in BENCH_ENV if os.environ.get(name)]
    if not (env or smoke or only):
        return "make bench"
    options = [*(["--smoke"] if smoke else []), *(["--only", only] if only else [])]
    return " ".join([*env, ".venv/bin/python", "tools/bench.py", *options])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="one short pair of each: checks the suite works")
    ap.add_argument(
        "--only",
        help=f"comma-separated subset of {','.join(SCENARIOS)}; or of the optional {','.join(OPTIONAL_SCENARIOS)}",
    )
    ap.add_argument("--out", help="write the table as markdown here")
    args = ap.parse_args(argv)
    chosen = args.only.split(",") if args.only else list(SCENARIOS)
    unknown = set(chosen) - set(SCENARIOS) - set(OPTIONAL_SCENARIOS)
    if unknown:
        ap.error(f"unknown scenario {', '.join(sorted(unknown))}")
    suite = Suite(smoke=args.smoke)
    command = reproducing_command(args.smoke, args.only)
    print(f"estimated run time: about {estimate_s(chosen, args.smoke) / 60:.0f} min", flush=True)
    for name in chosen:
        print(f"== {name}", flush=True)
        try:
            {**SCENARIOS, **OPTIONAL_SCENARIOS}[name](suite)
        except (SetupError, ValueError) as e:  # a missing tool or root, a bad MYSQLIO_BENCH_* value
            print(f"bench: {e}", file=sys.stderr, flush=True)
            return 2
        except Exception as e:  # a stalled server, a tool's failure: keep the rows already made
            reason = f"{name}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
            print(f"bench: stopped at {reason}", file=sys.stderr, flush=True)
            if args.out and suite.results:
                write_markdown(args.out, suite, command, failure=reason)
            return 1
    if args.out:
        write_markdown(args.out, suite, command)
    return 0


if __name__ == "__main__":
    sys.exit(main())

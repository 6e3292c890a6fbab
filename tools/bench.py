#!/usr/bin/env python3
"""mysqlio benchmarks: cost to mysqld and capacity, side by side with what users use today.

    make bench                                   # full suite, writes docs/benchmarks.md
    .venv/bin/python tools/bench.py --smoke      # one short pair of each (CI keeps it working)
    .venv/bin/python tools/bench.py --only capacity,top_cpu

Benchmarks never fail on a number: they print a table (scenario, metric, median,
min-max, ratio to baseline) and write the same to --out. Run as root.

1. kernel_cost  in-kernel ns per event from kernel.bpf_stats_enabled (run_time_ns /
                run_cnt) under MariaDB sysbench oltp_write_only: mysqlio top, record,
                the pid-filter-only floor (tracer/bpf/empty.bpf.o), a bpftrace per-fd sum.
2. tps          sysbench TPS: no tracer vs the floor vs top vs record vs strace -f vs
                bpftrace ("-raw": on the raw sys_enter/sys_exit hook), interleaved
                rounds, medians and per-round ratios to no tracer.
   request_cost ns per pwrite64 of iogen flat out, untraced vs top / record on
                either syscall hook: the cost of one traced request, caches warm.
3. capacity     record at 100k..2M requests/s of small pwrites to tmpfs (iogen):
                captured vs produced, lost, mysqlio CPU, trace bytes per event.
4. top_cpu      top's userspace CPU at 10k / 100k / 1M events/s.
5. report       offline report speed and peak RSS (tools/bench_report.py).
6. startup      command to first attached probe; RSS of top.
"""

from __future__ import annotations

import argparse
import json
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from mysqlio import syscall_hook
from mysqlio.devtools.traced import held_bpf_ids  # one fdinfo reader for tests and tools
from mysqlio.syscall_hook import Hook

REPO = Path(__file__).resolve().parent.parent

IOGEN = REPO / "tools" / "iogen"
MYSQLIO = [sys.executable, "-m", "mysqlio"]
IO_SYSCALLS = (
    "write,pwrite64,writev,pwritev,pwritev2,read,pread64,readv,preadv,preadv2,fsync,fdatasync,sync_file_range,io_submit"
)


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
        spread = f"{min(self.values):.4g}–{max(self.values):.4g}" if len(self.values) > 1 else ""
        return [self.scenario, self.metric, f"{self.median:.4g} {self.unit}".strip(), spread, ratio, self.note]


@dataclass
class Suite:
    smoke: bool
    results: list[Result] = field(default_factory=list)

    def add(self, result: Result) -> None:
        self.results.append(result)
        print("  " + " | ".join(result.row()), flush=True)


# ---------------------------------------------------------------- helpers


def child_cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


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


def wait_line(stream, prefix: str, timeout_s: float = 30) -> str:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        if line.startswith(prefix):
            return line
    raise RuntimeError(f"no line starting with {prefix!r}")


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


class Tracer:
    """One of the tracers compared: started on a pid, stopped, its BPF programs known."""

    def __init__(self, name: str, pid: int, tmp: str) -> None:
        # "<tracer>-raw": mysqlio's probes (or the floor) on the raw sys_enter/sys_exit
        # instead of the per-syscall tracepoints (tracer/syscall_hook.py)
        # "<tracer>-nopc": mysqlio without its page-cache and device hooks (--no-page-cache)
        self.page_cache = not name.endswith("-nopc")
        name = name.removesuffix("-nopc")
        self.name = name.removesuffix("-raw")
        self.hook: Hook = "raw" if name.endswith("-raw") else "tracepoints"
        self.pid = pid
        self.proc: subprocess.Popen[str] | None = None
        self._floor = None
        self._tmp = tmp

    def start(self) -> None:
        if self.name == "none":
            return
        if self.name == "top":
            self._start_mysqlio(["top", "-p", str(self.pid), "--json", "-i", "1"], "mysqlio: tracing pid")
        elif self.name == "record":
            self._start_mysqlio(
                ["record", "-p", str(self.pid), "-o", f"{self._tmp}/bench.trace"], "mysqlio: recording pid"
            )
        elif self.name == "strace":
            self.proc = subprocess.Popen(
                ["strace", "-f", "-qq", "-e", f"trace={IO_SYSCALLS}", "-o", "/dev/null", "-p", str(self.pid)],
                stderr=subprocess.DEVNULL,
                text=True,
            )
            time.sleep(1.0)
        elif self.name == "bpftrace":
            ensure_tracefs()
            self.proc = subprocess.Popen(
                ["bpftrace", "-e", bpftrace_script(self.pid)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            wait_line(self.proc.stdout, "Attaching")
            time.sleep(0.5)
        elif self.name == "floor":
            import ctypes

            from mysqlio.libbpf import BpfObject

            self._floor = BpfObject(str(REPO / "tracer" / "bpf" / "empty.bpf.o"))
            unused = (
                ("floor_sys_enter", "floor_sys_exit") if self.hook == "tracepoints" else ("floor_enter", "floor_exit")
            )
            for program in unused:
                self._floor.disable_program(program)
            self._floor.set_rodata("targ_tgid", ctypes.c_uint32(self.pid))
            self._floor.load()
            self._floor.attach_all()
            if self.hook == "tracepoints":
                ensure_tracefs()
                syscall_hook.attach(self._floor, enter="floor_enter", exit="floor_exit")
        else:
            raise ValueError(self.name)

    def _start_mysqlio(self, args: list[str], ready: str) -> None:
        """A mysqlio command, returned once it says its probes are attached."""
        env = {**os.environ, syscall_hook.HOOK_ENV: self.hook}
        if not self.page_cache:
            args = [*args, "--no-page-cache"]
        self.proc = subprocess.Popen(
            [*MYSQLIO, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
        )
        wait_line(self.proc.stderr, ready)

    def prog_ids(self) -> set[int]:
        if self.name == "floor":
            return held_prog_ids(os.getpid())
        return held_prog_ids(self.proc.pid) if self.proc else set()

    def stop(self) -> None:
        if self._floor is not None:
            self._floor.close()
            self._floor = None
        if self.proc is not None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


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
            rec_ps = psutil.Process(rec.pid)
            cpu0 = child_cpu_seconds(rec_ps)
            gen.stdin.write("go\n")
            gen.stdin.flush()
            expected = json.loads(gen.stdout.readline())
            time.sleep(1.0)
            cpu = child_cpu_seconds(rec_ps) - cpu0
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
    base = statistics.median(ns_per_op["none"])
    for name in variants:
        added = statistics.median(ns_per_op[name]) - base
        suite.add(
            Result(
                f"pwrite64 flat out (1 thread, tmpfs) under {name}",
                "ns per request",
                ns_per_op[name],
                "ns",
                baseline=None if name == "none" else base,
                note=f"{rounds} rounds of {ops:,}" + ("" if name == "none" else f"; tracing adds {added:.0f} ns"),
            )
        )


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
            cpu0, t0 = child_cpu_seconds(ps), time.monotonic()
            gen.stdin.write("go\n")
            gen.stdin.flush()
            expected = json.loads(gen.stdout.readline())
            cpu, wall = child_cpu_seconds(ps) - cpu0, time.monotonic() - t0
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


def bench_server(suite: Suite, kernel_cost: bool, tps: bool) -> None:
    """kernel_cost and tps share one MariaDB under sysbench oltp_write_only."""
    from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
    from mysqlio.devtools.sysbench import Sysbench

    run_s = 3 if suite.smoke else 10
    rounds = 1 if suite.smoke else int(os.environ.get("MYSQLIO_BENCH_ROUNDS", "10"))
    # the datadir on tmpfs: the virtual disk's jitter would hide a few percent of
    # tracer cost; without it the server is CPU-bound, which shows the cost fully
    base = tempfile.mkdtemp(prefix="mysqlio-bench-db-", dir="/dev/shm")
    try:
        with MariaDB(MariaDBOptions(), base_dir=base) as db, tempfile.TemporaryDirectory() as tmp:
            bench = Sysbench(db, tables=4, table_size=10000, threads=4)
            bench.prepare()
            if kernel_cost:
                _kernel_cost(suite, db.pid, bench, run_s, tmp)
            if tps:
                _tps(suite, db.pid, bench, run_s, rounds, tmp)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _kernel_cost(suite: Suite, pid: int, bench: object, run_s: int, tmp: str) -> None:
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    try:
        for name in ("floor", "floor-raw", "top", "top-raw", "record", "bpftrace"):
            tracer = Tracer(name, pid, tmp)
            tracer.start()
            ids = tracer.prog_ids()
            before = bpf_prog_stats(ids)
            bench.start(run_s)  # type: ignore[attr-defined]
            bench.wait(timeout_s=run_s + 60)  # type: ignore[attr-defined]
            after = bpf_prog_stats(ids)
            tracer.stop()
            per_prog = {
                prog_id: (prog, ns - before.get(prog_id, (prog, 0, 0))[1], cnt - before.get(prog_id, (prog, 0, 0))[2])
                for prog_id, (prog, ns, cnt) in after.items()
            }
            ns = sum(ns for _, ns, _ in per_prog.values())
            runs = sum(cnt for _, _, cnt in per_prog.values())
            suite.add(
                Result(
                    f"in-kernel cost: {name}",
                    "ns per program run",
                    [ns / max(runs, 1)],
                    "ns",
                    note=f"{runs:,} runs, {ns / 1e6 / run_s:.1f} ms of BPF per second of load",
                )
            )
            if name in ("top", "record"):  # where the time goes, program by program
                for prog, p_ns, p_runs in sorted(per_prog.values()):
                    if p_runs:
                        suite.add(
                            Result(
                                f"in-kernel cost: {name}, {prog}",
                                "ns per program run",
                                [p_ns / p_runs],
                                "ns",
                                note=f"{p_runs:,} runs",
                            )
                        )
    finally:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"], check=False)


def interleaved_tps(
    pid: int, bench: object, run_s: int, rounds: int, tmp: str, variants: Sequence[str], seed: int
) -> dict[str, list[float]]:
    """sysbench's TPS under each tracer variant, `rounds` rounds, each round running every
    variant once in a new order (A/B interleaved: the machine's drift hits all alike)."""
    tps: dict[str, list[float]] = {v: [] for v in variants}
    order = list(variants)
    rng = random.Random(seed)
    for _ in range(rounds):
        rng.shuffle(order)
        for name in order:
            tracer = Tracer(name, pid, tmp)
            tracer.start()
            try:
                bench.start(run_s)  # type: ignore[attr-defined]
                tps[name].append(_sysbench_tps(bench.wait(timeout_s=run_s + 120)))  # type: ignore[attr-defined]
            finally:
                tracer.stop()
    return tps


def _tps(suite: Suite, pid: int, bench: object, run_s: int, rounds: int, tmp: str) -> None:
    # floor: the same tracepoints with only the pid filter, to separate the cost
    # of enabling syscall tracepoints from the cost of our accounting; "-raw": on
    # the raw sys_enter/sys_exit every syscall runs, the fallback hook
    variants = ["none", "floor", "floor-raw", "top", "top-raw", "record", "strace", "bpftrace"]
    tps = interleaved_tps(pid, bench, run_s, rounds, tmp, variants, seed=7)
    add_tps_results(suite, tps, "sysbench oltp_write_only under", f"{rounds} rounds of {run_s} s")


def add_tps_results(suite: Suite, tps: dict[str, list[float]], title: str, note: str) -> None:
    """One row per variant ("<title> <variant>"), each with its per-round ratios to "none"."""
    for name, values in tps.items():
        paired = [] if name == "none" else [t / n for t, n in zip(values, tps["none"], strict=True)]
        suite.add(Result(f"{title} {name}", "TPS", values, note=note, paired_ratios=paired))


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
    "top_cpu": bench_top_cpu,
    "startup": bench_startup,
    "report": bench_report,
    "kernel_cost": lambda s: bench_server(s, kernel_cost=True, tps=False),
    "tps": lambda s: bench_server(s, kernel_cost=False, tps=True),
    "soak": bench_soak,
    # the page-cache hooks on and off, a server on a real block device (tools/bench_pagecache.py)
    "pagecache": lambda s: __import__("bench_pagecache").bench_pagecache(s),
}


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    models = [line.split(":", 1)[1].strip() for line in cpuinfo if "model name" in line]
    model = models[0] if models else ""
    mem = psutil.virtual_memory().total / 2**30
    return f"{os.cpu_count()} CPUs ({model or cpu}), {mem:.0f} GiB, Linux {platform.release()}"


def write_markdown(path: str, suite: Suite, command: str) -> None:
    header = ["scenario", "metric", "median", "min–max", "ratio to baseline", "note"]
    lines = [
        "# Benchmarks",
        "",
        f"Machine: {machine()}.  ",
        f"Command: `{command}`{' (smoke: one short pair of each; not representative)' if suite.smoke else ''}.",
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
"""


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="one short pair of each: checks the suite works")
    ap.add_argument("--only", help=f"comma-separated subset of {','.join(SCENARIOS)}")
    ap.add_argument("--out", help="write the table as markdown here")
    args = ap.parse_args(argv)
    chosen = args.only.split(",") if args.only else list(SCENARIOS)
    unknown = set(chosen) - set(SCENARIOS)
    if unknown:
        ap.error(f"unknown scenario {', '.join(sorted(unknown))}")
    suite = Suite(smoke=args.smoke)
    for name in chosen:
        print(f"== {name}", flush=True)
        SCENARIOS[name](suite)
    if args.out:
        write_markdown(args.out, suite, "make bench" if not args.smoke else "tools/bench.py --smoke")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What `top --json -i 1` costs at many active files (issue 60): iogen's scenario many writes
one page to each of N files every second (N x T (file, thread) cells per interval), traced
by top. Measured of top:
- its CPU per interval: utime + stime of all its threads from iogen's start to top's exit
  (wait4's), over the intervals' worth of files it printed (a top that falls behind on a
  loaded machine merges rounds into fewer intervals: it is charged per file row);
- its CPU in each steady second (/proc/PID/stat, past the first seconds; at most the share
  of a CPU the machine gives it when it falls behind);
- its peak RSS (VmHWM) once iogen is done.
Each run also checks that top lost nothing and counted every write iogen made.

Called by tools/bench.py (scenario "scale"); alone, `bench_scale.py --ab DIR` runs
interleaved A/B rounds of this tree's top against a mysqlio package in DIR (e.g. the last
commit's tracer/, extracted as DIR/mysqlio) and prints medians and ratios; with --screen,
of top's live screen in a pseudo-terminal instead (its CPU per iogen round; nothing is
read back from the screen, so not checked for exactness); with --exporter, of `mysqlio
exporter -i 1` scraped every SCRAPE_EVERY_S as Prometheus would (checked: its lost events
and its write requests in all, from a last scrape, against iogen's).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from bench import IOGEN, Result, Suite
from bench_tracers import MYSQLIO, wait_line

from mysqlio.devtools.scrape import free_port, scrape

# (files, threads): the cost curve of issue 60 (1k, 5k, 19k files by one thread; 64k cells)
CASES = ((1_000, 1), (5_000, 1), (19_000, 1), (16_000, 4))
SMOKE_CASES = ((19_000, 1),)
WARMUP = 3  # seconds left out: the first interval names every file (one /proc/PID/fd scan)
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """utime + stime of the whole process (/proc/PID/stat fields 14 and 15), seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S


def hwm_mib(pid: int) -> float:
    """Peak resident set (VmHWM), MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class Run:
    cpu_pct: list[float] = field(default_factory=list)  # per second past the warm-up
    # all top's CPU from iogen's start to top's exit (its last intervals drained) per
    # interval of all the files (a second each): what one costs, even when top falls behind
    cpu_per_round: float = 0.0
    cpu_per_round_live: float = 0.0  # the same up to the stop signal (the screen's exit left out)
    hwm_mib: float = 0.0
    lost: int = 0
    counted_ops: int = 0  # write ops top counted in iogen's files
    expected_ops: int = 0  # iogen's own count
    screen: bool = False  # the live screen (nothing read back from it: not checked)


class Reader:
    """Reads top's JSON lines as they come (the pipe never fills): lost events and writes."""

    def __init__(self, top: subprocess.Popen[str], directory: str) -> None:
        self.top = top
        self.prefix = directory.rstrip("/") + "/"
        self.lost = 0
        self.ops = 0
        self.rows = 0  # iogen's files in top's intervals, summed over them
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.top.stdout is not None
        for line in self.top.stdout:
            if not line.strip():
                continue
            obj = json.loads(line)
            self.lost += obj["lost_events"]
            mine = [f for f in obj["files"] if f["path"].startswith(self.prefix)]
            self.ops += sum(f["write_ops"] for f in mine)
            self.rows += len(mine)


class ScreenReader:
    """Reads the live screen's bytes from a pseudo-terminal as they come (not checked)."""

    def __init__(self, master: int) -> None:
        self.master = master
        self.seen = bytearray()  # the first bytes: the screen is up when its title shows
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: top exited and the terminal closed
                return
            if not chunk:
                return
            if len(self.seen) < 1 << 20:
                self.seen += chunk


def start_screen(argv: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], ScreenReader]:
    """top's live screen in a pseudo-terminal of 50 x 160, up (its title drawn)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
    top = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    reader = ScreenReader(master)
    deadline = time.monotonic() + 120
    while b"mysqlio top" not in reader.seen:
        if time.monotonic() > deadline or top.poll() is not None:
            raise RuntimeError(f"top's screen never came up: {bytes(reader.seen[-500:])!r}")
        time.sleep(0.1)
    return top, reader


def start_iogen(files: int, threads: int, seconds: int, work: str) -> subprocess.Popen[str]:
    """iogen many with files x threads for seconds, its files open, waiting for "go"."""
    many = ["--scenario", "many", "--files", str(files), "--threads", str(threads), "--period", "1"]
    gen = subprocess.Popen(
        [str(IOGEN), "--dir", work, "--wait", *many, "--seconds", str(seconds)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert gen.stdin and gen.stdout
    try:
        json.loads(gen.stdout.readline())  # ready: its files open
    except BaseException:
        gen.kill()
        gen.wait()
        raise
    return gen


def steady_seconds(run: Run, pid: int, seconds: int, each: Callable[[int], None] | None = None) -> None:
    """The tracer's CPU in each second of the steady rounds (by the clock, not by its lines:
    a top that falls behind prints late, and its CPU is what it costs); `each(second)` after
    each second's measure."""
    time.sleep(WARMUP)
    before = (time.monotonic(), cpu_s(pid))
    for second in range(WARMUP, seconds - 1):
        time.sleep(1)
        now = (time.monotonic(), cpu_s(pid))
        run.cpu_pct.append(100 * (now[1] - before[1]) / (now[0] - before[0]))
        before = now
        if each is not None:  # its cost in the tracer counts in the next second
            each(second)


def run_once(python_path: str | None, files: int, threads: int, seconds: int, work: str, screen: bool = False) -> Run:
    """iogen many with files x threads for seconds, traced by top from python_path (None:
    this tree's mysqlio); `screen`: its live screen in a pseudo-terminal, not --json."""
    gen = start_iogen(files, threads, seconds, work)
    env = dict(os.environ)
    if python_path:
        env["PYTHONPATH"] = python_path
    top = None
    try:
        assert gen.stdin and gen.stdout
        reader: Reader | ScreenReader
        if screen:
            top, reader = start_screen([*MYSQLIO, "top", "-p", str(gen.pid), "-i", "1"], env)
        else:
            top = subprocess.Popen(
                [*MYSQLIO, "top", "-p", str(gen.pid), "--json", "-i", "1"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            wait_line(top.stderr, "mysqlio: tracing pid", timeout_s=120)
            reader = Reader(top, work)
        at_go = cpu_s(top.pid)
        gen.stdin.write("go\n")
        gen.stdin.flush()
        run = Run()
        steady_seconds(run, top.pid, seconds)
        expected = json.loads(gen.stdout.readline())
        time.sleep(1.5)  # the last round's interval printed
        # not wait4's ru_maxrss: it keeps this (forked) process's RSS from before the exec
        run.hwm_mib = hwm_mib(top.pid)
        before_exit = cpu_s(top.pid)
        top.send_signal(signal.SIGINT)
        reader.thread.join(timeout=120)  # to its end of file: every interval printed
        if isinstance(reader, ScreenReader):
            os.close(reader.master)
        _, _, usage = os.wait4(top.pid, 0)  # the CPU of all its threads, the last drain's too
        top.returncode = 0
        # per interval of all the files: a top that fell behind merged rounds into fewer
        # intervals (fewer rows to name and print), so its CPU is divided by the rows
        # (the screen: iogen's rounds, a second each)
        intervals = seconds if isinstance(reader, ScreenReader) else max(reader.rows, 1) / files
        run.cpu_per_round = 100 * (usage.ru_utime + usage.ru_stime - at_go) / intervals
        # the screen: also without its exit (the session totals' table of every file, printed
        # once: ~13 s of CPU at 19,000 files, more than all the intervals' work)
        run.cpu_per_round_live = 100 * (before_exit - at_go) / intervals
        if isinstance(reader, Reader):
            run.lost, run.counted_ops = reader.lost, reader.ops
        run.expected_ops = sum(f["write_ops"] for f in expected["files"])
        run.screen = screen
        return run
    finally:
        for proc in (top, gen):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


SCRAPE_EVERY_S = 15  # Prometheus' default scrape_interval


def run_exporter_once(python_path: str | None, files: int, threads: int, seconds: int, work: str) -> Run:
    """iogen many with files x threads for seconds, traced by `mysqlio exporter -i 1` from
    python_path (None: this tree's), scraped every SCRAPE_EVERY_S and once at the end (its
    lost events, and its write requests in all against iogen's)."""
    gen = start_iogen(files, threads, seconds, work)
    env = dict(os.environ)
    if python_path:
        env["PYTHONPATH"] = python_path
    port = free_port()
    argv = [*MYSQLIO, "exporter", "-p", str(gen.pid), "-i", "1", "--listen", f"127.0.0.1:{port}", "--no-follow"]
    exporter = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert gen.stdin and gen.stdout
        wait_line(exporter.stderr, "mysqlio: exporting pid", timeout_s=120)
        at_go = cpu_s(exporter.pid)
        gen.stdin.write("go\n")
        gen.stdin.flush()
        run = Run()

        def scrape_now(second: int) -> None:
            if second % SCRAPE_EVERY_S == 0:
                scrape(port)

        steady_seconds(run, exporter.pid, seconds, scrape_now)
        expected = json.loads(gen.stdout.readline())
        time.sleep(2.5)  # the last round's interval drained
        last = scrape(port)
        run.hwm_mib = hwm_mib(exporter.pid)
        run.cpu_per_round = run.cpu_per_round_live = 100 * (cpu_s(exporter.pid) - at_go) / seconds
        run.lost = int(last.total("mysqlio_lost_events_total"))
        run.counted_ops = int(last.total("mysqlio_write_ops_total"))
        run.expected_ops = sum(f["write_ops"] for f in expected["files"])
        return run
    finally:
        for proc in (exporter, gen):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def label(files: int, threads: int) -> str:
    cells = files * threads
    who = "1 thread" if threads == 1 else f"{threads} threads"
    return f"scale: top --json -i 1 at {files:,} files x {who} ({cells:,} cells per interval)"


def bench_scale(suite: Suite) -> None:
    cases = SMOKE_CASES if suite.smoke else CASES
    # one round a case: the whole `make bench` must stay within its time (tests/test_bench_plan.py);
    # `--ab` runs rounds
    seconds = 7 if suite.smoke else 12
    for files, threads in cases:
        work = tempfile.mkdtemp(prefix="mysqlio-bench-scale-", dir="/dev/shm")
        try:
            runs = [run_once(None, files, threads, seconds, work)]
        finally:
            shutil.rmtree(work, ignore_errors=True)
        name = label(files, threads)
        note = f"one run of {seconds} rounds; {check_all(runs)}"
        steady = f"median of each second past the {WARMUP} first; 100 % = top falls behind"
        suite.add(Result(name, "userspace CPU per interval", [r.cpu_per_round for r in runs], "% of a core", note=note))
        suite.add(Result(name, "userspace CPU, steady", [steady_pct(r) for r in runs], "% of a core", note=steady))
        suite.add(Result(name, "peak RSS", [r.hwm_mib for r in runs], "MiB", note="VmHWM once iogen is done"))


def steady_pct(run: Run) -> float:
    return statistics.median(run.cpu_pct) if run.cpu_pct else float("nan")


def check_all(runs: Sequence[Run]) -> str:
    if any(r.screen for r in runs):
        return "not checked (the screen: no counts read back)"
    bad = [check(r) for r in runs if r.lost or r.counted_ops != r.expected_ops]
    return bad[0] if bad else f"every round exact (0 lost, all {runs[0].expected_ops:,} writes counted)"


def check(run: Run) -> str:
    """What was off in a run (a benchmark never fails on a number: it says so)."""
    return f"NOT EXACT: {run.lost:,} lost, {run.counted_ops:,} writes counted of {run.expected_ops:,}"


def ab(
    base: str,
    cases: Sequence[tuple[int, int]],
    rounds: int,
    seconds: int,
    out: IO[str],
    screen: bool = False,
    after: str | None = None,
    exporter: bool = False,
) -> None:
    """Interleaved rounds, base (A) then this tree (B) in each; medians and per-round ratios."""

    def one(python_path: str | None, files: int, threads: int, work: str) -> Run:
        if exporter:
            return run_exporter_once(python_path, files, threads, seconds, work)
        return run_once(python_path, files, threads, seconds, work, screen)

    print("| files x threads | variant | CPU per interval | CPU steady | peak RSS MiB | exact |", file=out)
    print("|---|---|---|---|---|---|", file=out)
    mode = " (screen)" if screen else " (exporter)" if exporter else ""
    for files, threads in cases:
        work = tempfile.mkdtemp(prefix="mysqlio-bench-scale-", dir="/dev/shm")
        got: dict[str, list[Run]] = {"before": [], "after": []}
        try:
            for _ in range(rounds):
                got["before"].append(one(base, files, threads, work))
                got["after"].append(one(after, files, threads, work))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        for name, runs in got.items():
            cpu = statistics.median(r.cpu_per_round for r in runs)
            steady = statistics.median(steady_pct(r) for r in runs)
            rss = statistics.median(r.hwm_mib for r in runs)
            cells = f"{cpu:.1f} % | {steady:.1f} % | {rss:.0f}"
            if screen:  # and without the exit's totals table
                cells = f"{cpu:.1f} % ({statistics.median(r.cpu_per_round_live for r in runs):.1f} % before exit)"
                cells += f" | {steady:.1f} % | {rss:.0f}"
            print(f"| {files:,} x {threads}{mode} | {name} | {cells} | {check_all(runs)} |", file=out, flush=True)
        pairs = list(zip(got["before"], got["after"], strict=True))
        live = statistics.median(a.cpu_per_round_live / b.cpu_per_round_live for b, a in pairs) if screen else None
        ratios = [
            statistics.median(a.cpu_per_round / b.cpu_per_round for b, a in pairs),
            statistics.median(steady_pct(a) / steady_pct(b) for b, a in pairs),
            statistics.median(a.hwm_mib / b.hwm_mib for b, a in pairs),
        ]
        cells = " | ".join(f"{r:.3f}" for r in ratios)
        if live is not None:
            cells = cells.replace(" |", f" ({live:.3f} before exit) |", 1)
        print(f"| {files:,} x {threads}{mode} | after / before (median of pairs) | {cells} | |", file=out, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--ab", required=True, metavar="DIR", help="PYTHONPATH holding the baseline mysqlio package")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--cases", default=",".join(f"{f}x{t}" for f, t in CASES), help="FILESxTHREADS,...")
    what = ap.add_mutually_exclusive_group()
    what.add_argument("--screen", action="store_true", help="top's live screen in a pseudo-terminal, not --json")
    what.add_argument("--exporter", action="store_true", help="mysqlio exporter -i 1, scraped, not top")
    ap.add_argument(
        "--after", metavar="DIR", help="PYTHONPATH holding the mysqlio package to compare (default: this tree's)"
    )
    args = ap.parse_args(argv)
    for flag, where in (("--ab", args.ab), ("--after", args.after)):
        if where is not None and not (Path(where) / "mysqlio" / "__init__.py").is_file():
            ap.error(f"{flag} {where}: no mysqlio package there")
    try:
        cases = [(int(f), int(t)) for f, t in (c.split("x") for c in args.cases.split(","))]
    except ValueError:
        ap.error(f"--cases {args.cases}: not FILESxTHREADS,...")
    ab(args.ab, cases, args.rounds, args.seconds, sys.stdout, args.screen, args.after, args.exporter)
    return 0


if __name__ == "__main__":
    sys.exit(main())

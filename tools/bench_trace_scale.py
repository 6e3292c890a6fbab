#!/usr/bin/env python3
"""`record`, `report` and `plot` at 10k-100k distinct files in one trace (issue 60).

A process here may hold 20,000 fds (and may not raise its hard limit), so the traced
process opens, writes and closes each file in turn: a small Python writer (TRACEE) that,
once told to go, writes one 4 KiB page to each of N files ROUNDS times over (RATE files
a second), then one page a tick to a few hot files for HOT_S seconds (a redo log beside a checkpoint: the
trace goes on in batches after every file is known). It prints what it wrote, the ground
truth. `mysqlio record` traces it; then, each in a child process, `mysqlio report`
(text), `report --json` and `plot` of the trace: wall and CPU seconds and peak RSS
(wait4's ru_maxrss), and the report's per-file bytes and requests checked against the
writer's, by inode; the files the report shows without their name are counted.

    .venv/bin/python tools/bench_trace_scale.py                 # N = 10k, 25k, 50k, 100k
    .venv/bin/python tools/bench_trace_scale.py --files 100000 --keep DIR

Called by tools/bench.py as the optional scenario "trace_scale" (`--only trace_scale`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench import Result, Suite
from bench_tracers import MYSQLIO, wait_line

CASES = (10_000, 25_000, 50_000, 100_000)
SMOKE_CASES = (10_000,)
ROUNDS = 2
HOT_FILES = 8
HOT_S = 10
PAGE = 4096
# files opened a second: a closed file is named by the kernel's table of names (LRU, one
# entry per file the process may hold open, 32,768 here), read at each of record's batches
# (0.5 s); faster, the writer names more files between two reads than it holds
RATE = 20_000

# The traced writer: files made before "go" (not traced: only reads, writes and syncs
# are), then each opened, written at its round's page and closed; the hot files stay open.
TRACEE = r"""
import json, os, sys, time
d, n, rounds, hot, hot_s, page, rate = sys.argv[1], *map(int, sys.argv[2:8])
paths = [os.path.join(d, f"f{i:06d}") for i in range(n)]
for p in paths:
    os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o644))
print(json.dumps({"ready": n}), flush=True)
sys.stdin.readline()
buf = b"x" * page
t0 = time.monotonic()
for r in range(rounds):
    for i, p in enumerate(paths):
        if i % 1000 == 0:  # at most `rate` files a second
            time.sleep(max(0.0, t0 + (r * n + i) / rate - time.monotonic()))
        fd = os.open(p, os.O_WRONLY)
        os.pwrite(fd, buf, r * page)
        os.close(fd)
fds = [os.open(p, os.O_WRONLY) for p in paths[:hot]]
ticks = 0
end = time.monotonic() + hot_s
while time.monotonic() < end:
    for fd in fds:
        os.pwrite(fd, buf, rounds * page)
    ticks += 1
    time.sleep(0.05)
writes = {p: rounds for p in paths}
for p in paths[:hot]:
    writes[p] += ticks
print(json.dumps({"writes": writes, "elapsed_s": time.monotonic() - t0}), flush=True)
sys.stdin.readline()
"""


@dataclass
class Child:
    seconds: float
    rss_mib: float
    cpu_s: float


@dataclass
class Case:
    files: int
    events: int
    trace_mib: float
    unnamed: int  # files whose rows bear no name (record could not name them)
    record: Child
    report: Child
    report_json: Child
    plot: Child


def run_child(argv: list[str], stdout: int | None = subprocess.DEVNULL) -> tuple[Child, str]:
    """argv to its end: wall seconds, peak RSS, CPU; its stdout when piped."""
    t = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE)
    out = proc.stdout.read().decode() if proc.stdout else ""
    err = proc.stderr.read().decode() if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[2:4])} exited {proc.returncode}: {err.strip()[-500:]}")
    child = Child(time.perf_counter() - t, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime)
    return child, out


def record(work: Path, files: int, trace: Path) -> tuple[Child, dict[str, int]]:
    """The writer traced by `mysqlio record`: the recorder's figures and the writer's writes."""
    data = work / "files"
    data.mkdir()
    gen = subprocess.Popen(
        [
            sys.executable,
            "-c",
            TRACEE,
            str(data),
            str(files),
            str(ROUNDS),
            str(HOT_FILES),
            str(HOT_S),
            str(PAGE),
            str(RATE),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    rec = None
    try:
        assert gen.stdin and gen.stdout
        json.loads(gen.stdout.readline())
        t = time.perf_counter()
        rec = subprocess.Popen(
            [*MYSQLIO, "record", "-p", str(gen.pid), "-o", str(trace)], stderr=subprocess.PIPE, text=True
        )
        wait_line(rec.stderr, "mysqlio: recording pid", timeout_s=120)
        gen.stdin.write("go\n")
        gen.stdin.flush()
        expected = json.loads(gen.stdout.readline())["writes"]
        time.sleep(1.5)  # the last writes drained
        rec.send_signal(signal.SIGINT)
        assert rec.stderr is not None
        err = rec.stderr.read()
        _, status, usage = os.wait4(rec.pid, 0)
        rec.returncode = os.waitstatus_to_exitcode(status)
        if rec.returncode != 0:
            raise RuntimeError(f"record exited {rec.returncode}: {err.strip()[-500:]}")
        child = Child(time.perf_counter() - t, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime)
        gen.stdin.write("done\n")
        gen.stdin.flush()
        return child, expected
    finally:
        if rec is not None and rec.poll() is None:
            rec.kill()
            rec.wait()
        gen.kill()
        gen.wait()


def check(report: dict, expected: dict[str, int]) -> int:
    """Every file the writer wrote, with its bytes and requests, nothing lost; judged by
    inode (a row of a file record could not name is `<dev D inode I>`, and a file named
    only later has two rows). The files without their name in the report, returned."""
    if report["lost_events"]:
        raise RuntimeError(f"{report['lost_events']} events lost")
    inode = {path: os.stat(path).st_ino for path in expected}
    got: dict[int, tuple[int, int]] = {}
    named = set()
    for f in report["files"]:
        ops, nbytes = got.get(f["ino"], (0, 0))
        got[f["ino"]] = (ops + f["write_ops"], nbytes + f["write_bytes"])
        if f["path"] in expected:
            named.add(f["path"])
    for path, writes in expected.items():
        if got.get(inode[path]) != (writes, writes * PAGE):
            raise RuntimeError(f"{path}: (writes, bytes) {got.get(inode[path])}; wrote {writes}")
    return len(expected) - len(named)


def run_case(files: int, keep: Path | None) -> Case:
    work = Path(tempfile.mkdtemp(prefix="mysqlio-trace-scale-", dir=keep))
    try:
        trace = work / "t.trace"
        rec, expected = record(work, files, trace)
        report, _ = run_child([*MYSQLIO, "report", str(trace)])
        report_json, out = run_child([*MYSQLIO, "report", str(trace), "--json"], stdout=subprocess.PIPE)
        plot, _ = run_child([*MYSQLIO, "plot", str(trace), "-o", str(work / "t.png")])
        doc = json.loads(out)
        unnamed = check(doc, expected)
        return Case(files, doc["events"], trace.stat().st_size / 2**20, unnamed, rec, report, report_json, plot)
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


def table(cases: list[Case]) -> str:
    """One row per case: each command's wall seconds / CPU seconds / peak RSS MiB (record's
    wall time is the run's: its CPU and RSS are what it cost)."""
    commands = ("record", "report", "report --json", "plot")
    lines = [
        "| files | unnamed | events | trace MiB | " + " | ".join(f"{c} s wall / CPU, MiB" for c in commands) + " |",
        "|---:|---:|---:|---:|" + "---:|" * len(commands),
    ]
    for c in cases:
        cells = [
            f"{x.seconds:.1f} / {x.cpu_s:.1f}, {x.rss_mib:.0f}" for x in (c.record, c.report, c.report_json, c.plot)
        ]
        lines.append(f"| {c.files:,} | {c.unnamed:,} | {c.events:,} | {c.trace_mib:.1f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def bench_trace_scale(suite: Suite) -> None:
    """tools/bench.py's optional scenario: the curve, each case a row per command."""
    cases = [run_case(n, None) for n in (SMOKE_CASES if suite.smoke else CASES)]
    for c in cases:
        for name, child in (("report", c.report), ("report --json", c.report_json), ("plot", c.plot)):
            suite.add(Result(f"trace_scale {name} ({c.files:,} files)", "time", [child.seconds], "s"))
            suite.add(Result(f"trace_scale {name} ({c.files:,} files)", "CPU", [child.cpu_s], "s"))
            suite.add(Result(f"trace_scale {name} ({c.files:,} files)", "peak RSS", [child.rss_mib], "MiB"))
        suite.add(Result(f"trace_scale record ({c.files:,} files)", "CPU", [c.record.cpu_s], "s"))
        suite.add(Result(f"trace_scale record ({c.files:,} files)", "peak RSS", [c.record.rss_mib], "MiB"))
        suite.add(Result(f"trace_scale record ({c.files:,} files)", "files left unnamed", [c.unnamed], ""))
    print(table(cases), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, action="append", help="distinct files (repeatable; default the curve)")
    ap.add_argument("--keep", type=Path, help="make each case's directory (trace, plot) here and keep it")
    args = ap.parse_args()
    cases = []
    for n in args.files or CASES:
        cases.append(run_case(n, args.keep))
        print(table(cases[-1:]).splitlines()[-1], flush=True)
    print(table(cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Benchmark of the trace writer and the offline report (run by hand, not a test).

    .venv/bin/python tools/bench_report.py                 # 10M events, 300 files
    .venv/bin/python tools/bench_report.py --events 2e6 --keep /tmp/x.trace

1. writer: 1M events in 10 batches of 100k -> events/s and bytes per event;
2. a synthetic trace of --events events (batches of --batch events, one per 0.5 s,
   a few hundred files, a few dozen threads) written by the writer;
3. `mysqlio report` (text, --json, --per-second --json, --group thread) on it, each
   in a child process: events/s and the child's peak RSS.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from mysqlio.events import EVENT_DTYPE
from mysqlio.trace import FileInfo, TraceMeta, TraceWriter

KDEV = (259 << 20) | 2
START_MONO = 10**12


def files_and_threads(nfiles: int) -> tuple[dict[tuple[int, int], FileInfo], dict[int, str]]:
    files = {
        (KDEV, 1000): FileInfo("/var/lib/mysql/ibdata1", "system", None, False),
        (KDEV, 1001): FileInfo("/var/lib/mysql/ib_logfile0", "redo", None, False),
        (KDEV, 1002): FileInfo("/var/lib/mysql/mysql-bin.000001", "binlog", None, False),
    }
    for i in range(nfiles - 3):
        files[(KDEV, 2000 + i)] = FileInfo(f"/var/lib/mysql/db{i % 7}/t{i}.ibd", "table", f"db{i % 7}.t{i}", False)
    threads = {5000 + i: ("ib_pg_flush_co" if i < 4 else "one_connection") for i in range(40)}
    return files, threads


def make_batch(rng: np.random.Generator, n: int, t0_ns: int, span_ns: int, nfiles: int) -> np.ndarray:
    e = np.zeros(n, EVENT_DTYPE)
    e["ts_ns"] = t0_ns + np.sort(rng.integers(0, span_ns, n))
    # a skewed file popularity: a few hot files, a long tail
    which = np.minimum(rng.zipf(1.3, n) - 1, nfiles - 1)
    ino = np.where(which < 3, 1000 + which, 2000 + which - 3)
    e["ino"] = ino
    e["dev"] = KDEV
    op = rng.choice(np.array([0, 0, 0, 0, 1, 2, 3, 4], np.uint8), n)
    e["op"] = op
    e["api"] = rng.choice(np.array([0, 1, 2], np.uint8), n, p=[0.6, 0.2, 0.2])
    size = rng.choice(np.array([4096, 16384, 16384, 65536, 1 << 20]), n)
    result = np.where(op <= 1, size, 0)
    result[rng.random(n) < 1e-4] = -28
    e["result"] = result
    e["offset"] = np.where(op <= 1, rng.integers(0, 1 << 20, n) * 16384, -1)
    e["latency_ns"] = rng.lognormal(10, 1.5, n).astype(np.uint64)
    e["tid"] = 5000 + rng.integers(0, 40, n)
    return e


def bench_writer(tmp: str) -> None:
    rng = np.random.default_rng(1)
    files, threads = files_and_threads(300)
    batches = [make_batch(rng, 100_000, START_MONO + i * 500_000_000, 500_000_000, 300) for i in range(10)]
    meta = TraceMeta("bench", os.uname().release, 1, None, None, None, time.time(), START_MONO, "bench")
    path = os.path.join(tmp, "w.trace")
    t = time.perf_counter()
    w = TraceWriter(path, meta)
    for b in batches:
        w.write(b, files, threads, 0)
    w.close(0)
    el = time.perf_counter() - t
    print(
        f"writer: 1,000,000 events in 10 batches: {el:.3f} s = {1e6 / el:,.0f} events/s, "
        f"{w.bytes_written / 1e6:.1f} bytes/event ({w.bytes_written / 1e6:.1f} MB)"
    )


def make_trace(path: str, events: int, batch: int, nfiles: int) -> float:
    rng = np.random.default_rng(2)
    files, threads = files_and_threads(nfiles)
    meta = TraceMeta("bench", os.uname().release, 1, None, None, "/var/lib/mysql", time.time(), START_MONO, "bench")
    w = TraceWriter(path, meta)
    written = 0
    i = 0
    write_s = 0.0
    while written < events:
        n = min(batch, events - written)
        b = make_batch(rng, n, START_MONO + i * 500_000_000, 500_000_000, nfiles)
        t = time.perf_counter()
        w.write(b, files, threads, 0)
        write_s += time.perf_counter() - t
        written += n
        i += 1
    w.close(0)
    print(
        f"trace: {written:,} events, {i} batches, {os.path.getsize(path) / 1e6:.0f} MB "
        f"({os.path.getsize(path) / written:.1f} bytes/event); writer {written / write_s:,.0f} events/s"
    )
    return written


def run_report(path: str, events: int, *args: str) -> None:
    t = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mysqlio", "report", path, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS
    el = time.perf_counter() - t
    err = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        print(f"report {' '.join(args)} failed: {err}")
        return
    print(
        f"report {' '.join(args) or '(text)':24} {el:6.2f} s = {events / el:>12,.0f} events/s, "
        f"peak RSS {usage.ru_maxrss / 1024:.0f} MiB"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=float, default=10e6)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--keep", help="write the trace here and keep it")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench_writer(tmp)
        path = args.keep or os.path.join(tmp, "bench.trace")
        events = make_trace(path, int(args.events), args.batch, args.files)
        run_report(path, events, "--json")
        run_report(path, events)
        run_report(path, events, "--group", "thread", "--json")
        run_report(path, events, "--per-second", "--json")
    return 0


if __name__ == "__main__":
    sys.exit(main())

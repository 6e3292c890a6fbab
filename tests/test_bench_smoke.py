"""The benchmark suite keeps working: one short pair of each scenario (numbers are not judged),
the server configurations of tools/bench_server.py's smoke run (MariaDB 10.11 with io_uring,
and 11.8, which builds or reuses the Debian trixie root of tools/server_roots.py; 10.11 with
aio runs the same code), under the first TPS workload.

It runs in a private mount namespace: on a machine without tracefs, the tracefs mysqlio
and the benchmark mount for the per-syscall tracepoints (and bpftrace) stay there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_syscall_hook import in_private_ns

pytestmark = [pytest.mark.bpf, pytest.mark.mariadb]
REPO = Path(__file__).resolve().parent.parent


# every server configuration, workload and tracer of tools/bench_server.py has a row
SERVER_ROWS = (
    "sysbench oltp_write_only, MariaDB 10.11 io_uring, under top",
    "sysbench oltp_write_only, MariaDB 10.11 io_uring, under record",
    "sysbench oltp_write_only, MariaDB 10.11 io_uring, under bpftrace",
    "sysbench oltp_write_only, MariaDB 10.11 io_uring, under pt-ioprofile",
    "sysbench oltp_write_only, MariaDB 11.8",
    "under top-nopc",
    "under record-nopc",
    "under floor",
    "sees: ",
    "io_uring, top | mysqlio userspace CPU",
    "io_uring, record | mysqlio userspace CPU",
    "11.8 io_uring, top | mysqlio userspace CPU",
    "in-kernel cost: top, sysbench oltp_write_only, MariaDB 10.11 io_uring",
    "in-kernel cost: record, sysbench oltp_write_only, MariaDB 10.11 io_uring",
    "in-kernel cost: top-raw",
    "in-kernel cost: record-raw",
    "in-kernel cost: bpftrace",
    "in-kernel cost: top-nopc, sysbench oltp_write_only, MariaDB 11.8",
    "in-kernel cost: floor-pc, sysbench oltp_write_only, MariaDB 11.8",
    "in-kernel cost: floor-pc-exits, sysbench oltp_write_only, MariaDB 11.8",
    "in-kernel cost: floor-exits, sysbench oltp_write_only, MariaDB 10.11 io_uring",
    "ns per traced request over floor-exits's",  # top-nopc, top on tmpfs
    "ns per traced request over floor-pc-exits's",  # top on disk
    "ns per traced request over floor's",  # record on tmpfs
    "| ns per traced request |",
    "| ratio to the floor |",
    "syscalls, sysbench oltp_write_only, MariaDB 11.8",
    "| server syscalls per commit |",
    "| top's tax on the server's syscalls |",
    "one sysbench run, Com_commit",  # TPS in windows of one load
)
# tools/bench_pagecache.py: a server on a loop ext4, the page-cache hooks on and off
PAGE_CACHE_ROWS = (
    "page cache on a loop ext4: in-kernel cost of top-nopc | ns per traced request",
    "page cache on a loop ext4: in-kernel cost of top | ns per traced request",
    "page cache on a loop ext4: sysbench oltp_write_only under none | TPS",
    "page cache on a loop ext4: sysbench oltp_write_only under record | TPS",
    "page cache on a loop ext4: top with the page-cache hooks / without | TPS ratio",
    "page cache on a loop ext4: record with the page-cache hooks / without | TPS ratio",
)


def test_bench_smoke(bpf_ready: None, iogen: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench.md"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYSQLIO_BENCH_")}  # every configuration
    proc = subprocess.run(
        in_private_ns([sys.executable, str(REPO / "tools" / "bench.py"), "--smoke", "--out", str(out)]),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    table = out.read_text()
    for scenario in (
        "record @",
        "top @",
        "startup",
        "report",
        *SERVER_ROWS,
        *PAGE_CACHE_ROWS,
        "pwrite64 flat out (1 thread, tmpfs) under record-raw",
        "getppid (no tracer hooks it) while a tracer traces another process, under top-raw",
        "scale: top --json -i 1 at 19,000 files x 1 thread",  # tools/bench_scale.py
    ):
        assert scenario in table, f"{scenario!r} missing from the benchmark table"
    # a smoke run's TPS windows: the first workload only (bench_server.chosen_workloads)
    assert "oltp_read_write" not in table

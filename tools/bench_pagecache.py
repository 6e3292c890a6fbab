"""What the page-cache hooks cost (issue 17): a MariaDB whose files go through the page
cache on a real block device, under sysbench oltp_write_only, with mysqlio's page-cache
and device hooks on and off (`--no-page-cache`), side by side.

The server's datadir is an ext4 on a loop device (tmpfs has no writeback: the hooks would
not run) and `innodb_flush_method=fsync` makes InnoDB's data and redo writes buffered, so
every write dirties pages and every sync writes them back: the hooks run as much as a
server can make them. Two measures, interleaved A/B rounds in one run:
- TPS: none, top without and with the page cache, record without and with it;
- in the kernel (bpf_stats): all programs' run time per traced request, with and without,
  and the page-cache programs' own share.
Called by tools/bench.py (scenario "pagecache").
"""

from __future__ import annotations

import tempfile

from bench import Result, Suite, add_tps_results, interleaved_tps
from bench_server import bpf_stats_enabled, program_runs, requests_of

from mysqlio.devtools.loop_disk import loop_ext4
from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.devtools.sysbench import Sysbench

VARIANTS = ("none", "top-nopc", "top", "record-nopc", "record")
# program names as the kernel keeps them (15 characters)
PAGE_CACHE_PROGRAMS = ("handle_dirty", "handle_bio_", "handle_writeba")


def bench_pagecache(suite: Suite) -> None:
    run_s = 3 if suite.smoke else 10
    rounds = 1 if suite.smoke else 10
    options = MariaDBOptions(extra={"innodb_flush_method": "fsync"})
    with loop_ext4(1024, direct_io=True) as disk, tempfile.TemporaryDirectory() as tmp:
        (disk.mount / "db").mkdir()  # the mount's root holds lost+found
        with MariaDB(options, base_dir=str(disk.mount / "db")) as db:
            _run(suite, db, run_s, rounds, tmp)


def _run(suite: Suite, db: MariaDB, run_s: int, rounds: int, tmp: str) -> None:
    bench = Sysbench(db, tables=4, table_size=10000, threads=4)
    bench.prepare()
    _kernel_cost(suite, db.pid, bench, run_s, tmp)
    _tps(suite, db, bench, run_s, rounds, tmp)


def _kernel_cost(suite: Suite, pid: int, bench: Sysbench, run_s: int, tmp: str) -> None:
    """All programs' run time per traced request (counted as bench_server counts them), with
    the page-cache hooks and without."""
    with bpf_stats_enabled():
        for name in ("top-nopc", "top"):
            runs = program_runs(pid, bench, name, run_s, tmp)
            requests, counted = requests_of(name, runs)
            total_ns = sum(ns for _, ns, _ in runs.values())
            pc_ns = sum(ns for prog, ns, _ in runs.values() if prog.startswith(PAGE_CACHE_PROGRAMS))
            pc_runs = sum(cnt for prog, _, cnt in runs.values() if prog.startswith(PAGE_CACHE_PROGRAMS))
            suite.add(
                Result(
                    f"page cache on a loop ext4: in-kernel cost of {name}",
                    "ns per traced request",
                    [total_ns / max(requests, 1)],
                    "ns",
                    note=f"{requests:,} requests ({counted}); page-cache programs {pc_runs:,} runs, "
                    f"{pc_ns / max(requests, 1):.0f} ns per request",
                )
            )


def _tps(suite: Suite, db: MariaDB, bench: Sysbench, run_s: int, rounds: int, tmp: str) -> None:
    # The binlog of 50 runs at full speed may fill the 1 GiB disk, where the server waits
    # for space: the likely cause of a run that stalled on 2026-11-27 (not confirmed: the
    # disk went with the run). Each run starts with an empty binlog.
    tps = interleaved_tps(
        db.pid, bench, run_s, rounds, tmp, VARIANTS, seed=17, before_run=lambda: db.sql("RESET MASTER")
    )
    add_tps_results(
        suite,
        tps,
        "page cache on a loop ext4: sysbench oltp_write_only under",
        f"{rounds} rounds of {run_s} s; innodb_flush_method=fsync",
    )
    for with_pc in ("top", "record"):
        ratios = [a / b for a, b in zip(tps[with_pc], tps[f"{with_pc}-nopc"], strict=True)]
        suite.add(
            Result(
                f"page cache on a loop ext4: {with_pc} with the page-cache hooks / without",
                "TPS ratio",
                ratios,
                note="per-round ratio of the two runs of the same round",
            )
        )

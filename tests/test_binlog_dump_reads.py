"""Who reads the binary log from the disk: a replica's dump thread on its primary (issue 61).

MariaDB 10.11, a primary and a replica (devtools/replication.py), their datadirs on this
machine's disk (a block device, not tmpfs). The replica is stopped while sysbench writes on
the primary; the primary's binary logs are then pushed out of the page cache (fsync,
POSIX_FADV_DONTNEED: those files' pages only), `mysqlio top --json` traces the primary, and
the replica is started again: the primary's binlog dump thread (performance_schema.threads,
PROCESSLIST_COMMAND "Binlog Dump") reads what the replica missed, cold, from the disk.

Ground truth:
- the binlog's bytes read in `top` equal performance_schema's file_summary_by_instance over
  the window (the server's own count of what it asked for), and every one of them was read
  by the dump thread;
- the binlog's disk reads all go to the dump thread: the file was cold, each of its pages
  read from the disk once (with MASTER_USE_GTID the dump thread scans the file from its
  start for the replica's GTID); what it read twice is a page-cache hit;
- the disk reads of all the primary's files in `top` equal the kernel's own count for the
  process (/proc/PID/io read_bytes) over the window, quiet at both edges.
"""

from __future__ import annotations

import glob
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from test_warmup import drop_from_page_cache, mapped_files, read_into_page_cache

from mysqlio.devtools.mariadb import MariaDB, MariaDBOptions
from mysqlio.devtools.replication import replica_pair, wait_caught_up
from mysqlio.devtools.sysbench import Sysbench
from mysqlio.devtools.traced import TopCollector

INTERVAL_S = 0.5
LOAD_S = 3
PAGE = 4096
DUMP_COMMAND = "Binlog Dump"
QUIET = {"innodb_stats_auto_recalc": "OFF"}  # no statistics written at the window's edges


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[MariaDB, MariaDB]]:
    with replica_pair(MariaDBOptions(extra=QUIET), MariaDBOptions(extra=QUIET)) as (primary, replica):
        yield primary, replica


def _binlogs(db: MariaDB) -> list[str]:
    return sorted(p for p in glob.glob(os.path.join(db.datadir, "mysql-bin.[0-9]*")))


def _pfs_read_bytes(db: MariaDB) -> dict[str, int]:
    """performance_schema's bytes read per binlog file."""
    rows = db.sql(
        "SELECT FILE_NAME, SUM_NUMBER_OF_BYTES_READ FROM performance_schema.file_summary_by_instance "
        "WHERE FILE_NAME LIKE '%mysql-bin.0%'"
    )
    return {os.path.realpath(name): int(n) for name, n in rows}


def _proc_read_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("read_bytes:"))


def _dump_threads(db: MariaDB) -> set[int]:
    """The host tids of the primary's binlog dump threads (no pid namespace here)."""
    rows = db.sql(f"SELECT THREAD_OS_ID FROM performance_schema.threads WHERE PROCESSLIST_COMMAND = '{DUMP_COMMAND}'")
    return {int(tid) for (tid,) in rows if tid is not None}


def _sum_files(intervals: list[dict[str, Any]]) -> tuple[dict[str, dict[str, int]], dict[int, dict[str, int]]]:
    """Per path: read, disk read and cache-hit bytes over the intervals; per tid: the
    binlog's read and disk read bytes."""
    files: dict[str, dict[str, int]] = {}
    binlog_by_tid: dict[int, dict[str, int]] = {}
    for o in intervals:
        for f in o["files"]:
            row = files.setdefault(f["path"], {"read": 0, "disk": 0, "hit": 0})
            row["read"] += f["read_bytes"]
            row["disk"] += f["disk_read_bytes"]
            row["hit"] += f["cache_hit_bytes"]
            if "/mysql-bin.0" in f["path"]:
                for t in f["threads"]:
                    by = binlog_by_tid.setdefault(t["tid"], {"read": 0, "disk": 0})
                    by["read"] += t["read_bytes"]
                    by["disk"] += t["disk_read_bytes"]
    return files, binlog_by_tid


@pytest.mark.bpf
@pytest.mark.mariadb
def test_the_dump_thread_reads_the_binlog_from_the_disk(
    bpf_ready: None, pair: tuple[MariaDB, MariaDB], capsys: pytest.CaptureFixture[str]
) -> None:
    primary, replica = pair
    wait_caught_up(primary, replica)
    replica.sql("STOP SLAVE")
    bench = Sysbench(primary, tables=1, table_size=1000, threads=1)
    bench.prepare()
    bench.start(LOAD_S)
    bench.wait(timeout_s=LOAD_S + 60)
    binlogs = _binlogs(primary)
    drop_from_page_cache(binlogs)
    # its binary and libraries cached: a cold code path's page faults (the dump thread's,
    # the first run of it here) would be disk reads of the process in no file's row
    read_into_page_cache(mapped_files(primary.pid))
    sizes = {p: os.path.getsize(p) for p in binlogs}
    top = TopCollector(primary.pid, INTERVAL_S)
    try:
        top.wait_until(0)
        top.wait_until(time.time())  # an interval ended after the quiet start
        start = top.intervals[-1]["time"]
        pfs_before, io_before = _pfs_read_bytes(primary), _proc_read_bytes(primary.pid)
        replica.sql("START SLAVE")
        wait_caught_up(primary, replica)
        dump_tids = _dump_threads(primary)
        time.sleep(2 * INTERVAL_S)  # the dump thread waits for new events: nothing more read
        pfs_after, io_after = _pfs_read_bytes(primary), _proc_read_bytes(primary.pid)
        top.wait_until(time.time())
        end = top.intervals[-1]["time"]
    finally:
        assert top.stop() == 0
    window = top.between(start + 1e-6, end)
    assert sum(o["lost_events"] for o in window) == 0
    files, by_tid = _sum_files(window)
    want = {p: n - pfs_before.get(p, 0) for p, n in pfs_after.items() if n - pfs_before.get(p, 0)}
    binlog = {p: row for p, row in files.items() if "/mysql-bin.0" in p and row["read"]}
    with capsys.disabled():
        print(f"\nbinlog reads (performance_schema): {want}")
        print(f"binlog in top (read, disk, hit): {binlog}")
        print(f"binlog by thread: {by_tid}; dump threads {dump_tids}; sizes {sizes}")
        print(f"server's disk reads: top {sum(r['disk'] for r in files.values())}, /proc/PID/io {io_after - io_before}")
    assert want and {p: row["read"] for p, row in binlog.items()} == want, (want, binlog)
    assert len(dump_tids) == 1, dump_tids
    (dump,) = dump_tids
    total_read = sum(want.values())
    binlog_disk = sum(row["disk"] for row in binlog.values())
    # every binlog byte read, and every one read from the disk, by the dump thread
    assert by_tid.get(dump, {}).get("read") == total_read, by_tid
    assert by_tid[dump]["disk"] == binlog_disk, by_tid
    # cold: each page of the file read from the disk once (with MASTER_USE_GTID the dump
    # thread looks for the replica's GTID from the file's start); what it read twice (the
    # file's head, opened again) came from the page cache
    for path, row in binlog.items():
        assert row["disk"] == -(-sizes[path] // PAGE) * PAGE, (path, row, sizes[path])
    assert sum(row["hit"] for row in binlog.values()) >= total_read - binlog_disk > 0, binlog
    # the server's disk reads, every file's: the kernel's own count for the process
    assert sum(r["disk"] for r in files.values()) == io_after - io_before, (files, io_after - io_before)

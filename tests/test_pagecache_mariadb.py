"""MariaDB 11.8's memory-mapped redo log, seen through the page cache.

11.8 maps ib_logfile0 MAP_SHARED (when /dev/shm is on the datadir's filesystem, as in the
sandbox of tests/test_rooted_on_disk.py: it takes that for persistent memory) and writes
its redo records as stores into the mapping: no system call, no fd. Traced by `mysqlio
top --json` under sysbench oltp_write_only, with the datadir on an ext4 on a loop device:

- ib_logfile0 has a row, with its path (from the server's maps) and kind "redo", and
  page-cache bytes dirtied: at least the redo the server wrote (Innodb_lsn_current's
  advance), as pages;
- over a quiesced window that starts and ends with `sync -f` (syncfs), every redo page dirtied is
  written back, and what wrote it is named (the sync at the end, or the kernel's flusher);
- the loop device's bytes and requests written as top saw them (completed; and the bios
  queued, split by owner) agree with its own counters (/sys/block/loopN/stat) over the
  window (bracketed: read just inside and just outside it) within 1e-4 (see the test; on
  an idle device tests/test_pagecache.py requires them equal).
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

import pytest
from test_pagecache import DeviceWindow, start_top_bracketed, stop_top_bracketed
from test_rooted_on_disk import _server_on_loop_disk, root  # noqa: F401 (a fixture)

from mysqlio.devtools.sysbench import Sysbench
from mysqlio.devtools.traced import FileTotals

LOAD_S = 6
PAGE = 4096


def _sync(path: str) -> None:
    """syncfs(2) of the server's filesystem only (the rest of the machine left alone)."""
    subprocess.run(["sync", "-f", path], check=True, timeout=120)


@pytest.mark.mariadb
def test_mapped_redo_log_dirtied_and_written_back(bpf_ready: None, root: str) -> None:  # noqa: F811
    with _server_on_loop_disk(root) as db:
        redo = os.path.join(db.datadir, "ib_logfile0")
        bench = Sysbench(db, tables=2, table_size=10000, threads=2)
        bench.prepare()
        quiet = _quiet_lsn(db)
        _sync(db.base_dir)  # no redo page dirty from here on: the window's writeback is its own dirtying
        top, first, outer0, inner0 = start_top_bracketed(db.pid, db.loop_device)
        try:
            lsn0 = db.status("Innodb_lsn_current")
            assert lsn0 == quiet, "the server wrote redo between the sync and the start of tracing"
            bench.start(LOAD_S)
            bench.wait(timeout_s=LOAD_S + 60)
            lsn1 = db.status("Innodb_lsn_current")
            time.sleep(2.0)  # the server quiesces
            _sync(db.base_dir)
            time.sleep(1.0)
            intervals, inner1, outer1 = stop_top_bracketed(top, db.loop_device)
        finally:
            if top.poll() is None:
                top.kill()
                top.wait()
            bench.stop()
    totals = FileTotals()
    for obj in [first, *intervals]:
        totals.add(obj)
    assert redo in totals.totals, sorted(totals.totals)
    assert totals.kinds[redo] == "redo"
    row, by = totals.totals[redo], totals.writeback_by[redo]
    lsn = lsn1 - lsn0
    assert lsn > 0
    # the redo as pages: every byte of it lands in some page dirtied in the window
    assert row["dirtied_bytes"] >= lsn - lsn % PAGE, (row, lsn)
    assert row["write_bytes"] == 0 and row["sync_ops"] == 0  # no system call carries it
    assert row["writeback_bytes"] == row["dirtied_bytes"], (row, by)
    assert set(by) <= {"sync", "flusher_periodic", "flusher_background"}, by
    # The device's own counters against top's, both views. Its requests and bytes as
    # completed are the kernel's counters read at top's drains: inside the window's reads.
    # The bytes of the bios queued to it, by owner: a bio queued inside the window completes
    # after it, or one queued before completes inside, so they agree within a few bios of
    # about 20,000 here (on an idle device, tests/test_pagecache.py requires them equal).
    dev = _device_sum(intervals, db.loop_device)  # after the first interval, as the window
    window = DeviceWindow(inner1 - inner0, outer1 - outer0)
    assert window.inner.bytes_written <= dev["write_bytes"] <= window.outer.bytes_written, (dev, window)
    assert window.inner.writes <= dev["write_requests"] <= window.outer.writes, (dev, window)
    slack = max(1, window.outer.writes // 10_000)
    owners = sum(dev["write_by"].values())
    low, high = window.inner.bytes_written - slack * (1 << 20), window.outer.bytes_written + slack * (1 << 20)
    assert low <= owners <= high, (dev, window)
    assert window.outer.bytes_written > 0
    assert dev["write_by"]["server_files"] >= row["writeback_bytes"]
    print(
        f"\nib_logfile0 (mapped): LSN +{lsn} B; dirtied {row['dirtied_bytes']} B, written back "
        f"{row['writeback_bytes']} B by {by}; {db.loop_device}: {dev['write_bytes']} B in "
        f"{dev['write_requests']} writes, by owner {dev['write_by']}"
    )


def _quiet_lsn(db: Any, timeout_s: float = 60) -> int:
    """The LSN once it has not moved for 2 s (background work after sysbench's prepare)."""
    deadline = time.monotonic() + timeout_s
    last = db.status("Innodb_lsn_current")
    while time.monotonic() < deadline:
        time.sleep(2.0)
        now = db.status("Innodb_lsn_current")
        if now == last:
            return int(now)
        last = now
    raise AssertionError(f"the server's LSN kept moving for {timeout_s:.0f} s after prepare")


def _device_sum(intervals: list[dict[str, Any]], name: str) -> dict[str, Any]:
    out: dict[str, Any] = {"write_bytes": 0, "write_requests": 0, "write_by": {}}
    for obj in intervals:
        for d in obj["devices"]:
            if d["name"] == name:
                out["write_bytes"] += d["write_bytes"]
                out["write_requests"] += d["write_requests"]
                for owner, n in d["write_by"].items():
                    out["write_by"][owner] = out["write_by"].get(owner, 0) + n
    return out

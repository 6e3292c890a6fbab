"""Page cache, writeback and the block device, traced by `mysqlio top --json`, against ground
truth on a real block device (an ext4 on a loop device; tmpfs has no writeback):

- iogen's page-cache scenarios (pc_*) state per file the bytes written, the page-cache bytes
  dirtied, the bytes written back and what caused it (fsync, fdatasync, sync_file_range,
  msync, the kernel's periodic flusher) and msync requests; top must give exactly those,
  with no event lost;
- the loop device's totals as top saw them (bytes and requests completed, written and read)
  equal the device's own counters (/sys/block/loopN/stat) over the same window, on a device
  nothing else uses; the bios attributed to iogen's files equal its written-back bytes, and
  the owners' shares add up to the device's bytes.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from mysqlio.devtools.loop_disk import LoopDisk, device_stat, dirty_expire, loop_ext4
from mysqlio.devtools.traced import (
    FileTotals,
    IogenRun,
    assert_exact,
    end_iogen,
    read_json_line,
    start_iogen,
    start_top,
    stop_top,
)

SYNC_SCENARIOS = ("pc_fsync", "pc_small", "pc_sfr", "pc_mmap")
INTERVAL_S = 0.3


def _traced_window(iogen: Path, disk: LoopDisk, scenarios: tuple[str, ...]) -> tuple[IogenRun, Any]:
    """iogen under top, the device quiet before and after: (the run, the device's stat delta)."""
    subprocess.run(["sync", "-f", str(disk.mount)], check=True, timeout=60)
    time.sleep(0.5)
    args = [a for s in scenarios for a in ("--scenario", s)]
    gen = start_iogen(str(iogen), str(disk.mount), args)
    top = None
    try:
        assert gen.stdin is not None and gen.stdout is not None
        top = start_top(gen.pid, INTERVAL_S)
        assert top.stdout is not None
        # the device's window starts after top's first interval, which _device_totals leaves
        # out: the first drain is before this read, the next after it (iogen waits meanwhile)
        first = read_json_line(top.stdout, 30, "mysqlio top")
        before = device_stat(disk.name)
        gen.stdin.write("go\n")
        gen.stdin.flush()
        expected = read_json_line(gen.stdout, 240, "iogen run")
        # whatever the scenarios left (the journal's commit) reaches the device in the window
        subprocess.run(["sync", "-f", str(disk.mount)], check=True, timeout=60)
        time.sleep(1.0)
        rest, _ = stop_top(top)
        after = device_stat(disk.name)
    finally:
        if top is not None and top.poll() is None:
            top.kill()
            top.wait()
        end_iogen(gen)
    intervals = [first, *rest]
    traced = FileTotals()
    for obj in intervals:
        traced.add(obj)
    return IogenRun(expected, traced, intervals), after - before


def _device_totals(intervals: list[dict[str, Any]], name: str) -> dict[str, Any]:
    total: dict[str, Any] = {"write_bytes": 0, "write_requests": 0, "read_bytes": 0, "read_requests": 0}
    by: dict[str, int] = {}
    for obj in intervals[1:]:  # see _traced_window
        for d in obj["devices"]:
            if d["name"] != name:
                continue
            for k in total:
                total[k] += d[k]
            for owner, n in d["write_by"].items():
                by[owner] = by.get(owner, 0) + n
    total["write_by"] = by
    return total


@pytest.fixture
def disk(bpf_ready: None) -> Any:
    # the loop device reads and writes its image with O_DIRECT: the image's own page
    # cache stays out of the host's counters
    with loop_ext4(64, direct_io=True) as d:
        yield d


def test_sync_scenarios_exact_and_device_agrees(iogen: Path, disk: LoopDisk) -> None:
    run, device = _traced_window(iogen, disk, SYNC_SCENARIOS)
    assert_exact(run, disk.mount)
    got = _device_totals(run.intervals, disk.name)
    # the device's own counters over the same window: bytes and requests, both directions
    assert got["write_bytes"] == device.bytes_written > 0
    assert got["write_requests"] == device.writes
    assert got["read_bytes"] == device.bytes_read
    assert got["read_requests"] == device.reads
    # the bios queued to it split by owner: the same bytes in all
    assert sum(got["write_by"].values()) == device.bytes_written
    written_back = sum(f["writeback_bytes"] for f in run.expected["files"])
    assert got["write_by"]["server_files"] == written_back
    # the rest is the filesystem's (journal and metadata of those syncs), not iogen's
    assert got["write_by"]["server_direct"] == 0 and got["write_by"]["other"] == 0
    assert got["write_by"]["filesystem"] == device.bytes_written - written_back > 0


def test_flusher_writes_back_on_its_own(iogen: Path, disk: LoopDisk) -> None:
    """Dirty pages left alone: the kernel's periodic flusher writes them (dirty_expire
    shortened to 1 s for the test, restored after); the bytes go to the file, not a thread
    of iogen."""
    with dirty_expire(100, 50):
        run, device = _traced_window(iogen, disk, ("pc_flusher",))
    assert_exact(run, disk.mount)
    (path,) = [f["path"] for f in run.expected["files"]]
    threads = {}
    for obj in run.intervals:
        for f in obj["files"]:
            if f["path"] == path:
                for t in f["threads"]:
                    threads[t["name"]] = threads.get(t["name"], 0) + t["writeback_bytes"]
    assert threads == {"[kernel]": 16 * 4096, "iogen": 0}, threads
    got = _device_totals(run.intervals, disk.name)
    assert got["write_bytes"] == device.bytes_written and got["write_requests"] == device.writes
    assert got["write_by"]["server_files"] == 16 * 4096

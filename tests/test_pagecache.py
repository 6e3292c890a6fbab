"""Page cache, writeback and the block device, traced by `mysqlio top --json`, against ground
truth on a real block device (an ext4 on a loop device; tmpfs has no writeback):

- iogen's page-cache scenarios (pc_*) state per file the bytes written, the page-cache bytes
  dirtied, the bytes written back and what caused it (fsync, fdatasync, sync_file_range,
  msync, the kernel's periodic flusher) and msync requests; top must give exactly those,
  with no event lost;
- the loop device's totals as top saw them (bytes and requests completed, written and read)
  equal the device's own counters (/sys/block/loopN/stat) over the same window, on a device
  nothing else uses (read just inside and just outside top's window: top's count lies
  between, and on a quiet device both are the same); the bios attributed to iogen's files equal its written-back bytes, and
  the owners' shares add up to the device's bytes.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mysqlio import kernel_features
from mysqlio.devtools.loop_disk import DeviceStat, LoopDisk, device_stat, dirty_expire, loop_ext4
from mysqlio.devtools.traced import (
    FileTotals,
    IogenRun,
    assert_exact,
    attached_line,
    end_iogen,
    read_json_line,
    start_iogen,
    start_top,
    stop_top,
)

SYNC_SCENARIOS = ("pc_fsync", "pc_small", "pc_sfr", "pc_mmap")
INTERVAL_S = 0.3


@dataclass
class DeviceWindow:
    """A device's own counters around top's window: `inner` between reads taken just inside
    it (after the first drain, before the last), `outer` between reads just outside it
    (after attach, after top exited). What top counted in its window lies between the two;
    on a quiet device both are the same, and then it must equal them."""

    inner: DeviceStat
    outer: DeviceStat

    def assert_holds(self, bytes_written: int, writes: int, bytes_read: int = -1, reads: int = -1) -> None:
        lo, hi = self.inner, self.outer
        assert lo.bytes_written <= bytes_written <= hi.bytes_written, (bytes_written, lo, hi)
        assert lo.writes <= writes <= hi.writes, (writes, lo, hi)
        if bytes_read >= 0:
            assert lo.bytes_read <= bytes_read <= hi.bytes_read, (bytes_read, lo, hi)
            assert lo.reads <= reads <= hi.reads, (reads, lo, hi)


def start_top_bracketed(pid: int, device: str) -> tuple[subprocess.Popen[str], dict[str, Any], DeviceStat, DeviceStat]:
    """top attached to pid: (top, its first interval, the device's counters read after attach
    and after that first interval's drain). Device sums leave the first interval out."""
    top = start_top(pid, INTERVAL_S)
    assert top.stdout is not None and top.stderr is not None
    assert attached_line(top.stderr).startswith("mysqlio: tracing pid")
    outer0 = device_stat(device)
    first = read_json_line(top.stdout, 60, "mysqlio top")
    return top, first, outer0, device_stat(device)


def stop_top_bracketed(top: subprocess.Popen[str], device: str) -> tuple[list[dict[str, Any]], DeviceStat, DeviceStat]:
    """The rest of top's intervals, and the device's counters read before its last drain and after it exited."""
    inner1 = device_stat(device)
    rest, _ = stop_top(top)
    return rest, inner1, device_stat(device)


def _traced_window(iogen: Path, disk: LoopDisk, scenarios: tuple[str, ...]) -> tuple[IogenRun, DeviceWindow]:
    """iogen under top, the device quiet before and after: (the run, the device's window)."""
    subprocess.run(["sync", "-f", str(disk.mount)], check=True, timeout=60)
    time.sleep(0.5)
    args = [a for s in scenarios for a in ("--scenario", s)]
    gen = start_iogen(str(iogen), str(disk.mount), args)
    top = None
    try:
        assert gen.stdin is not None and gen.stdout is not None
        top, first, outer0, inner0 = start_top_bracketed(gen.pid, disk.name)
        gen.stdin.write("go\n")
        gen.stdin.flush()
        expected = read_json_line(gen.stdout, 240, "iogen run")
        # whatever the scenarios left (the journal's commit) reaches the device in the window
        subprocess.run(["sync", "-f", str(disk.mount)], check=True, timeout=60)
        time.sleep(1.0)
        rest, inner1, outer1 = stop_top_bracketed(top, disk.name)
    finally:
        if top is not None and top.poll() is None:
            top.kill()
            top.wait()
        end_iogen(gen)
    intervals = [first, *rest]
    traced = FileTotals()
    for obj in intervals:
        traced.add(obj)
    return IogenRun(expected, traced, intervals), DeviceWindow(inner1 - inner0, outer1 - outer0)


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


@pytest.mark.parametrize("missing", ["", "-rdonly_cast"], ids=["plain-loads", "probe-reads"])
def test_sync_scenarios_exact_and_device_agrees(
    iogen: Path, disk: LoopDisk, monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    """Both ways the page-cache programs read a page, a folio's flags and the syscall a
    writeback is queued in: plain loads through bpf_rdonly_cast (the *_cast twins, Linux
    6.2) and probe reads (the kernels before)."""
    if missing:
        monkeypatch.setenv(kernel_features.FEATURES_ENV, missing)
    run, device = _traced_window(iogen, disk, SYNC_SCENARIOS)
    assert_exact(run, disk.mount)
    got = _device_totals(run.intervals, disk.name)
    # the device's own counters over the same window: bytes and requests, both directions
    device.assert_holds(got["write_bytes"], got["write_requests"], got["read_bytes"], got["read_requests"])
    # the bios queued to it split by owner: the same bytes in all
    assert sum(got["write_by"].values()) == got["write_bytes"] > 0
    written_back = sum(f["writeback_bytes"] for f in run.expected["files"])
    assert got["write_by"]["server_files"] == written_back
    # the rest is the filesystem's (journal and metadata of those syncs), not iogen's
    assert got["write_by"]["server_direct"] == 0 and got["write_by"]["other"] == 0
    assert got["write_by"]["filesystem"] == got["write_bytes"] - written_back > 0


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
    device.assert_holds(got["write_bytes"], got["write_requests"])
    assert got["write_by"]["server_files"] == 16 * 4096
